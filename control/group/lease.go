package group

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Tracker follows the other gateways' leases with the observer's own
// clock: a gateway is alive while its record changed less than a lease
// ago, as this observer saw it. A record first seen counts as just
// changed, so that a gateway that starts takes nobody's group over before
// a whole lease has passed.
//
// Anyone able to write the pool can write a lease record, so a record
// counts only when read while its incarnation holds the gateway's lease
// lock from a client the record names, the same client as before for the
// same incarnation (Observed.Renews): the cluster's word, not the
// record's. Only such a record renews a gateway, says it is idle, or names
// addresses a fence blocklists, and only those of the lock holder's
// machine; a clean stop is believed only from the holder already seen for
// that incarnation. A gateway seen only through records that do not count
// is a member (dead a lease later) whose clients this observer cannot
// name. When a gateway's incarnation changes, the clients of the one
// before that neither stopped nor was fenced are owed a fence (Owed): a
// process paused past its lease may still write when it resumes.
type Tracker struct {
	lease time.Duration
	peers map[int]*peer
}

type peer struct {
	rec     LeaseRecord
	changed time.Time
	// holder is the lock holder's address for rec's incarnation, once a
	// record of it counted ("": none did); trusted are the addresses a
	// fence of that incarnation blocklists.
	holder  string
	trusted []string
	// owed are the addresses of earlier incarnations that neither stopped
	// nor were fenced.
	owed []string
	// fenced is the incarnation this observer blocklisted: it never
	// counts as alive again, whatever it writes.
	fenced string
}

// Observed is a gateway's lease as one read found it.
type Observed struct {
	Rec LeaseRecord
	// Holder is who holds the gateway's lease lock now (nil: nobody).
	Holder *Holder
}

// Renews reports whether the record counts: its incarnation holds the
// lease lock from a client whose address the record names.
func (o Observed) Renews() bool {
	h := o.Holder
	return h != nil && h.Cookie == o.Rec.Incarnation && slices.Contains(o.Rec.Addrs, h.Addr)
}

