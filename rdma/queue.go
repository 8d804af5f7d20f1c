package rdma

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// reqState is the RDMA request state machine (after SPDK's). advance moves
// a request until its state stops changing; waits are FIFO queues.
type reqState uint8

const (
	// rsFree: on the queue's free list.
	rsFree reqState = iota
	// rsNew: bound to a received command capsule.
	rsNew
	// rsNeedBuffer: waiting in the poller's FIFO for data buffers.
	rsNeedBuffer
	// rsNeedRead: host write data to fetch; waiting for RDMA READ credits
	// (the QP's initiator depth and send-queue slots).
	rsNeedRead
	// rsReading: RDMA READs posted; waiting for the last one.
	rsReading
	// rsReady: data in place; ready to execute.
	rsReady
	// rsExecuting: owned by the core (backend I/O, held AER).
	rsExecuting
	// rsExecuted: the core completed it; the response is built.
	rsExecuted
	// rsNeedSend: waiting for send-queue credits.
	rsNeedSend
	// rsSending: RDMA WRITEs and the response SEND posted, as one chain.
	rsSending
	// rsDone: finished or abandoned; release its resources.
	rsDone
	rsCount // number of states
)

var reqStateNames = [rsCount]string{"free", "new", "need_buffer", "need_read", "reading", "ready",
	"executing", "executed", "need_send", "sending", "done"}

// checkStuck logs, once, a queue that has been draining for longer than
// drainWarnAfter.
func (q *queue) checkStuck() {
	if q.state == qsDraining && !q.stuckLogged && time.Since(q.drainSince) > drainWarnAfter {
		q.stuckLogged = true
		q.logStuck()
	}
}

// logStuck says what a queue that does not drain still waits for.
func (q *queue) logStuck() {
	var n [rsCount]int
	for i := range q.reqs {
		n[q.reqs[i].state]++
	}
	var by []string
	for st, c := range n {
		if c > 0 && reqState(st) != rsFree {
			by = append(by, fmt.Sprintf("%s=%d", reqStateNames[st], c))
		}
	}
	q.log.Warn("queue not drained", "state", q.state, "reason", q.reason, "receives_posted", q.recvPosted,
		"requests_out", len(q.reqs)-len(q.free), "by_state", strings.Join(by, " "))
}

type qState uint8

const (
	qsLive qState = iota
	qsDraining
	qsDead
)

// request is one slot of a queue's request pool. The pool is twice the
// queue depth: a request lingers until its SEND completes, while the host
// may already reuse the command slot.
type request struct {
	fr      fabric.Request
	q       *queue
	idx     uint16
	state   reqState
	waiting bool // in a FIFO
	recv    int  // receive slot holding the capsule, -1 when none
	icdLen  int  // in-capsule bytes received
	rspAddr uint64
	chunks  []int32
	segs    [][]byte
	raddr   uint64
	rkey    uint32
	inv     bool
	credits int // send-queue slots held
	reads   int // RDMA READs outstanding
	// inline tells QueueResponse whether the poller is inside the core's
	// Execute or Fail for this request (see toCore).
	inline atomic.Uint32
}

// request.inline values.
const (
	inlineIdle    = iota
	inlineRunning // the poller is in Execute/Fail: a response now is taken by it
	inlineDone    // the core responded before Execute/Fail returned
)

// queue is one NVMe/RDMA queue pair.
type queue struct {
	p       *poller
	d       *device
	l       *listener
	log     *slog.Logger
	id      verbs.CMID
	qp      *verbs.QP
	fq      *fabric.Queue
	qidx    uint16
	gen     uint16
	block   int
	cqes    int
	hostQID int
	depth   int
	icd     int
	state   qState

	sqCredits  int
	ord        int
	readsOut   int
	recvPosted int
	reqs       []request
	free       []uint16
	readWait   ring[*request]
	sendWait   ring[*request]
	recvWait   ring[int]
	reason     string
	// held are data buffers of requests released after a failed post:
	// part of their work may have gone in, so the device may still move
	// data through them until the QP is destroyed (checkDrained).
	held []int32
	// drainSince is when teardown began; stuckLogged once checkStuck
	// has reported the queue.
	drainSince  time.Time
	stuckLogged bool
}

