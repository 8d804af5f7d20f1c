// Package rdma is the NVMe/RDMA transport (NVMe-oF 1.1 §7.3): rdma_cm
// listeners, RC queue pairs, pre-registered buffer pools, a per-request
// state machine and batched completion polling.
package rdma

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// ErrNotSupported means this build has no RDMA support (no cgo).
var ErrNotSupported = verbs.ErrNotSupported

// ErrNoDevice means no RDMA device serves the address.
var ErrNoDevice = verbs.ErrNoDevice

// ErrDeviceRemoved means the RDMA device is being removed: nothing new is
// set up on it.
var ErrDeviceRemoved = errors.New("rdma: device being removed")

// Config sizes the transport.
type Config struct {
	// InCapsuleDataSize is the in-capsule data each receive buffer holds.
	InCapsuleDataSize uint32
	// MaxQueueDepth is the deepest I/O queue (commands).
	MaxQueueDepth int
	// MaxIOQueueID is the highest QID a host may announce.
	MaxIOQueueID int
	// MaxQueues is how many queues (admin and I/O, all hosts) one device
	// serves; it sizes the queue blocks registered at start. 0 takes it
	// from the device: DefaultMaxQueuesSRQ with a shared receive queue,
	// DefaultMaxQueues without.
	MaxQueues int
	// MDTS is the largest transfer in bytes.
	MDTS uint32
	// IOUnitSize is the size of one data buffer; transfers use several.
	IOUnitSize uint32
	// BufferPoolSize is the registered data buffer memory per device.
	BufferPoolSize uint64
	// Pollers is the number of completion pollers (CQs) per device.
	Pollers int
	// PollIdle is how long a poller busy-polls an idle CQ before it
	// sleeps on the completion channel, at least (the window adapts). 0
	// never busy-polls.
	PollIdle time.Duration
	// PollNap pauses the poller between empty polls within that window, so
	// the CPU serves other threads (or, in a virtual machine, the host)
	// while the host is between I/Os. 0 spins: the lowest latency, for
	// dedicated cores.
	PollNap time.Duration
	// SendWithInvalidate is ModeAuto, ModeOn or ModeOff.
	SendWithInvalidate string
	// IOUring runs file and block-device I/O on an io_uring per poller,
	// reaped by the poller itself: "auto" (where the kernel allows it),
	// "on" (fail without it) or "off" (namespace workers).
	IOUring string
	// SRQ gives each poller a shared receive queue, from which every queue
	// on it takes its command capsules: "auto" (where the device has
	// them), "on" (fail without) or "off" (receive buffers per queue).
	SRQ string
	// Logger receives the transport's log; nil discards.
	Logger *slog.Logger
}

// Values of Config.SendWithInvalidate, Config.IOUring and Config.SRQ.
const (
	ModeAuto = limits.ModeAuto
	ModeOn   = limits.ModeOn
	ModeOff  = limits.ModeOff
)

// Defaults of the RDMA sizing, package limits' (the configuration reads
// them there too). New applies those whose zero value means nothing. A zero
// InCapsuleDataSize, PollIdle or PollNap is meaningful (no in-capsule data,
// never busy-poll, spin), so New leaves those alone.
const (
	DefaultInCapsuleDataSize = limits.RDMAInCapsuleDataSize
	DefaultMaxQueues         = limits.RDMAMaxQueues
	DefaultMaxQueuesSRQ      = limits.RDMAMaxQueuesSRQ
	DefaultSRQDepth          = limits.RDMASRQDepth
	DefaultIOUnitSize        = limits.RDMAIOUnitSize
	DefaultBufferPoolSize    = limits.RDMABufferPoolSize
	DefaultPollers           = limits.RDMAPollers
	DefaultPollIdle          = limits.RDMAPollIdle
	DefaultPollNap           = limits.RDMAPollNap
	DefaultMode              = limits.RDMAMode
)

// Bounds of the RDMA sizing, checked by New and, key by key, by config.
const (
	InCapsuleDataSizeMax = limits.RDMAInCapsuleDataSizeMax
	QueueDepthMin        = limits.RDMAQueueDepthMin
	QueueDepthMax        = limits.RDMAQueueDepthMax
	IOQueuesMin          = limits.RDMAIOQueuesMin
	IOQueuesMax          = limits.RDMAIOQueuesMax
	QueuesMin            = limits.RDMAQueuesMin
	QueuesMax            = limits.RDMAQueuesMax
	MDTSMin              = limits.RDMAMDTSMin
	MDTSMax              = limits.RDMAMDTSMax
	IOUnitSizeMin        = limits.RDMAIOUnitSizeMin
	PollersMin           = limits.RDMAPollersMin
	PollersMax           = limits.RDMAPollersMax
	PollIdleMax          = limits.RDMAPollIdleMax
	PollNapMax           = limits.RDMAPollNapMax
)

