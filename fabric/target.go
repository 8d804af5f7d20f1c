package fabric

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Options configure the target. The limits that depend on the transport
// (MDTS, queue sizes) are the transport's: see TransportLimits.
type Options struct {
	// KATOMax caps the keep-alive timeout a host may ask for.
	KATOMax time.Duration
	// ConnectTimeout is how long a new transport queue may go without a
	// Fabrics Connect before it is disconnected.
	ConnectTimeout time.Duration
	// AuthTimeout bounds an in-band authentication (DefaultAuthTimeout).
	AuthTimeout time.Duration
	// AuthWorkers is how many DH computations of in-band authentication
	// run at once (DefaultAuthWorkers); they never run on a transport's
	// goroutine (authPool).
	AuthWorkers int
	// MaxConnectionsPerHost caps the queues (admin and I/O, all its
	// controllers) one host NQN may have connected; a Connect past it is
	// refused with Controller Busy.
	MaxConnectionsPerHost int
	// ANATransitionTime is ANATT, reported in Identify Controller
	// (limits.ANATransitionTime; whole seconds, at most 255).
	ANATransitionTime time.Duration
	// StateDir is where state that outlives the process is kept:
	// reservations that persist through power loss. "": none (hosts
	// cannot set PTPL).
	StateDir string
	// FirmwareRevision is reported in Identify Controller.
	FirmwareRevision string
	// Logger receives the target's log; nil discards.
	Logger *slog.Logger
}

// Controller defaults, used when a transport or caller leaves a limit
// unset; their values are package limits', which the configuration reads
// too.
const (
	DefaultMDTS                  = limits.MDTS
	DefaultMaxQueueDepth         = limits.MaxQueueDepth
	DefaultMaxIOQueues           = limits.MaxIOQueues
	DefaultKATOMax               = limits.KATOMax
	DefaultMaxConnectionsPerHost = limits.MaxConnectionsPerHost
	DefaultModel                 = limits.Model
	// DefaultConnectTimeout leaves a host's queue time for its Connect
	// (the Linux host sends it at once, and waits at most its admin
	// timeout, 60 s by default, for the answer).
	DefaultConnectTimeout = 30 * time.Second
)

// AdminQueueDepth is the admin queue's size: the Linux host asks for 32
// (NVME_AQ_DEPTH).
const AdminQueueDepth = 32