func newQueue(l *listener, d *device, p *poller, id verbs.CMID, block, cqes, hostQID, depth, sqSize, ord int) *queue {
	q := &queue{
		p: p, d: d, l: l, id: id, block: block, cqes: cqes, hostQID: hostQID, depth: depth,
		icd: d.icd, sqCredits: sqSize, ord: ord,
		log: d.log.With("qid", hostQID, "remote", id.PeerAddr()),
	}
	n := 2 * depth
	maxChunks := int(d.t.cfg.MDTS) / d.ioUnit
	q.reqs = make([]request, n)
	q.free = make([]uint16, 0, n)
	for i := n - 1; i >= 0; i-- {
		r := &q.reqs[i]
		r.q = q
		r.idx = uint16(i)
		r.recv = -1
		r.fr.Tag = uint32(i)
		r.fr.Rsp = d.rspBuf(block, i)
		r.rspAddr = d.addr(d.rspOff + (block*2*d.depth+i)*16)
		r.chunks = make([]int32, 0, maxChunks)
		r.segs = make([][]byte, 0, maxChunks)
		q.free = append(q.free, uint16(i))
	}
	q.readWait = newRing[*request](n)
	q.sendWait = newRing[*request](n)
	q.recvWait = newRing[int](depth)
	return q
}

// QueueResponse implements fabric.Conn. A response given while the poller
// is still inside Execute or Fail for the request is left to the poller;
// any other goes through its mailbox.
func (q *queue) QueueResponse(fr *fabric.Request) {
	r := &q.reqs[fr.Tag]
	if r.inline.CompareAndSwap(inlineRunning, inlineDone) {
		return
	}
	q.p.post(r)
}

// toCore hands r to the core: Execute, or Fail with st when it is not
// success. It reports whether the core responded before returning (a backend
// that never blocks, most admin commands, every failure), in which case r
// is rsExecuted and the caller goes on, with no trip through the mailbox.
func (q *queue) toCore(r *request, st nvme.Status) bool {
	r.state = rsExecuting
	r.inline.Store(inlineRunning)
	if st.IsSuccess() {
		q.fq.Execute(&r.fr)
	} else {
		q.fq.Fail(&r.fr, st)
	}
	if r.inline.CompareAndSwap(inlineRunning, inlineIdle) {
		return false // the response comes later, through the mailbox
	}
	r.inline.Store(inlineIdle)
	r.state = rsExecuted
	return true
}

// Disconnect implements fabric.Conn.
func (q *queue) Disconnect() {
	q.p.ctlAsync(func() { q.teardown("disconnect requested by the target") })
}

// reserve makes room in the poller's batch for q's next work requests,
// posting what is staged when it is full. It reports whether q is still
// live: a failed post tears its queue down.
func (q *queue) reserve(sends, recvs int) bool {
	for !q.p.batch.Room(sends, recvs) {
		if q.p.batch.Groups() == 0 {
			// Cannot happen with the batch sized from MDTS; never spin on it.
			q.log.Error("work requests do not fit the poller's batch", "sends", sends, "recvs", recvs)
			q.teardown("request too large to post")
			return false
		}
		q.p.flush()
	}
	return q.state == qsLive
}

// postRecv gives receive slot s back to the QP, with the poller's next flush.
func (q *queue) postRecv(s int) {
	if q.reserve(0, 1) {
		q.stageRecv(s)
	}
}

// stageRecv stages the receive of slot s; the caller has reserved room.
func (q *queue) stageRecv(s int) {
	d := q.d
	w := q.p.stageRecv(q)
	w.WRID = wrID(kindRecv, q.qidx, q.gen, uint16(s))
	w.SGE[0] = verbs.SGE{Addr: d.addr(d.cmdOff + (q.block*d.depth+s)*64), Length: 64, LKey: d.lkey}
	w.NumSGE = 1
	if q.icd > 0 {
		w.SGE[1] = verbs.SGE{Addr: d.addr(d.icdOff + (q.block*d.depth+s)*d.icd), Length: uint32(q.icd), LKey: d.lkey}
		w.NumSGE = 2
	}
}

