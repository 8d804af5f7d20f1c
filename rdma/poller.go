package rdma

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// pollBatch is how many completions one poll reaps (SPDK reaps 32).
const pollBatch = 32

// Work request kinds, carried in the top bits of wr_id.
const (
	kindRecv = iota + 1
	kindSend
	kindRead
	kindWrite
)

// wr_id = kind<<48 | queue slot<<32 | generation<<16 | index. It holds
// indexes into the poller's tables, never a Go pointer.
func wrID(kind int, qidx, gen, idx uint16) uint64 {
	return uint64(kind)<<48 | uint64(qidx)<<32 | uint64(gen)<<16 | uint64(idx)
}

func splitWRID(id uint64) (kind int, qidx, gen, idx uint16) {
	return int(id >> 48), uint16(id >> 32), uint16(id >> 16), uint16(id)
}

// poller owns one CQ and every queue on it. All request state changes
// happen on its goroutine, which is locked to an OS thread; other
// goroutines reach it through mbox (finished requests) and ctl (control).
type poller struct {
	d   *device
	idx int
	log *slog.Logger
	ch  *verbs.CompChannel
	cq  *verbs.CQ
	// evfd wakes the poller from its sleep in ch.Wait (an eventfd).
	evfd int
	// io runs file and block I/O of the poller's queues on an io_uring
	// this goroutine reaps; nil leaves it to the namespace workers.
	io *fabric.IOContext

	// guarded by d.mu
	cqBudget int
	nqueues  int

	// poller goroutine only
	queues     []*queue
	gens       []uint16
	freeChunks []int32
	bufWait    ring[*request]
	wcs        []verbs.WC
	// batch collects the work requests of a round; flush posts them.
	batch  *verbs.Batch
	batchQ []*queue // the queue of each of batch's groups

	mbox     chan *request
	ctl      chan func()
	sleeping atomic.Bool
	stop     chan struct{}
	done     chan struct{}
}

func newPoller(d *device, idx, firstChunk, nchunks int) (_ *poller, err error) {
	cfg := &d.t.cfg
	p := &poller{d: d, idx: idx, log: d.log.With("poller", idx), evfd: -1}
	defer func() {
		if err != nil {
			p.undoSetup()
		}
	}()
	if p.ch, err = d.ctx.NewCompChannel(); err != nil {
		return nil, err
	}
	cqSize := d.attr.MaxCQE
	if cqSize > 65536 {
		cqSize = 65536
	}
	if p.cq, err = d.ctx.CreateCQ(cqSize, p.ch); err != nil {
		return nil, err
	}
	p.cqBudget = cqSize
	if p.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		p.evfd = -1
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	maxReqs := cfg.MaxQueues * 2 * d.depth
	if cfg.IOUring != "off" {
		p.io, err = fabric.NewIOContext(ioRingDepth, p.evfd)
		if err != nil {
			if cfg.IOUring == "on" {
				return nil, fmt.Errorf("io_uring for file and block I/O: %w", err)
			}
			p.log.Warn("io_uring unavailable: file and block I/O goes to namespace workers", "err", err)
			p.io, err = nil, nil
		} else {
			p.io.CountInto(&d.t.stats.IOUringRequests)
		}
	}
	p.queues = make([]*queue, cfg.MaxQueues)
	p.gens = make([]uint16, cfg.MaxQueues)
	p.freeChunks = make([]int32, 0, nchunks)
	for i := firstChunk + nchunks - 1; i >= firstChunk; i-- {
		p.freeChunks = append(p.freeChunks, int32(i))
	}
	p.bufWait = newRing[*request](maxReqs)
	p.wcs = make([]verbs.WC, pollBatch)
	// The largest request (MDTS in one response or one fetch) must fit.
	p.batch = verbs.NewBatch(max(batchSends, d.wrsPerReq), batchRecvs, batchGroups)
	p.batchQ = make([]*queue, 0, batchGroups)
	p.mbox = make(chan *request, maxReqs)
	p.ctl = make(chan func(), 1024)
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go p.run()
	return p, nil
}