func (c *Config) setDefaults() {
	if c.MaxQueueDepth == 0 {
		c.MaxQueueDepth = fabric.DefaultMaxQueueDepth
	}
	if c.MaxIOQueueID == 0 {
		c.MaxIOQueueID = fabric.DefaultMaxIOQueues
	}
	if c.MDTS == 0 {
		c.MDTS = fabric.DefaultMDTS
	}
	if c.IOUnitSize == 0 {
		c.IOUnitSize = DefaultIOUnitSize
	}
	if c.BufferPoolSize == 0 {
		c.BufferPoolSize = DefaultBufferPoolSize
	}
	if c.Pollers == 0 {
		c.Pollers = DefaultPollers
	}
	if c.SendWithInvalidate == "" {
		c.SendWithInvalidate = DefaultMode
	}
	if c.IOUring == "" {
		c.IOUring = DefaultMode
	}
	if c.SRQ == "" {
		c.SRQ = DefaultMode
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.InCapsuleDataSize%16 != 0 || c.InCapsuleDataSize > InCapsuleDataSizeMax {
		errs = append(errs, fmt.Errorf("in-capsule data size %d: want a multiple of 16 up to %d", c.InCapsuleDataSize, InCapsuleDataSizeMax))
	}
	if c.MaxQueueDepth < QueueDepthMin || c.MaxQueueDepth > QueueDepthMax {
		errs = append(errs, fmt.Errorf("max queue depth %d: want %d..%d", c.MaxQueueDepth, QueueDepthMin, QueueDepthMax))
	}
	if c.MaxIOQueueID < IOQueuesMin || c.MaxIOQueueID > IOQueuesMax {
		errs = append(errs, fmt.Errorf("max I/O queue ID %d: want %d..%d", c.MaxIOQueueID, IOQueuesMin, IOQueuesMax))
	}
	if c.MaxQueues != 0 && (c.MaxQueues < QueuesMin || c.MaxQueues > QueuesMax) {
		errs = append(errs, fmt.Errorf("max queues %d: want 0 (by the device) or %d..%d", c.MaxQueues, QueuesMin, QueuesMax))
	}
	if c.IOUnitSize < IOUnitSizeMin || c.IOUnitSize&(c.IOUnitSize-1) != 0 {
		errs = append(errs, fmt.Errorf("io unit size %d: want a power of two >= %d", c.IOUnitSize, IOUnitSizeMin))
	}
	if c.MDTS < c.IOUnitSize || c.MDTS%c.IOUnitSize != 0 {
		errs = append(errs, fmt.Errorf("mdts %d: want a multiple of the io unit size %d", c.MDTS, c.IOUnitSize))
	}
	if c.BufferPoolSize < uint64(c.MDTS) {
		errs = append(errs, fmt.Errorf("buffer pool %d: smaller than mdts %d", c.BufferPoolSize, c.MDTS))
	}
	if c.PollIdle < 0 || c.PollNap < 0 {
		errs = append(errs, fmt.Errorf("poll idle %v, poll nap %v: want durations >= 0", c.PollIdle, c.PollNap))
	}
	for _, m := range []struct{ key, v string }{{"send_with_invalidate", c.SendWithInvalidate}, {"io_uring", c.IOUring}, {"srq", c.SRQ}} {
		switch m.v {
		case ModeAuto, ModeOn, ModeOff:
		default:
			errs = append(errs, fmt.Errorf("%s %q: want auto, on or off", m.key, m.v))
		}
	}
	return errors.Join(errs...)
}

// Transport is the RDMA transport. One Transport serves every rdma port.
type Transport struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	devices   map[uintptr]*device
	listeners map[*listener]struct{}
	// anchors is the event channel of the devices' anchor IDs
	// (device.anchor). It is never read: the kernel drops an ID's unread
	// events when the ID is destroyed.
	anchors *verbs.EventChannel
	// closed: Close has closed the listeners; no device is opened, and
	// no removal starts, after.
	closed bool

	// The device watch (removal.go): the user-verbs class in sysfs, its
	// nodes at the last look, and librdmacm's device sync (verbs).
	uverbsRoot  string
	nodes       map[string]uverbsNode
	syncDevices func() (int, error)
	watchStop   chan struct{}
	watchDone   chan struct{}
	// releases counts the removed devices being released.
	releases sync.WaitGroup

	stats Stats

	// healthMu guards lastBeats, each poller's sample at the previous
	// Stalled call.
	healthMu  sync.Mutex
	lastBeats map[*poller]beatSample
}

