package rdma

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// closeTimeout bounds how long closing a listener waits for its queues.
const closeTimeout = 15 * time.Second

// stuckLogWait is how long Close lets pollers log the queues that did not
// drain before it goes on.
const stuckLogWait = 500 * time.Millisecond

// listener is one rdma_cm listening ID with its event channel. All rdma_cm
// calls for the port and its connections run on its goroutine.
//
// When the device the ID is bound to is removed, the port goes down: the
// ID is destroyed with everything else on the device (removal.go), and the
// listener binds its address again, with a backoff, until that works (the
// device, or another one with the address, is there).
type listener struct {
	t      *Transport
	tgt    *fabric.Target
	port   *fabric.Port
	log    *slog.Logger
	ec     *verbs.EventChannel
	ecFile *os.File
	ip     net.IP
	svc    int

	// listener goroutine only (and listen, Close once it stopped): the
	// listening ID, invalid while the port is down, and its device, nil
	// when it is bound to every device (a wildcard address).
	id  verbs.CMID
	dev *device
	// retry fires the next bind of a port that is down; retryC is its
	// channel while armed, and backoff its delay.
	retry   *time.Timer
	retryC  <-chan time.Time
	backoff time.Duration

	stateMu sync.Mutex
	state   fabric.PortState

	events chan *verbs.CMEvent
	ctl    chan func()
	stop   chan struct{}
	done   chan struct{} // run returned
	read   chan struct{} // readEvents returned

	// listener goroutine only
	conns   map[uintptr]*cmConn
	closing bool

	live      sync.WaitGroup
	ids       sync.WaitGroup // destroyID goroutines
	closeOnce sync.Once
}

func (t *Transport) listen(tgt *fabric.Target, p *fabric.Port, ip net.IP, port int) (*listener, error) {
	ec, err := verbs.NewEventChannel()
	if err != nil {
		return nil, err
	}
	l := &listener{
		t: t, tgt: tgt, port: p, ec: ec, ip: ip, svc: port, log: t.log.With("port", net.JoinHostPort(p.Address, p.Service)),
		events: make(chan *verbs.CMEvent, 64), ctl: make(chan func(), 256),
		stop: make(chan struct{}), done: make(chan struct{}), read: make(chan struct{}),
		conns: map[uintptr]*cmConn{},
	}
	fail := func(err error) (*listener, error) {
		if l.id.Valid() {
			l.id.Destroy() // no event of it read yet: nothing to wait for
		}
		ec.Close()
		return nil, err
	}
	if l.id, l.dev, err = l.bind(); err != nil {
		return fail(err)
	}
	fd, err := syscall.Dup(ec.Fd())
	if err != nil {
		return fail(fmt.Errorf("dup event channel: %w", err))
	}
	syscall.SetNonblock(fd, true)
	l.ecFile = os.NewFile(uintptr(fd), "rdma-cm-events")
	t.mu.Lock()
	t.listeners[l] = struct{}{}
	t.mu.Unlock()
	go l.readEvents()
	go l.run()
	return l, nil
}

// bind creates a listening ID on l's channel, bound to the port's address.
// A listener bound to one address has its device at once: the pools are
// registered now rather than at the first connection, and a device that is
// going is refused. On error the ID, when valid, is the caller's to
// destroy: it may have had a connection request read already.
func (l *listener) bind() (verbs.CMID, *device, error) {
	id, err := l.ec.CreateID()
	if err != nil {
		return verbs.CMID{}, nil, err
	}
	if err := id.Bind(l.ip, l.svc); err != nil {
		return id, nil, err
	}
	if err := id.Listen(128); err != nil {
		return id, nil, err
	}
	var d *device
	if ctx := id.Context(); ctx != nil {
		if d, err = l.t.deviceFor(ctx, l.ip); err != nil {
			return id, nil, err
		}
	}
	return id, d, nil
}

