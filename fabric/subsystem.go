package fabric

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// SubsystemConfig describes an NVM subsystem.
type SubsystemConfig struct {
	NQN          string
	Serial       string // at most 20 ASCII characters
	Model        string // at most 40 ASCII characters
	AllowAnyHost bool
	Hosts        []string
	// HostAuth holds the DH-HMAC-CHAP secrets of hosts that must
	// authenticate, by host NQN (the discovery subsystem takes them too).
	HostAuth map[string]HostAuth
	// Auth is the hashes and DH groups allowed; zero: DefaultAuthPolicy.
	Auth AuthPolicy
	// Ports are the IDs of the ports that serve the subsystem; empty:
	// every port.
	Ports []uint16
	// CNTLIDMin and CNTLIDMax bound the controller IDs it hands out
	// (0: 1 and nvme.CNTLIDMax). Two targets serving one subsystem give
	// each a range of its own, so that no two controllers share an ID.
	CNTLIDMin, CNTLIDMax nvme.CNTLID
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
	keys        map[string]HostAuth
	policy      AuthPolicy
	namespaces  map[nvme.NSID]*Namespace
	nsids       []nvme.NSID                              // sorted
	nsTable     atomic.Pointer[map[nvme.NSID]*Namespace] // copy-on-write, for the I/O path
	controllers map[nvme.CNTLID]*Controller
	nextCNTLID  nvme.CNTLID
	// cntlidMin and cntlidMax bound the IDs allocCNTLID hands out.
	cntlidMin, cntlidMax nvme.CNTLID
	// ports serve the subsystem, by ID; nil: every port.
	ports map[uint16]bool
	// removed is set by Target.RemoveSubsystem: no namespace or
	// controller is added after it.
	removed bool
	maxNSID nvme.NSID
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
	s.cntlidMin, s.cntlidMax = c.CNTLIDMin, c.CNTLIDMax
	if s.cntlidMin == 0 {
		s.cntlidMin = 1
	}
	if s.cntlidMax == 0 {
		s.cntlidMax = nvme.CNTLIDMax
	}
	s.nextCNTLID = s.cntlidMin
	s.ports = portSet(c.Ports)
	if s.serial == "" {
		s.serial = DefaultSerial(c.NQN)
	}
	for _, h := range c.Hosts {
		s.hosts[h] = true
	}
	s.keys = maps.Clone(c.HostAuth)
	s.policy = c.Auth
	return s
}

// hostAuth is the secrets hostnqn authenticates with here, if any.
func (s *Subsystem) hostAuth(hostnqn string) (HostAuth, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.keys[hostnqn]
	return a, ok
}

// authPolicy is the hashes and groups a transaction may use.
func (s *Subsystem) authPolicy() AuthPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.policy
	if len(p.Hashes) == 0 {
		p.Hashes = DefaultAuthPolicy.Hashes
	}
	if len(p.Groups) == 0 {
		p.Groups = DefaultAuthPolicy.Groups
	}
	return p
}

// SetHostAuth sets (or, with a zero HostAuth, removes) the secrets of a
// host: a key rotation. Queues authenticated with the old secrets stay;
// the next transaction (a new queue, a reconnect, a re-authentication)
// uses the new ones.
func (s *Subsystem) SetHostAuth(hostnqn string, a HostAuth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Key.IsZero() && a.CtrlKey.IsZero() {
		delete(s.keys, hostnqn)
		return
	}
	if s.keys == nil {
		s.keys = map[string]HostAuth{}
	}
	s.keys[hostnqn] = a
}

// SetAuthPolicy sets the hashes and groups new transactions may use.
func (s *Subsystem) SetAuthPolicy(p AuthPolicy) {
	s.mu.Lock()
	s.policy = p
	s.mu.Unlock()
}

