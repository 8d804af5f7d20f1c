package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A gateway of a group (config.GatewayGroup, package control/group): the
// running configuration is the gateway's own file's (m.local: ports,
// transports...) composed with the group's state (subsystems, namespaces,
// hosts) and the ANA states the group's leases decide. A change through
// the API is committed to the group's state first, compare-and-swap on its
// version, and then applied here through the same plan and steps; the
// other gateways apply it when notified, or at their next read.

// GroupOptions make the target a gateway of the group its configuration
// names.
type GroupOptions struct {
	// Store is the group's RADOS objects.
	Store group.Store
	// Addrs are the addresses of the gateway's other RADOS clients (its
	// rbd namespaces'), which a lease records so that fencing the gateway
	// blocklists them too; nil: none.
	Addrs func() []string
	// Barrier waits until the gateway's other RADOS clients (its rbd
	// namespaces') have the newest OSD map; nil: none. A fence runs it after
	// the blocklist and before taking the dead gateway's ANA group over, so
	// that the writes the hosts then send here reach OSDs that apply the
	// blocklist before them (an OSD still on the older map would take the
	// dead gateway's late writes after ours).
	Barrier func() error
	// Fenced is called once when this gateway finds itself blocklisted by
	// another that took its group over: it can write nothing any more.
	Fenced func(error)
	// Unsettled reports whether a write of the gateway's data path was
	// given up on (rados_osd_op_timeout) and may still reach the storage:
	// its bytes may sit in a socket, delivered whenever the network heals.
	// nil: never.
	Unsettled func() bool
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// MemoryNamespaces lets the API add memory namespaces to the group
	// (tests without a cluster). A gateway's memory is its own: a host
	// would read through one gateway what it did not write through
	// another, so a gateway refuses them by default (ErrNotShared).
	MemoryNamespaces bool
}

// ErrNotShared is a namespace a gateway group cannot serve: one whose data
// is not the cluster's (memory; a file or device is group.ErrLocal).
var ErrNotShared = errors.New("a gateway group serves RBD images only: each gateway's memory is its own, so a host would read through one gateway what it did not write through another")

// ErrNoGroup is a gateway_group this build cannot join.
var ErrNoGroup = errors.New("gateway_group needs a RADOS client")

// ErrGroup wraps a change refused because the group's state cannot be
// read or written (corrupt, unreachable): nothing changed.
var ErrGroup = errors.New("the gateway group's state is unavailable")

// gateway is a Manager's group side.
type gateway struct {
	store group.Store
	cfg   config.GatewayGroup
	opts  GroupOptions
	now   func() time.Time

	incarnation string
	seq         uint64

	mu    sync.Mutex
	state *group.State // the state followed: the newest read or committed
	// epochs counts the objects (epochs) followed, and adoptions the
	// states: a read that another state was adopted during cannot move
	// the gateway to another epoch (it may be the old one, returning late).
	epochs, adoptions uint64
	stateErr          error // the last read's failure, nil after a good one
	tracker           *group.Tracker
	lastBeat          time.Time // the last heartbeat written
	// beatAddrs are the client addresses the last heartbeat wrote.
	beatAddrs []string
	beatErr   error
	beatFails int          // heartbeats failed in a row
	log       *slog.Logger // the Manager's
	fenced    bool         // this gateway was blocklisted (or its ID taken)
	logged    string       // the state error last logged
	// fenceLogged is why each dead gateway cannot be fenced, as last logged.
	fenceLogged map[int]string
	// degraded is what of the group's state this gateway could not apply
	// at its last try, by subsystem NQN, with why (empty: none).
	degraded map[string]string
	// failed is what applyEach could not apply, with when: it is not
	// tried again before it changes or limits.GroupRetryDegraded passes.
	failed map[string]failure
	// unread is why the group's state could not be read (or applied)
	// since another gateway announced a change, or while the watch was
	// lost: the namespaces' shared reservations may be behind, so their
	// I/O is refused and every group reported inaccessible until a read
	// succeeds. nil while it reads.
	unread error
	// unreadGen counts the times unread was set and the changes announced
	// (newReadGen): a read marks the state read only if neither happened
	// since it began (readState), so that a read that succeeded before a
	// newer one failed, or before a change it could not have seen, cannot
	// clear it.
	unreadGen uint64
	// idle: unread, and no command runs on the group's namespaces any
	// more; the lease says so, and the others serve this gateway's group
	// meanwhile. draining: a goroutine waits for that.
	idle, draining bool
	// withheld: unread, with a write of the data path given up on that
	// may still land (GroupOptions.Unsettled): not idle, the lease is not
	// renewed, so that the others blocklist this gateway's clients before
	// they serve its group.
	withheld bool
	// prevOwed are the addresses of this ID's previous incarnation, on
	// other machines, that it waits to see blocklisted before it serves
	// (fencePrevious).
	prevOwed []string
	// sharedMu orders the namespaces' refusal flags with unread
	// (reconcileShared, attach).
	sharedMu sync.Mutex

	conflicts, failovers, stateErrors atomic.Uint64

	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	unwatch func()
	// beatNow asks the heartbeat goroutine, once looping is set, for a
	// heartbeat now; it closes the channel sent when it is written.
	beatNow chan chan struct{}
	looping atomic.Bool
}

func (g *gateway) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), limits.RBDConnectTimeout)
}

