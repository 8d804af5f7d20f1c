package rdma

import (
	"log/slog"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// engine is one poller's request engine: the state machines of its queues'
// requests (request.go), their credits and wait lines (fifo.go), the data
// buffer pool (pool.go), and the batch their work requests are staged in.
// Completions come in as plain verbs.WC values and work requests go out
// through workBatch; the QP is reached only through qpConn. It runs on one
// goroutine, the poller's, and never calls cgo, so it is tested without
// RDMA (engine_test.go).
type engine struct {
	log   *slog.Logger
	stats *Stats
	loop  loop
	geo   geometry
	pool  bufPool
	// batch collects the work requests of a round; flush posts them.
	batch  workBatch
	batchQ []*queue // the queue of each of batch's groups
	// queues is the table wr_ids index (wrid.go); gens the generation of
	// each slot, so a late completion of a queue gone is recognised.
	queues []*queue
	gens   []uint16
	// srq is the poller's shared receive queue, nil when every queue posts
	// receives of its own; byQPN finds the queue a receive from it
	// landed on (wc.QPNum), while the queue's QP exists.
	srq   *sharedRecv
	byQPN map[uint32]*queue
	// now is the clock of the periodic checks (checkStuck); after runs fn
	// once d has passed, on another goroutine, and returns what cancels it
	// (time.AfterFunc; a fake in tests).
	now   func() time.Time
	after func(d time.Duration, fn func()) (cancel func() bool)
	// inUse is the data buffers out of the pool; published is what
	// stats.BuffersInUse has of it. The gauge is brought up to date once a
	// poller round (flush runs every round, idle ones too), not per I/O.
	inUse, published int64
}

// geometry is what the engine needs to know of the device.
type geometry struct {
	lkey      uint32 // of the region every buffer is in
	sgePerWR  int    // scatter/gather entries of one RDMA READ or WRITE
	sendInv   bool   // the device does SEND with invalidate
	maxChunks int    // data buffers of the largest transfer (MDTS)
}

// loop is the goroutine an engine runs on (the poller; a fake in tests).
// Work from other goroutines reaches the engine through it.
type loop interface {
	// handOver runs advance(r, evExecuted) on the loop: a response the
	// core gave from another goroutine.
	handOver(r *request)
	// runSoon runs fn on the loop; it never blocks the caller.
	runSoon(fn func())
	// drainCQs polls the loop's CQs until they are empty, dispatching
	// every completion: what a QP left there goes before the QP.
	drainCQs()
	// armSRQ arms the limit of the poller's SRQ (IBV_EVENT_SRQ_LIMIT_REACHED
	// once fewer receives than limit are posted).
	armSRQ(limit int)
}

// workBatch stages a round's work requests for any number of QPs, and
// receives for the poller's shared receive queue, and posts them with one
// call (the shell's verbs.Batch; a fake in tests).
type workBatch interface {
	Room(sends, recvs int) bool
	Groups() int
	// Len is every work request staged, SRQ receives included.
	Len() int
	Send(c qpConn) *verbs.SendWR
	Recv(c qpConn) *verbs.RecvWR
	// SRQRoom and SRQRecv stage receives for the poller's SRQ; they go in
	// before any QP's work.
	SRQRoom(n int) bool
	SRQRecv() *verbs.RecvWR
	Post()
	// Result is what Post did for group i: receives posted, and on failure
	// the send work requests left out (the failed one and those after it).
	Result(i int) (recvs int, unposted []verbs.SendWR, err error)
	// SRQResult is what Post did with the SRQ's receives.
	SRQResult() (posted int, unposted []verbs.RecvWR, err error)
	Reset()
}

// engineConfig sizes an engine.
type engineConfig struct {
	log    *slog.Logger
	stats  *Stats
	loop   loop
	batch  workBatch
	geo    geometry
	chunks []byte // the poller's data buffers, ioUnit bytes each
	ioUnit int
	// maxQueues sizes the queue table, maxReqs the buffer line.
	maxQueues, maxReqs int
	// srq, when set, is the poller's shared receive queue.
	srq *srqConfig
}

func newEngine(c engineConfig) *engine {
	e := &engine{
		log: c.log, stats: c.stats, loop: c.loop, batch: c.batch, geo: c.geo,
		pool:   newBufPool(c.chunks, c.ioUnit, c.maxReqs, &c.stats.BufferWaits),
		batchQ: make([]*queue, 0, 64),
		queues: make([]*queue, c.maxQueues),
		gens:   make([]uint16, c.maxQueues),
		now:    time.Now,
		after: func(d time.Duration, fn func()) func() bool {
			return time.AfterFunc(d, fn).Stop
		},
	}
	if c.srq != nil {
		e.srq = newSharedRecv(*c.srq)
		e.byQPN = make(map[uint32]*queue, c.maxQueues)
	}
	return e
}

// open gives q a slot in the table and, without an SRQ, posts its
// receives; with one, receives on q's QP come from the poller's SRQ, and
// the queue is found by its QP number. It reports whether q was added, and
// whether it is still live after the post (a failed post tears it down,
// and the engine finishes with it as with any other). With an SRQ, a queue
// whose QP number another queue of the poller still holds is refused: the
// receives on that number must keep naming their queue.
func (e *engine) open(q *queue) (added, live bool) {
	if e.srq != nil {
		qpn := q.conn.QPNum()
		if old := e.byQPN[qpn]; old != nil {
			e.log.Error("a new QP has the number of a QP of the poller not yet destroyed: queue refused", "qp_num", qpn, "old_state", old.state.String())
			return false, false
		}
	}
	for i, old := range e.queues {
		if old == nil {
			e.gens[i]++
			q.slot, q.gen = uint16(i), e.gens[i]
			e.queues[i] = q
			added = true
			break
		}
	}
	if !added {
		return false, false
	}
	if e.srq != nil {
		e.byQPN[q.conn.QPNum()] = q
		return true, true
	}
	for s := 0; s < q.depth; s++ {
		q.postRecv(s)
	}
	e.flush()
	return true, q.live()
}

// queueAt is the live table entry a wr_id names, or nil for a queue gone.
func (e *engine) queueAt(slot, gen uint16) *queue {
	if int(slot) >= len(e.queues) {
		return nil
	}
	if q := e.queues[slot]; q != nil && q.gen == gen {
		return q
	}
	return nil
}

// complete dispatches one work completion.
func (e *engine) complete(wc *verbs.WC) {
	kind, slot, gen, idx := splitWRID(wc.WRID)
	if kind == kindSRQRecv {
		e.srqReceived(int(idx), wc)
		return
	}
	q := e.queueAt(slot, gen)
	if q == nil {
		return // a late completion of a queue already torn down
	}
	ok := wc.Status == verbs.WCSuccess
	if !ok && wc.Status != verbs.WCFlushErr {
		e.stats.CompletionErrors.Add(1)
		q.log.Warn("work completion error", "kind", kind, "status", wc.StatusString(), "vendor_err", wc.VendorErr)
	}
	switch kind {
	case kindRecv:
		if int(idx) < q.depth {
			q.received(int(idx), wc)
		}
	case kindRead, kindSend:
		if int(idx) >= len(q.reqs) {
			return
		}
		ev := evWorkFailed
		switch {
		case ok && kind == kindRead:
			ev = evReadDone
		case ok:
			ev = evSendDone
		}
		// A request abandoned after a failed post is free again: the rest
		// of its chain that did go in flushes, and the event is ignored.
		q.advance(&q.reqs[idx], ev)
		q.retryCredits()
	case kindWrite, kindReadPart:
		// Unsignaled; seen only when flushed or failed. The SEND, or the
		// last READ, after it decides.
		if !ok && kind == kindWrite {
			q.teardown("RDMA WRITE failed")
		} else if !ok {
			q.teardown("RDMA READ failed")
		}
	}
}

// responded runs a request the core finished off the poller.
func (e *engine) responded(r *request) { r.q.advance(r, evExecuted) }

// stageSend adds a send work request for q to the round's batch; the
// caller has made room with q.reserve.
func (e *engine) stageSend(q *queue) *verbs.SendWR {
	w := e.batch.Send(q.conn)
	e.noteGroup(q)
	return w
}

// stageRecv adds a receive work request for q, like stageSend.
func (e *engine) stageRecv(q *queue) *verbs.RecvWR {
	w := e.batch.Recv(q.conn)
	e.noteGroup(q)
	return w
}

// room reports whether sends more send and recvs more receive work
// requests (for the SRQ, when the poller has one) fit the round's batch.
func (e *engine) room(sends, recvs int) bool {
	if e.srq != nil {
		return e.batch.Room(sends, 0) && e.batch.SRQRoom(recvs)
	}
	return e.batch.Room(sends, recvs)
}

func (e *engine) noteGroup(q *queue) {
	if e.batch.Groups() > len(e.batchQ) {
		e.batchQ = append(e.batchQ, q)
	}
}

// postFailure is a queue whose share of a batch did not all go in.
type postFailure struct {
	q        *queue
	err      error
	unposted []uint64 // wr_ids of the sends that were not posted
}

// flush posts the round's batch: the SRQ's receives, then every queue's
// receives and sends, each queue's as one chain, in one call. A queue
// whose post failed is torn down and the requests whose work did not go in
// are abandoned; SRQ receives that did not go in wait for the SRQ to grow.
func (e *engine) flush() {
	e.publish()
	if e.batch.Len() == 0 {
		return
	}
	e.stats.PostCalls.Add(1)
	e.stats.WorkRequests.Add(uint64(e.batch.Len()))
	e.batch.Post()
	if e.srq != nil {
		e.srqPosted()
		e.publishSRQ() // what the post did, not a round late
	}
	var failed []postFailure // allocated only when a post fails
	for i, q := range e.batchQ {
		recvs, unposted, err := e.batch.Result(i)
		q.recvPosted += recvs
		if err != nil {
			f := postFailure{q: q, err: err}
			for _, w := range unposted {
				f.unposted = append(f.unposted, w.WRID)
			}
			failed = append(failed, f)
		}
	}
	// Empty before handling failures: that may stage (and flush) more.
	e.batch.Reset()
	clear(e.batchQ)
	e.batchQ = e.batchQ[:0]
	for _, f := range failed {
		f.q.postFailed(f.err, f.unposted)
	}
}

// returnChunks gives data buffers back to the pool and lets the requests
// waiting for them try again.
func (e *engine) returnChunks(chunks []int32) {
	if len(chunks) == 0 {
		return
	}
	e.pool.put(chunks)
	e.inUse -= int64(len(chunks))
	e.pool.wait.retry(func(r *request) { r.q.advance(r, evNone) })
}

// checkStuck logs the queues that take too long to drain, and tears down
// those whose host takes no more responses; and it posts again the SRQ
// receives a failed post left out.
func (e *engine) checkStuck() {
	e.retrySpare()
	now := e.now()
	for _, q := range e.queues {
		if q != nil {
			q.checkStuck()
			q.checkResponses(now)
		}
	}
}

// abandonPosted lets go of the posted work of every queue: the device is
// gone (see queue.abandonPosted).
func (e *engine) abandonPosted() {
	for _, q := range e.queues {
		if q != nil {
			q.abandonPosted()
		}
	}
}

// publish brings the BuffersInUse gauge, and the SRQ's, up to date.
func (e *engine) publish() {
	if d := e.inUse - e.published; d != 0 {
		e.stats.BuffersInUse.Add(d)
		e.published = e.inUse
	}
	e.publishSRQ()
}

// publishSRQ brings the SRQ's gauges up to date.
func (e *engine) publishSRQ() {
	if s := e.srq; s != nil {
		s.gPosted.Store(int64(s.posted))
		s.gHeld.Store(int64(s.given() - s.posted))
		s.gOverflow.Store(int64(s.over - len(s.overFree)))
	}
}
