package fabric

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Capacity is the namespace's size in bytes and its logical block size.
func (ns *Namespace) Capacity() (bytes uint64, blockSize uint32) {
	i := ns.Info()
	return uint64(i.Size), i.BlockSize
}

// ControllerState is where a controller is in its life, from CC and CSTS
// (NVMe base §3.1.5, §3.1.6, §7.6).
type ControllerState uint8

const (
	// CtrlDisabled: connected, CC.EN not set (yet, or after a reset).
	CtrlDisabled ControllerState = iota
	// CtrlReady: CSTS.RDY, taking I/O.
	CtrlReady
	// CtrlShuttingDown: the host set CC.SHN; the flush runs.
	CtrlShuttingDown
	// CtrlShutDown: shutdown processing complete.
	CtrlShutDown
	// CtrlFatal: CSTS.CFS, an invalid CC was written.
	CtrlFatal
	// NumControllerStates is the number of states.
	NumControllerStates
)

var ctrlStateNames = [NumControllerStates]string{"disabled", "ready", "shutting_down", "shut_down", "fatal"}

// String is the state's metric label: lower case, no spaces.
func (s ControllerState) String() string {
	if s < NumControllerStates {
		return ctrlStateNames[s]
	}
	return "unknown"
}

// State is the controller's current state.
func (c *Controller) State() ControllerState {
	c.mu.Lock()
	csts := nvme.CSTS(c.csts)
	c.mu.Unlock()
	switch {
	case csts.Fatal():
		return CtrlFatal
	case csts&nvme.CSTSShstMask == nvme.CSTSShstComplete:
		return CtrlShutDown
	case csts&nvme.CSTSShstMask == nvme.CSTSShstOccurring:
		return CtrlShuttingDown
	case csts.Ready():
		return CtrlReady
	}
	return CtrlDisabled
}

// ControllerStates counts the subsystem's live controllers by state.
func (s *Subsystem) ControllerStates() [NumControllerStates]int {
	// Copy the list first: a controller's lock is never taken under the
	// subsystem's.
	s.mu.Lock()
	cs := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	var n [NumControllerStates]int
	for _, c := range cs {
		n[c.State()]++
	}
	return n
}
