package rdma

import (
	"fmt"
	"strings"
	"time"
)

// drainWarnAfter is how long a queue may take to drain before its state is
// logged as a warning.
const drainWarnAfter = 10 * time.Second

// responseTimeout is how long a live queue's response SENDs may make no
// progress before the queue is torn down. A host posts a receive for every
// command it may have outstanding, so a response waits only on a host that
// stopped posting them; the QP's RNR retries do not bound that wait, since
// the host's connection request sets their count (the IB CM gives the
// passive side's QP the REQ's RNR retry count) and Linux asks for 7, for
// ever.
const responseTimeout = 10 * time.Second

// teardown starts tearing the queue down: the QP goes to the error state,
// every posted work request flushes, waiting requests are dropped, and the
// core lets go of the queue. checkDrained finishes once all is back.
func (q *queue) teardown(reason string) {
	if !q.live() {
		return
	}
	// Work this round staged goes in first, so that it flushes with the
	// rest and no request waits for a completion that never comes.
	q.e.flush()
	if !q.live() {
		return // that post failed for q and tore it down
	}
	q.state = qsDraining
	q.reason = reason
	q.drainSince = time.Now()
	q.log.Info("queue disconnecting", "reason", reason)
	q.conn.Disconnect()
	if err := q.conn.SetError(); err != nil {
		q.log.Debug("QP to error", "err", err)
	}
	// The core lets go first: it hands back what it holds (AERs) and may
	// delete the controller, disconnecting its other queues.
	if q.core != nil {
		q.core.Destroy()
	}
	mine := func(r *request) bool { return r.q == q }
	dropped := q.e.pool.wait.removeIf(mine, nil)
	dropped = q.bufWait.removeIf(mine, dropped)
	dropped = q.readWait.removeIf(mine, dropped)
	dropped = q.sendWait.removeIf(mine, dropped)
	for q.parked.len() > 0 {
		q.parked.pop()
	}
	for _, r := range dropped {
		q.advance(r, evNone) // not live: each is done
	}
	q.checkDrained()
}

// postFailed handles a batch post that did not take all of q's work: the
// queue is torn down, and the requests whose READs or SEND did not go in
// are abandoned (what did go in flushes as usual).
func (q *queue) postFailed(err error, unposted []uint64) {
	q.log.Error("post work requests", "err", err)
	q.teardown("post failed")
	for _, id := range unposted {
		// WRITEs are followed by their SEND, which decides.
		if kind, _, _, idx := splitWRID(id); (kind == kindRead || kind == kindSend) && int(idx) < len(q.reqs) {
			q.advance(&q.reqs[idx], evNotPosted)
		}
	}
}

// abandonPosted finishes a queue whose device is gone and may never
// complete what was posted (hardware removed, its user context
// disassociated): its receives count as flushed, and requests waiting for
// a READ or SEND completion are abandoned, their buffers held until the QP
// is destroyed. Requests the core holds come back as usual.
func (q *queue) abandonPosted() {
	q.teardown("RDMA device removed")
	if q.state != qsDraining {
		return
	}
	q.recvPosted = 0
	for i := range q.reqs {
		if r := &q.reqs[i]; r.state == rsReading || r.state == rsSending {
			q.advance(r, evNotPosted)
		}
	}
	q.checkDrained()
}

// checkDrained finishes the teardown once nothing is outstanding.
func (q *queue) checkDrained() {
	if q.state != qsDraining || q.recvPosted > 0 || len(q.free) < len(q.reqs) {
		return
	}
	q.state = qsDead
	q.conn.Destroy()
	if q.e.queues[q.slot] == q {
		q.e.queues[q.slot] = nil
	}
	// The device no longer touches anything of this QP's.
	q.e.returnChunks(q.held)
	q.held = nil
}

// checkStuck logs, once, a queue that has been draining for longer than
// drainWarnAfter.
func (q *queue) checkStuck() {
	if q.state == qsDraining && !q.stuckLogged && time.Since(q.drainSince) > drainWarnAfter {
		q.stuckLogged = true
		q.logStuck()
	}
}

// checkResponses tears down a live queue whose response SENDs have made
// no progress for responseTimeout (see there). It runs with checkStuck,
// every few seconds, so the I/O path pays only for a counter.
func (q *queue) checkResponses(now time.Time) {
	if !q.live() {
		return
	}
	out := false
	for i := range q.reqs {
		if q.reqs[i].state == rsSending {
			out = true
			break
		}
	}
	switch {
	case !out || q.sendsDone != q.sendsSeen:
		q.sendsSeen, q.stalledSince = q.sendsDone, time.Time{}
	case q.stalledSince.IsZero():
		q.stalledSince = now
	case now.Sub(q.stalledSince) >= responseTimeout:
		q.log.Warn("responses not delivered: the host posts no receives; disconnecting", "for", now.Sub(q.stalledSince))
		q.teardown("responses not delivered")
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
			by = append(by, fmt.Sprintf("%s=%d", reqState(st), c))
		}
	}
	q.log.Warn("queue not drained", "state", q.state.String(), "reason", q.reason, "receives_posted", q.recvPosted,
		"requests_out", len(q.reqs)-len(q.free), "by_state", strings.Join(by, " "))
}