// readEvents waits for rdma_cm events in the Go runtime's poller.
func (l *listener) readEvents() {
	defer close(l.read)
	rc, err := l.ecFile.SyscallConn()
	if err != nil {
		return
	}
	for {
		ev, closed, err := readWhenReady(rc, l.ec.GetEvent)
		if closed {
			return
		}
		if err != nil {
			l.log.Error("rdma_get_cm_event", "err", err)
			return
		}
		select {
		case l.events <- ev:
		case <-l.stop:
			ev.Ack()
			return
		}
	}
}

// readWhenReady waits in the Go runtime's poller until get, called each
// time rc's descriptor is readable, returns something other than EAGAIN.
// closed reports that the wait ended because the descriptor was closed.
func readWhenReady[T any](rc syscall.RawConn, get func() (T, error)) (v T, closed bool, err error) {
	rerr := rc.Read(func(uintptr) bool {
		v, err = get()
		return !errors.Is(err, syscall.EAGAIN)
	})
	if rerr != nil {
		return v, true, nil
	}
	return v, false, err
}

func (l *listener) run() {
	defer close(l.done)
	watch := time.NewTicker(drainWarnAfter / 2)
	defer watch.Stop()
	for {
		select {
		case <-watch.C:
			l.checkQueues()
		case ev := <-l.events:
			destroy := l.handle(ev)
			ev.Ack()
			if destroy.Valid() {
				l.destroyID(destroy)
			}
		case fn := <-l.ctl:
			fn()
		case <-l.retryC:
			l.relisten()
		case <-l.stop:
			return
		}
	}
}

// checkQueues runs the periodic check of the listener's queues on their
// pollers: a queue that does not drain keeps its host from connecting
// again, so say what it waits for; and a live queue whose host takes no
// more responses is torn down (checkResponses). One call per poller, so an
// idle target with many queues is woken rarely.
func (l *listener) checkQueues() {
	seen := map[*poller]bool{}
	for _, c := range l.conns {
		if !seen[c.p] {
			seen[c.p] = true
			c.p.runSoon(c.p.checkStuck)
		}
	}
}

// post runs fn on the listener's goroutine, without blocking the caller;
// dropped once the listener has stopped.
func (l *listener) post(fn func()) {
	select {
	case l.ctl <- fn:
	default:
		go func() {
			select {
			case l.ctl <- fn:
			case <-l.done:
			}
		}()
	}
}

// State implements fabric.StateReporter.
func (l *listener) State() fabric.PortState {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return l.state
}

func (l *listener) setState(s fabric.PortState) {
	l.stateMu.Lock()
	l.state = s
	l.stateMu.Unlock()
}

// Relisten backoff: the first bind of a port that went down is tried
// after relistenMin, and each failure doubles the wait up to relistenMax.
// nvmet retries a port whose address changed every 5 s; a removed device
// usually comes back (a reset, a driver reload) within seconds.
const (
	relistenMin = time.Second
	relistenMax = 10 * time.Second
)

// nextBackoff is the wait after one of prev (0 for the first).
func nextBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return relistenMin
	}
	return min(2*prev, relistenMax)
}

// deviceGone tears down the listener's queues on d, a device being
// removed, and takes the port down if its ID is bound to d.
func (l *listener) deviceGone(d *device, why string) {
	for _, c := range l.conns {
		if c.d == d {
			c.teardown("RDMA device removed")
		}
	}
	if l.dev == d && !l.closing {
		l.down(fmt.Sprintf("RDMA device %s removed (%s)", d.attr.Name, why))
	}
}

// down destroys the listening ID and arms the first bind again. The ID is
// destroyed off this goroutine, which acknowledges its events: connection
// requests read for it are still on their way here.
func (l *listener) down(reason string) {
	if l.id.Valid() {
		l.destroyID(l.id)
		l.id = verbs.CMID{}
	}
	l.dev = nil
	l.setState(fabric.PortState{Down: true, Reason: reason, Since: time.Now()})
	l.log.Error("port down: no connection is accepted until its address is usable again", "reason", reason)
	l.backoff = 0
	l.armRetry()
}

