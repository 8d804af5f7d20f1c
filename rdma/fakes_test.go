package rdma

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// The engine's test bench: a fake QP (fakeConn) that keeps what was posted
// to it in order, a fake shared receive queue (fakeSRQ), a fake batch that
// can fail a post part-way, a fake core, and a fake loop whose hand-overs
// the test delivers. Nothing here touches RDMA. Each test runs in both of
// the engine's receive modes (forModes): receives per queue, and an SRQ.

// fakeConn is a QP: sends and recvs are the work requests posted and not yet
// completed, in order. With an SRQ it has no receives of its own.
type fakeConn struct {
	qpn                              uint32
	sends                            []verbs.SendWR
	recvs                            []verbs.RecvWR
	setErrors, disconnects, destroys int
	// inError is the QP in the error state: SetError sets it, a test
	// sets it for rdma_cm's doing (a DREQ).
	inError bool
}

func (c *fakeConn) SetError() error        { c.setErrors++; c.inError = true; return nil }
func (c *fakeConn) InError() (bool, error) { return c.inError, nil }
func (c *fakeConn) Disconnect()            { c.disconnects++ }
func (c *fakeConn) Destroy()               { c.destroys++ }
func (c *fakeConn) QPNum() uint32          { return c.qpn }

// fakeSRQ is a shared receive queue: the receives posted and not yet taken
// by a QP, in order. A QP in the error state flushes none of them.
type fakeSRQ struct{ recvs []verbs.RecvWR }

type fakeGroup struct {
	c           *fakeConn
	sends       []verbs.SendWR
	recvs       []verbs.RecvWR
	recvsPosted int
	unposted    []verbs.SendWR
	err         error
}

// fakeBatch is a workBatch. failSends makes the next post of a conn take
// only that many of its sends; failRecvs makes it take none of its
// receives; failSRQ (when >= 0) makes the next post take only that many of
// the SRQ's receives. It allocates nothing once each of its groups has
// been used once.
type fakeBatch struct {
	maxSends, maxRecvs, maxGroups int
	ns, nr                        int
	groups                        []*fakeGroup
	used                          []*fakeGroup // groups made so far, for reuse
	failSends                     map[*fakeConn]int
	failRecvs                     map[*fakeConn]bool
	posts                         int

	srq         *fakeSRQ
	srqStaged   []verbs.RecvWR
	failSRQ     int
	srqPosted   int
	srqUnposted []verbs.RecvWR
	srqErr      error
}

func newFakeBatch(sends, recvs, groups int) *fakeBatch {
	return &fakeBatch{maxSends: sends, maxRecvs: recvs, maxGroups: groups,
		failSends: map[*fakeConn]int{}, failRecvs: map[*fakeConn]bool{},
		groups: make([]*fakeGroup, 0, groups), srqStaged: make([]verbs.RecvWR, 0, recvs), failSRQ: -1}
}

func (b *fakeBatch) Room(sends, recvs int) bool {
	return b.ns+sends <= b.maxSends && b.nr+recvs <= b.maxRecvs && len(b.groups) < b.maxGroups
}
func (b *fakeBatch) Groups() int { return len(b.groups) }
func (b *fakeBatch) Len() int    { return b.ns + b.nr + len(b.srqStaged) }

func (b *fakeBatch) SRQRoom(n int) bool { return len(b.srqStaged)+n <= cap(b.srqStaged) }

func (b *fakeBatch) SRQRecv() *verbs.RecvWR {
	b.srqStaged = append(b.srqStaged, verbs.RecvWR{})
	return &b.srqStaged[len(b.srqStaged)-1]
}

func (b *fakeBatch) SRQResult() (int, []verbs.RecvWR, error) {
	return b.srqPosted, b.srqUnposted, b.srqErr
}

