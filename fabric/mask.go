package fabric

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Namespace masking, as the base specification's attached controllers
// (2.0 §3.2.1.5) and SPDK's per-namespace hosts have it: a namespace with
// a mask is attached to the controllers of the hosts it names only. To any
// other controller it is an inactive NSID, exactly as a namespace that is
// not there: absent from the Active Namespace ID list, zeroes for Identify
// Namespace, Invalid Namespace or Format for its Namespace Identification
// Descriptors, its features and every I/O command. A mask only narrows what
// the subsystem's own host list allows: it lets no host connect.

// hostMask is a namespace's set of host NQNs.
type hostMask map[string]struct{}

func newHostMask(hosts []string) *hostMask {
	if len(hosts) == 0 {
		return nil
	}
	m := make(hostMask, len(hosts))
	for _, h := range hosts {
		m[h] = struct{}{}
	}
	return &m
}

// visibleTo reports whether the controller of hostnqn sees ns.
func (ns *Namespace) visibleTo(hostnqn string) bool {
	m := ns.hosts.Load()
	if m == nil {
		return true
	}
	_, ok := (*m)[hostnqn]
	return ok
}

// Hosts lists the hosts the namespace is masked to, sorted; nil: every host.
func (ns *Namespace) Hosts() []string {
	m := ns.hosts.Load()
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(*m))
}

// CheckHosts refuses a mask fabric cannot apply.
func CheckHosts(hosts []string) error {
	if len(hosts) > limits.NamespaceHosts {
		return fmt.Errorf("%d hosts, more than %d", len(hosts), limits.NamespaceHosts)
	}
	for _, h := range hosts {
		if err := nvme.CheckNQN(h); err != nil {
			return fmt.Errorf("host %q: %w", h, err)
		}
	}
	return nil
}

// SetNamespaceHosts masks a namespace to hosts (none: every host), live.
// Each controller whose view changed, and only those, gets a Namespace
// Attribute Changed notice with the NSID in its Changed Namespace List:
// the Linux host then adds or removes the disk without reconnecting.
// Commands already executing complete; new ones from a host masked out
// fail with Invalid Namespace or Format.
func (s *Subsystem) SetNamespaceHosts(nsid nvme.NSID, hosts []string) error {
	if err := CheckHosts(hosts); err != nil {
		return fmt.Errorf("namespace %d: %w", nsid, err)
	}
	ns := s.namespace(nsid)
	if ns == nil {
		return fmt.Errorf("namespace %d: %w", nsid, ErrNoNamespace)
	}
	// s.mu orders writers of the mask with the controller list read.
	s.mu.Lock()
	cs := make([]*Controller, 0, len(s.controllers))
	before := make([]bool, 0, len(s.controllers))
	for _, c := range s.controllers {
		cs = append(cs, c)
		before = append(before, ns.visibleTo(c.hostNQN))
	}
	ns.hosts.Store(newHostMask(hosts))
	s.mu.Unlock()
	for i, c := range cs {
		if ns.visibleTo(c.hostNQN) != before[i] {
			c.nsChanged(nsid)
		}
	}
	return nil
}

// lookup finds a namespace the controller sees, without locking: the I/O
// path's.
func (c *Controller) lookup(nsid nvme.NSID) *Namespace {
	ns := c.s.lookup(nsid)
	if ns == nil || !ns.visibleTo(c.hostNQN) {
		return nil
	}
	return ns
}

// namespace looks up an active namespace the controller sees.
func (c *Controller) namespace(nsid nvme.NSID) *Namespace {
	ns := c.s.namespace(nsid)
	if ns == nil || !ns.visibleTo(c.hostNQN) {
		return nil
	}
	return ns
}

// namespaces lists the namespaces the controller sees, in NSID order.
func (c *Controller) namespaces() []*Namespace {
	all := c.s.Namespaces()
	return slices.DeleteFunc(all, func(ns *Namespace) bool { return !ns.visibleTo(c.hostNQN) })
}

// nsChangedFor tells the controllers that see ns that it changed.
func (s *Subsystem) nsChangedFor(ns *Namespace) {
	for _, c := range s.controllerList() {
		if ns.visibleTo(c.hostNQN) {
			c.nsChanged(ns.nsid)
		}
	}
}