func (l *listener) armRetry() {
	l.backoff = nextBackoff(l.backoff)
	if l.retry == nil {
		l.retry = time.NewTimer(l.backoff)
	} else {
		l.retry.Reset(l.backoff)
	}
	l.retryC = l.retry.C
}

// relisten binds the port of a listener that is down again.
func (l *listener) relisten() {
	l.retryC = nil
	if l.closing || l.id.Valid() {
		return
	}
	id, d, err := l.bind()
	if err != nil {
		if id.Valid() {
			l.destroyID(id)
		}
		l.armRetry()
		l.log.Debug("port still down", "err", err, "retry_in", l.backoff)
		return
	}
	l.id, l.dev = id, d
	was := l.State()
	l.setState(fabric.PortState{})
	l.log.Info("port listening again", "down_for", time.Since(was.Since).Round(time.Millisecond))
}

// freeID destroys a connection's ID; only a debug message if that fails.
func (l *listener) freeID(id verbs.CMID) {
	if err := id.Destroy(); err != nil {
		l.log.Debug("rdma_destroy_id", "err", err)
	}
}

// destroyID frees a connection's ID off this goroutine: rdma_destroy_id
// waits until every event of the ID is acknowledged, and one may already be
// on its way here (a host giving up sends a REJ). Close waits for it.
func (l *listener) destroyID(id verbs.CMID) {
	l.ids.Add(1)
	go func() {
		defer l.ids.Done()
		l.freeID(id)
	}()
}

// discard acknowledges an event read but never handled, refusing a
// connection request, so that its ID and the listening ID can be destroyed.
func (l *listener) discard(ev *verbs.CMEvent) {
	var id verbs.CMID
	if ev.Type == verbs.EventConnectRequest {
		_ = l.reject(ev, nvme.RDMACMRejectNoResources, "port closing")
		id = ev.ID
	}
	ev.Ack()
	if id.Valid() {
		l.freeID(id)
	}
}

// handle processes one event; it returns an ID to destroy once the event
// is acknowledged.
func (l *listener) handle(ev *verbs.CMEvent) verbs.CMID {
	switch ev.Type {
	case verbs.EventConnectRequest:
		if err := l.accept(ev); err != nil {
			return ev.ID
		}
	case verbs.EventEstablished:
		if c := l.conns[ev.ID.Handle()]; c != nil {
			c.q.log.Debug("queue established")
		}
	case verbs.EventDisconnected, verbs.EventConnectError, verbs.EventUnreachable,
		verbs.EventRejected, verbs.EventTimewaitExit, verbs.EventAddrChange:
		if c := l.conns[ev.ID.Handle()]; c != nil {
			reason := "host disconnected"
			if ev.Type != verbs.EventDisconnected {
				reason = ev.Type.String()
			}
			c.teardown(reason)
		}
	case verbs.EventDeviceRemoval:
		// On the listening ID or a connection's: the device is going, and
		// everything on it is released (removal.go).
		if d := l.t.deviceOf(ev.ID.Context()); d != nil {
			l.t.deviceRemoved(d, "rdma_cm "+ev.Type.String())
		} else if c := l.conns[ev.ID.Handle()]; c != nil {
			c.teardown("RDMA device removed")
		}
	default:
		l.log.Debug("rdma_cm event ignored", "event", ev.Type.String())
	}
	return verbs.CMID{}
}

// reject refuses a connection with an NVMe/RDMA reject status.
func (l *listener) reject(ev *verbs.CMEvent, sts nvme.RDMACMRejectStatus, why string, args ...any) error {
	l.t.stats.Rejected.Add(1)
	l.log.Warn("connection rejected", append([]any{"remote", ev.ID.PeerAddr(), "status", sts.String(), "why", why}, args...)...)
	pd := make([]byte, nvme.RDMACMRejectSize)
	nvme.PutRDMACMReject(pd, sts)
	if err := ev.ID.Reject(pd); err != nil {
		l.log.Debug("rdma_reject", "err", err)
	}
	return fmt.Errorf("rejected: %s", why)
}