func (b *fakeBatch) group(c qpConn) *fakeGroup {
	fc := c.(*fakeConn)
	if n := len(b.groups); n > 0 && b.groups[n-1].c == fc {
		return b.groups[n-1]
	}
	n := len(b.groups)
	if n == len(b.used) {
		// Capacity for the whole batch: a staged WR's address stays valid.
		b.used = append(b.used, &fakeGroup{sends: make([]verbs.SendWR, 0, b.maxSends), recvs: make([]verbs.RecvWR, 0, b.maxRecvs)})
	}
	g := b.used[n]
	*g = fakeGroup{c: fc, sends: g.sends[:0], recvs: g.recvs[:0]}
	b.groups = append(b.groups, g)
	return g
}

func (b *fakeBatch) Send(c qpConn) *verbs.SendWR {
	g := b.group(c)
	g.sends = append(g.sends, verbs.SendWR{})
	b.ns++
	return &g.sends[len(g.sends)-1]
}

func (b *fakeBatch) Recv(c qpConn) *verbs.RecvWR {
	g := b.group(c)
	g.recvs = append(g.recvs, verbs.RecvWR{})
	b.nr++
	return &g.recvs[len(g.recvs)-1]
}

func (b *fakeBatch) Post() {
	b.posts++
	b.srqPosted, b.srqUnposted, b.srqErr = len(b.srqStaged), nil, nil
	if n := b.failSRQ; n >= 0 && n < len(b.srqStaged) {
		b.failSRQ = -1
		b.srqPosted, b.srqUnposted = n, b.srqStaged[n:]
		b.srqErr = fmt.Errorf("ibv_post_srq_recv: %w", syscall.ENOMEM)
	}
	if b.srqPosted > 0 {
		b.srq.recvs = append(b.srq.recvs, b.srqStaged[:b.srqPosted]...)
	}
	for _, g := range b.groups {
		if b.failRecvs[g.c] {
			delete(b.failRecvs, g.c)
			g.err = fmt.Errorf("ibv_post_recv: %w", syscall.ENOMEM)
		} else {
			g.c.recvs = append(g.c.recvs, g.recvs...)
			g.recvsPosted = len(g.recvs)
		}
		ok := len(g.sends)
		if n, fail := b.failSends[g.c]; fail && n < len(g.sends) {
			delete(b.failSends, g.c)
			ok = n
			g.unposted = g.sends[n:]
			g.err = errors.Join(g.err, fmt.Errorf("ibv_post_send: %w", syscall.ENOMEM))
		}
		g.c.sends = append(g.c.sends, g.sends[:ok]...)
	}
}

func (b *fakeBatch) Result(i int) (int, []verbs.SendWR, error) {
	g := b.groups[i]
	return g.recvsPosted, g.unposted, g.err
}

func (b *fakeBatch) Reset() {
	clear(b.groups)
	b.groups, b.ns, b.nr = b.groups[:0], 0, 0
	b.srqStaged = b.srqStaged[:0]
}

// fakeLoop collects what other goroutines hand the engine. drain is what
// drainCQs does (the bench delivers its unpolled completions); arms are
// the SRQ limits armed, in order.
type fakeLoop struct {
	handed []*request
	fns    []func()
	drain  func()
	drains int
	arms   []int
}

func (l *fakeLoop) handOver(r *request) { l.handed = append(l.handed, r) }
func (l *fakeLoop) runSoon(fn func())   { l.fns = append(l.fns, fn) }
func (l *fakeLoop) armSRQ(limit int)    { l.arms = append(l.arms, limit) }
func (l *fakeLoop) drainCQs() {
	l.drains++
	if l.drain != nil {
		l.drain()
	}
}

// fakeTimer is a timer the engine started (engine.after); the test fires
// it.
type fakeTimer struct {
	d                time.Duration
	fn               func()
	fired, cancelled bool
}

// fakeCore is the fabric core. Read and Write move SGL1's length; hold
// keeps executed requests (backend I/O in flight) until respond.
type fakeCore struct {
	q                 *queue
	parseStatus       nvme.Status
	hold              bool
	held              []*fabric.Request
	executed          []uint16 // CIDs, in order
	failed, destroyed int
}

