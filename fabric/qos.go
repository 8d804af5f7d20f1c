package fabric

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Quality of service: limits on a namespace's I/O, for all its hosts
// together and for each host, after SPDK's bdev QoS and ceph-nvmeof's
// namespace set_qos. A command over a limit is held, never failed: a host
// takes an error for a path failure and fails over or gives up. It waits
// in a FIFO of its host's on the namespace, and the namespace's timer lets
// it go once the limits allow; the hosts that wait take turns, so that
// one host's backlog does not hold up another's commands. Keep Alive and
// every admin command are never held; nor are Flush and the reservation
// commands.
//
// A limit is a rate with a little credit (limits.QoSBurst) kept as the
// time its next unit is due (GCRA, a token bucket in time units): a
// command goes once every limit it falls under is due, and moves each on
// by its cost. A command larger than the credit goes into debt rather
// than waiting for ever. Nothing is allocated per command: the FIFOs are
// linked through the requests.

// QoSLimits are rates: commands per second (IOPS: reads and writes,
// Write Zeroes and Dataset Management; ReadIOPS reads; WriteIOPS the
// others) and bytes per second of data (BW, ReadBW, WriteBW). 0 is no
// limit.
type QoSLimits struct {
	IOPS, ReadIOPS, WriteIOPS uint64
	BW, ReadBW, WriteBW       uint64
}

// IsZero reports whether l limits nothing.
func (l QoSLimits) IsZero() bool { return l == QoSLimits{} }

// rates lists l in bucket order (qosIOPS...).
func (l QoSLimits) rates() [qosBuckets]uint64 {
	return [qosBuckets]uint64{l.IOPS, l.ReadIOPS, l.WriteIOPS, l.BW, l.ReadBW, l.WriteBW}
}

// QoSConfig is a namespace's QoS: its own limits, shared by every host,
// and each host's: PerHost for any host, Hosts for those named (a host
// named gets its entry instead of PerHost).
type QoSConfig struct {
	Limits  QoSLimits
	PerHost QoSLimits
	Hosts   map[string]QoSLimits
}

// IsZero reports whether c limits nothing.
func (c QoSConfig) IsZero() bool {
	if !c.Limits.IsZero() || !c.PerHost.IsZero() {
		return false
	}
	for _, l := range c.Hosts {
		if !l.IsZero() {
			return false
		}
	}
	return true
}

// limitsFor is the limits of hostnqn's commands alone.
func (c QoSConfig) limitsFor(hostnqn string) QoSLimits {
	if l, ok := c.Hosts[hostnqn]; ok {
		return l
	}
	return c.PerHost
}

// Buckets: which limits a command falls under.
const (
	qosIOPS = iota
	qosReadIOPS
	qosWriteIOPS
	qosBW
	qosReadBW
	qosWriteBW
	qosBuckets
)

// bucket is one limit: nsPer nanoseconds per unit (0: none), and tat the
// time (ns since the namespace's QoS started) when its credit is spent.
type bucket struct {
	nsPer float64
	tat   float64
}

// bucketSet is the limits one scope (the namespace, or one host) applies.
type bucketSet struct {
	b  [qosBuckets]bucket
	on bool
}

// set takes new rates, keeping each limit's debt.
func (s *bucketSet) set(l QoSLimits) {
	s.on = false
	for i, r := range l.rates() {
		s.b[i].nsPer = 0
		if r > 0 {
			s.b[i].nsPer = 1e9 / float64(r)
			s.on = true
		}
	}
}

// cost is what a command takes of the limits: the I/O buckets and the
// byte buckets it falls under, and its bytes.
type qosCost struct {
	ops   [2]uint8 // qosIOPS and qosReadIOPS or qosWriteIOPS
	bytes [2]uint8 // qosBW and qosReadBW or qosWriteBW
	n     uint32   // data bytes
}

var (
	readCost  = qosCost{ops: [2]uint8{qosIOPS, qosReadIOPS}, bytes: [2]uint8{qosBW, qosReadBW}}
	writeCost = qosCost{ops: [2]uint8{qosIOPS, qosWriteIOPS}, bytes: [2]uint8{qosBW, qosWriteBW}}
)

// costOf is r's cost, and false for a command no limit holds.
func costOf(r *Request) (qosCost, bool) {
	switch r.Cmd.Opcode() {
	case nvme.OpRead:
		c := readCost
		c.n = r.DataLen
		return c, true
	case nvme.OpWrite:
		c := writeCost
		c.n = r.DataLen
		return c, true
	case nvme.OpWriteZeroes, nvme.OpDSM:
		// One write each: what they change is not data the host sends.
		return writeCost, true
	}
	return qosCost{}, false
}

