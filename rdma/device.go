package rdma

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// device is one RDMA device: its protection domain, the one registered
// memory region that holds every buffer the transport uses, and pollers.
//
// The region is laid out once, at start (regionLayout):
//
//	rsp  [blocks][2*depth][16]byte        response capsules
//	cmd  [recvs][64]byte                  receive buffers for command capsules
//	icd  [recvs][icd]byte                 their in-capsule data (page aligned)
//	data [chunks][ioUnit]byte             data buffers, split among pollers
//
// A queue takes one block. The receive buffers are the blocks' own, depth
// each (recvs = blocks × depth), or, with a shared receive queue per
// poller (srqDepth > 0), the pollers' (recvs = pollers × srqDepth): then a
// block is its responses alone. Nothing is registered after start.
type device struct {
	t    *Transport
	log  *slog.Logger
	ctx  *verbs.Context
	attr verbs.DeviceAttr
	pd   *verbs.PD
	mr   *verbs.MR
	mem  []byte
	lkey uint32
	// overflow is the pollers' SRQ overflow buffers (srq.go), poller p's
	// srqOverflow(srqDepth) commands and in-capsule data at p's share:
	// mapped, not registered, resident only as far as used.
	overflow []byte

	depth int // commands per block
	icd   int
	lay   regionLayout
	// srqDepth is the receive buffers of each poller's shared receive
	// queue; 0 when each queue has receive buffers of its own.
	srqDepth int
	ioUnit   int
	chunks   int
	sendInv  bool
	sgePerWR int
	// wrsPerReq is the most send-queue work requests one request needs:
	// its RDMA operations for MDTS bytes plus the response SEND.
	wrsPerReq int

	// key is the device's entry in Transport.devices (its context).
	key uintptr
	// node is the device's user-verbs node in sysfs, watched for its
	// removal (removal.go); zero when the machine shows none.
	node uverbsNode
	// anchor is an rdma_cm ID of the transport's own bound to the device:
	// librdmacm closes the device's context when its last ID on it is
	// destroyed, and the anchor goes only after everything of ours on the
	// context (close). Not valid when it could not be made.
	anchor verbs.CMID

	mu         sync.Mutex
	blocks     int // queue blocks in all
	freeBlocks []int
	pollers    []*poller
	// newCQ makes another CQ for a poller, of p.cqSize entries on its
	// channel; replaced in tests, which have no device.
	newCQ func(p *poller) (*verbs.CQ, error)
	// removed: the device is going (removal.go); no queue is set up on it
	// any more, and idle closes once its last queue is gone.
	removed bool
	idle    chan struct{}
	// gone is removed for the pollers, which log less about a device that
	// no longer answers.
	gone atomic.Bool

	// events waits for the device's asynchronous events (a duplicate of its
	// descriptor); eventsDone closes when readAsyncEvents returns.
	events     *os.File
	eventsDone chan struct{}
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// regionLayout is where each part of a device's region starts, and its
// size (see device).
type regionLayout struct {
	rspOff, cmdOff, icdOff, dataOff, size int
}

// layoutRegion lays out blocks queue blocks of depth commands, recvs
// receive buffers of icd in-capsule bytes, and chunks data buffers.
func layoutRegion(blocks, depth, recvs, icd, ioUnit, chunks int) regionLayout {
	var l regionLayout
	l.cmdOff = alignUp(l.rspOff+blocks*2*depth*nvme.CompletionSize, 4096)
	l.icdOff = alignUp(l.cmdOff+recvs*nvme.CommandSize, 4096)
	l.dataOff = alignUp(l.icdOff+recvs*icd, ioUnit)
	l.size = l.dataOff + chunks*ioUnit
	return l
}

// srqDepthFor decides whether a device gets a shared receive queue per
// poller, and how many receive buffers each holds: 0 for none. mode is
// Config.SRQ: auto takes one where the device has enough (ibv_devinfo -v
// shows max_srq, max_srq_wr and max_srq_sge; rxe has them), on fails
// without.
func srqDepthFor(mode string, attr verbs.DeviceAttr, pollers, icd int) (int, error) {
	if mode == ModeOff {
		return 0, nil
	}
	sges := 1
	if icd > 0 {
		sges = 2
	}
	// A receive's wr_id carries its buffer in 16 bits (wrid.go), and
	// every CQ of the poller keeps room for all of them (poller.cqRoom).
	depth := DefaultSRQDepth
	if d := verbs.SRQDepthFault(); d > 0 {
		depth = d // a faultinject build's, to run it low on purpose
	}
	depth = min(depth, attr.MaxSRQWR, 1<<16-1)
	if attr.MaxSRQ >= pollers && attr.MaxSRQSGE >= sges && depth >= QueueDepthMin && min(attr.MaxCQE, maxCQSize) >= 2*depth {
		return depth, nil
	}
	if mode == ModeOn {
		return 0, fmt.Errorf("device %s: rdma.srq is on, but it has no shared receive queue for each of %d pollers "+
			"(max_srq %d, max_srq_wr %d, max_srq_sge %d, max_cqe %d)", attr.Name, pollers, attr.MaxSRQ, attr.MaxSRQWR, attr.MaxSRQSGE, attr.MaxCQE)
	}
	return 0, nil
}

func openDevice(t *Transport, ctx *verbs.Context) (*device, error) {
	cfg := &t.cfg
	attr, err := ctx.Query()
	if err != nil {
		return nil, err
	}
	d := &device{t: t, ctx: ctx, key: ctx.Handle(), attr: attr, depth: cfg.MaxQueueDepth, icd: int(cfg.InCapsuleDataSize),
		ioUnit: int(cfg.IOUnitSize), idle: make(chan struct{})}
	d.log = t.log.With("device", attr.Name)
	if d.node, err = t.nodeOf(attr.Name); err != nil {
		return nil, fmt.Errorf("device %s: %w", attr.Name, err)
	}
	if d.depth > attr.MaxQPWR {
		d.depth = attr.MaxQPWR
	}
	if d.srqDepth, err = srqDepthFor(cfg.SRQ, attr, cfg.Pollers, d.icd); err != nil {
		return nil, err
	}
	blocks, recvs := cfg.MaxQueues, 0
	if d.srqDepth > 0 {
		if blocks == 0 {
			blocks = DefaultMaxQueuesSRQ
		}
		recvs = cfg.Pollers * d.srqDepth
	} else {
		if blocks == 0 {
			blocks = DefaultMaxQueues
		}
		recvs = blocks * d.depth
	}
	d.chunks = int(cfg.BufferPoolSize / uint64(d.ioUnit))
	d.lay = layoutRegion(blocks, d.depth, recvs, d.icd, d.ioUnit, d.chunks)
	size := d.lay.size
	if uint64(size) > attr.MaxMRSize {
		return nil, fmt.Errorf("device %s: %d bytes of buffers exceed the largest memory region (%d)", attr.Name, size, attr.MaxMRSize)
	}
	d.sgePerWR = min(verbs.MaxSendSGE, attr.MaxSGE)
	if attr.MaxSGERd > 0 {
		d.sgePerWR = min(d.sgePerWR, attr.MaxSGERd)
	}
	d.wrsPerReq = 1 + (int(cfg.MDTS)/d.ioUnit+d.sgePerWR-1)/d.sgePerWR
	switch cfg.SendWithInvalidate {
	case ModeOn:
		d.sendInv = true
	case ModeAuto:
		d.sendInv = attr.MemMgtExtensions
	}

	// Outside the Go heap, locked, registered once.
	d.mem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("device %s: mmap %d bytes: %w", attr.Name, size, err)
	}
	fail := func(err error) (*device, error) {
		d.close()
		return nil, err
	}
	if d.srqDepth > 0 {
		n := cfg.Pollers * srqOverflow(d.srqDepth) * (nvme.CommandSize + d.icd)
		if d.overflow, err = unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
			return fail(fmt.Errorf("device %s: mmap %d bytes of SRQ overflow: %w", attr.Name, n, err))
		}
	}
	if d.pd, err = ctx.AllocPD(); err != nil {
		return fail(err)
	}
	if d.mr, err = d.pd.RegMR(d.mem); err != nil {
		return fail(fmt.Errorf("register %d bytes (is the memlock limit high enough?): %w", size, err))
	}
	t.stats.RegisteredBytes.Add(int64(size))
	d.lkey = d.mr.LKey()
	d.newCQ = func(p *poller) (*verbs.CQ, error) { return d.ctx.CreateCQ(p.cqSize, p.ch) }
	d.blocks = blocks
	for b := blocks - 1; b >= 0; b-- {
		d.freeBlocks = append(d.freeBlocks, b)
	}
	per := d.chunks / cfg.Pollers
	if per*d.ioUnit < int(cfg.MDTS) {
		return fail(fmt.Errorf("buffer pool of %d bytes is too small for %d pollers with mdts %d", cfg.BufferPoolSize, cfg.Pollers, cfg.MDTS))
	}
	for i := 0; i < cfg.Pollers; i++ {
		off := d.lay.dataOff + i*per*d.ioUnit
		p, err := newPoller(d, i, d.mem[off:off+per*d.ioUnit:off+per*d.ioUnit])
		if err != nil {
			return fail(err)
		}
		d.pollers = append(d.pollers, p)
	}
	// Every asynchronous event must be read and acknowledged: a QP with an
	// unacknowledged event cannot be destroyed (the poller would hang in
	// ibv_destroy_qp), and a fatal one must tear its queue down.
	fd, err := ctx.AsyncEventFD()
	if err != nil {
		return fail(err)
	}
	d.events = os.NewFile(uintptr(fd), "rdma-async-events")
	d.eventsDone = make(chan struct{})
	go d.readAsyncEvents(append([]*poller(nil), d.pollers...))
	d.log.Info("RDMA device ready", "registered_bytes", size, "queue_blocks", blocks, "depth", d.depth,
		"srq_depth", d.srqDepth, "in_capsule", d.icd, "io_unit", d.ioUnit, "chunks", d.chunks, "pollers", cfg.Pollers,
		"send_with_invalidate", d.sendInv, "max_sge", d.sgePerWR, "max_qp_init_rd_atom", attr.MaxQPInitRdAtom)
	return d, nil
}