// parseRW sets what a test core's Parse sets: a write's or read's
// direction and length from its SGL, nothing for the rest.
func parseRW(r *fabric.Request) {
	r.Dir, r.DataLen, r.Data = fabric.DirNone, 0, nil
	switch r.Cmd.Opcode() {
	case nvme.OpWrite:
		r.Dir, r.DataLen = fabric.DirHostToCtrl, r.Cmd.SGL1().Length()
	case nvme.OpRead:
		r.Dir, r.DataLen = fabric.DirCtrlToHost, r.Cmd.SGL1().Length()
	}
}

func (c *fakeCore) Parse(r *fabric.Request) nvme.Status {
	parseRW(r)
	return c.parseStatus
}

func (c *fakeCore) Execute(r *fabric.Request) {
	c.executed = append(c.executed, r.Cmd.CID())
	if c.hold {
		c.held = append(c.held, r)
		return
	}
	c.respond(r, nvme.StatusSuccess)
}

func (c *fakeCore) Fail(r *fabric.Request, st nvme.Status) {
	c.failed++
	c.respond(r, st)
}

func (c *fakeCore) respond(r *fabric.Request, st nvme.Status) {
	r.Rsp.SetCID(r.Cmd.CID())
	r.Rsp.SetStatus(st)
	c.q.QueueResponse(r)
}

func (c *fakeCore) Destroy() { c.destroyed++ }

// bench is one engine with its fakes.
type bench struct {
	t    *testing.T
	e    *engine
	b    *fakeBatch
	loop *fakeLoop
	srq  *fakeSRQ // nil: receives per queue
	// inflight are SRQ receives a QP took and has not reported.
	inflight []verbs.RecvWR
	stats    Stats
	total    int // data buffers in the pool
	qpns     uint32
	// cq are completions the device wrote that the poller has not polled
	// yet: drainCQs delivers them. timers are the engine's, in order.
	cq     []verbs.WC
	timers []*fakeTimer
}

const (
	testUnit     = 4096
	testMaxBytes = 4 * testUnit // MDTS
	testICD      = 256
	// testSRQ is the receive buffers of the bench's SRQ, when it has one:
	// all are posted at start.
	testSRQ = 64
)

type benchOpts struct {
	chunks            int // data buffers; default 16
	batchSends        int // default 64
	depth             int // default 4
	sqSize, readDepth int // default depth*5 and 16
	// srq is the receive buffers of a shared receive queue; 0 gives every
	// queue receives of its own. srqStart posts only that many at start.
	srq, srqStart int
	// srqShare is the SRQ buffers one queue may hold (0: the default);
	// srqOver the overflow buffers (0: srqOverflow(srq); -1: none).
	srqShare, srqOver int
	// maxReqs sizes the engine's buffer line; default 4 queues × 2·16.
	maxReqs int
}

// modes are the engine's two ways of receiving capsules, which its tests
// run in: benchOpts.srq for each.
var modes = []struct {
	name string
	srq  int
}{{"own receives", 0}, {"srq", testSRQ}}

// forModes runs fn in each receive mode.
func forModes(t *testing.T, fn func(t *testing.T, srq int)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { fn(t, m.srq) })
	}
}