// newGateway reads the group's state and joins: its listeners recorded, a
// first heartbeat. The caller then serves what compose gives.
func newGateway(cfg *config.Config, o GroupOptions, log *slog.Logger) (*gateway, error) {
	if o.Store == nil {
		return nil, fmt.Errorf("%w (this binary has none: run the rbd build, nvmeof-tgt-rbd)", ErrNoGroup)
	}
	if len(cfg.Subsystems) > 0 {
		return nil, fmt.Errorf("%w: subsystems: a gateway serves its group's, kept in RADOS; remove them from its file", ErrInvalid)
	}
	inc := make([]byte, 8)
	rand.Read(inc)
	g := &gateway{store: o.Store, cfg: cfg.GatewayGroup, opts: o, now: o.Now, incarnation: hex.EncodeToString(inc),
		tracker: group.NewTracker(cfg.GatewayGroup.Lease), fenceLogged: map[int]string{}, failed: map[string]failure{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		beatNow: make(chan chan struct{}), log: log}
	if g.now == nil {
		g.now = time.Now
	}
	// The ID's previous lease record, before this one's replaces it: its
	// incarnation may be a process paused past its lease (fencePrevious).
	ctx0, cancel0 := g.ctx()
	prev, err := g.store.Leases(ctx0)
	cancel0()
	if err != nil {
		return nil, fmt.Errorf("gateway group %s: read the leases: %w", g.cfg.Name, err)
	}
	// The ID's lease lock first: while another gateway holds it (one
	// given the same ID, or this one's previous incarnation, until its
	// lock lapses) this one must not join, nor write its listeners.
	deadline := time.Now().Add(g.cfg.Lease + g.cfg.Lease/2)
	for {
		g.heartbeat()
		if !errors.Is(g.beatErr, group.ErrIDTaken) || time.Now().After(deadline) {
			break
		}
		time.Sleep(g.cfg.Lease / 8)
	}
	if g.beatErr != nil {
		if errors.Is(g.beatErr, group.ErrIDTaken) {
			return nil, fmt.Errorf("gateway group %s: gateway %d: %w; it renewed its lease for %v: two gateways of a group were given one id",
				g.cfg.Name, g.cfg.ID, g.beatErr, g.cfg.Lease+g.cfg.Lease/2)
		}
		return nil, fmt.Errorf("gateway group %s: %w", g.cfg.Name, g.beatErr)
	}
	ctx, cancel := g.ctx()
	defer cancel()
	st, err := group.Update(ctx, g.store, limits.GroupRetries, func(s *group.State) (bool, error) {
		before := s.Clone()
		s.SetListeners(g.cfg.ID, cfg.Ports)
		return !reflect.DeepEqual(before.Listeners, s.Listeners), nil
	})
	if err != nil {
		return nil, fmt.Errorf("gateway group %s: %w", g.cfg.Name, err)
	}
	g.state, g.epochs = st, 1
	g.heartbeat() // the others' leases
	if g.beatErr != nil {
		return nil, fmt.Errorf("gateway group %s: %w", g.cfg.Name, g.beatErr)
	}
	if err := g.fencePrevious(prev[g.cfg.ID]); err != nil {
		return nil, fmt.Errorf("gateway group %s: %w", g.cfg.Name, err)
	}
	return g, nil
}

// fencePrevious blocklists the clients of this ID's previous incarnation
// before this one serves, unless it stopped cleanly or they are
// blocklisted already (another gateway fenced it): a process paused past
// its lease keeps its clients, and would write when it resumes. Only those
// on this gateway's own machine are blocklisted here, never a live
// gateway's: the record is anyone's word; those elsewhere are waited for
// (prevOwed: the others fence a previous incarnation they saw), and this
// gateway reports every group inaccessible meanwhile.
func (g *gateway) fencePrevious(l group.Lease) error {
	r, err := group.DecodeLease(l.Record)
	if err != nil || r.Incarnation == g.incarnation || r.Stopped || len(r.Addrs) == 0 {
		return nil
	}
	ctx, cancel := g.ctx()
	defer cancel()
	if done, err := g.store.Blocklisted(ctx, r.Addrs); err == nil && done {
		return nil
	}
	host := ""
	if own := g.store.Addrs(); len(own) > 0 {
		host, _ = group.AddrHost(own[0])
	}
	leases, err := g.store.Leases(ctx)
	if err != nil {
		return fmt.Errorf("read the leases: %w", err)
	}
	live := map[string]bool{}
	for _, a := range g.addrs() {
		live[a] = true
	}
	for id, l := range leases {
		if o, err := group.DecodeLease(l.Record); err == nil && id != g.cfg.ID && (group.Observed{Rec: o, Holder: l.Holder}).Renews() {
			for _, a := range o.Addrs {
				live[a] = true
			}
		}
	}
	var local, other []string
	for _, a := range r.Addrs {
		switch h, _ := group.AddrHost(a); {
		case live[a]:
		case h == host:
			local = append(local, a)
		default:
			other = append(other, a)
		}
	}
	if len(local) > 0 {
		if err := g.store.Blocklist(ctx, local); err != nil {
			return fmt.Errorf("fence this gateway's previous incarnation %s (%v): %w", r.Incarnation, local, err)
		}
		if g.opts.Barrier != nil {
			if err := g.opts.Barrier(); err != nil {
				return fmt.Errorf("fence this gateway's previous incarnation: %w", err)
			}
		}
	}
	g.mu.Lock()
	g.prevOwed = other
	g.mu.Unlock()
	return nil
}

// addrs are this gateway's RADOS clients' addresses.
func (g *gateway) addrs() []string {
	a := slices.Clone(g.store.Addrs())
	if g.opts.Addrs != nil {
		a = append(a, g.opts.Addrs()...)
	}
	slices.Sort(a)
	return slices.Compact(a)
}

// heartbeat renews the lease (its lock, then its record) and reads the
// others'.
func (g *gateway) heartbeat() {
	ctx, cancel := g.ctx()
	defer cancel()
	g.mu.Lock()
	idle, prevOwed, withheld, recorded := g.idle, slices.Clone(g.prevOwed), g.withheld, slices.Clone(g.beatAddrs)
	g.mu.Unlock()
	if withheld {
		g.withheldBeat(ctx, recorded)
		return
	}
	g.seq++
	rec := group.LeaseRecord{Incarnation: g.incarnation, Seq: g.seq, Addrs: g.addrs(), Idle: idle}
	err := g.store.Heartbeat(ctx, g.cfg.ID, g.incarnation, g.cfg.Lease, rec.Encode())
	var leases map[int]group.Lease
	if err == nil {
		leases, err = g.store.Leases(ctx)
	}
	owedDone := false
	if err == nil && len(prevOwed) > 0 {
		owedDone, _ = g.store.Blocklisted(ctx, prevOwed)
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.beatErr = err
	if err == nil {
		g.beatAddrs = rec.Addrs
	}
	// Transitions only (under a partition every beat fails): when the lease stops being
	// renewed, and when it is renewed again, with for how long it was not.
	switch {
	case err != nil && g.beatFails == 0 && !g.lastBeat.IsZero():
		g.log.Warn("gateway group: heartbeat failed: the lease is not renewed", "group", g.cfg.Name,
			"renewed_ago", now.Sub(g.lastBeat), "err", err)
	case err == nil && g.beatFails > 0 && g.state != nil:
		g.log.Info("gateway group: heartbeat renewed the lease again", "group", g.cfg.Name,
			"failed_beats", g.beatFails, "renewed_ago", now.Sub(g.lastBeat))
	}
	if err != nil {
		g.beatFails++
	} else {
		g.beatFails = 0
	}
	if owedDone {
		g.prevOwed = nil
	}
	// Blocklisted, or its ID taken once it had joined (it stalled past
	// its lease and another gateway of that ID started): it can serve
	// nothing any more.
	if (errors.Is(err, group.ErrBlocklisted) || (errors.Is(err, group.ErrIDTaken) && g.state != nil)) && !g.fenced {
		g.fenced = true
		if g.opts.Fenced != nil {
			go g.opts.Fenced(err)
		}
	}
	if err != nil || g.state == nil {
		return
	}
	g.lastBeat = now
	// Every ID's lease: which count is the tracker's to say (a record
	// counts only while its incarnation holds the ID's lock).
	obs := map[int]group.Observed{}
	for id, l := range leases {
		if id == g.cfg.ID {
			continue
		}
		if r, err := group.DecodeLease(l.Record); err == nil {
			obs[id] = group.Observed{Rec: r, Holder: l.Holder}
		}
	}
	g.tracker.Observe(now, obs)
}

// errWithheld is the heartbeat's error while the lease is withheld.
var errWithheld = errors.New("lease withheld: the group's state is unread and a write given up on may still land, so the others fence this gateway before they serve its group")

// withheldBeat is a heartbeat that renews nothing (the lease lapses, and
// the others fence this gateway): it only learns whether the clients its
// lease recorded are blocklisted, and then that this gateway is fenced.
func (g *gateway) withheldBeat(ctx context.Context, recorded []string) {
	// An OSD operation first: the OSDs refuse a blocklisted client's, and
	// the monitor's list may not be reachable to it. If the OSDs do not
	// answer (the usual reason to withhold), the monitors may: ask them.
	_, err := g.store.Leases(ctx)
	done := false
	if !errors.Is(err, group.ErrBlocklisted) {
		mctx, cancel := g.ctx()
		done, err = g.store.Blocklisted(mctx, recorded)
		cancel()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.beatErr = errWithheld
	if (done || errors.Is(err, group.ErrBlocklisted)) && !g.fenced {
		g.fenced = true
		if g.opts.Fenced != nil {
			go g.opts.Fenced(fmt.Errorf("%w: every client its lease recorded (%v), while it withheld its lease", group.ErrBlocklisted, recorded))
		}
	}
}

// recordAddrs has the lease record the gateway's RADOS clients' addresses
// now if they changed since the last heartbeat (a namespace opened a new
// cluster connection), before what opened it is served: a gateway that
// dies at once is then fenced with every client that could write, not
// only those of its last periodic heartbeat. An error (the lease could
// not be written, the gateway is stopping) means they are not recorded:
// the change must not be served.
func (g *gateway) recordAddrs() error {
	now := g.addrs()
	recorded := func() bool { // g.mu held
		for _, a := range now {
			if !slices.Contains(g.beatAddrs, a) {
				return false
			}
		}
		return true
	}
	g.mu.Lock()
	done := recorded()
	g.mu.Unlock()
	if done {
		return nil
	}
	if !g.looping.Load() {
		g.heartbeat() // joining: nothing else heartbeats yet
	} else {
		done := make(chan struct{})
		select {
		case g.beatNow <- done:
			<-done
		case <-g.stop:
			return errors.New("the gateway is stopping")
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !recorded() {
		return fmt.Errorf("its lease does not record its new cluster clients %v: %v", now, g.beatErr)
	}
	return nil
}

// view is this gateway's view of the group now. g.mu is held.
func (g *gateway) view(st *group.State) group.View {
	now := g.now()
	v := group.View{Self: g.cfg.ID, SelfOK: !g.fenced && g.unread == nil && len(g.prevOwed) == 0 && !g.lastBeat.IsZero() && now.Sub(g.lastBeat) < g.cfg.Lease,
		Alive: map[int]bool{}, Fenced: map[int]bool{}, Idle: map[int]bool{}}
	members := map[int]bool{g.cfg.ID: true}
	for _, id := range g.tracker.Members() {
		members[id] = true
		v.Alive[id] = g.tracker.Alive(id, now)
		v.Fenced[id] = g.tracker.Fenced(id)
		v.Idle[id] = g.tracker.Idle(id, now)
	}
	v.Members = slices.Sorted(maps.Keys(members))
	groups := map[uint32]bool{}
	for _, s := range st.Subsystems {
		for _, n := range s.Namespaces {
			groups[n.ANAGroup] = true
		}
	}
	v.Groups = slices.Sorted(maps.Keys(groups))
	return v
}

// fence blocklists the dead gateways this one takes over from, before it
// reports their groups optimized: their writes in flight cannot land after
// the hosts' retries through this gateway. It blocklists only the
// addresses the tracker trusts (a record read while the dead gateway held
// its lease lock, on the lock holder's machine), never one of a live
// gateway's (this one's included): if a trusted address is a live one's,
// something is wrong and nothing is taken over. As the taker it also
// fences the earlier incarnations other gateways replaced while those may
// still write (Tracker.Owed).
func (g *gateway) fence(log func(msg string, args ...any)) {
	g.mu.Lock()
	v := g.view(g.state)
	ids := v.ToFence()
	type target struct {
		id               int
		trusted, claimed []string
	}
	var todo []target
	owed := map[int][]string{}
	now := g.now()
	live := map[string]bool{}
	for _, a := range g.addrs() {
		live[a] = true
	}
	for _, id := range g.tracker.Members() {
		if g.tracker.Alive(id, now) {
			for _, a := range g.tracker.Trusted(id) {
				live[a] = true
			}
		}
	}
	for _, id := range ids {
		r, _ := g.tracker.Record(id)
		todo = append(todo, target{id, g.tracker.Trusted(id), r.Addrs})
	}
	if g.isTaker(v) {
		for _, id := range g.tracker.Members() {
			if a := g.tracker.Owed(id); len(a) > 0 {
				owed[id] = a
			}
		}
	}
	g.mu.Unlock()
	blocklist := func(addrs []string) error {
		ctx, cancel := g.ctx()
		err := g.store.Blocklist(ctx, addrs)
		cancel()
		if err == nil && g.opts.Barrier != nil {
			err = g.opts.Barrier()
		}
		return err
	}
	for id, addrs := range owed {
		if slices.ContainsFunc(addrs, func(a string) bool { return live[a] }) {
			g.logFence(log, id, "cannot fence a gateway's earlier incarnation: one of its addresses is a live gateway's", "addrs", addrs)
			continue
		}
		if err := blocklist(addrs); err != nil {
			log("cannot fence a gateway's earlier incarnation", "gateway", id, "addrs", addrs, "err", err)
			continue
		}
		g.mu.Lock()
		g.tracker.SetOwedFenced(id, addrs)
		g.mu.Unlock()
		log("a gateway's earlier incarnation, replaced without stopping, fenced: its clients blocklisted", "gateway", id, "addrs", addrs)
	}
	for _, t := range todo {
		if len(t.trusted) == 0 {
			// No lease of it was read while it held its lock (it died
			// before this gateway saw it alive, or recorded no address):
			// the record's addresses are anyone's word. An operator who
			// knows it is down fences it (group fence).
			g.logFence(log, t.id, "cannot fence a dead gateway: no lease of it read while it held its lock names its clients (it died before this gateway saw it alive, or recorded none); its ANA group stays inaccessible until it returns or an operator fences it (nvmeof-tgt-rbd group fence ID)",
				"claimed_addrs", t.claimed)
			continue
		}
		if slices.ContainsFunc(t.trusted, func(a string) bool { return live[a] }) {
			g.logFence(log, t.id, "cannot fence a dead gateway: an address its lease names is a live gateway's; its ANA group stays inaccessible", "addrs", t.trusted)
			continue
		}
		if err := blocklist(t.trusted); err != nil {
			log("cannot fence a dead gateway: its ANA group stays inaccessible", "gateway", t.id, "addrs", t.trusted, "err", err)
			continue
		}
		g.setFenced(t.id)
		log("gateway's lease expired: its clients blocklisted, its ANA group taken over", "gateway", t.id, "addrs", t.trusted)
	}
}

// isTaker reports whether this gateway takes the dead's groups over in v.
// g.mu is held.
func (g *gateway) isTaker(v group.View) bool {
	for _, id := range v.Members {
		if id == g.cfg.ID {
			return v.SelfOK
		}
		if v.Alive[id] && !v.Idle[id] {
			return false
		}
	}
	return false
}

// FenceGateway fences gateway id by an operator's word: its lease's
// addresses are blocklisted, whether or not this gateway trusts them (a
// gateway that died before this one saw it alive), and its ANA group is
// taken over. It refuses a gateway that is alive, this one, or one whose
// lease names a live gateway's address.
func (m *Manager) FenceGateway(id int) error {
	g := m.gw
	if g == nil {
		return fmt.Errorf("%w: this target is not a gateway of a group", ErrInvalid)
	}
	g.mu.Lock()
	now := g.now()
	r, known := g.tracker.Record(id)
	live := map[string]bool{}
	for _, a := range g.addrs() {
		live[a] = true
	}
	for _, m := range g.tracker.Members() {
		if g.tracker.Alive(m, now) {
			for _, a := range g.tracker.Trusted(m) {
				live[a] = true
			}
		}
	}
	alive := g.tracker.Alive(id, now)
	addrs := union(g.tracker.Trusted(id), r.Addrs)
	g.mu.Unlock()
	switch {
	case id == g.cfg.ID:
		return fmt.Errorf("%w: gateway %d is this one", ErrInvalid, id)
	case !known:
		return notFound(fmt.Errorf("gateway %d: no lease of it is known here", id))
	case alive:
		return &refusal{code: 409, err: fmt.Errorf("gateway %d holds its lease: it is alive", id)}
	case len(addrs) == 0:
		return &refusal{code: 409, err: fmt.Errorf("gateway %d: its lease names no client address to blocklist", id)}
	case slices.ContainsFunc(addrs, func(a string) bool { return live[a] }):
		return &refusal{code: 409, err: fmt.Errorf("gateway %d: its lease names %v, among them a live gateway's address", id, addrs)}
	}
	ctx, cancel := g.ctx()
	err := g.store.Blocklist(ctx, addrs)
	cancel()
	if err == nil && g.opts.Barrier != nil {
		err = g.opts.Barrier()
	}
	if err != nil {
		return fmt.Errorf("%w: fence gateway %d: %w", ErrGroup, id, err)
	}
	g.setFenced(id)
	m.log.Warn("gateway fenced by an operator: its clients blocklisted, its ANA group taken over", "gateway", id, "addrs", addrs)
	g.kickLoop()
	return nil
}

// union is a and those of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (g *gateway) setFenced(id int) {
	g.mu.Lock()
	g.tracker.SetFenced(id)
	delete(g.fenceLogged, id)
	g.mu.Unlock()
	g.failovers.Add(1)
}

// logFence logs why gateway id cannot be fenced, once until that changes.
func (g *gateway) logFence(log func(msg string, args ...any), id int, msg string, args ...any) {
	g.mu.Lock()
	first := g.fenceLogged[id] != msg
	g.fenceLogged[id] = msg
	g.mu.Unlock()
	if first {
		log(msg, append([]any{"gateway", id}, args...)...)
	}
}

// notify tells the other gateways of a change, and waits (bounded) for
// them to apply it.
func (g *gateway) notify(version uint64, kind string) (missed int, err error) {
	ctx, cancel := g.ctx()
	defer cancel()
	n := group.Notification{Version: version, From: g.cfg.ID, Kind: kind}
	_, missed, err = g.store.Notify(ctx, n.Encode(), limits.GroupNotifyTimeout)
	return missed, err
}

// latest is the newest state read or committed.
func (g *gateway) latest() *group.State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// read reads the group's state, keeping the last good one and the error.
// It returns the state read and its version as the namespaces' shared
// reservations take it (resvVersion), 0 for a state older than the one
// followed.
func (g *gateway) read() (*group.State, uint64, error) {
	g.mu.Lock()
	gen := g.adoptions
	g.mu.Unlock()
	ctx, cancel := g.ctx()
	defer cancel()
	st, err := group.Read(ctx, g.store)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if g.stateErr == nil || g.stateErr.Error() != err.Error() {
			g.stateErrors.Add(1)
		}
		g.stateErr = err
		return nil, 0, err
	}
	g.stateErr = nil
	g.adopt(st, gen)
	return st, g.resvVersion(st), nil
}

// adopt follows st if it is newer than the state followed: a later
// version of the same object, or another object (made anew under a new
// epoch: its versions start again) read when no other state was adopted
// since gen (it may be the old one, returning late). A missing object is
// never followed: the gateway serves what it served, and the next change
// through any gateway makes the object anew from that gateway's state
// (gatewayUpdate). A commit's state passes the adoptions now: it is the
// newest. g.mu is held.
func (g *gateway) adopt(st *group.State, gen uint64) {
	switch {
	case st.Version == 0 && st.Epoch == "" && g.state.Version > 0:
		return
	case st.Epoch == g.state.Epoch && st.Version == g.state.Version && reflect.DeepEqual(st, g.state):
		return // the same: nothing adopted, so no concurrent read is turned away
	case st.Epoch == g.state.Epoch && st.Version >= g.state.Version:
	case st.Epoch != g.state.Epoch && gen == g.adoptions:
		g.epochs++
	default:
		return
	}
	g.state = st
	g.adoptions++
}

// resvVersion is st's version as the namespaces' shared reservations
// order them, across the objects followed: a new object's versions come
// after every one of the objects before (each version of an epoch below
// 2^40), 0 for a state not of the epoch followed. g.mu is held.
func (g *gateway) resvVersion(st *group.State) uint64 {
	if st.Epoch != g.state.Epoch {
		return 0
	}
	return g.epochs<<40 | st.Version
}

// compose is what this gateway serves of st.
func (m *Manager) compose(local *config.Config, st *group.State) *config.Config {
	g := m.gw
	g.mu.Lock()
	ana := g.view(st).ANAStates()
	g.mu.Unlock()
	l := local.Clone()
	l.GatewayGroup = g.cfg
	return st.Compose(l, ana)
}

// localOf is the gateway's own part of a composed configuration: what its
// file holds.
func (m *Manager) localOf(c *config.Config) *config.Config {
	l := c.Clone()
	l.Subsystems = nil
	l.Referrals = slices.Clone(m.local.Referrals)
	for i := range l.Ports {
		l.Ports[i].ANAGroups = nil
	}
	return l
}

// gatewayNew serves the group's state from an empty target.
func (m *Manager) gatewayNew(cfg *config.Config, o GroupOptions) error {
	g, err := newGateway(cfg, o, m.log)
	if err != nil {
		return err
	}
	m.gw = g
	m.local = cfg.Clone()
	// What it cannot serve of the state is left out, as later (serveState):
	// one subsystem a gateway cannot serve must not stop it starting.
	applied, err := m.serveState(g.state, changeOpts{force: true})
	if len(applied) > 0 {
		m.log.Debug("gateway group state applied", "group", g.cfg.Name, "applied", applied)
	}
	if err != nil {
		return fmt.Errorf("gateway group %s: %w", g.cfg.Name, err)
	}
	if err := m.applyReservations(g.state, g.resvVersion(g.state)); err != nil {
		return fmt.Errorf("gateway group %s: %w", g.cfg.Name, err)
	}
	m.reconcileShared()
	// The state joined, read before the watch starts: from then on a
	// notice's read (onNotice) may replace g.state under g.mu.
	joined := g.state
	unwatch, err := g.store.Watch(m.onNotice)
	if err != nil {
		return fmt.Errorf("gateway group %s: watch its state: %w", g.cfg.Name, err)
	}
	g.unwatch = unwatch
	m.log.Info("gateway joined its group", "group", g.cfg.Name, "gateway", g.cfg.ID, "version", joined.Version,
		"subsystems", len(joined.Subsystems), "incarnation", g.incarnation)
	// The others learn of this gateway's listeners now rather than at
	// their next read.
	go g.notify(joined.Version, group.KindConfig)
	// From here a forced heartbeat (recordAddrs) goes through the loop's.
	g.looping.Store(true)
	go m.gatewayLoop()
	return nil
}

// gatewayLoop follows the group until Close: it applies the state when
// notified, every limits.GroupPoll, and when a heartbeat changed who
// owns what. Heartbeats run on a goroutine of their own, so that a change
// that takes long (an image slow to open, under m.mu) never delays the
// lease: the others would fence this gateway.
func (m *Manager) gatewayLoop() {
	g := m.gw
	defer close(g.done)
	leases := make(chan struct{}, 1)
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		beat := time.NewTicker(g.cfg.Lease / 4)
		defer beat.Stop()
		for {
			select {
			case <-g.stop:
				return
			case done := <-g.beatNow:
				g.heartbeat()
				close(done)
			case <-beat.C:
				g.heartbeat()
				g.fence(m.log.Warn)
				select {
				case leases <- struct{}{}:
				default:
				}
			}
		}
	}()
	defer func() { <-beats }()
	poll := time.NewTicker(limits.GroupPoll)
	defer poll.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-leases:
			m.sync(false)
		case <-poll.C:
			m.sync(true)
		case <-g.kick:
			m.sync(true)
		}
	}
}