// DefaultSerial derives a serial number from a subsystem NQN
// (limits.Serial): stable across restarts, distinct between subsystems.
func DefaultSerial(nqn string) string { return limits.Serial(nqn) }

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
	// Dynamic controller model: 1..FFEFh (NVMe base §5.15.2.1), within the
	// subsystem's range.
	for i := 0; i <= int(s.cntlidMax-s.cntlidMin); i++ {
		id := s.nextCNTLID
		s.nextCNTLID++
		if s.nextCNTLID > s.cntlidMax || s.nextCNTLID < s.cntlidMin {
			s.nextCNTLID = s.cntlidMin
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
		errs = append(errs, ns.close())
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

// AllowAnyHost reports whether any host may connect.
func (s *Subsystem) AllowAnyHost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allowAny
}

// Hosts lists the hosts allowed to connect, sorted.
func (s *Subsystem) Hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.hosts))
	for h := range s.hosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// AddHost allows hostnqn to connect.
func (s *Subsystem) AddHost(hostnqn string) {
	s.mu.Lock()
	s.hosts[hostnqn] = true
	s.mu.Unlock()
	s.t.discoveryChanged() // the host's discovery log now lists s
}

// RemoveHost takes hostnqn off the allowed hosts and deletes its
// controllers, as SPDK's nvmf_subsystem_remove_host does: a host the
// operator removed keeps no access through a connection it already had.
// It returns how many controllers were deleted.
func (s *Subsystem) RemoveHost(hostnqn string) int {
	s.mu.Lock()
	delete(s.hosts, hostnqn)
	s.mu.Unlock()
	s.t.discoveryChanged()
	return s.disconnectUnless(func(c *Controller) bool { return c.hostNQN != hostnqn })
}

// CheckCNTLIDRange reports whether min..max is a valid controller ID range.
func CheckCNTLIDRange(min, max nvme.CNTLID) error {
	if min < 1 || max > nvme.CNTLIDMax || min > max {
		return fmt.Errorf("controller ID range %d..%d is not within 1..%d", min, max, nvme.CNTLIDMax)
	}
	return nil
}

func portSet(ids []uint16) map[uint16]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[uint16]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// servedOn reports whether p serves the subsystem. The discovery subsystem
// is on every port.
func (s *Subsystem) servedOn(p *Port) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ports == nil || s.ports[p.ID]
}

// Ports lists the IDs of the ports that serve the subsystem, sorted; nil:
// every port.
func (s *Subsystem) Ports() []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ports == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.ports))
}

// SetCNTLIDRange changes the controller IDs new controllers get; those
// connected keep theirs.
func (s *Subsystem) SetCNTLIDRange(min, max nvme.CNTLID) error {
	if err := CheckCNTLIDRange(min, max); err != nil {
		return err
	}
	s.mu.Lock()
	s.cntlidMin, s.cntlidMax, s.nextCNTLID = min, max, min
	s.mu.Unlock()
	return nil
}

// SetPorts changes the ports that serve the subsystem (empty: every port).
// The controllers connected through a port that no longer serves it are
// deleted, and discovery controllers told.
func (s *Subsystem) SetPorts(ids []uint16) int {
	s.mu.Lock()
	s.ports = portSet(ids)
	s.mu.Unlock()
	s.t.discoveryChanged()
	return s.disconnectUnless(func(c *Controller) bool { return s.servedOn(c.port) })
}

// SetAllowAnyHost opens the subsystem to every host, or restricts it to its
// host list, deleting the controllers of hosts not on it.
func (s *Subsystem) SetAllowAnyHost(any bool) int {
	s.mu.Lock()
	changed := s.allowAny != any
	s.allowAny = any
	s.mu.Unlock()
	if !changed {
		return 0
	}
	s.t.discoveryChanged()
	if any {
		return 0
	}
	return s.disconnectUnless(func(c *Controller) bool { return s.hostAllowed(c.hostNQN) })
}

// disconnectUnless deletes the controllers keep refuses.
func (s *Subsystem) disconnectUnless(keep func(*Controller) bool) int {
	n := 0
	for _, c := range s.controllerList() {
		if !keep(c) {
			c.delete("host removed from the subsystem")
			n++
		}
	}
	return n
}