func (o *Options) setDefaults() {
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.AuthTimeout == 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.AuthWorkers == 0 {
		o.AuthWorkers = DefaultAuthWorkers()
	}
	if o.KATOMax == 0 {
		o.KATOMax = DefaultKATOMax
	}
	if o.MaxConnectionsPerHost == 0 {
		o.MaxConnectionsPerHost = DefaultMaxConnectionsPerHost
	}
	if o.ANATransitionTime == 0 {
		o.ANATransitionTime = limits.ANATransitionTime
	}
	if o.FirmwareRevision == "" {
		o.FirmwareRevision = "0.1"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Target is the whole NVMe over Fabrics target: subsystems and ports.
type Target struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	subsystems map[string]*Subsystem
	discovery  *Subsystem
	ports      []*Port
	listeners  []Listener
	referrals  []Referral
	genctr     uint64
	nextPortID uint16 // the last port ID given out
	closed     bool

	hosts       hostQueues
	authPool    *authPool
	stats       targetStats
	refusalLog  logLimit // refused Connects
	authFailLog logLimit // failed authentications
}

type targetStats struct {
	queues      atomic.Int64
	controllers atomic.Int64
	errors      atomic.Uint64
	connects    atomic.Uint64
	rejects     atomic.Uint64
	kaExpired   atomic.Uint64
	// unwrittenData counts successful commands whose data a handler did
	// not write (Request.unwrittenData).
	unwrittenData atomic.Uint64
	// connectTimeouts counts queues disconnected for sending no Connect.
	connectTimeouts atomic.Uint64
	// In-band authentication: queues authenticated, transactions that
	// failed, queues disconnected for not authenticating in time.
	authOK, authFailed, authTimeouts atomic.Uint64
	// hostLimit counts Connects refused for MaxConnectionsPerHost.
	hostLimit atomic.Uint64
}

// Stats is a snapshot of the target's counters, for metrics.
type Stats struct {
	Queues, Controllers                         int64
	Errors, Connects, ConnectRejects, KAExpired uint64
	// Authentication (auth.go): queues authenticated, failed transactions,
	// queues disconnected for not authenticating in time.
	AuthSucceeded, AuthFailed, AuthTimeouts uint64
	// HostLimitRejects are the ConnectRejects for MaxConnectionsPerHost.
	HostLimitRejects uint64
}

// ErrClosed is returned by operations on a closed target.
var ErrClosed = errors.New("fabric: target closed")

// NewTarget creates an empty target with a discovery subsystem.
func NewTarget(o Options) *Target {
	o.setDefaults()
	t := &Target{opts: o, log: o.Logger, subsystems: map[string]*Subsystem{}, genctr: 1,
		refusalLog: newLogLimit(), authFailLog: newLogLimit()}
	// Each queue has at most one computation waiting, and an address at
	// most MaxConnectionsPerHost queues waiting to authenticate
	// (hostQueues), some more re-authenticating.
	t.authPool = newAuthPool(o.AuthWorkers, 2*o.MaxConnectionsPerHost)
	t.discovery = newSubsystem(t, SubsystemConfig{NQN: nvme.DiscoveryNQN, Serial: discoverySerial, AllowAnyHost: true, Model: "nvmeof-tgt discovery"}, true)
	return t
}

// Options returns the target's limits.
func (t *Target) Options() Options { return t.opts }

// Logger is the target's logger.
func (t *Target) Logger() *slog.Logger { return t.log }

// Stats snapshots the counters.
func (t *Target) Stats() Stats {
	return Stats{
		Queues: t.stats.queues.Load(), Controllers: t.stats.controllers.Load(),
		Errors: t.stats.errors.Load(), Connects: t.stats.connects.Load(),
		ConnectRejects: t.stats.rejects.Load(), KAExpired: t.stats.kaExpired.Load(),
		AuthSucceeded: t.stats.authOK.Load(), AuthFailed: t.stats.authFailed.Load(), AuthTimeouts: t.stats.authTimeouts.Load(),
		HostLimitRejects: t.stats.hostLimit.Load(),
	}
}

// AddSubsystem adds an NVM subsystem.
func (t *Target) AddSubsystem(c SubsystemConfig) (*Subsystem, error) {
	s, err := t.addSubsystem(c)
	if err != nil {
		return nil, err
	}
	t.discoveryChanged()
	return s, nil
}

func (t *Target) addSubsystem(c SubsystemConfig) (*Subsystem, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if err := checkNQNs(c, t.log); err != nil {
		return nil, fmt.Errorf("add subsystem: %w", err)
	}
	if c.CNTLIDMin != 0 || c.CNTLIDMax != 0 {
		if err := CheckCNTLIDRange(max(c.CNTLIDMin, 1), cmp.Or(c.CNTLIDMax, nvme.CNTLIDMax)); err != nil {
			return nil, fmt.Errorf("add subsystem %s: %w", c.NQN, err)
		}
	}
	if _, ok := t.subsystems[c.NQN]; ok {
		return nil, fmt.Errorf("add subsystem %s: already exists", c.NQN)
	}
	s := newSubsystem(t, c, false)
	t.subsystems[c.NQN] = s
	return s, nil
}

// RemoveSubsystem deletes a subsystem while hosts may be connected: its
// controllers are deleted (their hosts disconnected), its namespaces closed
// once their commands finished, and discovery controllers told.
func (t *Target) RemoveSubsystem(nqn string) error {
	t.mu.Lock()
	s := t.subsystems[nqn]
	if s != nil {
		delete(t.subsystems, nqn)
	}
	t.mu.Unlock()
	if s == nil {
		return fmt.Errorf("remove subsystem %s: %w", nqn, ErrNoSubsystem)
	}
	s.mu.Lock()
	s.removed = true
	s.mu.Unlock()
	t.discoveryChanged()
	s.shutdown()
	return s.close()
}

// ErrNoSubsystem means the target has no subsystem with that NQN.
var ErrNoSubsystem = errors.New("no such subsystem")

// ErrNoPort means the target has no such port.
var ErrNoPort = errors.New("no such port")

// Subsystem finds a subsystem (including the discovery subsystem) by NQN.
func (t *Target) Subsystem(nqn string) *Subsystem {
	if nqn == nvme.DiscoveryNQN {
		return t.discovery
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subsystems[nqn]
}

// Subsystems lists the NVM subsystems sorted by NQN.
func (t *Target) Subsystems() []*Subsystem {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Subsystem, 0, len(t.subsystems))
	for _, s := range t.subsystems {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].nqn < out[j].nqn })
	return out
}