func newBench(t *testing.T, o benchOpts) *bench {
	if o.chunks == 0 {
		o.chunks = 16
	}
	if o.batchSends == 0 {
		o.batchSends = 64
	}
	h := &bench{t: t, loop: &fakeLoop{}, b: newFakeBatch(o.batchSends, 64, 8), total: o.chunks}
	c := engineConfig{
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), stats: &h.stats, loop: h.loop, batch: h.b,
		// One SGE per RDMA operation: a transfer of n buffers is a chain of n.
		geo:    geometry{lkey: 7, sgePerWR: 1, sendInv: true, maxChunks: testMaxBytes / testUnit},
		chunks: make([]byte, o.chunks*testUnit), ioUnit: testUnit,
		maxQueues: 4, maxReqs: cmp.Or(o.maxReqs, 4*2*16),
	}
	if o.srq > 0 {
		h.srq = &fakeSRQ{}
		h.b.srq = h.srq
		over := o.srqOver
		switch over {
		case 0:
			over = srqOverflow(o.srq)
		case -1:
			over = 0
		}
		c.srq = &srqConfig{cmd: make([]byte, o.srq*nvme.CommandSize), icd: make([]byte, o.srq*testICD), icdSize: testICD, n: o.srq, start: o.srqStart,
			overCmd: make([]byte, over*nvme.CommandSize), overICD: make([]byte, over*testICD), share: o.srqShare}
	}
	h.e = newEngine(c)
	h.e.after = func(d time.Duration, fn func()) func() bool {
		tm := &fakeTimer{d: d, fn: fn}
		h.timers = append(h.timers, tm)
		return func() bool { was := !tm.fired && !tm.cancelled; tm.cancelled = true; return was }
	}
	h.loop.drain = func() {
		for len(h.cq) > 0 {
			wc := h.cq[0]
			h.cq = h.cq[1:]
			h.e.complete(&wc)
		}
	}
	if h.srq != nil {
		h.e.startSRQ()
		want := o.srq
		if o.srqStart > 0 {
			want = o.srqStart
		}
		if got := len(h.srq.recvs); got != want {
			t.Fatalf("SRQ receives posted at start: %d, want %d", got, want)
		}
	}
	return h
}

// lastWQE delivers IBV_EVENT_QP_LAST_WQE_REACHED for c's QP, as the device
// does once the QP is in the error state, and ends the round.
func (h *bench) lastWQE(c *fakeConn) {
	h.e.lastWQEReached(c.qpn)
	h.e.flush()
}

// fire runs the timers due, as their goroutine would: through runSoon.
func (h *bench) fire() {
	for _, tm := range h.timers {
		if !tm.fired && !tm.cancelled {
			tm.fired = true
			tm.fn()
		}
	}
	h.runLoop()
}

// posted is how many receives the host of c finds posted: c's own, or
// the SRQ's.
func (h *bench) posted(c *fakeConn) int {
	if h.srq != nil {
		return len(h.srq.recvs)
	}
	return len(c.recvs)
}

// restPosted is how many receives are posted for the host of a queue of
// depth at rest: its depth, or what the SRQ was given.
func (h *bench) restPosted(depth int) int {
	if h.srq != nil {
		return h.e.srq.posted
	}
	return depth
}

// open connects a queue; it returns the queue, its QP and its core.
func (h *bench) open(o benchOpts) (*queue, *fakeConn, *fakeCore) {
	h.t.Helper()
	if o.depth == 0 {
		o.depth = 4
	}
	if o.sqSize == 0 {
		o.sqSize = o.depth * (1 + testMaxBytes/testUnit)
	}
	if o.readDepth == 0 {
		o.readDepth = 16
	}
	h.qpns++
	c := &fakeConn{qpn: 100 + h.qpns}
	q := newQueue(h.e, queueConfig{
		conn: c, log: h.e.log,
		mem: queueMem{
			cmd: make([]byte, o.depth*nvme.CommandSize),
			icd: make([]byte, o.depth*testICD),
			rsp: make([]byte, 2*o.depth*nvme.CompletionSize),
		},
		depth: o.depth, icd: testICD, sqSize: o.sqSize, readDepth: o.readDepth,
	})
	core := &fakeCore{q: q}
	q.core = core
	if added, live := h.e.open(q); !added || !live {
		h.t.Fatalf("open: added %v live %v", added, live)
	}
	want := o.depth
	if h.srq != nil {
		want = 0 // the SRQ's serve it
	}
	if len(c.recvs) != want {
		h.t.Fatalf("receives posted at open: %d, want %d", len(c.recvs), want)
	}
	return q, c, core
}