// geometry is what a poller's engine needs to know of the device.
func (d *device) geometry() geometry {
	return geometry{lkey: d.lkey, sgePerWR: d.sgePerWR, sendInv: d.sendInv, maxChunks: int(d.t.cfg.MDTS) / d.ioUnit}
}

// queueMem is queue block b's share of the region: its responses and,
// without a shared receive queue, its receive buffers.
func (d *device) queueMem(b int) queueMem {
	rsp := d.lay.rspOff + b*2*d.depth*nvme.CompletionSize
	m := queueMem{rsp: d.mem[rsp : rsp+2*d.depth*nvme.CompletionSize]}
	if d.srqDepth == 0 {
		cmd := d.lay.cmdOff + b*d.depth*nvme.CommandSize
		icd := d.lay.icdOff + b*d.depth*d.icd
		m.cmd = d.mem[cmd : cmd+d.depth*nvme.CommandSize]
		m.icd = d.mem[icd : icd+d.depth*d.icd]
	}
	return m
}

// srqMem is poller p's receive buffers, for its shared receive queue.
func (d *device) srqMem(p int) srqConfig {
	n := d.srqDepth
	cmd := d.lay.cmdOff + p*n*nvme.CommandSize
	icd := d.lay.icdOff + p*n*d.icd
	c := srqConfig{cmd: d.mem[cmd : cmd+n*nvme.CommandSize], icd: d.mem[icd : icd+n*d.icd], icdSize: d.icd, n: n,
		start: min(verbs.SRQStartFault(), n)} // 0 but in a faultinject build
	o := srqOverflow(n)
	off := p * o * (nvme.CommandSize + d.icd)
	icdOff := off + o*nvme.CommandSize
	c.overCmd = d.overflow[off:icdOff:icdOff]
	c.overICD = d.overflow[icdOff : icdOff+o*d.icd : icdOff+o*d.icd]
	return c
}