// postFailed handles a batch post that did not take all of q's work: the
// queue is torn down, and the requests whose READs or SEND did not go in
// are released (what did go in flushes as usual).
func (q *queue) postFailed(err error, unposted []uint64) {
	q.log.Error("post work requests", "err", err)
	q.teardown("post failed")
	for _, id := range unposted {
		kind, _, _, idx := splitWRID(id)
		r := &q.reqs[idx]
		if !(kind == kindRead && r.state == rsReading || kind == kindSend && r.state == rsSending) {
			continue // an unsignaled part of a chain, or a request already released
		}
		// The front of r's chain (READs, or WRITEs before the SEND) may have
		// gone in, and nothing signaled will report when it is done: its
		// buffers wait for the QP's destruction, not for the pool.
		q.held = append(q.held, r.chunks...)
		r.chunks = r.chunks[:0]
		q.unhold(r)
		r.state = rsDone
		q.advance(r)
	}
}

// recvDone handles a received command capsule.
func (q *queue) recvDone(slot int, wc *verbs.WC) {
	q.recvPosted--
	if wc.Status != verbs.WCSuccess || q.state != qsLive {
		q.teardown("receive flushed")
		q.checkDrained()
		return
	}
	if wc.ByteLen < nvme.CommandSize {
		q.log.Warn("short command capsule", "bytes", wc.ByteLen)
		q.teardown("short command capsule")
		return
	}
	if len(q.free) == 0 {
		// Every request still waits for its SEND: park the capsule.
		q.recvWait.push(slot<<16 | (int(wc.ByteLen) - nvme.CommandSize))
		return
	}
	q.start(slot, int(wc.ByteLen)-nvme.CommandSize)
}

// start binds a free request to the capsule in slot.
func (q *queue) start(slot, icdLen int) {
	r := &q.reqs[q.free[len(q.free)-1]]
	q.free = q.free[:len(q.free)-1]
	r.recv = slot
	r.icdLen = icdLen
	r.fr.Cmd = q.d.cmdBuf(q.block, slot)
	r.inv = false
	r.state = rsNew
	q.advance(r)
}

// advance runs r's state machine until it must wait.
func (q *queue) advance(r *request) {
	for {
		switch r.state {
		case rsNew:
			if q.state != qsLive {
				r.state = rsDone
				continue
			}
			st := q.fq.Parse(&r.fr)
			if st.IsSuccess() && r.fr.DataLen > 0 {
				st = q.mapSGL(r)
			} else if st.IsSuccess() {
				r.state = rsReady
			}
			if !st.IsSuccess() && !q.toCore(r, st) {
				return
			}
		case rsNeedBuffer:
			if q.state != qsLive {
				r.state = rsDone
				continue
			}
			if !q.p.getBuffers(r) {
				return
			}
			if r.fr.Dir == fabric.DirHostToCtrl {
				r.state = rsNeedRead
			} else {
				r.state = rsReady
			}
		case rsNeedRead:
			if !q.postReads(r) {
				return
			}
		case rsReady:
			if !q.toCore(r, nvme.StatusSuccess) {
				return
			}
		case rsExecuted:
			if q.state != qsLive {
				r.state = rsDone
				continue
			}
			r.state = rsNeedSend
		case rsNeedSend:
			if !q.postResponse(r) {
				return
			}
		case rsDone:
			q.release(r)
			return
		default: // rsReading, rsExecuting, rsSending: wait for an event
			return
		}
	}
}

// mapSGL binds r's data to its in-capsule bytes, or sends it to wait for
// data buffers.
func (q *queue) mapSGL(r *request) nvme.Status {
	m, st := mapSGL(r.fr.Cmd.SGL1(), r.fr.Dir, r.fr.DataLen, q.icd, r.icdLen)
	if !st.IsSuccess() {
		return st
	}
	if m.inCapsule {
		icd := q.d.icdBuf(q.block, r.recv)
		r.segs = append(r.segs[:0], icd[m.off:m.off+uint64(r.fr.DataLen)])
		r.fr.Data = r.segs
		r.state = rsReady
		return st
	}
	r.raddr, r.rkey, r.inv = m.addr, m.key, m.inv
	r.state = rsNeedBuffer
	return st
}