// onNotice is the watch's callback: another gateway changed the state.
// Reservations are applied before the acknowledgement (the notifier waits
// for it before its command completes); the rest by the loop. A change
// that cannot be read or applied is not acknowledged: the namespaces'
// I/O is refused instead (unreadState) until a read succeeds.
func (m *Manager) onNotice(n group.Notice) {
	g := m.gw
	defer g.kickLoop()
	if n.Self {
		n.Ack()
		return
	}
	// A change was announced: no read that began before it may mark the
	// state read (clearUnread), only this one, or a later one.
	gen := g.newReadGen()
	var err error
	for range 3 {
		var st *group.State
		var ver uint64
		if st, ver, err = g.read(); err != nil {
			break
		}
		if ver != 0 {
			err = m.applyReservations(st, ver)
			break
		}
		// The read lost to another adoption (a state of another
		// epoch): read again.
		err = errors.New("the group's state read was not the one followed")
	}
	if err != nil {
		m.unreadState(err)
		return
	}
	m.readState(gen)
	n.Ack()
}

func (g *gateway) kickLoop() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// unreadState refuses I/O on every namespace of the group (a path error:
// hosts use another path) and reports every group inaccessible, because
// the group's state cannot be read: a reservation taken through another
// gateway may be missing here. Once no command runs on those namespaces
// any more, the lease says the gateway is idle, and the others serve its
// group meanwhile.
func (m *Manager) unreadState(err error) {
	g := m.gw
	first := m.setUnread(err)
	if first {
		m.log.Error("gateway group state unread: refusing I/O on its namespaces until it reads", "group", g.cfg.Name, "err", err)
	}
	g.mu.Lock()
	drain := !g.draining && !g.idle && g.unread != nil
	g.draining = g.draining || drain
	g.mu.Unlock()
	if drain {
		go m.drain()
	}
}