// rnrRetryCount is the RNR retry count the accept offers: how often the
// host's QP resends a capsule that finds no receive posted. A queue with
// receives of its own always has one for every command the host may send.
// Our own QP's count comes from the host's connection request (the IB CM
// gives the passive side the REQ's value; Linux sends 7, for ever), so it
// cannot bound a host that never posts receives: the engine's
// checkResponses does.
//
// With a shared receive queue every buffer may be held at once (hosts with
// more commands out than it has buffers): the host must wait for one, not
// fail its queue, so the accept offers 7, for ever, as nvmet does; and the
// QP's RNR NAK timer, which the IB CM sets to its largest (0: 655.36 ms,
// cm_init_qp_rtr_attr), is cut to srqMinRNRTimer.
const (
	rnrRetryCount    = 6
	rnrRetryCountSRQ = 7
	// srqMinRNRTimer is 0.64 ms in the IB encoding of RNR NAK timers.
	srqMinRNRTimer = 12
)

// connPlan is what admit decided for a connection request.
type connPlan struct {
	d          *device
	local      string // the address the host reached
	qid, depth int
	// ord is the RDMA READs we may issue against the host, ird those it
	// may issue against us.
	ord, ird     int
	sqSize, cqes int
}

// refusal is why a connection is rejected: an NVMe/RDMA reject status
// (NVMe-oF 1.1 §7.3.1) and words for the log.
type refusal struct {
	sts  nvme.RDMACMRejectStatus
	why  string
	args []any
}

// accept admits a connection request, sets its queue up and accepts it.
func (l *listener) accept(ev *verbs.CMEvent) error {
	pl, no := l.admit(ev)
	if no != nil {
		return l.reject(ev, no.sts, no.why, no.args...)
	}
	c, live, no := l.setup(ev, pl)
	if no != nil {
		return l.reject(ev, no.sts, no.why, no.args...)
	}
	if !live {
		// Torn down by the poller, which finishes with it and frees the ID.
		l.reject(ev, nvme.RDMACMRejectNoResources, "posting receives failed")
		return nil
	}
	pd := make([]byte, nvme.RDMACMAcceptSize)
	nvme.PutRDMACMAccept(pd, uint16(pl.depth))
	rnr := uint8(rnrRetryCount)
	if pl.d.srqDepth > 0 {
		rnr = rnrRetryCountSRQ
	}
	if err := ev.ID.Accept(verbs.ConnParam{PrivateData: pd, ResponderResources: uint8(pl.ird), InitiatorDepth: uint8(pl.ord), RNRRetryCount: rnr}); err != nil {
		c.q.log.Warn("rdma_accept failed", "err", err)
		c.teardown("accept failed")
		return nil
	}
	if pl.d.srqDepth > 0 {
		// The QP is connected (rdma_accept moved it to RTS). On the
		// poller, which destroys it: a host may already have had it torn
		// down.
		c.p.runSoon(func() {
			if !c.q.live() {
				return
			}
			if err := c.qp.SetMinRNRTimer(srqMinRNRTimer); err != nil {
				c.q.log.Warn("RNR NAK timer left at the IB CM's 655 ms", "err", err)
			}
		})
	}
	l.t.stats.Accepted.Add(1)
	c.q.log.Debug("queue accepted", "depth", pl.depth, "sq", pl.sqSize, "ord", pl.ord, "ird", pl.ird, "poller", c.p.idx)
	return nil
}

