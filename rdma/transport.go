// Package rdma is the NVMe/RDMA transport (NVMe-oF 1.1 §7.3): rdma_cm
// listeners, RC queue pairs, pre-registered buffer pools, a per-request
// state machine and batched completion polling.
package rdma

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
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

// Config sizes the transport.
type Config struct {
	// InCapsuleDataSize is the in-capsule data each receive buffer holds.
	InCapsuleDataSize uint32
	// MaxQueueDepth is the deepest I/O queue (commands).
	MaxQueueDepth int
	// MaxIOQueueID is the highest QID a host may announce.
	MaxIOQueueID int
	// MaxQueues is how many queues (admin and I/O, all hosts) one device
	// serves; it sizes the receive pools registered at start.
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
	// Logger receives the transport's log; nil discards.
	Logger *slog.Logger
}

// Values of Config.SendWithInvalidate and Config.IOUring.
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
	if c.MaxQueues == 0 {
		c.MaxQueues = DefaultMaxQueues
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
	for _, m := range []struct{ key, v string }{{"send_with_invalidate", c.SendWithInvalidate}, {"io_uring", c.IOUring}} {
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
		cfg.Logger.Warn("test build: faults injected on purpose (batch posts, QP creation)", "plan", plan)
	}
	stall, err := setupStall()
	if err != nil {
		return nil, fmt.Errorf("rdma: %w", err)
	}
	if stall != "" {
		cfg.Logger.Warn("test build: poller 0 stalls on purpose", "env", StallEnv, "value", stall)
	}
	return &Transport{cfg: cfg, log: cfg.Logger, devices: map[uintptr]*device{}, listeners: map[*listener]struct{}{}}, nil
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
// registering its pools) the first time.
func (t *Transport) deviceFor(ctx *verbs.Context) (*device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.devices[ctx.Handle()]; d != nil {
		return d, nil
	}
	d, err := openDevice(t, ctx)
	if err != nil {
		return nil, err
	}
	t.devices[ctx.Handle()] = d
	return d, nil
}

// Close frees every device; call after every listener is closed.
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
	t.mu.Lock()
	devs := t.devices
	t.devices = map[uintptr]*device{}
	t.mu.Unlock()
	for _, d := range devs {
		if err := d.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
