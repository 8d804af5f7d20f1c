package rdma

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/sys"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// pollBatch is how many completions one poll reaps (SPDK reaps 32).
const pollBatch = 32

// poller owns its CQs, the engine of every queue on them, and the OS loop
// that drives the engine: poll the CQs, run what other goroutines handed
// over, post the round's work, nap or sleep. Its goroutine is locked to an
// OS thread; other goroutines reach it through mbox (requests the core
// finished) and ctl (control functions). It is the engine's loop.
type poller struct {
	d   *device
	idx int
	log *slog.Logger
	ch  *verbs.CompChannel
	// cqs are the poller's CQs, all on ch: the one made with it, and more
	// as queues need room (device.allocBlock). The list is replaced, never
	// changed, under d.mu; the poller loads it each round.
	cqs    atomic.Pointer[[]*pollerCQ]
	cqSize int
	// srq is the poller's shared receive queue, which every QP on it takes
	// its receives from; nil when each posts its own.
	srq *verbs.SRQ
	// evfd wakes the poller from its sleep in ch.Wait (an eventfd).
	evfd int
	// io runs file, block and RBD I/O of the poller's queues on a ring
	// (io_uring, librbd's completion queue) this goroutine reaps; nil
	// leaves it to the namespace workers.
	io *fabric.IOContext

	// guarded by d.mu
	nqueues int
	// srqFailed: the SRQ failed (IBV_EVENT_SRQ_ERR); the poller takes no
	// new queue, whose QP would get no receives (device.allocBlock).
	srqFailed bool

	// poller goroutine only
	e   *engine
	wcs []verbs.WC
	// checkStuck is e.checkStuck, made once: the listener hands it over
	// every few seconds, and a method value made per call allocates.
	checkStuck func()

	mbox     chan *request
	ctl      chan func()
	sleeping atomic.Bool
	stop     chan struct{}
	done     chan struct{}

	// For the watchdog (health.go), written by the poller goroutine only:
	// beat moves at the top of every round and around each sleep; asleep
	// is set while it blocks in ch.Wait. (sleeping is a wake-up token that
	// wakers clear, so it cannot tell.) A cache line of their own: beat is
	// written every round, and wakers read mbox and sleeping above.
	_      cpu.CacheLinePad
	beat   atomic.Uint64
	asleep atomic.Bool
}

func newPoller(d *device, idx int, chunks []byte) (_ *poller, err error) {
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
	p.cqSize = min(d.attr.MaxCQE, maxCQSize)
	cq, err := d.ctx.CreateCQ(p.cqSize, p.ch)
	if err != nil {
		return nil, err
	}
	p.cqs.Store(&[]*pollerCQ{{cq: cq, room: p.cqRoom()}})
	var srq *srqConfig
	if d.srqDepth > 0 {
		if p.srq, err = d.pd.CreateSRQ(d.srqDepth, 2); err != nil {
			return nil, err
		}
		m := d.srqMem(idx)
		srq = &m
	}
	if p.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		p.evfd = -1
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	maxReqs := pollerMaxReqs(d.blocks, d.depth, d.srqDepth)
	if cfg.IOUring != ModeOff {
		p.io, err = fabric.NewIOContext(ioRingDepth, p.evfd)
		if err != nil {
			if cfg.IOUring == ModeOn {
				return nil, fmt.Errorf("io_uring for file and block I/O: %w", err)
			}
			p.log.Warn("io_uring unavailable: file and block I/O goes to namespace workers", "err", err)
			p.io, err = nil, nil
		} else {
			p.io.CountInto(&d.t.stats.IOUringRequests)
		}
	}
	p.wcs = make([]verbs.WC, pollBatch)
	p.e = newEngine(engineConfig{
		log: p.log, stats: &d.t.stats, loop: p,
		// The largest request (MDTS in one response or one fetch) must fit.
		batch:  verbsBatch{verbs.NewBatch(max(batchSends, d.wrsPerReq), batchRecvs, batchGroups), p.srq},
		geo:    d.geometry(),
		chunks: chunks, ioUnit: d.ioUnit,
		maxQueues: d.blocks, maxReqs: maxReqs,
		srq: srq,
	})
	p.checkStuck = p.e.checkStuck
	if p.srq != nil {
		// Before the poller runs: its engine is this goroutine's for now.
		p.e.startSRQ()
	}
	p.mbox = make(chan *request, maxReqs)
	p.ctl = make(chan func(), 1024)
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go p.run()
	p.planStall()
	return p, nil
}