// stageRDMA stages the WRs that move r's segments to or from the host's
// contiguous buffer, up to sgePerWR segments each, and returns the last.
func (q *queue) stageRDMA(r *request, op verbs.WROpcode, kind int) *verbs.SendWR {
	per := q.d.sgePerWR
	raddr := r.raddr
	var w *verbs.SendWR
	for i := 0; i < len(r.segs); i += per {
		w = q.p.stageSend(q)
		*w = verbs.SendWR{WRID: wrID(kind, q.qidx, q.gen, r.idx), Opcode: op, RemoteAddr: raddr, RKey: r.rkey}
		for j := i; j < len(r.segs) && j < i+per; j++ {
			seg := r.segs[j]
			w.SGE[w.NumSGE] = verbs.SGE{Addr: verbs.Addr(seg), Length: uint32(len(seg)), LKey: q.d.lkey}
			w.NumSGE++
			raddr += uint64(len(seg))
		}
	}
	return w
}

// wrsFor is how many RDMA operations move r's data.
func (q *queue) wrsFor(r *request) int {
	return (len(r.segs) + q.d.sgePerWR - 1) / q.d.sgePerWR
}

// takeCredits lets r through the FIFO w when it is at the head and the
// resources are there.
func (q *queue) takeCredits(w *ring[*request], r *request, ok bool, waits *atomic.Uint64) bool {
	if h, any := w.peek(); any && h != r || !ok {
		if !r.waiting {
			r.waiting = true
			w.push(r)
			waits.Add(1)
		}
		return false
	}
	if r.waiting {
		w.pop()
		r.waiting = false
	}
	return true
}