// AddPort starts listening on p with tr. The port's ID is assigned here,
// and its limits are read from tr (see Limiter).
func (t *Target) AddPort(tr Transport, p *Port) error {
	lim, err := limitsOf(tr)
	if err != nil {
		return fmt.Errorf("listen %s %s:%s: %w", tr.Name(), p.Address, p.Service, err)
	}
	p.TransportLimits = lim
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if p.ID == 0 {
		p.ID = t.freePortID()
	} else if slices.ContainsFunc(t.ports, func(q *Port) bool { return q.ID == p.ID }) {
		t.mu.Unlock()
		return fmt.Errorf("listen %s %s:%s: port ID %d in use", tr.Name(), p.Address, p.Service, p.ID)
	}
	if p.Transport == "" {
		p.Transport = tr.Name()
	}
	t.mu.Unlock()
	l, err := tr.Listen(t, p)
	if err != nil {
		return fmt.Errorf("listen %s %s:%s: %w", tr.Name(), p.Address, p.Service, err)
	}
	t.mu.Lock()
	t.ports = append(t.ports, p)
	t.listeners = append(t.listeners, l)
	t.mu.Unlock()
	t.discoveryChanged()
	t.log.Info("listening", "transport", p.Transport, "address", p.Address, "port", p.Service)
	return nil
}

// freePortID is the next port ID no port has, never one given out before:
// a host that knew the port by an ID does not meet another under it. t.mu
// is held.
func (t *Target) freePortID() uint16 {
	for {
		t.nextPortID = t.nextPortID%nvme.PortIDMax + 1
		if !slices.ContainsFunc(t.ports, func(p *Port) bool { return p.ID == t.nextPortID }) {
			return t.nextPortID
		}
	}
}

// subsystemList snapshots the NVM subsystems; t.mu is held.
func (t *Target) subsystemList() []*Subsystem {
	out := make([]*Subsystem, 0, len(t.subsystems))
	for _, s := range t.subsystems {
		out = append(out, s)
	}
	return out
}

// RemovePort stops listening on the port with that ID: every queue
// connected through it is disconnected, and discovery controllers told.
func (t *Target) RemovePort(id uint16) error {
	t.mu.Lock()
	i := slices.IndexFunc(t.ports, func(p *Port) bool { return p.ID == id })
	if i < 0 {
		t.mu.Unlock()
		return fmt.Errorf("remove port %d: %w", id, ErrNoPort)
	}
	p, l := t.ports[i], t.listeners[i]
	t.ports = slices.Delete(t.ports, i, i+1)
	t.listeners = slices.Delete(t.listeners, i, i+1)
	t.mu.Unlock()
	t.discoveryChanged()
	t.log.Info("port closing", "transport", p.Transport, "address", p.Address, "port", p.Service)
	return l.Close()
}

// PortState is the state of the port with that ID; ok is false when there
// is no such port.
func (t *Target) PortState(id uint16) (st PortState, ok bool) {
	t.mu.Lock()
	i := slices.IndexFunc(t.ports, func(p *Port) bool { return p.ID == id })
	var l Listener
	if i >= 0 {
		l = t.listeners[i]
	}
	t.mu.Unlock()
	if i < 0 {
		return PortState{}, false
	}
	if r, ok := l.(StateReporter); ok {
		return r.State(), true
	}
	return PortState{}, true
}

// Ports lists the ports in order.
func (t *Target) Ports() []*Port {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Port(nil), t.ports...)
}

func (t *Target) discoveryGeneration() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.genctr
}

// Close stops every listener (which disconnects every host), then closes
// every namespace's backend after its in-flight I/O has finished.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ls := t.listeners
	t.listeners = nil
	subs := make([]*Subsystem, 0, len(t.subsystems))
	for _, s := range t.subsystems {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	var errs []error
	for _, l := range ls {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range append(subs, t.discovery) {
		s.shutdown()
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