// due is when s lets a command of cost c go (ns since the epoch): when
// every limit it falls under has credit left.
func (s *bucketSet) due(c qosCost) float64 {
	if !s.on {
		return 0
	}
	burst := float64(limits.QoSBurst)
	d := 0.0
	for _, i := range c.ops {
		if b := &s.b[i]; b.nsPer > 0 {
			d = max(d, b.tat-burst)
		}
	}
	for _, i := range c.bytes {
		if b := &s.b[i]; b.nsPer > 0 {
			d = max(d, b.tat-burst)
		}
	}
	return d
}

// take charges c to s at now.
func (s *bucketSet) take(c qosCost, now float64) {
	if !s.on {
		return
	}
	for _, i := range c.ops {
		if b := &s.b[i]; b.nsPer > 0 {
			b.tat = max(b.tat, now) + b.nsPer
		}
	}
	for _, i := range c.bytes {
		if b := &s.b[i]; b.nsPer > 0 {
			b.tat = max(b.tat, now) + b.nsPer*float64(c.n)
		}
	}
}

// idle reports whether s has no debt at now: forgetting it loses nothing.
func (s *bucketSet) idle(now float64) bool {
	for i := range s.b {
		if s.b[i].tat > now {
			return false
		}
	}
	return true
}

// qosHost is one host's state on a namespace: its limits, and its held
// commands in arrival order.
type qosHost struct {
	nqn    string
	limits bucketSet
	// head and tail are the FIFO, linked through Request.qosNext; n its
	// length.
	head, tail *Request
	n          int
	// next links the hosts that hold commands, in turn order.
	next *qosHost
	// waited is the time its commands were held (ns), held how many
	// commands it holds now.
	waited int64
}

// nsQoS is a namespace's QoS, under one lock.
type nsQoS struct {
	mu  sync.Mutex
	cfg QoSConfig
	// off: no limit; commands go at once and none is held.
	off    bool
	closed bool
	ns     bucketSet
	hosts  map[string]*qosHost
	// turn is the ring of hosts that hold commands, turn the next to go.
	turn  *qosHost
	held  int
	timer *time.Timer
	// armed is when the timer fires (ns since the epoch), 0 when it is
	// stopped; last when it last ran.
	armed, last float64
	waited      int64 // ns commands were held, all hosts
	heldTotal   uint64
	// now is the clock (nanotime), release what runs a command let go
	// (Queue.executeHeld): fakes in tests.
	now     func() float64
	release func(r *Request)
}

func newNSQoS() *nsQoS {
	q := &nsQoS{off: true, hosts: map[string]*qosHost{},
		now:     func() float64 { return float64(nanotime()) },
		release: func(r *Request) { r.q.executeHeld(r) }}
	q.timer = time.AfterFunc(time.Hour, q.run)
	q.timer.Stop()
	return q
}

// host is hostnqn's state, made on its first command (once per host, not
// per command). q.mu is held.
func (q *nsQoS) host(hostnqn string) *qosHost {
	if h := q.hosts[hostnqn]; h != nil {
		return h
	}
	if len(q.hosts) >= limits.QoSHostEntries {
		q.forgetIdle(q.now())
	}
	h := &qosHost{nqn: hostnqn}
	h.limits.set(q.cfg.limitsFor(hostnqn))
	q.hosts[hostnqn] = h
	return h
}

// forgetIdle drops the hosts that hold nothing and owe nothing: with a
// host allowed to be any NQN, the map would otherwise grow with every
// host ever seen. Their wait times go with them. q.mu is held.
func (q *nsQoS) forgetIdle(now float64) {
	for k, h := range q.hosts {
		if h.n == 0 && h.limits.idle(now) {
			delete(q.hosts, k)
		}
	}
}

// admit lets r, a command of hostnqn's, go now, or holds it and reports
// false: run lets it go later, through Queue.executeHeld.
func (q *nsQoS) admit(r *Request, hostnqn string, c qosCost) bool {
	q.mu.Lock()
	if q.off {
		q.mu.Unlock()
		return true
	}
	h := q.host(hostnqn)
	now := q.now()
	// Only while nothing is held: a command that came later must not
	// pass those that wait.
	if q.held == 0 && h.limits.due(c) <= now && q.ns.due(c) <= now {
		h.limits.take(c, now)
		q.ns.take(c, now)
		q.mu.Unlock()
		return true
	}
	r.qosCost = c
	r.qosHost = h
	r.qosSince = int64(now)
	r.qosNext = nil
	if h.tail == nil {
		h.head = r
		q.joinTurn(h)
	} else {
		h.tail.qosNext = r
	}
	h.tail = r
	h.n++
	q.held++
	q.heldTotal++
	r.q.held.Add(1)
	q.arm(now, max(h.limits.due(c), q.ns.due(c)))
	q.mu.Unlock()
	return false
}