// setUnread sets why the state is unread (nil: it reads) and every live
// namespace's refusal flag with it, as one step: with sharedMu held, the
// flags agree with unread (reconcileShared, attach take it too). It
// reports whether the state was read until now.
func (m *Manager) setUnread(err error) (first bool) {
	g := m.gw
	g.sharedMu.Lock()
	defer g.sharedMu.Unlock()
	g.mu.Lock()
	first = g.unread == nil && err != nil
	g.unread = err
	if err != nil {
		g.unreadGen++
	}
	if err == nil {
		g.idle, g.withheld = false, false
	}
	st := g.state
	g.mu.Unlock()
	m.setFlags(st, err != nil)
	return first
}

// readGen is the point a read of the state begins at, for readState.
func (g *gateway) readGen() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unreadGen
}

// newReadGen begins a read of a change announced just now: reads that
// began before it can no longer mark the state read.
func (g *gateway) newReadGen() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unreadGen++
	return g.unreadGen
}

// clearUnread is setUnread(nil) for a read that began at gen (readGen):
// it clears nothing, and reports false, if the state was found unread
// since, by a read that began later and failed.
func (m *Manager) clearUnread(gen uint64) bool {
	g := m.gw
	g.sharedMu.Lock()
	defer g.sharedMu.Unlock()
	g.mu.Lock()
	if g.unreadGen != gen {
		g.mu.Unlock()
		return false
	}
	g.unread = nil
	g.idle, g.withheld = false, false
	st := g.state
	g.mu.Unlock()
	m.setFlags(st, false)
	return true
}

