package fabric

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Asymmetric Namespace Access (base 2.0 §8.1.3), as nvmet models it: each
// port reports a state per ANA group, and each namespace is in one group.
// A host that reaches a namespace through a port where its group is
// inaccessible, lost or in transition gets a Path Related status and
// retries on another path; the admin queue keeps working.

// anaTable is one port's state of every group, copied on write so that the
// I/O path reads it without a lock. A zero state is optimized: a group the
// configuration leaves out.
type anaTable struct {
	state [limits.ANAGroups + 1]nvme.ANAState
	// changed is the port's change count when each group's state last
	// changed; count the port's change count (the log header's).
	changed [limits.ANAGroups + 1]uint64
	count   uint64
}

var defaultANA anaTable

func (p *Port) anaTable() *anaTable {
	if t := p.ana.Load(); t != nil {
		return t
	}
	return &defaultANA
}

// ANAState is the state group has through p.
func (p *Port) ANAState(group uint32) nvme.ANAState {
	if group == 0 || group > limits.ANAGroups {
		return nvme.ANAInaccessible
	}
	if s := p.anaTable().state[group]; s != 0 {
		return s
	}
	return nvme.ANAOptimized
}

// ANAStates lists the groups whose state through p is not optimized.
func (p *Port) ANAStates() map[uint32]nvme.ANAState {
	t := p.anaTable()
	out := map[uint32]nvme.ANAState{}
	for g := uint32(1); g <= limits.ANAGroups; g++ {
		if s := t.state[g]; s != 0 && s != nvme.ANAOptimized {
			out[g] = s
		}
	}
	return out
}

// CheckANAGroup reports whether g is a valid ANA group ID.
func CheckANAGroup(g uint32) error {
	if g < 1 || g > limits.ANAGroups {
		return fmt.Errorf("ANA group %d is not in 1..%d", g, limits.ANAGroups)
	}
	return nil
}

// SetANAStates sets the state of every group through the port with that ID:
// those in states, the others optimized. Controllers connected through the
// port whose subsystem has a namespace in a group that changed get an ANA
// Change notice, once until they read the log page. Hosts stay connected.
func (t *Target) SetANAStates(portID uint16, states map[uint32]nvme.ANAState) error {
	for g, s := range states {
		if err := CheckANAGroup(g); err != nil {
			return err
		}
		if !s.Valid() {
			return fmt.Errorf("ANA group %d: %v", g, s)
		}
	}
	t.mu.Lock()
	i := slices.IndexFunc(t.ports, func(p *Port) bool { return p.ID == portID })
	if i < 0 {
		t.mu.Unlock()
		return fmt.Errorf("port %d: %w", portID, ErrNoPort)
	}
	p := t.ports[i]
	// t.mu serializes writers of every port's table.
	old := p.anaTable()
	next := *old
	var changed []uint32
	for g := uint32(1); g <= limits.ANAGroups; g++ {
		s := states[g]
		if s == nvme.ANAOptimized {
			s = 0
		}
		if next.state[g] != s {
			changed = append(changed, g)
			next.state[g] = s
		}
	}
	if len(changed) == 0 {
		t.mu.Unlock()
		return nil
	}
	next.count++
	for _, g := range changed {
		next.changed[g] = next.count
	}
	p.ana.Store(&next)
	subs := t.subsystemList()
	t.mu.Unlock()
	t.log.Info("ANA states changed", "port", portID, "groups", changed, "states", maps.Collect(maps.All(states)))
	for _, s := range subs {
		s.anaChanged(func(c *Controller) bool { return c.port == p }, changed)
	}
	return nil
}

// anaChanged sends an ANA Change notice to the controllers of s that match
// and see a namespace in one of groups.
func (s *Subsystem) anaChanged(match func(*Controller) bool, groups []uint32) {
	var in []*Namespace
	for _, ns := range s.Namespaces() {
		if slices.Contains(groups, ns.ANAGroup()) {
			in = append(in, ns)
		}
	}
	if len(in) == 0 {
		return
	}
	for _, c := range s.controllerList() {
		if match(c) && slices.ContainsFunc(in, func(ns *Namespace) bool { return ns.visibleTo(c.hostNQN) }) {
			c.anaChanged()
		}
	}
}

func (c *Controller) anaChanged() {
	c.events.notice(aenANA, nvme.AECANAChange,
		nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoANAChange, nvme.LogANA), nil)
}

// ANAGroup is the namespace's ANA group.
func (ns *Namespace) ANAGroup() uint32 { return ns.anaGroup.Load() }

// SetNamespaceANAGroup moves a namespace to another ANA group; every
// controller of the subsystem is told.
func (s *Subsystem) SetNamespaceANAGroup(nsid nvme.NSID, group uint32) error {
	if err := CheckANAGroup(group); err != nil {
		return err
	}
	ns := s.namespace(nsid)
	if ns == nil {
		return fmt.Errorf("namespace %d: %w", nsid, ErrNoNamespace)
	}
	if old := ns.anaGroup.Swap(group); old != group {
		// Only the controllers that see it: to the others, neither
		// group changed.
		s.anaChanged(func(c *Controller) bool { return ns.visibleTo(c.hostNQN) }, []uint32{old, group})
	}
	return nil
}

// anaPage is the ANA log page as a controller sees it at one moment.
type anaPage struct {
	count      uint64
	descs      []nvme.ANAGroupDesc
	groupsOnly bool
	// size is the page's length: what Identify implies, which the
	// descriptors do not fill.
	size uint64
}

// anaLog is the ANA log page as c sees it: one descriptor per group that
// has namespaces, in group order, each with its NSIDs ascending (nvmet
// lists them so too). Its length is what Identify implies (header,
// NANAGRPID descriptors, MNAN NSIDs): nvme-cli reads it in pieces up to
// there, the Linux host in one read of that length (nvme_read_ana_log).
// With MNAN the largest NSID that is up to 16 GiB of zeros after the
// descriptors, so the page is never built: put writes a window of it, and
// what a read costs is its descriptors and its length.
func (c *Controller) anaLog(groupsOnly bool) anaPage {
	byGroup := map[uint32][]nvme.NSID{}
	for _, ns := range c.namespaces() { // NSID order
		g := ns.ANAGroup()
		byGroup[g] = append(byGroup[g], ns.nsid)
	}
	t := c.port.anaTable()
	p := anaPage{count: t.count, groupsOnly: groupsOnly}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		p.descs = append(p.descs, nvme.ANAGroupDesc{GroupID: g, ChangeCount: t.changed[g], State: c.port.ANAState(g), NSIDs: byGroup[g]})
	}
	p.size = max(uint64(nvme.ANALogSize(p.descs, groupsOnly)), nvme.ANALogMaxSize(limits.ANAGroups, uint32(c.s.nn()), groupsOnly))
	return p
}

// put writes the page's bytes at [off, off+len(b)) into b.
func (p *anaPage) put(b []byte, off uint64) {
	nvme.ANALogWindow(b, off, p.count, p.descs, p.groupsOnly)
}

// ioPathStatus is what an I/O command to ns through c's port gets from ANA:
// success, or the Path Related status of an inaccessible group; an
// inaccessible one too while the namespace's shared state is unknown
// (SetSharedStateUnknown). Lock-free.
func (c *Controller) ioPathStatus(ns *Namespace) nvme.Status {
	if ns.sharedUnknown.Load() {
		return nvme.StatusANAInaccessible
	}
	if t := c.port.ana.Load(); t == nil {
		return nvme.StatusSuccess // every group optimized
	}
	return c.port.ANAState(ns.ANAGroup()).IOStatus()
}