// postReads fetches host write data with RDMA READ.
func (q *queue) postReads(r *request) bool {
	n := q.wrsFor(r)
	ok := q.sqCredits >= n && (q.readsOut == 0 || q.readsOut+n <= q.ord)
	if !q.takeCredits(&q.readWait, r, ok, &q.d.t.stats.ReadWaits) {
		return false
	}
	// Held before reserve: a flush in there can run other requests.
	q.hold(r, n, n)
	if !q.reserve(n, 0) {
		q.unhold(r)
		r.state = rsDone
		return true
	}
	// Only the last READ is signaled: completions of one send queue are
	// reported in order, so it covers the others.
	q.stageRDMA(r, verbs.WRRDMARead, kindRead).Flags = verbs.SendSignaled
	r.state = rsReading
	return true
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

func (q *queue) readDone(r *request, wc *verbs.WC) {
	q.unhold(r)
	if wc.Status != verbs.WCSuccess {
		q.teardown("RDMA READ failed")
		r.state = rsDone
	} else {
		r.state = rsReady
	}
	q.advance(r)
	q.kickWaits()
}

// postResponse sends the data (host reads) and the response capsule as
// one chain: WRITEs unsignaled, then the signaled SEND.
func (q *queue) postResponse(r *request) bool {
	n := 1
	withData := r.fr.Dir == fabric.DirCtrlToHost && r.fr.Rsp.Status().IsSuccess() && len(r.segs) > 0
	if withData {
		n += q.wrsFor(r)
	}
	if !q.takeCredits(&q.sendWait, r, q.sqCredits >= n, &q.d.t.stats.SendWaits) {
		return false
	}
	q.hold(r, n, 0)
	if !q.reserve(n, 1) {
		q.unhold(r)
		r.state = rsDone
		return true
	}
	// The capsule is consumed: its receive buffer goes back with the
	// response (a batch posts receives first), so the host's next command
	// finds it posted.
	if r.recv >= 0 {
		q.stageRecv(r.recv)
		r.recv = -1
	}
	if withData {
		q.stageRDMA(r, verbs.WRRDMAWrite, kindWrite)
	}
	w := q.p.stageSend(q)
	*w = verbs.SendWR{WRID: wrID(kindSend, q.qidx, q.gen, r.idx), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, NumSGE: 1}
	w.SGE[0] = verbs.SGE{Addr: r.rspAddr, Length: nvme.CompletionSize, LKey: q.d.lkey}
	if r.inv && q.d.sendInv {
		w.Opcode = verbs.WRSendWithInv
		w.InvRKey = r.rkey
		q.d.t.stats.SendWithInvalidate.Add(1)
	}
	r.state = rsSending
	return true
}

func (q *queue) sendDone(r *request, wc *verbs.WC) {
	q.unhold(r)
	if wc.Status != verbs.WCSuccess {
		q.teardown("SEND failed")
	}
	r.state = rsDone
	q.advance(r)
	q.kickWaits()
}

// kickWaits lets the heads of the credit FIFOs retry.
func (q *queue) kickWaits() {
	q.kick(&q.readWait)
	q.kick(&q.sendWait)
}

func (q *queue) kick(w *ring[*request]) {
	for {
		h, ok := w.peek()
		if !ok {
			return
		}
		q.advance(h)
		if h2, ok := w.peek(); ok && h2 == h {
			if h.waiting {
				return
			}
			w.pop() // defensive: never spin on a stale head
		}
	}
}

// release returns r to the free list with all it holds.
func (q *queue) release(r *request) {
	if r.state == rsFree {
		// A second release would put r twice on the free list, and a queue
		// could then be destroyed under a request still in use.
		q.log.Error("request released twice: ignored", "idx", r.idx)
		return
	}
	q.p.putBuffers(r)
	r.segs = r.segs[:0]
	r.fr.Data = nil
	r.rkey = 0
	if r.recv >= 0 {
		// Abandoned before its response: repost unless the queue is going.
		slot := r.recv
		r.recv = -1
		if q.state == qsLive {
			q.postRecv(slot)
		}
	}
	r.state = rsFree
	q.free = append(q.free, r.idx)
	if q.state == qsLive {
		if v, ok := q.recvWait.pop(); ok {
			q.start(v>>16, v&0xffff)
		}
	} else {
		q.checkDrained()
	}
}

// teardown starts tearing the queue down: the QP goes to the error state,
// every posted work request flushes, waiting requests are dropped, and the
// core lets go of the queue. checkDrained finishes once all is back.
func (q *queue) teardown(reason string) {
	if q.state != qsLive {
		return
	}
	// Work this round staged goes in first, so that it flushes with the
	// rest and no request waits for a completion that never comes.
	q.p.flush()
	if q.state != qsLive {
		return // that post failed for q and tore it down
	}
	q.state = qsDraining
	q.reason = reason
	q.drainSince = time.Now()
	q.log.Info("queue disconnecting", "reason", reason)
	q.id.Disconnect()
	if err := q.qp.SetError(); err != nil {
		q.log.Debug("QP to error", "err", err)
	}
	// The core lets go first: it hands back what it holds (AERs) and may
	// delete the controller, disconnecting its other queues.
	if q.fq != nil {
		q.fq.Destroy()
	}
	var dropped []*request
	drop := func(r *request) bool {
		if r.q == q {
			r.waiting = false
			dropped = append(dropped, r)
			return true
		}
		return false
	}
	q.p.bufWait.removeIf(drop)
	q.readWait.removeIf(drop)
	q.sendWait.removeIf(drop)
	q.recvWait = newRing[int](1)
	for _, r := range dropped {
		r.state = rsDone
		q.advance(r)
	}
	q.checkDrained()
}

// checkDrained finishes the teardown once nothing is outstanding.
func (q *queue) checkDrained() {
	if q.state != qsDraining || q.recvPosted > 0 || len(q.free) < len(q.reqs) {
		return
	}
	q.state = qsDead
	q.id.DestroyQP()
	q.p.removeQueue(q)
	// The device no longer touches anything of this QP's.
	q.p.returnChunks(q.held)
	q.held = nil
	q.d.freeBlock(q.block, q.p, q.cqes)
	q.d.t.stats.QueuesLive.Add(-1)
	q.d.t.stats.Disconnected.Add(1)
	q.l.queueGone(q)
}