// admit validates the CM private data and sizes the queue pair for the
// device the request came in on.
func (l *listener) admit(ev *verbs.CMEvent) (connPlan, *refusal) {
	if l.closing {
		return connPlan{}, &refusal{sts: nvme.RDMACMRejectNoResources, why: "port closing"}
	}
	cr, sts, why := parseConnRequest(ev.PrivateData, l.t.cfg.MaxIOQueueID, l.t.cfg.MaxQueueDepth)
	if sts != 0 {
		return connPlan{}, &refusal{sts, why, []any{"private_data", fmt.Sprintf("%x", ev.PrivateData)}}
	}
	ctx := ev.ID.Context()
	if ctx == nil {
		return connPlan{}, &refusal{sts: nvme.RDMACMRejectNoResources, why: "no device for the connection"}
	}
	local := ""
	if host, _, err := net.SplitHostPort(ev.ID.LocalAddr()); err == nil {
		local = host
	}
	d, err := l.t.deviceFor(ctx, net.ParseIP(local))
	if err != nil {
		return connPlan{}, &refusal{nvme.RDMACMRejectNoResources, "device setup failed", []any{"err", err}}
	}
	if cr.depth > d.depth {
		return connPlan{}, &refusal{nvme.RDMACMRejectInvalidHSQSIZE, "send queue size above device limit", []any{"depth", cr.depth, "max", d.depth}}
	}
	pl := connPlan{d: d, qid: cr.qid, depth: cr.depth, local: local}
	// We issue RDMA READs against the host: at most its responder
	// resources, which the CM reports to the passive side as the event's
	// initiator depth (the values arrive swapped to our point of view).
	pl.ord = min(int(ev.InitiatorDepth), d.attr.MaxQPInitRdAtom)
	if pl.ord == 0 {
		return connPlan{}, &refusal{sts: nvme.RDMACMRejectInvalidORD, why: "host offers no RDMA READ resources"}
	}
	pl.ird = min(int(ev.ResponderResources), d.attr.MaxQPRdAtom)
	pl.sqSize = min(pl.depth*d.wrsPerReq, d.attr.MaxQPWR)
	// With an SRQ, the poller's CQs keep room for its receives already.
	pl.cqes = pl.sqSize
	if d.srqDepth == 0 {
		pl.cqes += pl.depth
	}
	return pl, nil
}

// setup takes a queue block and CQ room, creates the QP and the core's
// queue, and opens the queue on its poller, which posts its receives. What
// it took is given back in one place when a step fails. live reports
// whether the queue survived posting its receives; when it did not, the
// poller finishes with it.
func (l *listener) setup(ev *verbs.CMEvent, pl connPlan) (*cmConn, bool, *refusal) {
	d := pl.d
	block, p, cq, err := d.allocBlock(pl.cqes)
	if errors.Is(err, errNoBlock) {
		return nil, false, &refusal{nvme.RDMACMRejectNoResources, "queue limit reached", []any{"max_queues", d.blocks}}
	}
	if errors.Is(err, errRemoved) {
		return nil, false, &refusal{nvme.RDMACMRejectNoResources, "device being removed", []any{"device", d.attr.Name}}
	}
	if errors.Is(err, errSRQFailed) {
		d.log.Error("connection refused: the shared receive queue of every poller failed (IBV_EVENT_SRQ_ERR)")
		return nil, false, &refusal{nvme.RDMACMRejectNoResources, "every poller's shared receive queue failed", []any{"device", d.attr.Name}}
	}
	if err != nil {
		return nil, false, &refusal{nvme.RDMACMRejectNoResources, "no completion queue room", []any{"err", err}}
	}
	c := &cmConn{l: l, d: d, p: p, cq: cq, id: ev.ID, block: block, cqes: pl.cqes}
	qp, err := ev.ID.CreateQP(d.pd, verbs.QPInit{
		SendCQ: cq.cq, RecvCQ: cq.cq, SRQ: p.srq, MaxSendWR: uint32(pl.sqSize), MaxRecvWR: uint32(pl.depth),
		MaxSendSGE: uint32(d.sgePerWR), MaxRecvSGE: 2,
	})
	if err != nil {
		c.undoSetup()
		return nil, false, &refusal{nvme.RDMACMRejectNoResources, "create QP failed", []any{"err", err}}
	}
	c.qp = qp
	c.q = newQueue(p.e, queueConfig{
		conn: c, log: d.log.With("qid", pl.qid, "remote", ev.ID.PeerAddr()), mem: d.queueMem(block),
		depth: pl.depth, icd: d.icd, sqSize: pl.sqSize, readDepth: pl.ord,
	})
	c.fq = l.tgt.NewQueue(l.port, c.q, fabric.QueueHint{QID: pl.qid, Depth: pl.depth, Remote: ev.ID.PeerAddr(), LocalIP: pl.local})
	c.q.core = c.fq
	if p.io != nil {
		// Before the poller sees the queue (open below): no command yet.
		c.fq.UseIOContext(p.io)
	}
	// From here the queue counts as live: if posting its receives fails, the
	// poller tears it down like any other, and queueGone finishes with it.
	l.conns[ev.ID.Handle()] = c
	l.live.Add(1)
	l.t.stats.QueuesLive.Add(1)
	c.registered = true
	var added, live bool
	// live is read on the poller: once exec returns, the poller may already
	// be finishing a torn-down queue.
	p.exec(func() { added, live = p.e.open(c.q) })
	if !added {
		c.undoSetup()
		return nil, false, &refusal{sts: nvme.RDMACMRejectNoResources, why: "queue setup failed"}
	}
	return c, live, nil
}