// joinTurn puts h, which now holds a command, in the ring before the host
// whose turn it is: last to go. q.mu is held.
func (q *nsQoS) joinTurn(h *qosHost) {
	if q.turn == nil {
		h.next = h
		q.turn = h
		return
	}
	// After the one before turn (hosts holding commands: few).
	q.ringPrev(q.turn).next = h
	h.next = q.turn
}

// leaveTurn takes h, which holds nothing now, off the ring; prev is the
// host before it. q.mu is held.
func (q *nsQoS) leaveTurn(h, prev *qosHost) {
	if h.next == h {
		q.turn = nil
	} else {
		prev.next = h.next
		if q.turn == h {
			q.turn = h.next
		}
	}
	h.next = nil
}

// arm sets the timer for due, no sooner than a tick after its last run.
// q.mu is held.
func (q *nsQoS) arm(now, due float64) {
	due = max(due, q.last+float64(limits.QoSTick), now)
	if q.armed != 0 && q.armed <= due {
		return
	}
	q.armed = due
	q.timer.Reset(time.Duration(due - now))
}

// run lets go, host by host in turn, the held commands the limits allow
// now, and sets the timer for the next. It runs them after unlocking.
func (q *nsQoS) run() {
	q.mu.Lock()
	now := q.now()
	q.armed, q.last = 0, now
	var out reqList
	next := 0.0
	// A pass gives each host that holds commands one, from the host
	// whose turn it is; the next turn is the host after the last that
	// went. A pass in which none may go ends it, and its heads say when
	// to look again.
	for q.turn != nil {
		progress := false
		next = 0
		h, prev := q.turn, q.ringPrev(q.turn)
		for range q.ringLen() {
			r := h.head
			due := max(h.limits.due(r.qosCost), q.ns.due(r.qosCost))
			if !q.off && due > now {
				if next == 0 || due < next {
					next = due
				}
				prev, h = h, h.next
				continue
			}
			if !q.off {
				h.limits.take(r.qosCost, now)
				q.ns.take(r.qosCost, now)
			}
			q.pop(h, now)
			out.push(r)
			progress = true
			if h.n > 0 {
				prev, h = h, h.next
				q.turn = h
				continue
			}
			nx := h.next
			q.leaveTurn(h, prev)
			if q.turn == nil {
				break
			}
			h = nx
			q.turn = h
		}
		if !progress {
			break
		}
	}
	if q.turn != nil {
		q.arm(now, next)
	}
	q.mu.Unlock()
	for r := out.first; r != nil; {
		nx := r.qosNext
		r.qosNext = nil
		r.q.held.Add(-1)
		q.release(r)
		r = nx
	}
}

// reqList is a list of requests linked through qosNext.
type reqList struct{ first, last *Request }

func (l *reqList) push(r *Request) {
	r.qosNext = nil
	if l.last == nil {
		l.first = r
	} else {
		l.last.qosNext = r
	}
	l.last = r
}

// pop takes h's head off its FIFO, counting its wait. q.mu is held.
func (q *nsQoS) pop(h *qosHost, now float64) {
	r := h.head
	h.head = r.qosNext
	if h.head == nil {
		h.tail = nil
	}
	h.n--
	q.held--
	waited := int64(now) - r.qosSince
	h.waited += waited
	q.waited += waited
}

// ringPrev is the host before h in the ring. q.mu is held.
func (q *nsQoS) ringPrev(h *qosHost) *qosHost {
	p := h
	for p.next != h {
		p = p.next
	}
	return p
}

// ringLen is how many hosts hold commands. q.mu is held.
func (q *nsQoS) ringLen() int {
	if q.turn == nil {
		return 0
	}
	n := 1
	for h := q.turn.next; h != q.turn; h = h.next {
		n++
	}
	return n
}

// set applies c: held commands are looked at again at once.
func (q *nsQoS) set(c QoSConfig) {
	q.mu.Lock()
	q.cfg = QoSConfig{Limits: c.Limits, PerHost: c.PerHost, Hosts: maps.Clone(c.Hosts)}
	q.off = q.closed || c.IsZero()
	q.ns.set(c.Limits)
	for nqn, h := range q.hosts {
		h.limits.set(q.cfg.limitsFor(nqn))
	}
	q.mu.Unlock()
	q.run()
}

