package fabric

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// SubsystemConfig describes an NVM subsystem.
type SubsystemConfig struct {
	NQN          string
	Serial       string // at most 20 ASCII characters
	Model        string // at most 40 ASCII characters
	AllowAnyHost bool
	Hosts        []string
}

// Subsystem is an NVM subsystem (or the discovery subsystem): namespaces
// and the controllers hosts created on it.
type Subsystem struct {
	t         *Target
	nqn       string
	serial    string
	model     string
	discovery bool

	mu          sync.Mutex
	allowAny    bool
	hosts       map[string]bool
	namespaces  map[nvme.NSID]*Namespace
	nsids       []nvme.NSID                              // sorted
	nsTable     atomic.Pointer[map[nvme.NSID]*Namespace] // copy-on-write, for the I/O path
	controllers map[nvme.CNTLID]*Controller
	nextCNTLID  nvme.CNTLID
	maxNSID     nvme.NSID
}

func newSubsystem(t *Target, c SubsystemConfig, discovery bool) *Subsystem {
	s := &Subsystem{
		t: t, nqn: c.NQN, serial: c.Serial, model: c.Model, discovery: discovery,
		allowAny: c.AllowAnyHost, hosts: map[string]bool{},
		namespaces: map[nvme.NSID]*Namespace{}, controllers: map[nvme.CNTLID]*Controller{}, nextCNTLID: 1,
	}
	if s.model == "" {
		s.model = DefaultModel
	}
	if s.serial == "" {
		s.serial = DefaultSerial(c.NQN)
	}
	for _, h := range c.Hosts {
		s.hosts[h] = true
	}
	return s
}

// DefaultSerial derives a serial number from a subsystem NQN: the first 20
// hex digits of its SHA-256, which fill the 20-byte SN field of Identify
// Controller and are stable across restarts and distinct between
// subsystems.
func DefaultSerial(nqn string) string {
	sum := sha256.Sum256([]byte(nqn))
	return hex.EncodeToString(sum[:])[:20]
}

// discoverySerial is the discovery controller's SN. Hosts have always seen
// this value (FNV-1a of the discovery NQN), so it stays fixed rather than
// switching to DefaultSerial.
const discoverySerial = "eecef49c0e3d1e6d"

// NQN is the subsystem's NQN.
func (s *Subsystem) NQN() string { return s.nqn }

// hostAllowed reports whether hostnqn may create a controller here.
func (s *Subsystem) hostAllowed(hostnqn string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allowAny || s.hosts[hostnqn]
}

// NamespaceConfig describes one namespace.
type NamespaceConfig struct {
	NSID     uint32
	Device   blockdev.Device
	UUID     [16]byte
	NGUID    [16]byte
	ReadOnly bool
	// Workers is how many goroutines run the backend's blocking I/O; 0 runs
	// it inline on the transport's goroutine (the memory backend).
	Workers int
}

// Namespace is one namespace of a subsystem.
type Namespace struct {
	nsid       nvme.NSID
	dev        blockdev.Device
	uuid       [16]byte
	nguid      [16]byte
	readOnly   bool
	blockShift uint
	nblocks    uint64
	work       chan *Request
	queuer     blockdev.Queuer // the backend, when it can queue I/O on an IOContext
	wg         sync.WaitGroup
	workers    int
	lastErrLog atomic.Int64 // unix seconds of the last logged backend error

	stats nsCounters
}

// NSID is the namespace ID.
func (ns *Namespace) NSID() nvme.NSID { return ns.nsid }

// Stats is a snapshot of the namespace's counters.
func (ns *Namespace) Stats() NamespaceStats { return ns.stats.snapshot() }

