package rdma

import (
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// A poller's shared receive queue (rdma.srq), as nvmet and SPDK keep one per
// core: the receive buffers of every queue on the poller are posted once, to
// one SRQ, and a command capsule lands in whichever is at its head. So the
// registered memory grows with the pollers, not with the connections.
//
// A buffer belongs to the poller. It is bound to a queue only when a capsule
// lands in it: the completion names the QP (wc.QPNum), which names the queue
// (engine.byQPN). The queue's request holds the buffer until it is done with
// the capsule, and then it goes back to the SRQ, whatever became of the
// queue meanwhile; a queue torn down gives back the buffers its requests and
// parked capsules hold, and no other. A QP in the error state flushes only
// the receive it was in the middle of, if any: the SRQ's other receives stay
// posted for the other QPs (ibv_post_srq_recv(3); rxe completes just that
// one with IBV_WC_WR_FLUSH_ERR). Completions that arrive for a queue being
// torn down give their buffer back at once.
//
// So a QP of the SRQ is destroyed only once the device says it takes no
// more receives from it (IBV_EVENT_QP_LAST_WQE_REACHED, IB spec o10-2.2.5
// and ibv_create_srq(3)) and the CQs are drained of what it left there:
// until then its number stays bound to the draining queue, whose buffers
// go back to the SRQ; destroyed sooner, a late completion would find no
// queue, or another queue's QP of the same number. A device that never
// sends the event is waited for lastWQETimeout.
//
// Every buffer is posted at start: the depth is what the operator
// configured, and its memory is registered already. A buffer a post leaves
// out is spare, and the SRQ limit is armed for it: when fewer receives than
// a quarter of those given are left posted (IBV_EVENT_SRQ_LIMIT_REACHED,
// ibv_modify_srq(3)), the spare are posted again. (A faultinject build may
// post fewer at start, FaultSRQStartEnv, and the event grows the SRQ the
// same way.)
//
// A queue's share (audit item 13). A command holds its buffer until it is
// answered, so commands that run long (a slow or stalled backend) hold
// theirs as long, and a host with deep enough queues (two controllers of
// 16 queues of 128 are the default SRQ's 4096 buffers) could hold them
// all: every other host's capsules would meet RNR NAKs, and the buffer one
// of its commands frees would most often go to its own next command, sent
// as soon as the response arrives. So one queue's capsules hold at most
// share SRQ buffers (limits.RDMASRQQueueShare). A capsule that lands past
// that is copied, command and in-capsule data, to one of the poller's
// overflow buffers, memory of the process that is not registered (nothing
// but the CPU reads it), and its SRQ buffer is posted again at once. The
// overflow has as many buffers as the SRQ, so that one host at the default
// limits fits in it whatever it keeps out; when it is full a capsule keeps
// its SRQ buffer past the share (counted: overflowFull). Buffer n+i is
// overflow buffer i: the request or parked capsule that holds it treats it
// as any other, and gives it back to the overflow, not the SRQ.

// srqConfig is a poller's shared receive queue, for its engine: n receive
// buffers of nvme.CommandSize command bytes and icd in-capsule data bytes.
type srqConfig struct {
	cmd, icd []byte // n × 64 and n × icd bytes of the registered region
	icdSize  int
	n        int
	// start is the buffers posted at start; 0 posts all of them.
	start int
	// overCmd and overICD are the overflow's buffers, as many as
	// len(overCmd)/64 (srqOverflow), outside the registered region.
	overCmd, overICD []byte
	// share is the SRQ buffers one queue may hold; 0 is
	// limits.RDMASRQQueueShare.
	share int
}

// srqOverflow is the overflow buffers of an SRQ of n: as many.
func srqOverflow(n int) int { return n }

// sharedRecv is the engine's side of the poller's SRQ.
type sharedRecv struct {
	srqConfig
	// posted is the buffers posted and not completed yet: in the SRQ, or
	// taken by a QP that has not reported it.
	posted int
	// spare are the buffers never posted, or left out by a post that
	// failed: the room the SRQ grows into.
	spare []int32
	// retry: a post left buffers out (srqPosted), so the poller's periodic
	// check posts the spare again (retrySpare), besides the limit event,
	// which comes only once receives are consumed.
	retry bool
	// gPosted and gHeld are posted and given-but-not-posted (held by the
	// queues' requests and parked capsules), for metrics: publish writes
	// them on the poller, scrapes read them anywhere.
	gPosted, gHeld atomic.Int64
	// empty counts the receives that left the SRQ with none posted: the
	// next capsule of any host on the poller meets an RNR NAK, and rxe
	// flushes a QP whose retries run out.
	empty atomic.Uint64
	// overFree are the overflow buffers free (n+i for overflow buffer i);
	// over is how many there are.
	overFree []int32
	over     int
	// moved counts the capsules copied to the overflow; overflowFull
	// those that kept their SRQ buffer past their queue's share, the
	// overflow full; gOverflow is the overflow buffers held, for metrics.
	moved, overflowFull atomic.Uint64
	gOverflow           atomic.Int64
}

func newSharedRecv(c srqConfig) *sharedRecv {
	if c.share == 0 {
		c.share = limits.RDMASRQQueueShare
	}
	s := &sharedRecv{srqConfig: c, spare: make([]int32, 0, c.n), over: len(c.overCmd) / nvme.CommandSize}
	for i := c.n - 1; i >= 0; i-- {
		s.spare = append(s.spare, int32(i))
	}
	s.overFree = make([]int32, 0, s.over)
	for i := s.n + s.over - 1; i >= s.n; i-- {
		s.overFree = append(s.overFree, int32(i))
	}
	return s
}

// cmdAt is the command capsule in buffer b: an SRQ buffer, or past n an
// overflow buffer.
func (s *sharedRecv) cmdAt(b int) []byte {
	mem := s.cmd
	if b >= s.n {
		mem, b = s.overCmd, b-s.n
	}
	off := b * nvme.CommandSize
	return mem[off : off+nvme.CommandSize : off+nvme.CommandSize]
}

// icdAt is the in-capsule data room of buffer b, as cmdAt.
func (s *sharedRecv) icdAt(b int) []byte {
	mem := s.icd
	if b >= s.n {
		mem, b = s.overICD, b-s.n
	}
	off := b * s.icdSize
	return mem[off : off+s.icdSize : off+s.icdSize]
}

// keep binds SRQ buffer b, holding a capsule of n bytes, to q, against
// q's share; past it, moveOut.
func (q *queue) keep(b, n int) int {
	if q.srqHeld < q.e.srq.share {
		q.srqHeld++
		return b
	}
	return q.moveOut(b, n)
}

// moveOut copies the capsule in SRQ buffer b to an overflow buffer, which
// it returns, and posts b again; with the overflow full, b stays q's past
// its share.
func (q *queue) moveOut(b, n int) int {
	s := q.e.srq
	if len(s.overFree) == 0 {
		s.overflowFull.Add(1)
		q.srqHeld++
		return b
	}
	o := int(s.overFree[len(s.overFree)-1])
	s.overFree = s.overFree[:len(s.overFree)-1]
	copy(s.cmdAt(o), s.cmdAt(b))
	if icd := n - nvme.CommandSize; icd > 0 {
		copy(s.icdAt(o), s.icdAt(b)[:icd])
	}
	q.e.srqRepost(b)
	s.moved.Add(1)
	return o
}

// srqDone gives back buffer b, which held a capsule of q: an overflow
// buffer to the overflow, an SRQ buffer to the SRQ, off q's share.
func (q *queue) srqDone(b int) {
	s := q.e.srq
	if b >= s.n {
		s.overFree = append(s.overFree, int32(b))
		return
	}
	q.srqHeld--
	q.e.srqRepost(b)
}

// given is the buffers the SRQ has been given: posted, or held by the
// queues' requests since a capsule landed in them.
func (s *sharedRecv) given() int { return s.n - len(s.spare) }

// srqArmAt is the SRQ limit for given buffers: the event comes when fewer
// than a quarter of them are left posted.
func srqArmAt(given int) int { return max(given/4, 1) }

// startSRQ posts the SRQ's buffers (all of them, but for a faultinject
// build's srqConfig.start), before any queue is on the poller.
func (e *engine) startSRQ() {
	n := e.srq.n
	if e.srq.start > 0 {
		n = e.srq.start
	}
	e.postSpare(n)
}

// growSRQ answers the SRQ limit event: it gives the SRQ as many spare
// buffers again as it has, up to all of them (those a failed post left
// out, or a faultinject build did not post at start), and arms the limit
// again while some are spare. With none (every buffer given: the limit was
// armed for spare that a later round posted), an armed limit would only
// report every capsule that finds the SRQ low: it stays unarmed.
func (e *engine) growSRQ() {
	e.postSpare(max(e.srq.given(), 1))
}

// postSpare posts up to n spare buffers and arms the limit while some are
// left spare.
func (e *engine) postSpare(n int) {
	s := e.srq
	for n > 0 && len(s.spare) > 0 {
		b := s.spare[len(s.spare)-1]
		s.spare = s.spare[:len(s.spare)-1]
		e.srqRepost(int(b))
		n--
	}
	e.flush() // a post that fails arms the limit (srqPosted)
	if len(s.spare) > 0 {
		e.loop.armSRQ(srqArmAt(s.given()))
	} else {
		s.retry = false
	}
}

// retrySpare posts, from the poller's periodic check, the buffers a failed
// post left spare: after a failure at start, or with an idle poller, no
// receive may be consumed to bring the limit event. Those a faultinject
// build held back at start are left to the event.
func (e *engine) retrySpare() {
	if s := e.srq; s != nil && s.retry && len(s.spare) > 0 {
		e.postSpare(len(s.spare))
	}
}

// srqRepost gives buffer b back to the SRQ, with the round's flush.
func (e *engine) srqRepost(b int) {
	for !e.batch.SRQRoom(1) {
		e.flush()
	}
	e.stageSRQRecv(b)
}

// stageSRQRecv stages the receive of buffer b; the caller made room.
func (e *engine) stageSRQRecv(b int) {
	s := e.srq
	w := e.batch.SRQRecv()
	w.WRID = wrID(kindSRQRecv, 0, 0, uint16(b))
	off := b * nvme.CommandSize
	w.SGE[0] = verbs.SGE{Addr: verbs.Addr(s.cmd[off : off+nvme.CommandSize]), Length: nvme.CommandSize, LKey: e.geo.lkey}
	w.NumSGE = 1
	if s.icdSize > 0 {
		off := b * s.icdSize
		w.SGE[1] = verbs.SGE{Addr: verbs.Addr(s.icd[off : off+s.icdSize]), Length: uint32(s.icdSize), LKey: e.geo.lkey}
		w.NumSGE = 2
	}
}

// srqPosted reads what the round's post did with the SRQ's receives. Those
// left out are spare again, for the SRQ to grow into: the SRQ holds every
// buffer (its max_wr), so this is a device in trouble, not a full queue.
func (e *engine) srqPosted() {
	n, unposted, err := e.batch.SRQResult()
	e.srq.posted += n
	if err == nil {
		return
	}
	for _, w := range unposted {
		if _, _, _, idx := splitWRID(w.WRID); int(idx) < e.srq.n {
			e.srq.spare = append(e.srq.spare, int32(idx))
		}
	}
	e.srq.retry = true
	e.log.Error("post SRQ receives", "err", err, "left_out", len(unposted), "posted", e.srq.posted)
	// The limit event posts them again: without it armed they would be
	// stranded, the SRQ that much smaller for good.
	e.loop.armSRQ(srqArmAt(e.srq.given()))
}

// srqReceived dispatches a receive completion of the SRQ: the capsule goes
// to the queue of the QP it landed on, and a buffer no live queue takes
// goes back to the SRQ.
func (e *engine) srqReceived(b int, wc *verbs.WC) {
	if b >= e.srq.n {
		return
	}
	e.srq.posted--
	if e.srq.posted == 0 {
		e.srq.empty.Add(1)
	}
	q := e.byQPN[wc.QPNum]
	if wc.Status != verbs.WCSuccess && wc.Status != verbs.WCFlushErr {
		e.stats.CompletionErrors.Add(1)
		log := e.log
		if q != nil {
			log = q.log
		}
		log.Warn("work completion error", "kind", kindSRQRecv, "status", wc.StatusString(), "vendor_err", wc.VendorErr, "qp_num", wc.QPNum)
	}
	if q == nil || !q.live() {
		e.srqRepost(b)
		return
	}
	q.received(b, wc)
}

// lastWQETimeout bounds the wait for IBV_EVENT_QP_LAST_WQE_REACHED of a QP
// torn down: a device that never sends it must not keep the queue (and its
// host's reconnect) for ever. Below removalDrainTimeout and closeTimeout.
const lastWQETimeout = 5 * time.Second

// lastWQEReached answers IBV_EVENT_QP_LAST_WQE_REACHED for QP qpn: the QP,
// in the error state, takes no more receives from the SRQ. What it left in
// the CQs is dispatched first, while its number still names its queue (a
// receive goes back to the SRQ), and then the queue may be destroyed. The
// event may come before the queue's teardown (rdma_cm moved the QP to the
// error state on a DREQ): the queue is torn down now, but only if its QP
// is in the error state: the shim acknowledges an event before the engine
// sees it, so the QP it was for may be destroyed already and its number
// reused by a new, healthy queue. Events for QPs this poller does not
// have, and repeats, are ignored.
func (e *engine) lastWQEReached(qpn uint32) {
	q := e.byQPN[qpn]
	if q == nil || q.lastWQE {
		return
	}
	if q.live() {
		// A QP that cannot be queried is torn down: the event stands.
		if inErr, err := q.conn.InError(); err == nil && !inErr {
			q.log.Debug("IBV_EVENT_QP_LAST_WQE_REACHED for a QP not in the error state: an earlier QP's of the same number, ignored", "qp_num", qpn)
			return
		}
	}
	e.loop.drainCQs()
	q.lastWQE = true
	if q.live() {
		q.teardown("QP left the SRQ (last WQE reached)")
	}
	q.checkDrained()
}

// lastWQETimedOut finishes q's wait for its last WQE event once
// lastWQETimeout has passed without it.
func (q *queue) lastWQETimedOut() {
	if q.state != qsDraining || q.lastWQE {
		return
	}
	q.e.stats.SRQLastWQETimeouts.Add(1)
	q.log.Warn("no IBV_EVENT_QP_LAST_WQE_REACHED for the QP of a queue torn down: destroying it after draining the CQs",
		"after", lastWQETimeout, "qp_num", q.conn.QPNum())
	q.e.loop.drainCQs()
	q.lastWQE = true
	q.checkDrained()
}

// srqFailed answers IBV_EVENT_SRQ_ERR: the SRQ gives the poller's QPs no
// more receives, so every queue on the poller is torn down, and its host
// reconnects, to another poller: this one takes no new queue
// (poller.markSRQFailed, before this runs).
func (e *engine) srqFailed() {
	e.stats.SRQErrors.Add(1)
	n := 0
	for _, q := range e.queues {
		if q != nil && q.live() {
			n++
		}
	}
	e.log.Error("shared receive queue failed (IBV_EVENT_SRQ_ERR): tearing down the poller's queues; it takes no new ones", "queues", n)
	for _, q := range e.queues {
		if q != nil {
			q.teardown("shared receive queue failed")
		}
	}
}