// undoSetup releases what a newPoller that failed had set up.
func (p *poller) undoSetup() {
	if p.evfd >= 0 {
		unix.Close(p.evfd)
	}
	if p.cq != nil {
		p.cq.Destroy()
	}
	if p.ch != nil {
		p.ch.Close()
	}
}

// ioRingDepth is how many file and block operations a poller keeps in
// flight on its io_uring; more wait for the namespace workers.
const ioRingDepth = 1024

// A poller's batch holds at most this many send and receive work requests
// and QP groups; a round that stages more posts in several calls.
const (
	batchSends  = 256
	batchRecvs  = 256
	batchGroups = 64
)

// pollWindowMax caps how long the poller busy-polls an idle CQ before it
// sleeps, however short its recent sleeps were.
const pollWindowMax = 2 * time.Millisecond

// nextWindow adapts the busy-poll window to the last sleep. A sleep that work
// ended within pollWindowMax was a loss (a wake-up costs more than polling
// through the gap, as at queue depth 1): the window grows to cover such a gap.
// A longer sleep (an idle host) sets it back to base, so an idle target sleeps
// at once and uses no CPU. A base of 0 turns busy-polling off altogether.
func nextWindow(window, base, slept time.Duration) time.Duration {
	limit := max(base, pollWindowMax)
	if base == 0 || slept >= limit {
		return base
	}
	return min(max(2*window, slept+slept/2), limit)
}

func (p *poller) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.done)
	base := p.d.t.cfg.PollIdle
	nap := unix.NsecToTimespec(p.d.t.cfg.PollNap.Nanoseconds())
	if p.d.t.cfg.PollNap > 0 {
		// Naps of microseconds need the thread's timer slack (50us by default) cut.
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0); err != nil {
			p.log.Debug("timer slack", "err", err)
		}
	}
	window := base
	lastWork := time.Now()
	for {
		n := p.poll()
		m := p.drain()
		if p.io != nil {
			// Submits what the completions above queued, and completes
			// finished backend I/O (handed over through mbox).
			m += p.io.Poll()
		}
		// Everything the round staged goes out in one call.
		p.flush()
		if n > 0 || m > 0 {
			lastWork = time.Now()
			continue
		}
		if p.stopping() {
			return
		}
		if time.Since(lastWork) < window {
			if nap.Nsec > 0 {
				napFor(&nap)
			}
			continue
		}
		start := time.Now()
		p.sleep()
		lastWork = time.Now()
		window = nextWindow(window, base, lastWork.Sub(start))
	}
}

// napFor pauses the poller's thread for ts without telling the Go scheduler.
// A nap through the scheduler's syscall path (entersyscall/exitsyscall) cost
// a wake-up of another runtime thread each time: measured in the test guest
// at QD32 as 1.5k futex wake-ups a second on that thread, 16 % of a vCPU,
// and a fifth of the QD1 latency (bench/results/2026-11-23-experiments.md).
// The poller's goroutine is locked to its thread and has nothing to hand
// over, so it keeps its P; a signal (preemption, GC) ends the nap early.
func napFor(ts *unix.Timespec) {
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(ts)), 0, 0)
}

// poll reaps one batch of completions and dispatches them.
func (p *poller) poll() int {
	n, err := p.cq.Poll(p.wcs)
	if err != nil {
		p.log.Error("poll CQ", "err", err)
		return 0
	}
	for i := 0; i < n; i++ {
		p.complete(&p.wcs[i])
	}
	return n
}

// drain runs what other goroutines handed over: finished requests, then
// control functions.
func (p *poller) drain() int {
	k := 0
	for {
		select {
		case r := <-p.mbox:
			r.state = rsExecuted
			r.q.advance(r)
			k++
			continue
		default:
		}
		break
	}
	for {
		select {
		case fn := <-p.ctl:
			fn()
			k++
			continue
		default:
		}
		return k
	}
}

