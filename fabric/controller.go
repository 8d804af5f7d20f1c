package fabric

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// errorLogEntries is ELPE+1: how many error log entries a controller keeps.
const errorLogEntries = 16

// aerLimit is AERL+1: how many Async Event Requests a controller holds.
const aerLimit = 4

// kasUnit is the keep-alive granularity reported in KAS (100 ms units).
const kasUnit = time.Second

// Controller is a dynamic controller created by an admin queue Connect.
type Controller struct {
	s       *Subsystem
	id      nvme.CNTLID
	hostNQN string
	hostID  [16]byte
	port    *Port
	log     *slog.Logger

	mu       sync.Mutex
	cc       nvme.CC
	csts     uint32
	kato     time.Duration
	kaTimer  *time.Timer
	queues   map[nvme.QID]*Queue
	admin    *Queue
	nrIOQ    uint16 // granted by Set Features Number of Queues
	errLog   []nvme.ErrorLogEntry
	errCount uint64
	deleted  bool
	feat     map[uint8]uint32
	// shutdownFlush: a shutdown's flush runs; shutdownAgain: another
	// shutdown was asked for meanwhile (flushForShutdown).
	shutdownFlush, shutdownAgain bool

	// events are the controller's asynchronous events, under their own
	// lock (events.go).
	events asyncEvents
	// resvMasks are the Reservation Notification Masks set per namespace
	// (Set Features 82h), resvMaskAll the one set for every namespace.
	resvMasks   map[nvme.NSID]uint32
	resvMaskAll uint32

	wce     atomic.Bool // volatile write cache enabled
	enabled atomic.Bool // CSTS.RDY, read lock-free on the I/O path
	created time.Time
}

// ID is the controller's CNTLID.
func (c *Controller) ID() nvme.CNTLID { return c.id }

// HostNQN is the connected host's NQN.
func (c *Controller) HostNQN() string { return c.hostNQN }

// Subsystem is the controller's subsystem.
func (c *Controller) Subsystem() *Subsystem { return c.s }

func (c *Controller) isDiscovery() bool { return c.s.discovery }

// hostKey is what the controller's host is counted by (see hostKey).
func (c *Controller) hostKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	remote := ""
	if c.admin != nil {
		remote = c.admin.hint.Remote
	}
	return hostKey(c.hostNQN, remote)
}

// newController allocates a CNTLID and registers the controller.
func (s *Subsystem) newController(hostNQN string, hostID [16]byte, p *Port, kato time.Duration) (*Controller, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil, fmt.Errorf("subsystem %s is being removed", s.nqn)
	}
	id, ok := s.allocCNTLID()
	if !ok {
		return nil, fmt.Errorf("no free controller ID in %s", s.nqn)
	}
	c := &Controller{
		s: s, id: id, hostNQN: hostNQN, hostID: hostID, port: p,
		log:  s.t.log.With("subnqn", s.nqn, "hostnqn", hostNQN, "cntlid", id),
		kato: kato, queues: map[nvme.QID]*Queue{}, nrIOQ: p.MaxIOQueues,
		feat: map[uint8]uint32{}, created: time.Now(),
	}
	c.wce.Store(true)
	s.controllers[id] = c
	s.t.stats.controllers.Add(1)
	if kato > 0 {
		c.kaTimer = time.AfterFunc(kato, c.keepAliveExpired)
	}
	return c, nil
}

func (c *Controller) keepAliveExpired() {
	c.mu.Lock()
	admin, off := c.admin, c.kato == 0
	c.mu.Unlock()
	if off {
		return // turned off as the timer fired
	}
	if admin != nil && admin.authenticating() {
		// The host cannot send Keep Alive before its admin queue is
		// authenticated, and a DH exchange may take longer than KATO;
		// the authentication timeout bounds this wait instead.
		c.keepAlive()
		return
	}
	c.s.t.stats.kaExpired.Add(1)
	c.log.Warn("keep-alive timeout expired, deleting controller", "kato", c.kato)
	c.delete("keep-alive timeout")
}

// keepAlive restarts the keep-alive timer, unless KATO is 0: Set Features
// may have turned it off (NVMe base §5.27.1.12).
func (c *Controller) keepAlive() {
	c.mu.Lock()
	if c.kaTimer != nil && !c.deleted && c.kato > 0 {
		c.kaTimer.Reset(c.kato)
	}
	c.mu.Unlock()
}

// delete removes the controller and disconnects all its queues.
func (c *Controller) delete(reason string) {
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		return
	}
	c.deleted = true
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	qs := make([]*Queue, 0, len(c.queues))
	for _, q := range c.queues {
		qs = append(qs, q)
	}
	c.mu.Unlock()
	c.s.mu.Lock()
	if c.s.controllers[c.id] == c {
		delete(c.s.controllers, c.id)
		c.s.t.stats.controllers.Add(-1)
	}
	c.s.mu.Unlock()
	c.log.Info("controller deleted", "reason", reason)
	for _, q := range qs {
		q.conn.Disconnect()
	}
}

// queueGone detaches a destroyed queue; losing the admin queue deletes the
// controller, as nvmet does.
func (c *Controller) queueGone(q *Queue) {
	c.mu.Lock()
	if c.queues[q.qid] == q {
		delete(c.queues, q.qid)
	}
	admin := q == c.admin
	c.mu.Unlock()
	if admin {
		c.delete("admin queue disconnected")
	}
}

// addQueue binds q as queue qid of the controller.
func (c *Controller) addQueue(q *Queue, qid nvme.QID, size uint32) nvme.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	if _, used := c.queues[qid]; used {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	c.queues[qid] = q
	if qid == 0 {
		c.admin = q
	}
	q.qid = qid
	q.size = size
	q.log = c.log.With("qid", qid)
	q.ctrl.Store(c)
	return nvme.StatusSuccess
}