// sameHost are those of addrs on holder's machine.
func sameHost(addrs []string, holder string) []string {
	host, err := AddrHost(holder)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if ah, err := AddrHost(a); err == nil && ah == host {
			out = append(out, a)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// NewTracker tracks leases of the given length.
func NewTracker(lease time.Duration) *Tracker {
	return &Tracker{lease: lease, peers: map[int]*peer{}}
}

// Observe takes the leases as read at now.
func (t *Tracker) Observe(now time.Time, recs map[int]Observed) {
	for id, o := range recs {
		p := t.peers[id]
		r := o.Rec
		renews := o.Renews()
		if renews && p != nil && p.rec.Incarnation == r.Incarnation && p.holder != "" && p.holder != o.Holder.Addr {
			// The incarnation's lock moved to another client (it lapsed,
			// and someone took it with the incarnation's public name).
			renews = false
		}
		switch {
		case p == nil:
			p = &peer{rec: r, changed: now}
			t.peers[id] = p
			// A stop or an idle gateway is believed only from a holder
			// already seen for its incarnation.
			p.rec.Stopped, p.rec.Idle = false, false
		case !renews:
			continue
		case p.rec.Incarnation != r.Incarnation:
			if p.holder != "" && !p.rec.Stopped && p.fenced != p.rec.Incarnation {
				p.owed = union(p.owed, p.trusted)
			}
			p.rec, p.changed, p.holder, p.trusted = r, now, "", nil
			p.rec.Stopped, p.rec.Idle = false, false
		default:
			if p.holder == "" || p.rec.Seq != r.Seq || p.rec.Stopped != r.Stopped || p.rec.Idle != r.Idle {
				p.changed = now
			}
			seen := p.holder == o.Holder.Addr
			p.rec = r
			p.rec.Stopped, p.rec.Idle = r.Stopped && seen, r.Idle && seen
		}
		if renews {
			p.holder = o.Holder.Addr
			// Once trusted within an incarnation an address stays so.
			p.trusted = union(p.trusted, sameHost(r.Addrs, o.Holder.Addr))
		}
	}
}

// Members are the gateways that ever held a lease.
func (t *Tracker) Members() []int { return slices.Sorted(maps.Keys(t.peers)) }

// Record is gateway id's last lease record.
func (t *Tracker) Record(id int) (LeaseRecord, bool) {
	p := t.peers[id]
	if p == nil {
		return LeaseRecord{}, false
	}
	return p.rec, true
}

// Trusted are the addresses a fence of gateway id's incarnation
// blocklists: the lock holder's machine's among those its records named
// (nil if none counted).
func (t *Tracker) Trusted(id int) []string {
	if p := t.peers[id]; p != nil {
		return slices.Clone(p.trusted)
	}
	return nil
}

// Owed are the addresses of gateway id's earlier incarnations still to be
// fenced; SetOwedFenced clears them once blocklisted.
func (t *Tracker) Owed(id int) []string {
	if p := t.peers[id]; p != nil {
		return slices.Clone(p.owed)
	}
	return nil
}

// SetOwedFenced records that the addresses Owed gave are blocklisted.
func (t *Tracker) SetOwedFenced(id int, addrs []string) {
	if p := t.peers[id]; p != nil {
		p.owed = slices.DeleteFunc(p.owed, func(a string) bool { return slices.Contains(addrs, a) })
	}
}

// Age is how long ago gateway id's record last changed, as seen here.
func (t *Tracker) Age(id int, now time.Time) time.Duration {
	if p := t.peers[id]; p != nil {
		return now.Sub(p.changed)
	}
	return 0
}

// Alive reports whether gateway id holds its lease at now.
func (t *Tracker) Alive(id int, now time.Time) bool {
	p := t.peers[id]
	return p != nil && !p.rec.Stopped && p.fenced != p.rec.Incarnation && now.Sub(p.changed) < t.lease
}

// Idle reports whether gateway id, alive, serves nothing: its namespaces
// refuse I/O and none runs (it cannot read the group's state), so its
// group may be served elsewhere without a fence.
func (t *Tracker) Idle(id int, now time.Time) bool {
	return t.Alive(id, now) && t.peers[id].rec.Idle
}

// Fenced reports whether gateway id, not alive, can no longer write: it
// stopped cleanly, or this observer blocklisted its incarnation.
func (t *Tracker) Fenced(id int) bool {
	p := t.peers[id]
	return p != nil && (p.rec.Stopped || p.fenced == p.rec.Incarnation)
}

// SetFenced records that gateway id's current incarnation was
// blocklisted.
func (t *Tracker) SetFenced(id int) {
	if p := t.peers[id]; p != nil {
		p.fenced = p.rec.Incarnation
	}
}

// View is one gateway's view of its group at one moment: what decides the
// ANA states of its ports, and whom it must fence.
type View struct {
	// Self is this gateway's ID; SelfOK that its own lease holds (its
	// heartbeats succeed) and it serves: without it, it gives up every
	// group.
	Self   int
	SelfOK bool
	// Alive and Fenced are of the other gateways (Tracker's); Idle those
	// alive that serve nothing.
	Alive, Fenced, Idle map[int]bool
	// Members are the gateways known, Self among them.
	Members []int
	// Groups are the ANA groups namespaces are in.
	Groups []uint32
}

// taker is the gateway that takes over the groups of the dead: the live
// one of lowest ID (Self counts as live to itself), 0 if none.
func (v View) taker() int {
	for _, id := range v.Members {
		if v.live(id) {
			return id
		}
	}
	return 0
}

// live reports whether gateway id serves: alive and not idle.
func (v View) live(id int) bool {
	if id == v.Self {
		return v.SelfOK
	}
	return v.Alive[id] && !v.Idle[id]
}

func (v View) member(id int) bool { return slices.Contains(v.Members, id) }

// Owner is the gateway whose ports report group g optimized: its own
// gateway while that serves, else the taker; 0 if none does.
func (v View) Owner(g uint32) int {
	if id := int(g); v.member(id) && v.live(id) {
		return id
	}
	t := v.taker()
	if id := int(g); t != 0 && v.member(id) && id != v.Self && !v.Fenced[id] && !v.Idle[id] {
		// Dead but not fenced yet: nobody may take it over, lest the
		// dead one's writes land after the taker's.
		return 0
	}
	return t
}

// AllGroups are the groups whose states a gateway's ports report: its
// members' and those namespaces are in, sorted.
func (v View) AllGroups() []uint32 {
	set := map[uint32]bool{}
	for _, id := range v.Members {
		set[uint32(id)] = true
	}
	for _, g := range v.Groups {
		set[g] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// ANAStates are the states of every group through Self's ports:
// optimized where Self owns the group, inaccessible elsewhere (another
// gateway's, or nobody's while a dead one is not yet fenced).
func (v View) ANAStates() map[string]string {
	out := map[string]string{}
	for _, g := range v.AllGroups() {
		s := nvme.ANAInaccessible
		if v.Owner(g) == v.Self && v.SelfOK {
			s = nvme.ANAOptimized
		}
		out[strconv.FormatUint(uint64(g), 10)] = s.String()
	}
	return out
}

// Owners maps each group to its owner (0: none).
func (v View) Owners() map[uint32]int {
	out := map[uint32]int{}
	for _, g := range v.AllGroups() {
		out[g] = v.Owner(g)
	}
	return out
}

// ToFence are the dead gateways Self must blocklist before it takes their
// groups over: when Self is the taker.
func (v View) ToFence() []int {
	if v.taker() != v.Self || !v.SelfOK {
		return nil
	}
	var out []int
	for _, id := range v.Members {
		if id != v.Self && !v.Alive[id] && !v.Fenced[id] {
			out = append(out, id)
		}
	}
	return out
}

// PickGroup is the ANA group for a namespace added without one: the
// member's group with the fewest namespaces (ties: the lowest), so that
// namespaces spread over the gateways. counts are the namespaces per
// group now.
func PickGroup(members []int, counts map[uint32]int) uint32 {
	best := uint32(0)
	for _, id := range slices.Sorted(slices.Values(members)) {
		g := uint32(id)
		if best == 0 || counts[g] < counts[best] {
			best = g
		}
	}
	if best == 0 {
		return 1
	}
	return best
}