// drain waits until no command runs on the group's namespaces, and then,
// if the state is still unread, has the lease say the gateway is idle.
func (m *Manager) drain() {
	g := m.gw
	defer func() {
		g.mu.Lock()
		g.draining = false
		g.mu.Unlock()
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		g.mu.Lock()
		st, unread := g.state, g.unread != nil
		g.mu.Unlock()
		if !unread {
			return
		}
		busy := false
		for _, sub := range st.Subsystems {
			for _, n := range sub.Namespaces {
				if ns := m.liveNamespace(sub.NQN, n.NSID); ns != nil && ns.Executing() > 0 {
					busy = true
				}
			}
		}
		if !busy {
			break
		}
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
	}
	// A write given up on (its OSD unreachable) may still land when the
	// network heals: an idle gateway's group is served with nothing
	// fenced, so this one withholds its lease instead, and the others
	// fence it first.
	unsettled := g.opts.Unsettled != nil && g.opts.Unsettled()
	g.mu.Lock()
	idle := g.unread != nil && !unsettled
	g.idle = idle
	g.withheld = g.unread != nil && unsettled
	withheld := g.withheld
	g.mu.Unlock()
	if withheld {
		m.log.Error("gateway group state unread, and a write of its data path was given up on and may still land: withholding the lease, so that the other gateways fence this one before they serve its group", "group", g.cfg.Name)
	}
	if idle && g.looping.Load() {
		done := make(chan struct{})
		select {
		case g.beatNow <- done: // the others learn of it now
			<-done
		case <-g.stop:
		}
	}
}

// readState serves I/O again once the state was read and applied.
func (m *Manager) readState(gen uint64) {
	g := m.gw
	g.mu.Lock()
	was := g.unread != nil
	version := g.state.Version
	g.mu.Unlock()
	if !m.clearUnread(gen) {
		return
	}
	if was {
		m.log.Info("gateway group state read again: serving I/O on its namespaces", "group", g.cfg.Name, "version", version)
		g.kickLoop()
	}
}

// reconcileShared gives every live namespace of the group the refusal
// flag unread says (a namespace attached since, marked until its
// reservations were applied, included).
func (m *Manager) reconcileShared() {
	g := m.gw
	g.sharedMu.Lock()
	defer g.sharedMu.Unlock()
	g.mu.Lock()
	st, unknown := g.state, g.unread != nil
	g.mu.Unlock()
	m.setFlags(st, unknown)
}

// setFlags sets every live namespace of st's refusal flag. g.sharedMu is
// held.
func (m *Manager) setFlags(st *group.State, unknown bool) {
	for _, sub := range st.Subsystems {
		for _, n := range sub.Namespaces {
			if ns := m.liveNamespace(sub.NQN, n.NSID); ns != nil {
				ns.SetSharedStateUnknown(unknown)
			}
		}
	}
}

// unreadNow reports whether the group's state is unread now.
func (g *gateway) unreadNow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unread != nil
}

// sync serves the group's state as it is now: read again (reread), or the
// last read with the ANA states the leases decide now. What cannot be
// applied of it is left as it was, and only it (serveState).
func (m *Manager) sync(reread bool) {
	g := m.gw
	read, gen := false, g.readGen()
	if reread {
		_, _, err := g.read()
		switch {
		case err == nil:
			read = true
		case !g.store.Watching():
			// The watch is lost too: a change another gateway announced
			// meanwhile (a reservation) would not be heard of.
			m.logStateErr(err)
			m.unreadState(fmt.Errorf("%w (and the watch of the state is lost)", err))
		default:
			// The watch holds: no change was announced that this gateway
			// did not hear of (onNotice), so what it holds is still the
			// group's; a corrupt state cannot be changed at all.
			m.logStateErr(err)
		}
	}
	m.mu.Lock()
	// The newest state known, taken under m.mu: a change through this
	// gateway committed after the read above is in it, and is never undone
	// by an older read that returned late.
	g.mu.Lock()
	st, ver := g.state, g.resvVersion(g.state)
	g.mu.Unlock()
	applied, err := m.serveState(st, changeOpts{force: true})
	ports := slices.Clone(m.local.Ports)
	m.mu.Unlock()
	if len(applied) > 0 {
		m.log.Info("gateway group state applied", "group", g.cfg.Name, "version", st.Version, "applied", applied)
	}
	if err != nil {
		m.log.Error("gateway group state not applied", "group", g.cfg.Name, "version", st.Version, "err", err)
	}
	if err := m.applyReservations(st, ver); err != nil {
		m.unreadState(err)
	} else if read {
		m.readState(gen)
	} else {
		m.reconcileShared()
	}
	if read {
		m.ownListeners(st, ports)
	}
}

// ownListeners writes this gateway's listeners into the state if they are
// missing there (an object made anew by another gateway): the others'
// discovery logs refer to them.
func (m *Manager) ownListeners(st *group.State, ports []config.Port) {
	g := m.gw
	var want group.State
	want.Listeners = map[int][]group.Listener{}
	want.SetListeners(g.cfg.ID, ports)
	if reflect.DeepEqual(st.Listeners[g.cfg.ID], want.Listeners[g.cfg.ID]) {
		return
	}
	ctx, cancel := g.ctx()
	defer cancel()
	next, err := group.Update(ctx, g.store, limits.GroupRetries, func(s *group.State) (bool, error) {
		before := slices.Clone(s.Listeners[g.cfg.ID])
		s.SetListeners(g.cfg.ID, ports)
		return !reflect.DeepEqual(before, s.Listeners[g.cfg.ID]), nil
	})
	if err != nil {
		m.log.Warn("gateway group: cannot write this gateway's listeners", "err", err)
		return
	}
	g.mu.Lock()
	g.adopt(next, g.adoptions)
	g.mu.Unlock()
	go g.notify(next.Version, group.KindConfig)
}

// serveState serves what this gateway can of st: first the ports, their ANA
// states and the referrals, which a takeover or a failback changes and
// which nothing else may hold up; then the subsystems, all at once or,
// when that fails, each on its own (applyEach), a subsystem that cannot be
// served as st has it not being served here at all. m.mu is held.
func (m *Manager) serveState(st *group.State, opts changeOpts) ([]string, error) {
	g := m.gw
	target := m.compose(m.local, st)
	var applied []string
	// The ANA states of the ports already listening, and the referrals:
	// a port added waits for the subsystems (a host that reconnected to
	// it first would be told, for good, that its subsystem is not there).
	base := m.running.Clone()
	for i := range base.Ports {
		if p := findPort(target, base.Ports[i].ID); p != nil {
			base.Ports[i].ANAGroups = maps.Clone(p.ANAGroups)
		}
	}
	base.Referrals = slices.Clone(target.Referrals)
	degraded := map[string]string{}
	if !reflect.DeepEqual(base, m.running) {
		a, err := m.applyGroupState(base, opts)
		applied = append(applied, a...)
		if err != nil {
			degraded[portsAndANA] = err.Error()
		}
	}
	if !reflect.DeepEqual(target, m.running) {
		a, err := m.applyGroupState(target, opts)
		applied = append(applied, a...)
		if err != nil {
			more, d := m.applyEach(target, opts)
			applied = append(applied, more...)
			maps.Copy(degraded, d)
		}
	}
	g.mu.Lock()
	changed := !maps.Equal(g.degraded, degraded)
	g.degraded = degraded
	g.mu.Unlock()
	if changed {
		for _, what := range slices.Sorted(maps.Keys(degraded)) {
			m.log.Error("gateway group state not applied here: serving the rest", "group", g.cfg.Name, "version", st.Version,
				"subsystem", what, "err", degraded[what])
		}
	}
	return applied, nil
}