func (c *Controller) ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.csts&nvme.CSTSReady != 0
}

// cap is the Controller Capabilities property.
func (c *Controller) capability() nvme.CAP {
	mqes := uint16(c.port.MaxQueueDepth - 1)
	if c.isDiscovery() {
		mqes = AdminQueueDepth - 1
	}
	// CQR: queues are contiguous; TO: 15 * 500 ms; CSS bit 0: NVM command set.
	return nvme.MakeCAP(mqes, true, 15, nvme.CAPCSSNVM, 0, 4)
}

// setCC applies a Controller Configuration write (NVMe base §3.1.5, §7.6).
func (c *Controller) setCC(v uint32) {
	c.mu.Lock()
	old := c.cc
	nc := nvme.CC(v)
	c.cc = nc
	switch {
	case nc.Enabled() && !old.Enabled():
		if !c.isDiscovery() && (nc.IOSQES() != nvme.CommandSizeShift || nc.IOCQES() != nvme.CompletionSizeShift) || nc.MPS() > 4 || nc.AMS() != 0 || nc.CSS() != 0 {
			c.csts |= nvme.CSTSFatal
			c.log.Warn("invalid controller configuration", "cc", fmt.Sprintf("%#x", v))
		} else {
			c.csts = nvme.CSTSReady
		}
	case !nc.Enabled() && old.Enabled():
		c.csts &^= nvme.CSTSReady | nvme.CSTSShstMask
	}
	c.enabled.Store(c.csts&nvme.CSTSReady != 0)
	startShutdown := nc.SHN() != nvme.SHNNone && old.SHN() == nvme.SHNNone
	flush := false
	if startShutdown {
		c.csts = c.csts&^nvme.CSTSShstMask | nvme.CSTSShstOccurring
		// One shutdown flush at a time: a host toggling CC.SHN would
		// otherwise start a flush per toggle. One asked for while another
		// runs is made after it, for what was written since it began.
		if c.shutdownFlush {
			c.shutdownAgain = true
		} else {
			c.shutdownFlush, flush = true, true
		}
	}
	c.mu.Unlock()
	if flush {
		// In the background: the host polls CSTS.SHST.
		go c.flushForShutdown()
	}
}

// flushForShutdown flushes every namespace, again while another shutdown
// was asked for meanwhile, then reports the shutdown complete.
func (c *Controller) flushForShutdown() {
	for {
		for _, nsid := range c.s.activeNSIDs() {
			if ns := c.s.namespace(nsid); ns != nil {
				if err := ns.dev.Flush(); err != nil {
					c.log.Error("shutdown flush failed", "nsid", nsid, "err", err)
				}
			}
		}
		c.mu.Lock()
		if c.shutdownAgain {
			c.shutdownAgain = false
			c.mu.Unlock()
			continue
		}
		c.shutdownFlush = false
		c.csts = c.csts&^nvme.CSTSShstMask | nvme.CSTSShstComplete
		c.mu.Unlock()
		return
	}
}

// recordError adds an error log entry (NVMe base §5.14.1.1).
func (c *Controller) recordError(r *Request, st nvme.Status) {
	if st == nvme.StatusAbortSQDeleted {
		return
	}
	var nsid nvme.NSID
	if r.ns != nil {
		nsid = r.ns.nsid
	}
	c.mu.Lock()
	c.errCount++
	e := nvme.ErrorLogEntry{
		ErrorCount: c.errCount, SQID: r.q.qid, CID: r.Cmd.CID(), Status: st,
		ParamErrorLocation: r.errLoc, LBA: r.errLBA, NSID: nsid, TRTYPE: c.port.TRType,
	}
	c.errLog = append([]nvme.ErrorLogEntry{e}, c.errLog...)
	if len(c.errLog) > errorLogEntries {
		c.errLog = c.errLog[:errorLogEntries]
	}
	c.mu.Unlock()
	c.log.Debug("command failed", "qid", r.q.qid, "cid", r.Cmd.CID(), "opcode", r.Cmd.Opcode(), "status", st.String())
}

// ControllerInfo describes a connected controller for the operator.
type ControllerInfo struct {
	SubNQN    string
	HostNQN   string
	CNTLID    nvme.CNTLID
	Discovery bool
	// HostAddress is the host's transport address, as the admin queue's
	// connection reports it.
	HostAddress string
	PortID      uint16
	IOQueues    int
	KATO        time.Duration
	Connected   time.Time
	Enabled     bool // CSTS.RDY
}

// Info describes the controller.
func (c *Controller) Info() ControllerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := ControllerInfo{
		SubNQN: c.s.nqn, HostNQN: c.hostNQN, CNTLID: c.id, Discovery: c.isDiscovery(),
		PortID: c.port.ID, IOQueues: len(c.queues), KATO: c.kato, Connected: c.created,
		Enabled: c.csts&nvme.CSTSReady != 0,
	}
	if c.admin != nil {
		ci.HostAddress = c.admin.hint.Remote
		ci.IOQueues--
	}
	return ci
}

// Controllers describes every connected controller, discovery controllers
// too, sorted by subsystem and CNTLID.
func (t *Target) Controllers() []ControllerInfo {
	var out []ControllerInfo
	for _, s := range append(t.Subsystems(), t.discovery) {
		for _, c := range s.controllerList() {
			out = append(out, c.Info())
		}
	}
	slices.SortFunc(out, func(a, b ControllerInfo) int {
		if a.SubNQN != b.SubNQN {
			return strings.Compare(a.SubNQN, b.SubNQN)
		}
		return int(a.CNTLID) - int(b.CNTLID)
	})
	return out
}
