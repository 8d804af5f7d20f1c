package rdma

import (
	"log/slog"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// qpConn is the engine's only handle on a queue's QP and rdma_cm ID (the
// shell's cmConn; a fake in tests).
type qpConn interface {
	// SetError moves the QP to the error state: everything posted flushes.
	SetError() error
	// Disconnect tells the host the connection is going (a DREQ).
	Disconnect()
	// Destroy destroys the QP and frees the queue's registered memory;
	// the engine calls it once nothing of the queue is outstanding.
	Destroy()
	// InError reports whether the QP is in the error state
	// (ibv_query_qp(3)).
	InError() (bool, error)
	// QPNum is the QP's number: receive completions of a shared receive
	// queue name their queue by it.
	QPNum() uint32
}

// core is the transport-independent queue the engine drives
// (*fabric.Queue; a fake in tests).
type core interface {
	Parse(*fabric.Request) nvme.Status
	Execute(*fabric.Request)
	Fail(*fabric.Request, nvme.Status)
	Destroy()
}

type qState uint8

const (
	qsLive     qState = iota
	qsDraining        // torn down: waiting for posted work to flush and requests to come back
	qsDead            // drained and destroyed
)

var qStateNames = [...]string{"live", "draining", "dead"}

func (s qState) String() string { return qStateNames[s] }

// queueMem is the registered memory a queue uses: the receive buffers of
// its command capsules and their in-capsule data, and its response
// capsules. With a shared receive queue, the receive buffers are the
// poller's, indexed by SRQ buffer; without, the queue's own, by slot.
type queueMem struct {
	cmd []byte // receive buffers × 64
	icd []byte // receive buffers × in-capsule data size
	rsp []byte // 2·depth × 16
}

func (m *queueMem) cmdBuf(slot int) []byte {
	off := slot * nvme.CommandSize
	return m.cmd[off : off+nvme.CommandSize : off+nvme.CommandSize]
}

func (m *queueMem) icdBuf(slot, icd int) []byte {
	off := slot * icd
	return m.icd[off : off+icd : off+icd]
}

func (m *queueMem) rspBuf(req int) []byte {
	off := req * nvme.CompletionSize
	return m.rsp[off : off+nvme.CompletionSize : off+nvme.CompletionSize]
}

// queueConfig is what the shell learned while connecting a queue.
type queueConfig struct {
	conn qpConn
	log  *slog.Logger
	mem  queueMem
	// depth is the commands the host may have outstanding (receive slots);
	// icd the in-capsule data each receive holds.
	depth, icd int
	// sqSize is the QP's send-queue slots; readDepth how many RDMA READs
	// the host lets us have outstanding (its responder resources).
	sqSize, readDepth int
}

// queue is one NVMe/RDMA queue pair, as the engine sees it.
type queue struct {
	e    *engine
	conn qpConn
	// core is the fabric queue; set by the shell before the queue is opened.
	core core
	log  *slog.Logger
	mem  queueMem
	// slot is the queue's index in the engine's table and gen its
	// generation there: both go into every wr_id (wrid.go).
	slot, gen uint16
	depth     int
	icd       int
	state     qState

	sqCredits  int // send-queue slots free
	readDepth  int // RDMA READs the host lets us have outstanding
	readsOut   int // RDMA READs outstanding
	recvPosted int
	reqs       []request
	free       []uint16
	readWait   fifo
	sendWait   fifo
	// bufWait is the line of requests waiting for room in the queue's
	// share of the poller's data buffers (bufShare chunks); bufClaimed is
	// what its requests past that line count against it.
	bufWait    fifo
	bufShare   int
	bufClaimed int
	// srqHeld is the SRQ buffers q's requests and parked capsules hold,
	// against the SRQ's share (srq.go).
	srqHeld int
	// parked are capsules that arrived while every request was still
	// waiting for its SEND to complete.
	parked ring[parkedCapsule]
	reason string
	// held are data buffers of requests abandoned after a failed post:
	// part of their work may have gone in, so the device may still move
	// data through them until the QP is destroyed (checkDrained).
	held []int32
	// drainSince is when teardown began; stuckLogged once checkStuck
	// has reported the queue.
	drainSince  time.Time
	stuckLogged bool
	// lastWQE: with an SRQ, the QP takes no more of its receives
	// (IBV_EVENT_QP_LAST_WQE_REACHED, its timeout, or the device gone);
	// cancelWait stops the timeout.
	lastWQE    bool
	cancelWait func() bool
	// sendsDone counts the response SENDs that completed; checkResponses
	// compares it with sendsSeen, its value at the previous check, and
	// stalledSince is when a check first found SENDs out and none done.
	sendsDone, sendsSeen uint64
	stalledSince         time.Time
}

// parkedCapsule is a received command waiting for a free request.
type parkedCapsule struct{ slot, icdLen int }

func newQueue(e *engine, c queueConfig) *queue {
	q := &queue{
		e: e, conn: c.conn, log: c.log, mem: c.mem, depth: c.depth, icd: c.icd,
		sqCredits: c.sqSize, readDepth: c.readDepth,
	}
	if e.srq != nil {
		q.mem.cmd, q.mem.icd = e.srq.cmd, e.srq.icd
	}
	n := 2 * c.depth
	q.reqs = make([]request, n)
	q.free = make([]uint16, 0, n)
	for i := n - 1; i >= 0; i-- {
		r := &q.reqs[i]
		r.q = q
		r.idx = uint16(i)
		r.recv = -1
		r.fr.Tag = uint32(i)
		r.fr.Rsp = c.mem.rspBuf(i)
		r.rspAddr = verbs.Addr(r.fr.Rsp)
		r.chunks = make([]int32, 0, e.geo.maxChunks)
		r.segs = make([][]byte, 0, e.geo.maxChunks)
		q.free = append(q.free, uint16(i))
	}
	q.readWait = newFIFO(n, &e.stats.ReadWaits)
	q.sendWait = newFIFO(n, &e.stats.SendWaits)
	q.bufWait = newFIFO(n, &e.stats.ShareWaits)
	q.bufShare = queueShare(e.pool.total, c.depth, e.geo.maxChunks)
	q.parked = newRing[parkedCapsule](c.depth)
	return q
}

func (q *queue) live() bool { return q.state == qsLive }

// QueueResponse implements fabric.Conn. A response given while the poller
// is still inside Execute or Fail for the request is left to the poller;
// any other is handed over to the poller's goroutine.
func (q *queue) QueueResponse(fr *fabric.Request) {
	r := &q.reqs[fr.Tag]
	if r.inline.CompareAndSwap(inlineRunning, inlineDone) {
		return
	}
	q.e.loop.handOver(r)
}

// Disconnect implements fabric.Conn.
func (q *queue) Disconnect() {
	q.e.loop.runSoon(func() { q.teardown("disconnect requested by the target") })
}

// received handles a command capsule in receive slot slot (with an SRQ,
// the poller's receive buffer slot).
func (q *queue) received(slot int, wc *verbs.WC) {
	if q.e.srq == nil {
		q.recvPosted--
	}
	if wc.Status != verbs.WCSuccess || !q.live() {
		q.recvUnused(slot)
		q.teardown("receive flushed")
		q.checkDrained()
		return
	}
	if wc.ByteLen < nvme.CommandSize {
		q.log.Warn("short command capsule", "bytes", wc.ByteLen)
		q.recvUnused(slot)
		q.teardown("short command capsule")
		return
	}
	icdLen := int(wc.ByteLen) - nvme.CommandSize
	if q.e.srq != nil {
		slot = q.keep(slot, int(wc.ByteLen))
	}
	if len(q.free) == 0 {
		// Every request still waits for its SEND: park the capsule. With
		// receives of its own, there are never more than those posted.
		// With an SRQ, nothing but the host's queue depth holds it back: a
		// host with more commands out than that breaks the submission
		// queue's flow control, and is disconnected rather than let it
		// take the poller's buffers.
		if !q.parked.push(parkedCapsule{slot, icdLen}) {
			q.recvDone(slot)
			if q.e.srq != nil {
				q.log.Warn("host sent more commands than its queue holds: disconnecting", "depth", q.depth)
				q.teardown("queue depth exceeded")
				return
			}
			q.lineFull("parked capsules")
		}
		return
	}
	q.start(slot, icdLen)
}

// recvUnused lets go of a receive that brought no capsule for the queue:
// with an SRQ, the buffer is the poller's and goes back to it; without, it
// was the queue's own, and the queue is being torn down.
func (q *queue) recvUnused(slot int) {
	if q.e.srq != nil {
		q.e.srqRepost(slot)
	}
}

// recvDone lets go of a capsule the queue kept and will not run, as
// recvUnused.
func (q *queue) recvDone(slot int) {
	if q.e.srq != nil {
		q.srqDone(slot)
	}
}

// cmdBuf is the command capsule in receive buffer b: the queue's own, the
// SRQ's, or the SRQ's overflow.
func (q *queue) cmdBuf(b int) []byte {
	if s := q.e.srq; s != nil {
		return s.cmdAt(b)
	}
	return q.mem.cmdBuf(b)
}

// icdBuf is the in-capsule data of receive buffer b, as cmdBuf.
func (q *queue) icdBuf(b int) []byte {
	if s := q.e.srq; s != nil {
		return s.icdAt(b)
	}
	return q.mem.icdBuf(b, q.icd)
}

// start binds a free request to the capsule in slot.
func (q *queue) start(slot, icdLen int) {
	r := &q.reqs[q.free[len(q.free)-1]]
	q.free = q.free[:len(q.free)-1]
	r.recv = slot
	r.icdLen = icdLen
	r.fr.Cmd = q.cmdBuf(slot)
	r.invalidate = false
	q.advance(r, evCapsule)
}

// freed puts a released request back on the free list, where a parked
// capsule may take it at once.
func (q *queue) freed(r *request) {
	q.free = append(q.free, r.idx)
	if !q.live() {
		q.checkDrained()
		return
	}
	if c, ok := q.parked.pop(); ok {
		q.start(c.slot, c.icdLen)
	}
}

// lineFull handles a wait line that refused a request. Every line is sized
// for all the requests that can wait in it, so this is a bug; the queue is
// torn down rather than a request lost.
func (q *queue) lineFull(what string) {
	q.log.Error("wait line full: tearing the queue down", "line", what)
	q.teardown("wait line full: " + what)
}

// hold takes n send-queue slots for r, reads of them for RDMA READs.
func (q *queue) hold(r *request, n, reads int) {
	r.credits, r.reads = n, reads
	q.sqCredits -= n
	q.readsOut += reads
}

// unhold gives back what r holds.
func (q *queue) unhold(r *request) {
	q.sqCredits += r.credits
	q.readsOut -= r.reads
	r.credits, r.reads = 0, 0
}

// retryCredits lets the heads of the credit lines try again after a
// completion gave credits back.
func (q *queue) retryCredits() {
	q.readWait.retry(q.retry)
	q.sendWait.retry(q.retry)
}

// retry runs a waiting request's state machine again.
func (q *queue) retry(r *request) { r.q.advance(r, evNone) }

// reserve makes room in the engine's batch for q's next work requests,
// posting what is staged when it is full. It reports whether q is still
// live: a failed post tears its queue down.
func (q *queue) reserve(sends, recvs int) bool {
	b := q.e.batch
	for !q.e.room(sends, recvs) {
		if b.Len() == 0 {
			// Cannot happen with the batch sized from MDTS; never spin on it.
			q.log.Error("work requests do not fit the poller's batch", "sends", sends, "recvs", recvs)
			q.teardown("request too large to post")
			return false
		}
		q.e.flush()
	}
	return q.live()
}

// postRecv gives receive slot s back to the QP, with the engine's next flush.
func (q *queue) postRecv(s int) {
	if q.reserve(0, 1) {
		q.stageRecv(s)
	}
}

// stageRecv stages the receive of slot s; the caller has reserved room.
func (q *queue) stageRecv(s int) {
	w := q.e.stageRecv(q)
	w.WRID = wrID(kindRecv, q.slot, q.gen, uint16(s))
	w.SGE[0] = verbs.SGE{Addr: verbs.Addr(q.mem.cmdBuf(s)), Length: nvme.CommandSize, LKey: q.e.geo.lkey}
	w.NumSGE = 1
	if q.icd > 0 {
		w.SGE[1] = verbs.SGE{Addr: verbs.Addr(q.mem.icdBuf(s, q.icd)), Length: uint32(q.icd), LKey: q.e.geo.lkey}
		w.NumSGE = 2
	}
}

// stageRDMA stages the WRs that move r's segments to or from the host's
// contiguous buffer, up to sgePerWR segments each, and returns the last.
func (q *queue) stageRDMA(r *request, op verbs.WROpcode, kind int) *verbs.SendWR {
	per := q.e.geo.sgePerWR
	raddr := r.remoteAddr
	var w *verbs.SendWR
	for i := 0; i < len(r.segs); i += per {
		w = q.e.stageSend(q)
		*w = verbs.SendWR{WRID: wrID(kind, q.slot, q.gen, r.idx), Opcode: op, RemoteAddr: raddr, RKey: r.rkey}
		for j := i; j < len(r.segs) && j < i+per; j++ {
			seg := r.segs[j]
			w.SGE[w.NumSGE] = verbs.SGE{Addr: verbs.Addr(seg), Length: uint32(len(seg)), LKey: q.e.geo.lkey}
			w.NumSGE++
			raddr += uint64(len(seg))
		}
	}
	return w
}

// wrsFor is how many RDMA operations move r's data.
func (q *queue) wrsFor(r *request) int {
	per := q.e.geo.sgePerWR
	return (len(r.segs) + per - 1) / per
}
