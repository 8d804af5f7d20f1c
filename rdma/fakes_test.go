package rdma

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// The engine's test bench: a fake QP (fakeConn) that keeps what was posted
// to it in order, a fake batch that can fail a post part-way, a fake core,
// and a fake loop whose hand-overs the test delivers. Nothing here touches
// RDMA.

// fakeConn is a QP: sends and recvs are the work requests posted and not yet
// completed, in order.
type fakeConn struct {
	sends                            []verbs.SendWR
	recvs                            []verbs.RecvWR
	setErrors, disconnects, destroys int
}

func (c *fakeConn) SetError() error { c.setErrors++; return nil }
func (c *fakeConn) Disconnect()     { c.disconnects++ }
func (c *fakeConn) Destroy()        { c.destroys++ }

type fakeGroup struct {
	c           *fakeConn
	sends       []verbs.SendWR
	recvs       []verbs.RecvWR
	recvsPosted int
	unposted    []verbs.SendWR
	err         error
}

// fakeBatch is a workBatch. failSends makes the next post of a conn take
// only that many of its sends; failRecvs makes it take none of its receives.
type fakeBatch struct {
	maxSends, maxRecvs, maxGroups int
	ns, nr                        int
	groups                        []*fakeGroup
	failSends                     map[*fakeConn]int
	failRecvs                     map[*fakeConn]bool
	posts                         int
}

func newFakeBatch(sends, recvs, groups int) *fakeBatch {
	return &fakeBatch{maxSends: sends, maxRecvs: recvs, maxGroups: groups,
		failSends: map[*fakeConn]int{}, failRecvs: map[*fakeConn]bool{}}
}

func (b *fakeBatch) Room(sends, recvs int) bool {
	return b.ns+sends <= b.maxSends && b.nr+recvs <= b.maxRecvs && len(b.groups) < b.maxGroups
}
func (b *fakeBatch) Groups() int { return len(b.groups) }
func (b *fakeBatch) Len() int    { return b.ns + b.nr }

func (b *fakeBatch) group(c qpConn) *fakeGroup {
	fc := c.(*fakeConn)
	if n := len(b.groups); n > 0 && b.groups[n-1].c == fc {
		return b.groups[n-1]
	}
	// Capacity for the whole batch: a staged WR's address stays valid.
	g := &fakeGroup{c: fc, sends: make([]verbs.SendWR, 0, b.maxSends), recvs: make([]verbs.RecvWR, 0, b.maxRecvs)}
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

func (b *fakeBatch) Reset() { b.groups, b.ns, b.nr = nil, 0, 0 }

// fakeLoop collects what other goroutines hand the engine.
type fakeLoop struct {
	handed []*request
	fns    []func()
}

func (l *fakeLoop) handOver(r *request) { l.handed = append(l.handed, r) }
func (l *fakeLoop) runSoon(fn func())   { l.fns = append(l.fns, fn) }

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

func (c *fakeCore) Parse(r *fabric.Request) nvme.Status {
	r.Dir, r.DataLen, r.Data = fabric.DirNone, 0, nil
	switch r.Cmd.Opcode() {
	case nvme.OpWrite:
		r.Dir, r.DataLen = fabric.DirHostToCtrl, r.Cmd.SGL1().Length()
	case nvme.OpRead:
		r.Dir, r.DataLen = fabric.DirCtrlToHost, r.Cmd.SGL1().Length()
	}
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
	t     *testing.T
	e     *engine
	b     *fakeBatch
	loop  *fakeLoop
	stats Stats
	total int // data buffers in the pool
}

const (
	testUnit     = 4096
	testMaxBytes = 4 * testUnit // MDTS
	testICD      = 256
)

type benchOpts struct {
	chunks            int // data buffers; default 16
	batchSends        int // default 64
	depth             int // default 4
	sqSize, readDepth int // default depth*5 and 16
}

func newBench(t *testing.T, o benchOpts) *bench {
	if o.chunks == 0 {
		o.chunks = 16
	}
	if o.batchSends == 0 {
		o.batchSends = 64
	}
	h := &bench{t: t, loop: &fakeLoop{}, b: newFakeBatch(o.batchSends, 64, 8), total: o.chunks}
	h.e = newEngine(engineConfig{
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), stats: &h.stats, loop: h.loop, batch: h.b,
		// One SGE per RDMA operation: a transfer of n buffers is a chain of n.
		geo:    geometry{lkey: 7, sgePerWR: 1, sendInv: true, maxChunks: testMaxBytes / testUnit},
		chunks: make([]byte, o.chunks*testUnit), ioUnit: testUnit,
		maxQueues: 4, maxReqs: 4 * 2 * 16,
	})
	return h
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
	c := &fakeConn{}
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
	if len(c.recvs) != o.depth {
		h.t.Fatalf("receives posted at open: %d, want %d", len(c.recvs), o.depth)
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

// capsule delivers a command in the queue's first posted receive, as the
// host's SEND would, and ends the poller round.
func (h *bench) capsule(q *queue, c *fakeConn, command nvme.Command, icd int) {
	h.t.Helper()
	if len(c.recvs) == 0 {
		h.t.Fatalf("capsule CID %d: no receive posted", command.CID())
	}
	w := c.recvs[0]
	c.recvs = c.recvs[1:]
	_, _, _, slot := splitWRID(w.WRID)
	copy(q.mem.cmdBuf(int(slot)), command)
	h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: uint32(nvme.CommandSize + icd)})
	h.e.flush()
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
		h.e.complete(&verbs.WC{WRID: w.WRID, Status: st})
		h.e.flush()
	}
	return cid
}

// flushAll completes everything posted on c as flushed, as a QP in the
// error state does (unsignaled work too).
func (h *bench) flushAll(c *fakeConn) {
	for len(c.recvs) > 0 || len(c.sends) > 0 {
		var w uint64
		if len(c.recvs) > 0 {
			w, c.recvs = c.recvs[0].WRID, c.recvs[1:]
		} else {
			w, c.sends = c.sends[0].WRID, c.sends[1:]
		}
		h.e.complete(&verbs.WC{WRID: w, Status: verbs.WCFlushErr})
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
	h.e.publish() // as the poller's round does
	if got, want := h.stats.BuffersInUse.Load(), int64(h.total-len(h.e.pool.free)); got != want {
		h.t.Fatalf("BuffersInUse gauge %d, want %d (buffers out of the pool)", got, want)
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
	if !slices.ContainsFunc(h.e.queues, func(q *queue) bool { return q != nil }) && len(h.e.pool.free) != h.total {
		h.t.Fatalf("pool has %d of %d buffers after the last queue is gone", len(h.e.pool.free), h.total)
	}
	h.check(q)
}

func kindName(k int) string {
	return map[int]string{kindRecv: "RECV", kindSend: "SEND", kindRead: "READ", kindReadPart: "READ", kindWrite: "WRITE"}[k]
}

func kinds(ws []verbs.SendWR) []string {
	var out []string
	for _, w := range ws {
		k, _, _, _ := splitWRID(w.WRID)
		out = append(out, kindName(k))
	}
	return out
}