// cmd builds a command: op with n bytes of data, keyed (RDMA) or in the
// capsule.
func cmd(cid uint16, op uint8, n uint32, inCapsule bool) nvme.Command {
	c := nvme.Command(make([]byte, nvme.CommandSize))
	c.SetOpcode(op)
	c.SetCID(cid)
	switch {
	case n > 0 && inCapsule:
		c.SGL1().SetDataBlockOffset(0, n)
	case n > 0:
		c.SGL1().SetKeyed(0x10000, n, 0xbeef, true)
	}
	return c
}

// capsule delivers a command in the queue's first posted receive (its
// own, or the SRQ's), as the host's SEND would, and ends the poller round.
func (h *bench) capsule(q *queue, c *fakeConn, command nvme.Command, icd int) {
	h.t.Helper()
	w, ok := h.take(c)
	if !ok {
		h.t.Fatalf("capsule CID %d: no receive posted", command.CID())
	}
	_, _, _, slot := splitWRID(w.WRID)
	copy(q.mem.cmdBuf(int(slot)), command)
	h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: uint32(nvme.CommandSize + icd), QPNum: c.qpn})
	h.e.flush()
}

// capsuleData is capsule with in-capsule data: data lands in the receive
// buffer after the command.
func (h *bench) capsuleData(q *queue, c *fakeConn, command nvme.Command, data []byte) {
	h.t.Helper()
	w, ok := h.take(c)
	if !ok {
		h.t.Fatalf("capsule CID %d: no receive posted", command.CID())
	}
	_, _, _, slot := splitWRID(w.WRID)
	copy(q.mem.cmdBuf(int(slot)), command)
	copy(q.mem.icdBuf(int(slot), q.icd), data)
	h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: uint32(nvme.CommandSize + len(data)), QPNum: c.qpn})
	h.e.flush()
}

// take is what a message arriving on c's QP consumes: the first receive
// posted, c's own or the SRQ's.
func (h *bench) take(c *fakeConn) (verbs.RecvWR, bool) {
	r := &c.recvs
	if h.srq != nil {
		r = &h.srq.recvs
	}
	if len(*r) == 0 {
		return verbs.RecvWR{}, false
	}
	w := (*r)[0]
	*r = (*r)[1:]
	return w, true
}

// finish completes the oldest posted send of the given kind that is
// signaled, as the device reports it: in order, after the signaled sends
// before it (unsignaled ones complete silently). It ends the round and
// reports the CID of the request.
func (h *bench) finish(q *queue, c *fakeConn, kind int, status uint32) uint16 {
	h.t.Helper()
	i, ok := firstSignaled(c, kind)
	if !ok {
		h.t.Fatalf("no signaled %s posted (posted: %v)", kindName(kind), kinds(c.sends))
	}
	done := c.sends[:i+1]
	c.sends = c.sends[i+1:]
	_, _, _, idx := splitWRID(done[i].WRID)
	cid := q.reqs[idx].fr.Cmd.CID()
	for j, w := range done {
		if w.Flags&verbs.SendSignaled == 0 {
			continue
		}
		st := uint32(verbs.WCSuccess)
		if j == i {
			st = status
		}
		h.e.complete(&verbs.WC{WRID: w.WRID, Status: st, QPNum: c.qpn})
		h.e.flush()
	}
	return cid
}

// flushAll completes everything posted on c as flushed, as a QP in the
// error state does (unsignaled work too), and with an SRQ then reports its
// last WQE. The SRQ's receives are not c's: they stay posted.
func (h *bench) flushAll(c *fakeConn) {
	h.flushQP(c)
	if h.srq != nil {
		h.lastWQE(c)
	}
}

