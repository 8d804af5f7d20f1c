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
// counts only when read while its incarnation held the gateway's lease
// lock from the client the record names (Observed.Held): the cluster's
// word, not the record's. Only such a record renews a gateway, says it
// stopped, or gives the addresses a fence blocklists. A gateway seen only
// through records that do not count is a member (dead a lease later) whose
// clients this observer cannot name.
type Tracker struct {
	lease time.Duration
	peers map[int]*peer
}

type peer struct {
	rec     LeaseRecord
	changed time.Time
	// held: rec was read while its incarnation held the lock; trusted
	// are the addresses of the last record that was (nil: none was).
	held    bool
	trusted []string
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

// Held reports whether the record counts: its incarnation holds the
// lease lock, from a client whose address the record names, and every
// address it names is of that client's machine.
func (o Observed) Held() bool {
	h := o.Holder
	if h == nil || h.Cookie != o.Rec.Incarnation || !slices.Contains(o.Rec.Addrs, h.Addr) {
		return false
	}
	host, err := AddrHost(h.Addr)
	if err != nil {
		return false
	}
	for _, a := range o.Rec.Addrs {
		if ah, err := AddrHost(a); err != nil || ah != host {
			return false
		}
	}
	return true
}

// NewTracker tracks leases of the given length.
func NewTracker(lease time.Duration) *Tracker {
	return &Tracker{lease: lease, peers: map[int]*peer{}}
}

// Observe takes the leases as read at now.
func (t *Tracker) Observe(now time.Time, recs map[int]Observed) {
	for id, o := range recs {
		p := t.peers[id]
		held := o.Held()
		switch {
		case p == nil:
			p = &peer{rec: o.Rec, changed: now}
			t.peers[id] = p
		case !held:
		case p.rec.Incarnation != o.Rec.Incarnation || p.rec.Seq != o.Rec.Seq || p.rec.Stopped != o.Rec.Stopped || !p.held:
			p.rec, p.changed = o.Rec, now
		}
		p.held = held
		if held {
			p.rec.Stopped = o.Rec.Stopped
			p.trusted = slices.Clone(o.Rec.Addrs)
		} else if p.trusted == nil {
			p.rec.Stopped = false // never read so: not to be believed
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

// Trusted are the addresses a fence of gateway id blocklists: those of its
// last record that counted (nil if none did).
func (t *Tracker) Trusted(id int) []string {
	if p := t.peers[id]; p != nil {
		return slices.Clone(p.trusted)
	}
	return nil
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
	// heartbeats succeed): without it, it gives up every group.
	Self   int
	SelfOK bool
	// Alive and Fenced are of the other gateways (Tracker's).
	Alive, Fenced map[int]bool
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

func (v View) live(id int) bool {
	if id == v.Self {
		return v.SelfOK
	}
	return v.Alive[id]
}

func (v View) member(id int) bool { return slices.Contains(v.Members, id) }

// Owner is the gateway whose ports report group g optimized: its own
// gateway while that lives, else the taker; 0 if none does.
func (v View) Owner(g uint32) int {
	if id := int(g); v.member(id) && v.live(id) {
		return id
	}
	t := v.taker()
	if id := int(g); t != 0 && v.member(id) && id != v.Self && !v.Fenced[id] {
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
