package rdma

import (
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
// torn down, or already gone, give their buffer back at once.
//
// A quarter of the buffers are given to the SRQ at start, and its limit is
// armed at a quarter of those it has been given: when fewer receives than
// that are left posted (IBV_EVENT_SRQ_LIMIT_REACHED, ibv_modify_srq(3)),
// as many again are given, until all are.

// srqConfig is a poller's shared receive queue, for its engine: n receive
// buffers of nvme.CommandSize command bytes and icd in-capsule data bytes.
type srqConfig struct {
	cmd, icd []byte // n × 64 and n × icd bytes of the registered region
	icdSize  int
	n        int
}

// sharedRecv is the engine's side of the poller's SRQ.
type sharedRecv struct {
	srqConfig
	// posted is the buffers posted and not completed yet: in the SRQ, or
	// taken by a QP that has not reported it.
	posted int
	// spare are the buffers never posted, or left out by a post that
	// failed: the room the SRQ grows into.
	spare []int32
}

func newSharedRecv(c srqConfig) *sharedRecv {
	s := &sharedRecv{srqConfig: c, spare: make([]int32, 0, c.n)}
	for i := c.n - 1; i >= 0; i-- {
		s.spare = append(s.spare, int32(i))
	}
	return s
}

// given is the buffers the SRQ has been given: posted, or held by the
// queues' requests since a capsule landed in them.
func (s *sharedRecv) given() int { return s.n - len(s.spare) }

// srqArmAt is the SRQ limit for given buffers: the event comes when fewer
// than a quarter of them are left posted.
func srqArmAt(given int) int { return max(given/4, 1) }

// startSRQ posts the first quarter of the SRQ's buffers, before any queue
// is on the poller. It returns the limit to arm, 0 for none.
func (e *engine) startSRQ() int {
	return e.postSpare(max(e.srq.n/4, 1))
}

// growSRQ answers the SRQ limit event: it gives the SRQ as many buffers
// again as it has, up to all of them, and returns the limit to arm again,
// 0 once every buffer is given (nothing is left to grow into, and an armed
// limit would only report every capsule that finds the SRQ low).
func (e *engine) growSRQ() int {
	return e.postSpare(e.srq.given())
}

// postSpare posts up to n spare buffers and returns the limit to arm.
func (e *engine) postSpare(n int) int {
	s := e.srq
	for n > 0 && len(s.spare) > 0 {
		b := s.spare[len(s.spare)-1]
		s.spare = s.spare[:len(s.spare)-1]
		e.srqRepost(int(b))
		n--
	}
	e.flush()
	if len(s.spare) == 0 {
		return 0
	}
	return srqArmAt(s.given())
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
	e.log.Error("post SRQ receives", "err", err, "left_out", len(unposted), "posted", e.srq.posted)
}

// srqReceived dispatches a receive completion of the SRQ: the capsule goes
// to the queue of the QP it landed on, and a buffer no live queue takes
// goes back to the SRQ.
func (e *engine) srqReceived(b int, wc *verbs.WC) {
	if b >= e.srq.n {
		return
	}
	e.srq.posted--
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