// applyGroupState applies target whole. m.mu is held.
func (m *Manager) applyGroupState(target *config.Config, opts changeOpts) ([]string, error) {
	if err := target.Validate(); err != nil {
		return nil, err
	}
	steps, _, err := m.plan(m.running, target, opts)
	if err != nil {
		return nil, err
	}
	return m.apply(steps)
}

// portsAndANA names, among what applyEach could not apply, what is not a
// subsystem's: the ports, their ANA states and the referrals.
const portsAndANA = "(ports, ANA states, referrals)"

// failure is a subsystem applyEach could not apply, as it was then.
type failure struct {
	want *config.Subsystem
	err  string
	at   time.Time
}

// applyEach applies each subsystem of target on its own. One that cannot
// be applied as target has it is not served here (hosts use the other
// gateways: an older version would keep, say, a host the group revoked),
// and it is not tried again before it changes or
// limits.GroupRetryDegraded passes. It returns what it applied and what it
// could not, by subsystem NQN, with why. m.mu is held.
func (m *Manager) applyEach(target *config.Config, opts changeOpts) (applied []string, degraded map[string]string) {
	g := m.gw
	degraded = map[string]string{}
	nqns := map[string]bool{}
	for _, s := range target.Subsystems {
		nqns[s.NQN] = true
	}
	for _, s := range m.running.Subsystems {
		nqns[s.NQN] = true
	}
	now := time.Now()
	for _, nqn := range slices.Sorted(maps.Keys(nqns)) {
		want := findSubsystem(target, nqn)
		have := findSubsystem(m.running, nqn)
		if (want == nil && have == nil) || (want != nil && have != nil && reflect.DeepEqual(*want, *have)) {
			delete(g.failed, nqn)
			continue
		}
		if f, ok := g.failed[nqn]; ok && want != nil && reflect.DeepEqual(f.want, want) && now.Sub(f.at) < limits.GroupRetryDegraded {
			degraded[nqn] = f.err
			continue
		}
		// Everything else as target has it (its ports too: a plan adds
		// a subsystem before a port), the other subsystems as served.
		next := target.Clone()
		next.Subsystems = slices.DeleteFunc(m.running.Clone().Subsystems, func(s config.Subsystem) bool { return s.NQN == nqn })
		var err error
		if want != nil {
			with := next.Clone()
			with.Subsystems = append(with.Subsystems, *want)
			var a []string
			a, err = m.applyGroupState(with, opts)
			applied = append(applied, a...)
		}
		if err == nil && want != nil {
			delete(g.failed, nqn)
			continue
		}
		if err == nil { // removed from the group
			a, rerr := m.applyGroupState(next, opts)
			applied = append(applied, a...)
			if rerr != nil {
				degraded[nqn] = rerr.Error()
			}
			continue
		}
		why := "not served here: " + err.Error()
		if findSubsystem(m.running, nqn) != nil {
			if a, rerr := m.applyGroupState(next, opts); rerr != nil {
				why += "; and cannot stop serving it: " + rerr.Error()
			} else {
				applied = append(applied, a...)
			}
		}
		degraded[nqn] = why
		w := *want
		g.failed[nqn] = failure{want: &w, err: why, at: now}
	}
	return applied, degraded
}

// logStateErr logs a state that cannot be read, once per distinct error.
func (m *Manager) logStateErr(err error) {
	g := m.gw
	g.mu.Lock()
	first := g.logged != err.Error()
	g.logged = err.Error()
	g.mu.Unlock()
	if first {
		m.log.Error("gateway group state unreadable: serving what was, refusing changes until it is repaired", "group", g.cfg.Name, "err", err)
	}
}

// applyReservations gives the live namespaces the group's reservations,
// st being at version (resvVersion); a
// namespace of the group with no record has none (its record went with
// the namespace, which may be back under the same NSID: what this gateway
// held of it is no longer anyone's). The namespaces apply side by side:
// each may wait (bounded) for the commands of hosts a Preempt and Abort
// took out, and the notifier waits for all of them at once.
func (m *Manager) applyReservations(st *group.State, version uint64) error {
	type apply struct {
		ref group.NSRef
		ns  *fabric.Namespace
		rs  fabric.ReservationState
	}
	var todo []apply
	var errs []error
	for _, sub := range st.Subsystems {
		for _, n := range sub.Namespaces {
			ref := group.NSRef{NQN: sub.NQN, NSID: n.NSID}
			if _, ok := st.Reservations[ref]; ok {
				continue
			}
			ns := m.liveNamespace(ref.NQN, ref.NSID)
			if ns == nil {
				continue
			}
			if cur := ns.ReservationState(); cur.Type != 0 || len(cur.Registrants) > 0 || cur.Seq != 0 {
				todo = append(todo, apply{ref, ns, fabric.ReservationState{}})
			}
		}
	}
	for ref, r := range st.Reservations {
		ns := m.liveNamespace(ref.NQN, ref.NSID)
		if ns == nil {
			continue
		}
		rs, err := fabricReservation(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("subsystem %s namespace %d: %w", ref.NQN, ref.NSID, err))
			continue
		}
		todo = append(todo, apply{ref, ns, rs})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, a := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.ns.ApplyReservation(version, a.rs); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("subsystem %s namespace %d: %w", a.ref.NQN, a.ref.NSID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("shared reservation state not applied: %w", errors.Join(errs...))
	}
	return nil
}

func fabricReservation(r group.Reservation) (fabric.ReservationState, error) {
	st := fabric.ReservationState{Generation: r.Generation, Type: nvme.ResvType(r.Type), PTPL: r.PTPL, Seq: r.Seq}
	if r.Holder != "" {
		h, err := fabric.ParseHostID(r.Holder)
		if err != nil {
			return st, err
		}
		st.Holder = h
	}
	for _, reg := range r.Registrants {
		h, err := fabric.ParseHostID(reg.HostID)
		if err != nil {
			return st, err
		}
		st.Registrants = append(st.Registrants, fabric.ReservationRegistrant{HostID: h, Key: reg.Key})
	}
	for _, n := range r.Notices {
		h, err := fabric.ParseHostID(n.HostID)
		if err != nil {
			return st, err
		}
		st.Notices = append(st.Notices, fabric.ReservationNotice{HostID: h, Kind: n.Kind})
	}
	for _, a := range r.Aborted {
		h, err := fabric.ParseHostID(a)
		if err != nil {
			return st, err
		}
		st.Aborted = append(st.Aborted, h)
	}
	return st, nil
}

func groupReservation(st fabric.ReservationState) group.Reservation {
	r := group.Reservation{Generation: st.Generation, Type: uint8(st.Type), PTPL: st.PTPL, Registrants: []group.Registrant{}, Seq: st.Seq}
	if st.Holder != (fabric.HostID{}) {
		r.Holder = st.Holder.String()
	}
	for _, reg := range st.Registrants {
		r.Registrants = append(r.Registrants, group.Registrant{HostID: reg.HostID.String(), Key: reg.Key})
	}
	for _, n := range st.Notices {
		r.Notices = append(r.Notices, group.ResvNotice{HostID: n.HostID.String(), Kind: n.Kind})
	}
	for _, h := range st.Aborted {
		r.Aborted = append(r.Aborted, h.String())
	}
	return r
}

// resvSharer shares the namespaces' reservations through the group's
// state (fabric.ReservationSharer).
type resvSharer struct{ m *Manager }