// Stats are the transport's counters, for metrics.
type Stats struct {
	Accepted, Rejected, Disconnected  atomic.Uint64
	QueuesLive                        atomic.Int64
	BufferWaits, SendWaits, ReadWaits atomic.Uint64 // requests that had to queue for a resource
	// BuffersInUse is the data buffers (IOUnitSize each) out of the pools:
	// held by requests, or by queues waiting for their QP's destruction.
	BuffersInUse atomic.Int64
	// ShareWaits counts requests that waited because their queue held its
	// share of the poller's data buffers.
	ShareWaits              atomic.Uint64
	PollSleeps, PollWakeups atomic.Uint64
	CompletionErrors        atomic.Uint64
	IOUringRequests         atomic.Uint64 // file and block requests run on a poller's io_uring
	SendWithInvalidate      atomic.Uint64
	// PostCalls counts the calls that posted a poller round's work
	// requests; WorkRequests the work requests they carried.
	PostCalls, WorkRequests atomic.Uint64
	// AsyncEvents counts the devices' asynchronous events (QP and port
	// errors, established connections, ...).
	AsyncEvents atomic.Uint64
	// RegisteredBytes is the memory the open devices registered (their
	// regions: receive buffers, responses and data buffers).
	RegisteredBytes atomic.Int64
	// SRQLimitEvents counts the times a poller's shared receive queue ran
	// below its armed limit (IBV_EVENT_SRQ_LIMIT_REACHED) and was grown.
	SRQLimitEvents atomic.Uint64
	// SRQErrors counts IBV_EVENT_SRQ_ERR: a poller's shared receive queue
	// failed, and every queue on the poller was torn down.
	SRQErrors atomic.Uint64
	// SRQLastWQETimeouts counts the QPs of queues torn down that were
	// destroyed without IBV_EVENT_QP_LAST_WQE_REACHED, after lastWQETimeout.
	SRQLastWQETimeouts atomic.Uint64
	// DeviceRemovals counts the devices released because they were
	// removed (removal.go).
	DeviceRemovals atomic.Uint64
}

// New creates the transport; devices are opened when a port is listened on.
func New(cfg Config) (*Transport, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("rdma config: %w", err)
	}
	plan, err := verbs.SetupFaults()
	if err != nil {
		return nil, fmt.Errorf("rdma: %w", err)
	}
	if plan != "" {
		cfg.Logger.Warn("test build: faults injected on purpose (batch posts, QP creation, SRQ depth)", "plan", plan)
	}
	stall, err := setupStall()
	if err != nil {
		return nil, fmt.Errorf("rdma: %w", err)
	}
	if stall != "" {
		cfg.Logger.Warn("test build: poller 0 stalls on purpose", "env", StallEnv, "value", stall)
	}
	return &Transport{cfg: cfg, log: cfg.Logger, devices: map[uintptr]*device{}, listeners: map[*listener]struct{}{},
		uverbsRoot: uverbsClass, syncDevices: verbs.SyncDevices}, nil
}

// Name is "rdma".
func (t *Transport) Name() string { return "rdma" }

// Limits implements fabric.Limiter: fabric sizes the controllers of rdma
// ports from the transport's own configuration.
func (t *Transport) Limits() fabric.TransportLimits { return t.cfg.Limits() }

// Limits are the controller limits c gives its ports.
func (c Config) Limits() fabric.TransportLimits {
	return fabric.TransportLimits{
		MDTS:              c.MDTS,
		MaxQueueDepth:     uint32(c.MaxQueueDepth),
		MaxIOQueues:       uint16(c.MaxIOQueueID),
		InCapsuleDataSize: c.InCapsuleDataSize,
	}
}

// Stats returns the live counters.
func (t *Transport) Stats() *Stats { return &t.stats }

// SRQStat is one poller's shared receive queue, for metrics: its receive
// buffers posted (in the SRQ, or taken by a QP that has not reported them
// yet) and held (bound to a queue by a capsule that landed in them, until
// the queue is done with it), and its overflow buffers holding capsules
// (srq.go). Without hosts, held and overflow are 0. Empty counts the
// receives that left it with nothing posted; Moved the capsules copied to
// the overflow, OverflowFull those that found it full.
type SRQStat struct {
	Device                 string
	Poller                 int
	Posted, Held, Overflow int64
	Empty                  uint64
	Moved, OverflowFull    uint64
}