// errNoBlock: every queue block of the region is taken (rdma.max_queues).
var errNoBlock = errors.New("queue limit reached")

// errRemoved: the device is being removed; no queue is set up on it.
var errRemoved = errors.New("device being removed")

// errSRQFailed: the shared receive queue of every poller failed
// (IBV_EVENT_SRQ_ERR); a new QP would get no receives.
var errSRQFailed = errors.New("every poller's shared receive queue failed")

// allocBlock takes a queue block and room for cqes entries on a CQ of a
// poller: the least loaded poller with a CQ that has the room, or else the
// least loaded poller on a CQ made for it. A CQ holds the worst case of a
// few queues only (every send and receive flushed at once: 640 entries for
// an I/O queue of 128 and its admin queue), so a host connected to
// hundreds of subsystems needs more CQs than pollers. A poller whose
// shared receive queue failed takes none.
func (d *device) allocBlock(cqes int) (int, *poller, *pollerCQ, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return 0, nil, nil, errRemoved
	}
	if len(d.freeBlocks) == 0 {
		return 0, nil, nil, errNoBlock
	}
	var best, least *poller
	var cq *pollerCQ
	for _, p := range d.pollers {
		if p.srqFailed {
			continue
		}
		if least == nil || p.nqueues < least.nqueues {
			least = p
		}
		if c := p.cqFor(cqes); c != nil && (best == nil || p.nqueues < best.nqueues) {
			best, cq = p, c
		}
	}
	if least == nil && len(d.pollers) > 0 {
		return 0, nil, nil, errSRQFailed
	}
	if best == nil {
		if least == nil || cqes > least.cqRoom() {
			return 0, nil, nil, fmt.Errorf("a queue of %d completion entries: larger than a CQ", cqes)
		}
		c, err := d.newCQ(least)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("another CQ: %w", err)
		}
		best, cq = least, &pollerCQ{cq: c, room: least.cqRoom()}
		best.addCQ(cq)
		if d.log != nil {
			d.log.Info("poller CQ added", "poller", best.idx, "cqs", len(*best.cqs.Load()), "entries", best.cqSize)
		}
	}
	cq.room -= cqes
	best.nqueues++
	b := d.freeBlocks[len(d.freeBlocks)-1]
	d.freeBlocks = d.freeBlocks[:len(d.freeBlocks)-1]
	return b, best, cq, nil
}