func (s resvSharer) Commit(subnqn string, nsid nvme.NSID, next func(fabric.ReservationState) *fabric.ReservationState) (uint64, error) {
	g := s.m.gw
	ctx, cancel := g.ctx()
	defer cancel()
	ref := group.NSRef{NQN: subnqn, NSID: uint32(nsid)}
	tries := 0
	st, err := group.Update(ctx, g.store, limits.GroupRetries, func(st *group.State) (bool, error) {
		if tries++; tries > 1 {
			g.conflicts.Add(1)
		}
		if !st.HasNamespace(ref) {
			return false, fmt.Errorf("namespace %d of %s is not in the group's state", nsid, subnqn)
		}
		cur, err := fabricReservation(st.Reservations[ref])
		if err != nil {
			return false, err
		}
		n := next(cur)
		if n == nil {
			return false, nil
		}
		st.Reservations[ref] = groupReservation(*n)
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("gateway group %s: %w", g.cfg.Name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.adopt(st, g.adoptions) // committed: the newest there is
	return g.resvVersion(st), nil
}

func (s resvSharer) Publish(version uint64) {
	if missed, err := s.m.gw.notify(version, group.KindReservation); err != nil || missed > 0 {
		s.m.log.Warn("a reservation change was not acknowledged by every gateway: they apply it at their next read",
			"version", version, "unacknowledged", missed, "err", err)
	}
}

// gatewayUpdate makes a change through this gateway: on the group's
// latest state, checked whole, prepared here (backends opened), committed
// to the group (compare-and-swap: a lost race is made again on the newer
// state, at most limits.GroupRetries times), then applied here and
// announced. A change refused at any point before the commit changes
// nothing, here or in the group. m.mu is held.
func (m *Manager) gatewayUpdate(edit func(*config.Config) error, opts changeOpts) (Result, error) {
	g := m.gw
	lo, hi := g.cfg.CNTLIDRange()
	for try := 0; try < limits.GroupRetries; try++ {
		cur, _, err := g.read()
		if err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrGroup, err)
		}
		if cur.Version == 0 {
			// No object (removed, say, to repair a corrupt one): the change
			// makes it anew from what this gateway follows, not from
			// nothing, which every gateway would then follow.
			g.mu.Lock()
			cur = g.state.Recreate()
			g.mu.Unlock()
		}
		base := m.compose(m.local, cur)
		next := base.Clone()
		if err := edit(next); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := m.derivedKept(base, next, lo, hi); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		next.ApplyDefaults()
		// What this gateway could not serve of the state before the change
		// and the change leaves alone stays as it is here: it must not
		// stop a change of something else (applyEach).
		skip := m.unservedUnchanged(base, next)
		if err := m.asServed(next, skip).Validate(); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := g.shareable(next, base); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		newState := cur.Clone()
		if err := newState.SetSubsystems(next.Subsystems); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		newState.SetListeners(g.cfg.ID, next.Ports)
		newLocal := m.localOf(next)
		target := m.asServed(m.compose(newLocal, newState), skip)
		localChanged := !reflect.DeepEqual(newLocal, m.local)
		if localChanged && m.path != "" {
			if _, err := m.unedited(); err != nil {
				return Result{}, err
			}
		}
		steps, restart, err := m.plan(m.running, target, opts)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := prepare(steps); err != nil {
			return Result{}, err
		}
		if err := g.recordAddrs(); err != nil {
			abort(steps)
			return Result{}, fmt.Errorf("%w: %w", ErrGroup, err)
		}
		set, rm := group.Diff(cur, newState)
		shared := len(set) > 0 || len(rm) > 0
		if shared {
			ctx, cancel := g.ctx()
			err = group.Commit(ctx, g.store, cur, newState)
			cancel()
			if errors.Is(err, group.ErrConflict) {
				abort(steps)
				g.conflicts.Add(1)
				continue
			}
			if err != nil {
				abort(steps)
				return Result{}, fmt.Errorf("%w: %w", ErrGroup, err)
			}
			g.mu.Lock()
			g.adopt(newState, g.adoptions) // committed: the newest there is
			g.mu.Unlock()
		}
		applied, err := m.run(steps)
		if shared {
			// A namespace added is served once it holds the group's
			// reservations of it (attach marks it until then).
			g.mu.Lock()
			st, ver := g.state, g.resvVersion(g.state)
			g.mu.Unlock()
			if rerr := m.applyReservations(st, ver); rerr != nil {
				m.unreadState(rerr)
			}
		}
		m.reconcileShared()
		res := Result{Applied: applied, Restart: restart}
		if localChanged {
			m.local = newLocal
			if perr := m.persist(); perr != nil {
				m.log.Error("the change is live but was not saved", "err", perr)
				err = errors.Join(err, fmt.Errorf("save the configuration: %w", perr))
			} else {
				res.Persisted = m.path != ""
			}
		}
		if shared {
			m.log.Info("gateway group state changed", "group", g.cfg.Name, "version", newState.Version)
			go func() {
				if _, err := g.notify(newState.Version, group.KindConfig); err != nil {
					m.log.Warn("gateway group: notify", "err", err)
				}
			}()
		}
		return res, err
	}
	return Result{}, &refusal{code: 409, err: fmt.Errorf("gateway group %s: %w", g.cfg.Name, group.ConflictError(limits.GroupRetries))}
}

// unservedUnchanged are the subsystems of base this gateway does not serve
// as base has them (it could not apply them: applyEach) and next leaves as
// they are. m.mu is held.
func (m *Manager) unservedUnchanged(base, next *config.Config) map[string]bool {
	skip := map[string]bool{}
	for _, s := range base.Subsystems {
		have, after := findSubsystem(m.running, s.NQN), findSubsystem(next, s.NQN)
		if (have == nil || !reflect.DeepEqual(*have, s)) && after != nil && reflect.DeepEqual(*after, s) {
			skip[s.NQN] = true
		}
	}
	return skip
}

// asServed is c with the subsystems of skip as this gateway serves them
// (m.running's, or none). m.mu is held.
func (m *Manager) asServed(c *config.Config, skip map[string]bool) *config.Config {
	if len(skip) == 0 {
		return c
	}
	out := c.Clone()
	out.Subsystems = nil
	for _, s := range c.Subsystems {
		if !skip[s.NQN] {
			out.Subsystems = append(out.Subsystems, s)
		} else if have := findSubsystem(m.running, s.NQN); have != nil {
			out.Subsystems = append(out.Subsystems, *have)
		}
	}
	return out
}

// derivedKept refuses a change of what the group decides (each
// subsystem's controller IDs, the ports' ANA states), and fills them in
// for what the change adds; it also spreads namespaces added without an
// ANA group over the gateways' groups.
func (m *Manager) derivedKept(base, next *config.Config, lo, hi int) error {
	for i := range next.Subsystems {
		s := &next.Subsystems[i]
		if bs := findSubsystem(base, s.NQN); len(s.Ports) > 0 && (bs == nil || !slices.Equal(bs.Ports, s.Ports)) {
			// Port IDs are each gateway's own (its file's): a subsystem
			// on port 1 would not be served by a gateway whose port is 2.
			return fmt.Errorf("subsystem %s: ports: in a gateway group a subsystem is served on every gateway's ports (each gateway numbers its own)", s.NQN)
		}
		switch {
		case s.CNTLIDMin == 0 && s.CNTLIDMax == 0:
			s.CNTLIDMin, s.CNTLIDMax = lo, hi
		case s.CNTLIDMin != lo || s.CNTLIDMax != hi:
			return fmt.Errorf("subsystem %s: cntlid_min and cntlid_max: in a gateway group each gateway hands out its own controller IDs, %d..%d for gateway %d", s.NQN, lo, hi, m.gw.cfg.ID)
		}
	}
	var ana map[string]string
	if len(base.Ports) > 0 {
		ana = base.Ports[0].ANAGroups
	}
	for i := range next.Ports {
		p := &next.Ports[i]
		if bp := findPort(base, p.ID); (bp != nil && !maps.Equal(bp.ANAGroups, p.ANAGroups)) || (bp == nil && len(p.ANAGroups) > 0) {
			return fmt.Errorf("port %d: ana_groups: in a gateway group the group sets the ANA states (each gateway's own group optimized)", p.ID)
		}
		p.ANAGroups = maps.Clone(ana)
	}
	g := m.gw
	g.mu.Lock()
	members := g.view(g.state).Members
	g.mu.Unlock()
	counts := map[uint32]int{}
	for _, s := range next.Subsystems {
		for _, n := range s.Namespaces {
			if n.ANAGroup != 0 {
				counts[n.ANAGroup]++
			}
		}
	}
	for i := range next.Subsystems {
		for j := range next.Subsystems[i].Namespaces {
			if n := &next.Subsystems[i].Namespaces[j]; n.ANAGroup == 0 {
				n.ANAGroup = group.PickGroup(members, counts)
				counts[n.ANAGroup]++
			}
		}
	}
	return nil
}

// gatewayReload applies the gateway's file again, with the group's state.
func (m *Manager) gatewayReload(next *config.Config) (Result, error) {
	restart := staticChanges(m.local, next)
	next.GatewayGroup = m.gw.cfg // the group and id it started with
	m.local = next
	// As a sync serves the state: validated, what cannot be served left
	// out (a host key file outside key_dir is never opened).
	applied, err := m.serveState(m.gw.latest(), changeOpts{force: true, reread: followsBackend})
	m.reconcileShared()
	return Result{Applied: applied, Restart: restart}, err
}

// closeGateway stops following the group: no change is applied after it
// returns. The lease stays until leaveGroup.
func (m *Manager) closeGateway() {
	g := m.gw
	select {
	case <-g.stop:
		return
	default:
	}
	close(g.stop)
	if g.unwatch != nil {
		g.unwatch()
	}
	<-g.done
}

// LeaveGroup says, once the target is closed and its clients with it,
// that this gateway stopped: the others take its group over at once.
func (m *Manager) LeaveGroup() {
	g := m.gw
	if g == nil || g.fenced {
		return
	}
	ctx, cancel := g.ctx()
	defer cancel()
	rec := group.LeaseRecord{Incarnation: g.incarnation, Seq: g.seq + 1, Addrs: g.addrs(), Stopped: true}
	// The lock is held a little longer, not released: the others believe a
	// record only while its incarnation holds the lock, and read the
	// leases every lease/4. A gateway of this ID that starts meanwhile
	// waits for it to lapse.
	if err := g.store.Heartbeat(ctx, g.cfg.ID, g.incarnation, g.cfg.Lease/2, rec.Encode()); err != nil {
		m.log.Warn("gateway group: cannot release the lease; the others take over when it expires", "err", err)
	}
}

// GroupStatus is a gateway's view of its group.
type GroupStatus struct {
	Name string `json:"name"`
	Pool string `json:"pool"`
	ID   int    `json:"id"`
	// Version is the group state's version this gateway last read.
	Version uint64 `json:"version"`
	// Error is why the group's state cannot be read now (this gateway
	// then serves what it served and refuses changes).
	Error string `json:"error,omitempty"`
	// Idle: unread, and no command runs on the group's namespaces; the
	// lease says so, and the others serve this gateway's group.
	Idle bool `json:"idle,omitempty"`
	// LeaseWithheld: unread, with a write given up on that may still
	// land: the lease is not renewed, for the others to fence this
	// gateway before they serve its group.
	LeaseWithheld bool `json:"lease_withheld,omitempty"`
	// PrevOwed are the clients of this gateway's previous incarnation, on
	// other machines, it waits to see blocklisted before it serves.
	PrevOwed []string `json:"prev_owed,omitempty"`
	// Unread is why this gateway refuses I/O on the group's namespaces
	// and reports its groups inaccessible: the state could not be read
	// since a change was announced, or the cluster cannot be reached.
	Unread string `json:"unread,omitempty"`
	// Degraded is what of the group's state this gateway cannot serve
	// (by subsystem NQN), with why: it serves the rest.
	Degraded map[string]string `json:"degraded,omitempty"`
	// Fenced: another gateway blocklisted this one.
	Fenced  bool           `json:"fenced,omitempty"`
	Members []MemberStatus `json:"members"`
	// Owners maps each ANA group to the gateway whose ports report it
	// optimized (0: none now).
	Owners    map[string]int `json:"ana_owners"`
	Failovers uint64         `json:"failovers"`
	Conflicts uint64         `json:"conflicts"`
	// StateErrors counts reads of the state that failed.
	StateErrors uint64 `json:"state_errors"`
}

// MemberStatus is one gateway of the group.
type MemberStatus struct {
	ID   int  `json:"id"`
	Self bool `json:"self,omitempty"`
	// Alive: it holds its lease.
	Alive bool `json:"alive"`
	// LeaseAge is how long ago its lease was last renewed, as seen here.
	LeaseAge time.Duration `json:"lease_age_ns"`
	// Idle: it holds its lease but serves nothing (it cannot read the
	// state); its group is served elsewhere.
	Idle bool `json:"idle,omitempty"`
	// Owed are addresses of an earlier incarnation of it that still have
	// to be fenced.
	Owed []string `json:"owed,omitempty"`
	// Unverified: no lease of it was read while it held its lease lock,
	// so this gateway knows no client of it to blocklist (Addrs are then
	// what its record claims).
	Unverified bool `json:"unverified,omitempty"`
	// Stopped: it left cleanly; Fenced: its clients are blocklisted.
	Stopped   bool     `json:"stopped,omitempty"`
	Fenced    bool     `json:"fenced,omitempty"`
	Addrs     []string `json:"addrs,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
}

// Group is the gateway's view of its group, nil for a target on its own.
func (m *Manager) Group() *GroupStatus {
	g := m.gw
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	v := g.view(g.state)
	gs := &GroupStatus{Name: g.cfg.Name, Pool: g.cfg.Pool, ID: g.cfg.ID, Version: g.state.Version, Fenced: g.fenced,
		Owners: map[string]int{}, Failovers: g.failovers.Load(), Conflicts: g.conflicts.Load(), StateErrors: g.stateErrors.Load()}
	if g.stateErr != nil {
		gs.Error = g.stateErr.Error()
	}
	if g.unread != nil {
		gs.Unread = g.unread.Error()
	}
	gs.Idle, gs.LeaseWithheld, gs.PrevOwed = g.idle, g.withheld, slices.Clone(g.prevOwed)
	if len(g.degraded) > 0 {
		gs.Degraded = maps.Clone(g.degraded)
	}
	for grp, owner := range v.Owners() {
		gs.Owners[strconv.FormatUint(uint64(grp), 10)] = owner
	}
	for _, id := range v.Members {
		ms := MemberStatus{ID: id, Self: id == g.cfg.ID}
		if ms.Self {
			ms.Alive, ms.LeaseAge, ms.Addrs, ms.Fenced = v.SelfOK, now.Sub(g.lastBeat), g.addrs(), g.fenced
		} else {
			r, _ := g.tracker.Record(id)
			ms.Alive, ms.LeaseAge, ms.Stopped, ms.Addrs = v.Alive[id], g.tracker.Age(id, now), r.Stopped, g.tracker.Trusted(id)
			if ms.Addrs == nil {
				ms.Unverified, ms.Addrs = true, r.Addrs
			}
			ms.Idle, ms.Owed = g.tracker.Idle(id, now), g.tracker.Owed(id)
			ms.Fenced = v.Fenced[id] && !r.Stopped
		}
		for _, l := range g.state.Listeners[id] {
			ms.Listeners = append(ms.Listeners, fmt.Sprintf("%s %s:%d", l.Transport, l.Address, l.Port))
		}
		gs.Members = append(gs.Members, ms)
	}
	return gs
}

// shareable refuses a memory namespace that next adds to base, unless the
// options allow them (ErrNotShared); one already in the group's state is
// left alone, as a reload leaves a namespace it cannot change.
func (g *gateway) shareable(next, base *config.Config) error {
	if g.opts.MemoryNamespaces {
		return nil
	}
	type ref struct {
		nqn  string
		nsid uint32
	}
	had := map[ref]bool{}
	for _, s := range base.Subsystems {
		for _, n := range s.Namespaces {
			had[ref{s.NQN, n.NSID}] = n.Backend == config.BackendMemory
		}
	}
	for _, s := range next.Subsystems {
		for _, n := range s.Namespaces {
			if n.Backend == config.BackendMemory && !had[ref{s.NQN, n.NSID}] {
				return fmt.Errorf("subsystem %s namespace %d: backend memory: %w", s.NQN, n.NSID, ErrNotShared)
			}
		}
	}
	return nil
}