// sleep arms the CQ and blocks until a completion, a handed-over request
// or a control function arrives. It blocks this locked thread in one cgo
// call (poll on the completion channel and the eventfd), so a wake-up is one
// kernel wake-up of this thread, with no goroutine hand-offs on the way.
func (p *poller) sleep() {
	if err := p.cq.ReqNotify(); err != nil {
		p.log.Error("arm CQ", "err", err)
		time.Sleep(time.Millisecond)
		return
	}
	// A completion that arrived before arming raises no event: poll once more.
	if p.poll() > 0 {
		p.flush()
		return
	}
	p.sleeping.Store(true)
	// Anything handed over before the store above is seen here; anything after
	// finds sleeping set and writes the eventfd.
	if len(p.mbox) > 0 || len(p.ctl) > 0 || p.stopping() {
		p.sleeping.Store(false)
		return
	}
	p.d.t.stats.PollSleeps.Add(1)
	err := p.ch.Wait(p.evfd)
	p.sleeping.Store(false)
	if err != nil {
		p.log.Error("wait for completions", "err", err)
		time.Sleep(time.Millisecond)
	}
	p.d.t.stats.PollWakeups.Add(1)
}

func (p *poller) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// evOne is the eventfd increment, in the host's byte order (little-endian
// on every architecture this runs on).
var evOne = [8]byte{1}

// kick wakes the poller if it sleeps. Only the first kicker of a sleep pays
// for the write.
func (p *poller) kick() {
	if p.sleeping.Load() && p.sleeping.CompareAndSwap(true, false) {
		p.wakeUp()
	}
}

func (p *poller) wakeUp() {
	if _, err := unix.Write(p.evfd, evOne[:]); err != nil && err != unix.EAGAIN {
		p.log.Error("wake poller", "err", err)
	}
}

// post hands a request the core finished back to the poller.
func (p *poller) post(r *request) {
	p.mbox <- r
	p.kick()
}

// ctlAsync runs fn on the poller goroutine; it never blocks the caller.
func (p *poller) ctlAsync(fn func()) {
	select {
	case p.ctl <- fn:
	default:
		go func() { p.ctl <- fn; p.kick() }()
	}
	p.kick()
}

// exec runs fn on the poller goroutine and waits. Never call it from there.
func (p *poller) exec(fn func()) {
	done := make(chan struct{})
	p.ctlAsync(func() { fn(); close(done) })
	<-done
}

// complete dispatches one work completion.
func (p *poller) complete(wc *verbs.WC) {
	kind, qidx, gen, idx := splitWRID(wc.WRID)
	if int(qidx) >= len(p.queues) {
		return
	}
	q := p.queues[qidx]
	if q == nil || q.gen != gen {
		return // a late completion of a queue already torn down
	}
	if wc.Status != verbs.WCSuccess && wc.Status != verbs.WCFlushErr {
		p.d.t.stats.CompletionErrors.Add(1)
		q.log.Warn("work completion error", "kind", kind, "status", wc.StatusString(), "vendor_err", wc.VendorErr)
	}
	switch kind {
	case kindRecv:
		q.recvDone(int(idx), wc)
	case kindSend:
		// A request whose post failed is already released; the rest of its
		// chain that did go in still flushes.
		if r := &q.reqs[idx]; r.state == rsSending {
			q.sendDone(r, wc)
		}
	case kindRead:
		if r := &q.reqs[idx]; r.state == rsReading {
			q.readDone(r, wc)
		}
	case kindWrite:
		// Unsignaled; seen only when flushed. The SEND after it decides.
		if wc.Status != verbs.WCSuccess {
			q.teardown("RDMA WRITE failed")
		}
	}
}

// stageSend adds a send work request for q to the round's batch; the
// caller has made room with q.reserve.
func (p *poller) stageSend(q *queue) *verbs.SendWR {
	w := p.batch.Send(q.qp)
	p.noteGroup(q)
	return w
}

// stageRecv adds a receive work request for q, like stageSend.
func (p *poller) stageRecv(q *queue) *verbs.RecvWR {
	w := p.batch.Recv(q.qp)
	p.noteGroup(q)
	return w
}

func (p *poller) noteGroup(q *queue) {
	if p.batch.Groups() > len(p.batchQ) {
		p.batchQ = append(p.batchQ, q)
	}
}