// SRQStats reports the shared receive queue of every poller of the open
// devices that have them, by device and poller. A device removed and
// still being released is left out: one of the same name may be open
// again, and its series would be reported twice.
func (t *Transport) SRQStats() []SRQStat {
	t.mu.Lock()
	var out []SRQStat
	for _, d := range t.devices {
		if d.gone.Load() {
			continue
		}
		// A device's pollers are set before it is published in t.devices
		// and cleared only after it is removed.
		for _, p := range d.pollers {
			if s := p.e.srq; s != nil {
				out = append(out, SRQStat{Device: d.attr.Name, Poller: p.idx, Posted: s.gPosted.Load(), Held: s.gHeld.Load(),
					Overflow: s.gOverflow.Load(), Empty: s.empty.Load(), Moved: s.moved.Load(), OverflowFull: s.overflowFull.Load()})
			}
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b SRQStat) int {
		return cmp.Or(strings.Compare(a.Device, b.Device), cmp.Compare(a.Poller, b.Poller))
	})
	return out
}

// DeviceCount reports how many RDMA devices the machine has.
func DeviceCount() (int, error) { return verbs.DeviceCount() }

// Listen binds and listens on the port's address.
func (t *Transport) Listen(tgt *fabric.Target, p *fabric.Port) (fabric.Listener, error) {
	ip := net.ParseIP(p.Address)
	if ip == nil {
		return nil, fmt.Errorf("rdma listen: bad address %q", p.Address)
	}
	port, err := strconv.Atoi(p.Service)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("rdma listen: bad port %q", p.Service)
	}
	p.TRType = nvme.TRTypeRDMA
	p.AdrFam = nvme.AdrFamIPv4
	if ip.To4() == nil {
		p.AdrFam = nvme.AdrFamIPv6
	}
	// Reliable connected QPs, no particular provider, rdma_cm (NVMe-oF §7.3).
	p.TSAS = nvme.RDMATSAS(1, 1, 1, 0)
	l, err := t.listen(tgt, p, ip, port)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// deviceFor returns the shared state of an RDMA device, opening it (and
// registering its pools) the first time; local is an address of the
// device, for its anchor. A device being removed is refused.
func (t *Transport) deviceFor(ctx *verbs.Context, local net.IP) (*device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("rdma: transport closed")
	}
	if d := t.devices[ctx.Handle()]; d != nil {
		if d.isRemoved() {
			return nil, fmt.Errorf("device %s: %w", d.attr.Name, ErrDeviceRemoved)
		}
		return d, nil
	}
	d, err := openDevice(t, ctx)
	if err != nil {
		return nil, err
	}
	d.anchor = t.anchorFor(d, local)
	t.devices[d.key] = d
	t.startWatch()
	return d, nil
}

// anchorFor binds an rdma_cm ID of the transport's own to local, an
// address of d (see device.anchor). t.mu is held.
func (t *Transport) anchorFor(d *device, local net.IP) verbs.CMID {
	if local == nil || local.IsUnspecified() {
		d.log.Warn("device without an anchor ID: no address of its own to bind one to")
		return verbs.CMID{}
	}
	if t.anchors == nil {
		ec, err := verbs.NewEventChannel()
		if err != nil {
			d.log.Warn("device without an anchor ID", "err", err)
			return verbs.CMID{}
		}
		t.anchors = ec
	}
	id, err := t.anchors.CreateID()
	if err != nil {
		d.log.Warn("device without an anchor ID", "err", err)
		return verbs.CMID{}
	}
	if err := id.Bind(local, 0); err != nil {
		id.Destroy()
		d.log.Warn("device without an anchor ID", "address", local, "err", err)
		return verbs.CMID{}
	}
	if c := id.Context(); c == nil || c.Handle() != d.key {
		id.Destroy()
		d.log.Warn("device without an anchor ID: its address is on another device now", "address", local)
		return verbs.CMID{}
	}
	return id
}

// Close closes every listener and frees every device.
func (t *Transport) Close() error {
	t.mu.Lock()
	ls := make([]*listener, 0, len(t.listeners))
	for l := range t.listeners {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	var errs []error
	for _, l := range ls {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	t.stopWatch()
	t.mu.Lock()
	t.closed = true // no removal starts from here
	t.mu.Unlock()
	// Removed devices are released by their own goroutine, which finishes
	// now that their queues are gone.
	released := make(chan struct{})
	go func() { t.releases.Wait(); close(released) }()
	stuck := false
	select {
	case <-released:
	case <-time.After(closeTimeout):
		stuck = true
		errs = append(errs, fmt.Errorf("rdma: removed devices not released after %v", closeTimeout))
	}
	t.mu.Lock()
	devs := t.devices
	t.devices = map[uintptr]*device{}
	t.mu.Unlock()
	for _, d := range devs {
		if d.isRemoved() {
			continue // its release still owns it
		}
		if err := d.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.anchors != nil && !stuck {
		t.anchors.Close()
	}
	return errors.Join(errs...)
}