// close lets every held command go, limits off: the namespace is going
// and they fail on it (Namespace.enter).
func (q *nsQoS) close() {
	q.mu.Lock()
	q.closed, q.off = true, true
	q.mu.Unlock()
	q.timer.Stop()
	q.run()
}

// drop completes the held commands of queue fq, which is gone, with
// Aborted SQ Deleted.
func (q *nsQoS) drop(fq *Queue) {
	q.mu.Lock()
	var out reqList
	for _, h := range q.hosts {
		if h.n == 0 {
			continue
		}
		var keep reqList
		for r := h.head; r != nil; {
			nx := r.qosNext
			if r.q == fq {
				h.n--
				q.held--
				out.push(r)
			} else {
				keep.push(r)
			}
			r = nx
		}
		h.head, h.tail = keep.first, keep.last
		if h.n == 0 {
			q.leaveTurn(h, q.ringPrev(h))
		}
	}
	q.mu.Unlock()
	for r := out.first; r != nil; {
		nx := r.qosNext
		r.qosNext = nil
		fq.held.Add(-1)
		r.complete(nvme.StatusAbortSQDeleted)
		r = nx
	}
}

// QoSStats is what a namespace's QoS held: commands held now, and the
// time and count of those held since the target started, in all and by
// host (the hosts it still keeps state of).
type QoSStats struct {
	Held      int
	HeldTotal uint64
	Waited    time.Duration
	Hosts     map[string]QoSHostStats
}

// QoSHostStats is one host's part of QoSStats.
type QoSHostStats struct {
	Held   int
	Waited time.Duration
}

// SetQoS sets the namespace's QoS, live: commands held are looked at
// again under the new limits at once, and all go when there are none.
func (ns *Namespace) SetQoS(c QoSConfig) error {
	if err := CheckQoS(c); err != nil {
		return fmt.Errorf("namespace %d: %w", ns.nsid, err)
	}
	ns.qosMu.Lock()
	defer ns.qosMu.Unlock()
	if ns.qosState == nil {
		if c.IsZero() {
			return nil
		}
		ns.qosState = newNSQoS()
	}
	ns.qosState.set(c)
	if c.IsZero() || ns.removed.Load() {
		ns.qos.Store(nil)
	} else {
		ns.qos.Store(ns.qosState)
	}
	return nil
}

// CheckQoS refuses a QoS configuration fabric cannot apply.
func CheckQoS(c QoSConfig) error {
	if len(c.Hosts) > limits.NamespaceHosts {
		return fmt.Errorf("QoS for %d hosts, more than %d", len(c.Hosts), limits.NamespaceHosts)
	}
	for h := range c.Hosts {
		if err := nvme.CheckNQN(h); err != nil {
			return fmt.Errorf("QoS of host %q: %w", h, err)
		}
	}
	return nil
}

// QoS is the namespace's QoS configuration.
func (ns *Namespace) QoS() QoSConfig {
	ns.qosMu.Lock()
	q := ns.qosState
	ns.qosMu.Unlock()
	if q == nil {
		return QoSConfig{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return QoSConfig{Limits: q.cfg.Limits, PerHost: q.cfg.PerHost, Hosts: maps.Clone(q.cfg.Hosts)}
}

// QoSStats describes what the namespace's QoS held.
func (ns *Namespace) QoSStats() QoSStats {
	ns.qosMu.Lock()
	q := ns.qosState
	ns.qosMu.Unlock()
	st := QoSStats{Hosts: map[string]QoSHostStats{}}
	if q == nil {
		return st
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	st.Held, st.HeldTotal, st.Waited = q.held, q.heldTotal, time.Duration(q.waited)
	for _, nqn := range slices.Sorted(maps.Keys(q.hosts)) {
		h := q.hosts[nqn]
		if h.waited > 0 || h.n > 0 {
			st.Hosts[nqn] = QoSHostStats{Held: h.n, Waited: time.Duration(h.waited)}
		}
	}
	return st
}

// closeQoS lets the commands the namespace holds go to fail on it.
func (ns *Namespace) closeQoS() {
	ns.qosMu.Lock()
	q := ns.qosState
	ns.qos.Store(nil)
	ns.qosMu.Unlock()
	if q != nil {
		q.close()
	}
}

// dropHeld completes the commands of q that its namespaces hold: q is
// gone.
func (q *Queue) dropHeld(ctrl *Controller) {
	if q.held.Load() == 0 || ctrl == nil {
		return
	}
	for _, ns := range ctrl.s.Namespaces() {
		ns.qosMu.Lock()
		qs := ns.qosState
		ns.qosMu.Unlock()
		if qs != nil {
			qs.drop(q)
		}
	}
}