// flushQP completes everything posted on c as flushed.
func (h *bench) flushQP(c *fakeConn) {
	for len(c.recvs) > 0 || len(c.sends) > 0 {
		var w uint64
		if len(c.recvs) > 0 {
			w, c.recvs = c.recvs[0].WRID, c.recvs[1:]
		} else {
			w, c.sends = c.sends[0].WRID, c.sends[1:]
		}
		h.e.complete(&verbs.WC{WRID: w, Status: verbs.WCFlushErr, QPNum: c.qpn})
		h.e.flush()
	}
}

// runLoop delivers what other goroutines handed over, as the poller does.
func (h *bench) runLoop() {
	for len(h.loop.handed) > 0 || len(h.loop.fns) > 0 {
		handed, fns := h.loop.handed, h.loop.fns
		h.loop.handed, h.loop.fns = nil, nil
		for _, r := range handed {
			h.e.responded(r)
		}
		for _, fn := range fns {
			fn()
		}
		h.e.flush()
	}
}

// respond completes the requests the core holds, in order.
func (h *bench) respond(core *fakeCore) {
	for _, r := range core.held {
		core.respond(r, nvme.StatusSuccess)
	}
	core.held = nil
	h.runLoop()
}

// check asserts what must hold between rounds: each request once on the
// free list or out; a request waits in a line only in a waiting state; and
// every data buffer is in exactly one place (the pool, a request, a queue's
// held list).
func (h *bench) check(qs ...*queue) {
	h.t.Helper()
	seen := map[int32]string{}
	own := func(c int32, who string) {
		if prev, dup := seen[c]; dup {
			h.t.Fatalf("data buffer %d is in two places: %s and %s", c, prev, who)
		}
		seen[c] = who
	}
	for _, c := range h.e.pool.free {
		own(c, "pool")
	}
	for _, q := range h.e.queues {
		if q != nil && !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	for _, q := range qs {
		free := slices.Clone(q.free)
		slices.Sort(free)
		if len(slices.Compact(free)) != len(q.free) {
			h.t.Fatalf("a request is on the free list twice: %v", q.free)
		}
		for _, i := range q.free {
			if st := q.reqs[i].state; st != rsFree {
				h.t.Fatalf("request %d on the free list in state %s", i, st)
			}
		}
		claimed, holds := 0, 0
		for i := range q.reqs {
			r := &q.reqs[i]
			if r.waitingIn != nil && r.state != rsNeedBuffer && r.state != rsNeedRead && r.state != rsNeedSend {
				h.t.Fatalf("request %d waits in a line in state %s", i, r.state)
			}
			for _, c := range r.chunks {
				own(c, "request")
			}
			claimed += r.claimed
			holds += len(r.chunks)
		}
		if claimed != q.bufClaimed || holds > q.bufShare || claimed > q.bufShare {
			h.t.Fatalf("queue claims %d (its requests %d) and holds %d buffers; its share is %d",
				q.bufClaimed, claimed, holds, q.bufShare)
		}
		for _, c := range q.held {
			own(c, "held")
		}
	}
	if len(seen) != h.total {
		h.t.Fatalf("%d data buffers accounted for, want %d", len(seen), h.total)
	}
	if h.srq != nil {
		h.checkSRQ(qs)
	}
	h.e.publish() // as the poller's round does
	if got, want := h.stats.BuffersInUse.Load(), int64(h.total-len(h.e.pool.free)); got != want {
		h.t.Fatalf("BuffersInUse gauge %d, want %d (buffers out of the pool)", got, want)
	}
}

// checkSRQ asserts that every SRQ buffer is in exactly one place: posted
// to the SRQ, staged for the next round's post (what a failed post let
// go), held by a request or a parked capsule of a queue, or spare; that
// the engine counts as posted what the SRQ holds; that each overflow
// buffer is free or held by one request or parked capsule; and that each
// queue counts against its share the SRQ buffers it holds.
func (h *bench) checkSRQ(qs []*queue) {
	h.t.Helper()
	seen := map[int]string{}
	over := map[int]string{}
	own := func(b int, who string) {
		m, what := seen, "SRQ"
		if b >= h.e.srq.n {
			m, what = over, "overflow"
		}
		if prev, dup := m[b]; dup {
			h.t.Fatalf("%s buffer %d is in two places: %s and %s", what, b, prev, who)
		}
		m[b] = who
	}
	for _, b := range h.e.srq.overFree {
		if b < int32(h.e.srq.n) {
			h.t.Fatalf("SRQ buffer %d on the overflow's free list", b)
		}
		own(int(b), "overflow free")
	}
	for _, w := range h.srq.recvs {
		_, _, _, idx := splitWRID(w.WRID)
		own(int(idx), "SRQ")
	}
	for _, w := range h.b.srqStaged {
		_, _, _, idx := splitWRID(w.WRID)
		own(int(idx), "staged")
	}
	for _, w := range h.inflight {
		_, _, _, idx := splitWRID(w.WRID)
		own(int(idx), "taken by a QP")
	}
	for _, b := range h.e.srq.spare {
		own(int(b), "spare")
	}
	for _, q := range qs {
		held := 0
		hold := func(b int, who string) {
			own(b, who)
			if b < h.e.srq.n {
				held++
			}
		}
		for i := range q.reqs {
			if r := &q.reqs[i]; r.recv >= 0 {
				hold(r.recv, fmt.Sprintf("request %d of queue %d", i, q.slot))
			}
		}
		for i := 0; i < q.parked.len(); i++ {
			hold(q.parked.buf[(q.parked.head+i)%len(q.parked.buf)].slot, "parked")
		}
		if held != q.srqHeld {
			h.t.Fatalf("queue %d holds %d SRQ buffers and counts %d against its share", q.slot, held, q.srqHeld)
		}
	}
	if len(seen) != h.e.srq.n {
		h.t.Fatalf("%d SRQ buffers accounted for, want %d: %v", len(seen), h.e.srq.n, seen)
	}
	if len(over) != h.e.srq.over {
		h.t.Fatalf("%d overflow buffers accounted for, want %d: %v", len(over), h.e.srq.over, over)
	}
	if h.e.srq.posted != len(h.srq.recvs)+len(h.inflight) {
		h.t.Fatalf("engine counts %d SRQ receives posted, the SRQ holds %d and QPs took %d", h.e.srq.posted, len(h.srq.recvs), len(h.inflight))
	}
}

// gone asserts that q drained and was destroyed once, with every buffer
// it had back in the pool.
func (h *bench) gone(q *queue, c *fakeConn) {
	h.t.Helper()
	if q.state != qsDead || c.destroys != 1 {
		h.t.Fatalf("queue %s, destroyed %d times; want dead, once", q.state, c.destroys)
	}
	if h.e.queues[q.slot] == q {
		h.t.Fatal("a dead queue is still in the engine's table")
	}
	if h.srq != nil && h.e.byQPN[c.qpn] == q {
		h.t.Fatal("a dead queue is still found by its QP number")
	}
	if !slices.ContainsFunc(h.e.queues, func(q *queue) bool { return q != nil }) && len(h.e.pool.free) != h.total {
		h.t.Fatalf("pool has %d of %d buffers after the last queue is gone", len(h.e.pool.free), h.total)
	}
	h.check(q)
}

func kindName(k int) string {
	return map[int]string{kindRecv: "RECV", kindSend: "SEND", kindRead: "READ", kindReadPart: "READ", kindWrite: "WRITE", kindSRQRecv: "SRQ RECV"}[k]
}

func kinds(ws []verbs.SendWR) []string {
	var out []string
	for _, w := range ws {
		k, _, _, _ := splitWRID(w.WRID)
		out = append(out, kindName(k))
	}
	return out
}

// withSRQ is o in receive mode srq.
func withSRQ(o benchOpts, srq int) benchOpts {
	o.srq = srq
	return o
}