// undoSetup releases what a newPoller that failed had set up.
func (p *poller) undoSetup() {
	if p.evfd >= 0 {
		unix.Close(p.evfd)
	}
	if p.srq != nil {
		p.srq.Destroy()
	}
	if cqs := p.cqs.Load(); cqs != nil {
		for _, c := range *cqs {
			c.cq.Destroy()
		}
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
		p.beat.Add(1)
		n := p.poll()
		m := p.runHandedOver()
		if p.io != nil {
			// Submits what the completions above queued, and completes
			// finished backend I/O (handed over through mbox).
			m += p.io.Poll()
		}
		// Everything the round staged goes out in one call.
		p.e.flush()
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
func napFor(ts *unix.Timespec) { sys.Nap(ts) }

// poll reaps one batch of completions from each CQ and dispatches them.
func (p *poller) poll() int {
	n := 0
	for _, c := range *p.cqs.Load() {
		k, err := c.cq.Poll(p.wcs)
		if err != nil {
			p.failed("poll CQ", err)
			continue
		}
		for i := 0; i < k; i++ {
			p.e.complete(&p.wcs[i])
		}
		n += k
	}
	return n
}

// maxCQSize caps a CQ's entries (4 MiB of CQEs on mlx5); a poller adds CQs
// rather than growing one.
const maxCQSize = 65536

// cqRoom is the entries of a new CQ of p that queues may take: with an
// SRQ, every receive it holds may complete on any of p's CQs, so each
// keeps room for all of them (srqDepthFor leaves at least as much).
func (p *poller) cqRoom() int { return p.cqSize - p.d.srqDepth }

// pollerMaxReqs is the most requests a poller may have handed over by the
// core (mbox) or waiting for data buffers (the pool's line): a queue block
// holds 2·depth requests. With an SRQ of srqDepth buffers it is fewer: a
// request holds its capsule's receive buffer, the SRQ's or its overflow's,
// from the capsule's arrival until its response is staged, all the time it
// is in the core or in that line, so no more than those buffers can be (a
// request held past its depth tears its queue down: srqReceived).
func pollerMaxReqs(blocks, depth, srqDepth int) int {
	n := blocks * 2 * depth
	if srqDepth > 0 {
		n = min(n, srqDepth+srqOverflow(srqDepth))
	}
	return n
}

// growSRQ answers the SRQ limit event (IBV_EVENT_SRQ_LIMIT_REACHED): more
// receives are posted, and the limit armed again while some are left.
func (p *poller) growSRQ() {
	p.d.t.stats.SRQLimitEvents.Add(1)
	p.e.growSRQ()
	p.log.Info("shared receive queue ran low: more receives posted", "posted", p.e.srq.posted, "of", p.e.srq.n)
}

// drainCQs implements loop: it polls the CQs until they are empty, or as
// many rounds as they have entries for (completions of other queues keep
// coming).
func (p *poller) drainCQs() {
	for range p.cqSize/pollBatch + 1 {
		if p.poll() == 0 {
			return
		}
	}
}

// lastWQEReached hands IBV_EVENT_QP_LAST_WQE_REACHED to the engine.
func (p *poller) lastWQEReached(qpn uint32) { p.e.lastWQEReached(qpn) }

// armSRQ implements loop: it arms the SRQ limit; 0 leaves it unarmed.
func (p *poller) armSRQ(limit int) {
	if limit == 0 {
		return
	}
	if err := p.srq.Arm(limit); err != nil {
		p.log.Warn("arm the shared receive queue's limit: it will not grow", "err", err)
	}
}

// pollerCQ is one of a poller's CQs and its entries not yet promised to a
// queue.
type pollerCQ struct {
	cq   *verbs.CQ
	room int // guarded by d.mu
}

// cqFor is a CQ of p with room for cqes more entries, or nil. d.mu is held.
func (p *poller) cqFor(cqes int) *pollerCQ {
	for _, c := range *p.cqs.Load() {
		if c.room >= cqes {
			return c
		}
	}
	return nil
}

// addCQ makes p poll and arm c too. d.mu is held.
func (p *poller) addCQ(c *pollerCQ) {
	cqs := append(slices.Clone(*p.cqs.Load()), c)
	p.cqs.Store(&cqs)
}

// runHandedOver runs what other goroutines handed over: finished requests,
// then control functions.
func (p *poller) runHandedOver() int {
	k := 0
	for {
		select {
		case r := <-p.mbox:
			p.e.responded(r)
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

// sleep arms the CQs and blocks until a completion, a handed-over request
// or a control function arrives. It blocks this locked thread in one cgo
// call (poll on the completion channel and the eventfd), so a wake-up is one
// kernel wake-up of this thread, with no goroutine hand-offs on the way.
// A CQ added meanwhile has no queue yet: its queue opens through ctl, which
// wakes the poller, and the next sleep arms it.
func (p *poller) sleep() {
	for _, c := range *p.cqs.Load() {
		if err := c.cq.ReqNotify(); err != nil {
			p.failed("arm CQ", err)
			time.Sleep(time.Millisecond)
			return
		}
	}
	// A completion that arrived before arming raises no event: poll once more.
	if p.poll() > 0 {
		p.e.flush()
		return
	}
	// librbd's completions signal the eventfd only once armed; one waiting
	// already is polled rather than slept on.
	if p.io != nil && !p.io.Arm() {
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
	// beat before asleep, both ways: a sample that sees asleep clear sees
	// the beat of the wake-up (health.go).
	p.beat.Add(1)
	p.asleep.Store(true)
	err := p.ch.Wait(p.evfd)
	p.beat.Add(1)
	p.asleep.Store(false)
	p.sleeping.Store(false)
	if err != nil {
		p.failed("wait for completions", err)
		time.Sleep(time.Millisecond)
	}
	p.d.t.stats.PollWakeups.Add(1)
}

// failed logs a CQ call that failed: an error, unless the device is
// being removed, when calls may fail until it is released.
func (p *poller) failed(what string, err error) {
	if p.d.gone.Load() {
		p.log.Debug(what, "err", err)
		return
	}
	p.log.Error(what, "err", err)
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

// wake wakes the poller if it sleeps. Only the first waker of a sleep pays
// for the write.
func (p *poller) wake() {
	if p.sleeping.Load() && p.sleeping.CompareAndSwap(true, false) {
		p.wakeUp()
	}
}

func (p *poller) wakeUp() {
	if _, err := unix.Write(p.evfd, evOne[:]); err != nil && err != unix.EAGAIN {
		p.log.Error("wake poller", "err", err)
	}
}

// handOver implements loop: a request the core finished off the poller.
func (p *poller) handOver(r *request) {
	p.mbox <- r
	p.wake()
}

// runSoon implements loop: fn runs on the poller goroutine; it never blocks
// the caller.
func (p *poller) runSoon(fn func()) {
	select {
	case p.ctl <- fn:
	default:
		go func() { p.ctl <- fn; p.wake() }()
	}
	p.wake()
}

// exec runs fn on the poller goroutine and waits. Never call it from there.
func (p *poller) exec(fn func()) {
	done := make(chan struct{})
	p.runSoon(func() { fn(); close(done) })
	<-done
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
	var errs []error
	// Its QPs are gone (the device closes after its queues): the SRQ may
	// go, and then the CQs.
	if p.srq != nil {
		if err := p.srq.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range *p.cqs.Load() {
		if err := c.cq.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return p.ch.Close()
}
