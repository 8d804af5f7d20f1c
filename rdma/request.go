package rdma

import (
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// reqState is the RDMA request state machine (after SPDK's). advance moves a
// request until its state stops changing, and is the only place that
// changes it; waits for a resource are FIFO lines (fifo.go).
type reqState uint8

const (
	// rsFree: on the queue's free list.
	rsFree reqState = iota
	// rsNew: bound to a received command capsule.
	rsNew
	// rsNeedBuffer: waiting for data buffers: in its queue's line while
	// the queue holds its share of the pool, then in the poller's line.
	rsNeedBuffer
	// rsNeedRead: host write data to fetch; waiting for RDMA READ credits
	// (the host's READ depth and send-queue slots).
	rsNeedRead
	// rsReading: RDMA READs posted; waiting for the last one.
	rsReading
	// rsReady: data in place, or a failure status found; ready for the core.
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

func (s reqState) String() string { return reqStateNames[s] }

// event is what moved a request, given to advance. A state takes only the
// events it waits for; any other is ignored (a late or duplicate one).
type event uint8

const (
	// evNone: look again, because a resource came back or the queue is closing.
	evNone event = iota
	// evCapsule: a command capsule was bound to this free request.
	evCapsule
	// evExecuted: the core responded off the poller (handed over).
	evExecuted
	// evReadDone: the last, signaled RDMA READ completed.
	evReadDone
	// evSendDone: the response SEND completed.
	evSendDone
	// evWorkFailed: its READ or SEND completed in error, or was flushed.
	evWorkFailed
	// evNotPosted: a failed post left its READs or SEND out.
	evNotPosted
)

// request is one slot of a queue's request pool. The pool is twice the
// queue depth: a request lingers until its SEND completes, while the host
// may already reuse the command slot.
type request struct {
	fr    fabric.Request
	q     *queue
	idx   uint16
	state reqState
	// waitingIn is the line r waits in, or nil.
	waitingIn *fifo
	recv      int // receive slot holding the capsule (an SRQ's, or its overflow's), -1 when none
	icdLen    int // in-capsule bytes received
	// status is a failure found before execution (Parse, the SGL): the
	// core fails r with it instead of executing it.
	status  nvme.Status
	rspAddr uint64
	chunks  []int32 // data buffers from the pool
	// claimed is the chunks r counts against its queue's share, from when
	// it leaves the queue's line until it gives its buffers back.
	claimed int
	segs    [][]byte
	// remoteAddr and rkey are the host's buffer (keyed SGL); invalidate
	// asks for rkey to be invalidated with the response (SEND with
	// invalidate, NVMe-oF 1.1 §7.3.2).
	remoteAddr uint64
	rkey       uint32
	invalidate bool
	credits    int // send-queue slots held
	reads      int // RDMA READs held against the host's READ depth
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

// advance runs r's state machine, starting with ev, until it must wait. It
// is the only writer of r.state: each step says where r goes next, and a
// step that names r's own state waits for an event.
func (q *queue) advance(r *request, ev event) {
	for {
		var next reqState
		switch r.state {
		case rsFree:
			next = rsFree
			if ev == evCapsule {
				next = rsNew
			}
		case rsNew:
			next = q.parse(r)
		case rsNeedBuffer:
			next = q.getBuffers(r)
		case rsNeedRead:
			next = q.postReads(r)
		case rsReading:
			next = q.reading(r, ev)
		case rsReady:
			next = q.toCore(r)
		case rsExecuting:
			next = rsExecuting
			if ev == evExecuted {
				next = rsExecuted
			}
		case rsExecuted:
			next = rsNeedSend
			if !q.live() {
				next = rsDone
			}
		case rsNeedSend:
			next = q.postResponse(r)
		case rsSending:
			next = q.sending(r, ev)
		case rsDone:
			q.release(r)
			next = rsFree
		}
		if next == r.state {
			return
		}
		r.state = next
		ev = evNone
		if next == rsFree {
			q.freed(r)
			return
		}
	}
}

// parse validates the command (the core) and says where its data is.
func (q *queue) parse(r *request) reqState {
	if !q.live() {
		return rsDone
	}
	r.status = q.core.Parse(&r.fr)
	if !r.status.IsSuccess() || r.fr.DataLen == 0 {
		return rsReady
	}
	m, st := mapSGL(r.fr.Cmd.SGL1(), r.fr.Dir, r.fr.DataLen, q.icd, r.icdLen)
	switch {
	case !st.IsSuccess():
		r.status = st
		return rsReady
	case m.inCapsule:
		icd := q.icdBuf(r.recv)
		r.segs = append(r.segs[:0], icd[m.off:m.off+uint64(r.fr.DataLen)])
		r.fr.Data = r.segs
		return rsReady
	}
	r.remoteAddr, r.rkey, r.invalidate = m.addr, m.key, m.inv
	return rsNeedBuffer
}

// getBuffers takes data buffers from the poller's pool, in line: first
// the queue's own line, for room in its share (queueShare), then the
// poller's. A queue at its share so never holds up the poller's line.
func (q *queue) getBuffers(r *request) reqState {
	pool := &q.e.pool
	if !q.live() {
		q.bufWait.remove(r)
		pool.wait.remove(r)
		return rsDone
	}
	if r.claimed == 0 {
		need := pool.chunksFor(r.fr.DataLen)
		// A queue holding nothing may always go: never wait for ever.
		switch q.bufWait.admit(r, q.bufClaimed == 0 || q.bufClaimed+need <= q.bufShare) {
		case waiting:
			return rsNeedBuffer
		case overflow:
			q.lineFull("buffer share")
			return rsDone
		}
		r.claimed = need
		q.bufClaimed += need
	}
	switch pool.get(r) {
	case waiting:
		return rsNeedBuffer
	case overflow:
		q.lineFull("data buffers")
		return rsDone
	}
	q.e.inUse += int64(len(r.chunks))
	if r.fr.Dir == fabric.DirHostToCtrl {
		return rsNeedRead
	}
	return rsReady
}

// postReads fetches host write data with RDMA READ, once r has the credits.
func (q *queue) postReads(r *request) reqState {
	if !q.live() {
		q.readWait.remove(r)
		return rsDone
	}
	n := q.wrsFor(r)
	have := q.sqCredits >= n && (q.readsOut == 0 || q.readsOut+n <= q.readDepth)
	switch q.readWait.admit(r, have) {
	case waiting:
		return rsNeedRead
	case overflow:
		q.lineFull("RDMA READ credits")
		return rsDone
	}
	// Held before reserve: a flush in there can run other requests.
	q.hold(r, n, n)
	if !q.reserve(n, 0) {
		q.unhold(r)
		return rsDone
	}
	// Only the last READ is signaled, and only its completion moves r:
	// completions of one send queue are reported in order, so it covers
	// the others, flushed ones too.
	last := q.stageRDMA(r, verbs.WRRDMARead, kindReadPart)
	last.WRID = wrID(kindRead, q.slot, q.gen, r.idx)
	last.Flags = verbs.SendSignaled
	return rsReading
}

// reading waits for r's READs. Data that arrives once the queue is closing
// is not executed: a command run on a queue the core let go of (a Connect,
// say) would leave state behind that nothing removes.
func (q *queue) reading(r *request, ev event) reqState {
	switch ev {
	case evReadDone:
		q.unhold(r)
		if !q.live() {
			return rsDone
		}
		return rsReady
	case evWorkFailed:
		q.unhold(r)
		q.teardown("RDMA READ failed")
		return rsDone
	case evNotPosted:
		q.abandon(r)
		return rsDone
	}
	return rsReading
}

// toCore hands r to the core: Execute, or Fail with r.status. When the core
// responds before returning (a backend that never blocks, most admin
// commands, every failure), r goes on at once, with no trip through the
// poller's mailbox.
func (q *queue) toCore(r *request) reqState {
	if !q.live() {
		return rsDone
	}
	r.inline.Store(inlineRunning)
	if r.status.IsSuccess() {
		q.core.Execute(&r.fr)
	} else {
		q.core.Fail(&r.fr, r.status)
	}
	if r.inline.CompareAndSwap(inlineRunning, inlineIdle) {
		return rsExecuting // the response comes later, handed over
	}
	r.inline.Store(inlineIdle)
	return rsExecuted
}

// postResponse sends the data (host reads) and the response capsule as one
// chain, once r has the send credits: WRITEs unsignaled, then the signaled
// SEND.
func (q *queue) postResponse(r *request) reqState {
	if !q.live() {
		q.sendWait.remove(r)
		return rsDone
	}
	n := 1
	withData := r.fr.Dir == fabric.DirCtrlToHost && r.fr.Rsp.Status().IsSuccess() && len(r.segs) > 0
	if withData {
		n += q.wrsFor(r)
	}
	switch q.sendWait.admit(r, q.sqCredits >= n) {
	case waiting:
		return rsNeedSend
	case overflow:
		q.lineFull("send credits")
		return rsDone
	}
	q.hold(r, n, 0)
	if !q.reserve(n, 1) {
		q.unhold(r)
		return rsDone
	}
	// The capsule is consumed: its receive buffer goes back with the
	// response (a batch posts receives first), so the host's next command
	// finds it posted.
	if r.recv >= 0 {
		switch s := q.e.srq; {
		case s == nil:
			q.stageRecv(r.recv)
		case r.recv < s.n: // srqDone, in the room reserved
			q.srqHeld--
			q.e.stageSRQRecv(r.recv)
		default:
			q.srqDone(r.recv) // an overflow buffer
		}
		r.recv = -1
	}
	if withData {
		q.stageRDMA(r, verbs.WRRDMAWrite, kindWrite)
	}
	w := q.e.stageSend(q)
	*w = verbs.SendWR{WRID: wrID(kindSend, q.slot, q.gen, r.idx), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, NumSGE: 1}
	w.SGE[0] = verbs.SGE{Addr: r.rspAddr, Length: nvme.CompletionSize, LKey: q.e.geo.lkey}
	if r.invalidate && q.e.geo.sendInv {
		w.Opcode = verbs.WRSendWithInv
		w.InvRKey = r.rkey
		q.e.stats.SendWithInvalidate.Add(1)
	}
	return rsSending
}

// sending waits for r's response SEND.
func (q *queue) sending(r *request, ev event) reqState {
	switch ev {
	case evSendDone:
		q.sendsDone++
		q.unhold(r)
		return rsDone
	case evWorkFailed:
		q.unhold(r)
		q.teardown("SEND failed")
		return rsDone
	case evNotPosted:
		q.abandon(r)
		return rsDone
	}
	return rsSending
}

// abandon lets go of a request whose post failed. The front of its chain
// (READs, or WRITEs before the SEND) may have gone in, and nothing signaled
// will report when it is done: its buffers wait for the QP's destruction,
// not for the pool.
func (q *queue) abandon(r *request) {
	q.held = append(q.held, r.chunks...)
	r.chunks = r.chunks[:0]
	q.unclaim(r)
	q.unhold(r)
}

// unclaim gives r's claim on the queue's share back, letting the queue's
// line go on.
func (q *queue) unclaim(r *request) {
	if r.claimed == 0 {
		return
	}
	q.bufClaimed -= r.claimed
	r.claimed = 0
	if q.bufWait.line.len() > 0 {
		q.bufWait.retry(q.retry)
	}
}

// release gives back what a finished or abandoned request holds: data
// buffers (letting waiting requests take them) and, when it never got to
// its response, its receive slot: to the queue's QP while the queue lives,
// or with an SRQ, to the poller's SRQ whatever became of the queue.
func (q *queue) release(r *request) {
	r.segs = r.segs[:0]
	r.fr.Data = nil
	r.rkey = 0
	if r.recv >= 0 {
		slot := r.recv
		r.recv = -1
		switch {
		case q.e.srq != nil:
			q.srqDone(slot)
		case q.live():
			q.postRecv(slot)
		}
	}
	if len(r.chunks) > 0 {
		chunks := r.chunks
		r.chunks = r.chunks[:0]
		q.e.returnChunks(chunks)
	}
	q.unclaim(r)
}