// AddNamespace attaches a backend as a namespace.
func (s *Subsystem) AddNamespace(c NamespaceConfig) (*Namespace, error) {
	if s.discovery {
		return nil, errors.New("add namespace: the discovery subsystem has none")
	}
	nsid := nvme.NSID(c.NSID)
	if !nsid.Valid() {
		return nil, fmt.Errorf("add namespace: invalid NSID %d", c.NSID)
	}
	bs := c.Device.BlockSize()
	if bs < 512 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("add namespace %d: block size %d is not a power of two >= 512", c.NSID, bs)
	}
	ns := &Namespace{
		nsid: nsid, dev: c.Device, uuid: c.UUID, nguid: c.NGUID, readOnly: c.ReadOnly,
		blockShift: uint(bits.TrailingZeros32(bs)),
	}
	ns.queuer, _ = c.Device.(blockdev.Queuer)
	ns.nblocks = uint64(c.Device.Size()) >> ns.blockShift
	if ns.nblocks == 0 {
		return nil, fmt.Errorf("add namespace %d: device is smaller than one block", c.NSID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.namespaces[nsid]; ok {
		return nil, fmt.Errorf("add namespace %d: NSID in use", c.NSID)
	}
	if c.Workers > 0 {
		// Deep enough for every request of every queue: submit never blocks.
		ns.work = make(chan *Request, 1<<16)
		ns.workers = c.Workers
		for i := 0; i < c.Workers; i++ {
			ns.wg.Add(1)
			go ns.worker()
		}
	}
	s.namespaces[nsid] = ns
	table := make(map[nvme.NSID]*Namespace, len(s.namespaces))
	for k, v := range s.namespaces {
		table[k] = v
	}
	s.nsTable.Store(&table)
	s.nsids = append(s.nsids, nsid)
	sort.Slice(s.nsids, func(i, j int) bool { return s.nsids[i] < s.nsids[j] })
	if nsid > s.maxNSID {
		s.maxNSID = nsid
	}
	return ns, nil
}

// namespace looks up an active namespace.
func (s *Subsystem) namespace(nsid nvme.NSID) *Namespace {
	s.mu.Lock()
	ns := s.namespaces[nsid]
	s.mu.Unlock()
	return ns
}

// lookup finds an active namespace without locking.
func (s *Subsystem) lookup(nsid nvme.NSID) *Namespace {
	if t := s.nsTable.Load(); t != nil {
		return (*t)[nsid]
	}
	return nil
}

// activeNSIDs returns the sorted active NSIDs.
func (s *Subsystem) activeNSIDs() []nvme.NSID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]nvme.NSID(nil), s.nsids...)
}

// nn is Identify Controller NN: the largest NSID a host may use.
func (s *Subsystem) nn() nvme.NSID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxNSID > 1024 {
		return s.maxNSID
	}
	return 1024
}

func (s *Subsystem) allocCNTLID() (nvme.CNTLID, bool) {
	// Dynamic controller model: 1..FFEFh (NVMe base §5.15.2.1).
	for i := 0; i < int(nvme.CNTLIDMax); i++ {
		id := s.nextCNTLID
		s.nextCNTLID++
		if s.nextCNTLID > nvme.CNTLIDMax {
			s.nextCNTLID = 1
		}
		if _, used := s.controllers[id]; !used {
			return id, true
		}
	}
	return 0, false
}

// shutdown deletes every controller (disconnecting its queues).
func (s *Subsystem) shutdown() {
	s.mu.Lock()
	cs := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.delete("target shutdown")
	}
}

// close stops the namespace workers and closes the backends.
func (s *Subsystem) close() error {
	s.mu.Lock()
	nss := make([]*Namespace, 0, len(s.namespaces))
	for _, ns := range s.namespaces {
		nss = append(nss, ns)
	}
	s.mu.Unlock()
	var errs []error
	for _, ns := range nss {
		// A nil request stops a worker; the channel is never closed, so a
		// late submit cannot panic.
		for i := 0; i < ns.workers; i++ {
			ns.work <- nil
		}
		ns.wg.Wait()
		if err := ns.dev.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush namespace %d: %w", ns.nsid, err))
		}
		if err := ns.dev.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close namespace %d: %w", ns.nsid, err))
		}
	}
	return errors.Join(errs...)
}

// Namespaces lists the active namespaces in NSID order.
func (s *Subsystem) Namespaces() []*Namespace {
	out := []*Namespace{}
	for _, id := range s.activeNSIDs() {
		if ns := s.namespace(id); ns != nil {
			out = append(out, ns)
		}
	}
	return out
}