// checkStuck logs the poller's queues that take too long to drain.
func (p *poller) checkStuck() {
	for _, q := range p.queues {
		if q != nil {
			q.checkStuck()
		}
	}
}

// postFailure is a queue whose share of a batch did not all go in.
type postFailure struct {
	q        *queue
	err      error
	unposted []uint64 // wr_ids of the sends that were not posted
}

// flush posts the round's batch: every queue's receives and sends, each
// queue's as one chain, in one call. A queue whose post failed is torn
// down and the requests whose work did not go in are released.
func (p *poller) flush() {
	if p.batch.Groups() == 0 {
		return
	}
	p.d.t.stats.PostCalls.Add(1)
	p.d.t.stats.WorkRequests.Add(uint64(p.batch.Len()))
	p.batch.Post()
	var failed []postFailure // allocated only when a post fails
	for i, q := range p.batchQ {
		recvs, unposted, err := p.batch.Result(i)
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
	p.batch.Reset()
	clear(p.batchQ)
	p.batchQ = p.batchQ[:0]
	for _, f := range failed {
		f.q.postFailed(f.err, f.unposted)
	}
}

// addQueue gives q a slot in the poller's table.
func (p *poller) addQueue(q *queue) bool {
	for i, old := range p.queues {
		if old == nil {
			p.gens[i]++
			q.qidx, q.gen = uint16(i), p.gens[i]
			p.queues[i] = q
			return true
		}
	}
	return false
}

func (p *poller) removeQueue(q *queue) {
	if p.queues[q.qidx] == q {
		p.queues[q.qidx] = nil
	}
}

// getBuffers gives r data buffers for its transfer, in FIFO order.
func (p *poller) getBuffers(r *request) bool {
	if h, ok := p.bufWait.peek(); ok && h != r {
		if !r.waiting {
			r.waiting = true
			p.bufWait.push(r)
			p.d.t.stats.BufferWaits.Add(1)
		}
		return false
	}
	unit := p.d.ioUnit
	need := (int(r.fr.DataLen) + unit - 1) / unit
	if len(p.freeChunks) < need {
		if !r.waiting {
			r.waiting = true
			p.bufWait.push(r)
			p.d.t.stats.BufferWaits.Add(1)
		}
		return false
	}
	if r.waiting {
		p.bufWait.pop()
		r.waiting = false
	}
	left := int(r.fr.DataLen)
	for i := 0; i < need; i++ {
		c := p.freeChunks[len(p.freeChunks)-1]
		p.freeChunks = p.freeChunks[:len(p.freeChunks)-1]
		r.chunks = append(r.chunks, c)
		n := min(left, unit)
		r.segs = append(r.segs, p.d.chunk(int(c))[:n])
		left -= n
	}
	r.fr.Data = r.segs
	return true
}

// putBuffers returns r's data buffers and lets waiting requests take them.
func (p *poller) putBuffers(r *request) {
	if len(r.chunks) == 0 {
		return
	}
	chunks := r.chunks
	r.chunks = r.chunks[:0]
	r.segs = r.segs[:0]
	r.fr.Data = nil
	p.returnChunks(chunks)
}

// returnChunks gives data buffers back to the pool and lets waiting
// requests take them.
func (p *poller) returnChunks(chunks []int32) {
	if len(chunks) == 0 {
		return
	}
	p.freeChunks = append(p.freeChunks, chunks...)
	for {
		h, ok := p.bufWait.peek()
		if !ok {
			return
		}
		h.q.advance(h)
		if h2, ok := p.bufWait.peek(); ok && h2 == h {
			if h.waiting {
				return // still not enough for the head
			}
			p.bufWait.pop() // defensive: never spin on a stale head
		}
	}
}

func (p *poller) close() error {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wakeUp()
	<-p.done
	if p.io != nil {
		if err := p.io.Close(); err != nil {
			p.log.Warn("close io_uring", "err", err)
		}
	}
	unix.Close(p.evfd)
	if err := p.cq.Destroy(); err != nil {
		return err
	}
	return p.ch.Close()
}