// undoSetup gives back what setup took for a connection the poller never
// saw, in the reverse order: listener registration, the core's queue, the
// QP, the block and CQ room.
func (c *cmConn) undoSetup() {
	if c.registered {
		delete(c.l.conns, c.id.Handle())
		c.l.live.Done()
		c.l.t.stats.QueuesLive.Add(-1)
	}
	if c.fq != nil {
		c.fq.Destroy()
	}
	if c.qp != nil {
		c.id.DestroyQP()
	}
	c.d.freeBlock(c.block, c.p, c.cq, c.cqes)
}

// teardown tears c's queue down on its poller.
func (c *cmConn) teardown(reason string) {
	c.p.runSoon(func() { c.q.teardown(reason) })
}

// queueGone is called by a poller once a queue is fully drained.
func (l *listener) queueGone(c *cmConn) {
	fn := func() {
		delete(l.conns, c.id.Handle())
		// rdma_destroy_id waits until every event of the ID is acknowledged,
		// and one (DISCONNECTED, TIMEWAIT_EXIT) may be on its way to this
		// goroutine, which acknowledges it: destroying here would deadlock
		// the listener. Its events find no queue now and are just acked.
		go func() {
			l.freeID(c.id)
			c.q.log.Debug("queue destroyed", "reason", c.q.reason)
			l.live.Done()
		}()
	}
	select {
	case l.ctl <- fn:
	default:
		go func() { l.ctl <- fn }()
	}
}

// Close refuses new connections, disconnects every queue, waits for them
// to drain and frees the listening ID.
func (l *listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		sync := make(chan struct{})
		l.ctl <- func() {
			l.closing = true
			if l.retry != nil {
				l.retry.Stop()
			}
			l.retryC = nil
			for _, c := range l.conns {
				c.teardown("target shutting down")
			}
			close(sync)
		}
		<-sync
		drained := make(chan struct{})
		go func() { l.live.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(closeTimeout):
			err = fmt.Errorf("rdma listener %s:%s: queues still draining after %v", l.port.Address, l.port.Service, closeTimeout)
			// Say what each one waits for, as far as the listener and its
			// pollers still run.
			select {
			case l.ctl <- func() {
				for _, c := range l.conns {
					c.p.runSoon(c.q.logStuck)
				}
			}:
			case <-time.After(stuckLogWait):
			}
			time.Sleep(stuckLogWait)
		}
		close(l.stop)
		<-l.done
		l.ecFile.Close()
		<-l.read
		// Events read but never handled hold their IDs, and connection
		// requests the listening ID, until acknowledged.
		for drained := false; !drained; {
			select {
			case ev := <-l.events:
				l.discard(ev)
			default:
				drained = true
			}
		}
		l.ids.Wait()
		if l.id.Valid() {
			if derr := l.id.Destroy(); derr != nil && err == nil {
				err = derr
			}
		}
		if err == nil {
			l.ec.Close()
		}
		l.t.mu.Lock()
		delete(l.t.listeners, l)
		l.t.mu.Unlock()
	})
	return err
}