// markSRQFailed takes p out of service for new queues: its shared
// receive queue failed (IBV_EVENT_SRQ_ERR), and a QP attached to it would
// get no receives, its host reconnecting in a loop.
func (p *poller) markSRQFailed() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.srqFailed = true
}

// freeBlock gives back what allocBlock took. A CQ stays with its poller
// until the device closes: a queue's QP must go before its CQ, and the
// next queues take the room.
func (d *device) freeBlock(b int, p *poller, cq *pollerCQ, cqes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.freeBlocks = append(d.freeBlocks, b)
	cq.room += cqes
	p.nqueues--
	d.checkIdle()
}

// markRemoved flags the device as going; false if it already was.
func (d *device) markRemoved() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return false
	}
	d.removed = true
	d.gone.Store(true)
	d.checkIdle()
	return true
}

func (d *device) isRemoved() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removed
}

// queues is how many queues hold a block: each has, or had, a QP not yet
// destroyed.
func (d *device) queues() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.blocks - len(d.freeBlocks)
}

// checkIdle closes idle once a removed device has no queue left: every
// block is back, and a block comes back only after its QP is destroyed.
// d.mu is held.
func (d *device) checkIdle() {
	if d.removed && len(d.freeBlocks) == d.blocks {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
}

// readAsyncEvents logs and acknowledges the device's asynchronous events
// until d.events is closed, and tears down the queue of a QP that failed.
func (d *device) readAsyncEvents(pollers []*poller) {
	defer close(d.eventsDone)
	rc, err := d.events.SyscallConn()
	if err != nil {
		d.log.Error("async events", "err", err)
		return
	}
	for {
		ev, closed, err := readWhenReady(rc, d.ctx.GetAsyncEvent)
		if closed {
			return
		}
		if err != nil {
			d.log.Error("async events", "err", err)
			return
		}
		d.t.stats.AsyncEvents.Add(1)
		if ev.SRQLimit() || ev.SRQErr() {
			for _, p := range pollers {
				if p.srq != nil && p.srq.Handle() == ev.SRQ {
					if ev.SRQErr() {
						p.markSRQFailed()
						p.runSoon(p.e.srqFailed)
					} else {
						p.runSoon(p.growSRQ)
					}
				}
			}
			continue
		}
		if ev.LastWQEReached() && ev.HasQP {
			// The QP's pollers alone know it (engine.byQPN).
			for _, p := range pollers {
				if p.srq != nil {
					p.runSoon(func() { p.lastWQEReached(ev.QPNum) })
				}
			}
			continue
		}
		if !ev.Fatal() {
			d.log.Debug("async event", "event", ev.String(), "qp_num", ev.QPNum)
			continue
		}
		if ev.DeviceFatal() {
			// The device is lost (mlx5 reports this when it is removed
			// or reset): release it as for an rdma_cm DEVICE_REMOVAL.
			d.t.deviceRemoved(d, "async event: "+ev.String())
			continue
		}
		d.log.Warn("async event", "event", ev.String(), "qp_num", ev.QPNum)
		if !ev.HasQP {
			continue
		}
		reason := "async event: " + ev.String()
		for _, p := range pollers {
			p.runSoon(func() {
				for _, q := range p.e.queues {
					if c, ok := q.connOf(); ok && c.qp.Num() == ev.QPNum {
						q.teardown(reason)
					}
				}
			})
		}
	}
}

func (d *device) close() error {
	var errs []error
	if d.events != nil {
		d.events.Close()
		<-d.eventsDone
		d.events = nil
	}
	for _, p := range d.pollers {
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
	}
	d.pollers = nil
	if d.mr != nil {
		if err := d.mr.Dereg(); err != nil {
			errs = append(errs, err)
		}
		d.mr = nil
		d.t.stats.RegisteredBytes.Add(-int64(len(d.mem)))
	}
	if d.pd != nil {
		if err := d.pd.Dealloc(); err != nil {
			errs = append(errs, err)
		}
		d.pd = nil
	}
	if d.mem != nil {
		if err := unix.Munmap(d.mem); err != nil {
			errs = append(errs, err)
		}
		d.mem = nil
	}
	if d.overflow != nil {
		if err := unix.Munmap(d.overflow); err != nil {
			errs = append(errs, err)
		}
		d.overflow = nil
	}
	// Last: the anchor keeps librdmacm from closing the context under
	// what was destroyed above.
	if d.anchor.Valid() {
		if err := d.anchor.Destroy(); err != nil {
			errs = append(errs, err)
		}
		d.anchor = verbs.CMID{}
	}
	return errors.Join(errs...)
}
