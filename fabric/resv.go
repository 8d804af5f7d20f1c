package fabric

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Persistent reservations (base 2.0 §8.19): the rules, as pure functions of
// a namespace's state. resvcmd.go runs the commands and persists the state.
//
// Registrants are hosts, known by their 128-bit host identifier: the
// controllers of one host share its registration (base 2.0 §8.19.1). The
// identifier is the one Connect asserts, tied to no host NQN (as nvmet and
// SPDK key registrations by it alone); limits.ResvRegistrants bounds how
// many one namespace keeps.

// HostID is a host identifier (Connect's HOSTID).
type HostID [16]byte

// resvReg is one registrant.
type resvReg struct {
	Host HostID
	Key  uint64
}

// resvState is a namespace's reservation state. A state once published is
// never changed (changes copy it), so the I/O path reads it through an
// atomic pointer with no lock.
type resvState struct {
	Gen    uint32
	Type   nvme.ResvType // 0: no reservation
	Holder HostID        // types 1-4; every registrant holds types 5 and 6
	Regs   []resvReg     // in the order they registered
	PTPL   bool          // Persist Through Power Loss
	// seq is the shared state's change count this state is (resvshare.go);
	// 0 for a target's own. Not persisted.
	seq uint64
	// byHost indexes Regs by host, so that the check every I/O command
	// makes (allows) costs the same with a thousand registrants as with
	// two. Made by sealed, when more than resvScanMax; nil: reg scans.
	byHost map[HostID]int
}

// resvScanMax is the most registrants reg scans rather than looks up: a
// scan of a few beats hashing a 16-byte key (BenchmarkResvCheck).
const resvScanMax = 8

func (s *resvState) clone() *resvState {
	c := *s
	c.Regs = slices.Clone(s.Regs)
	c.byHost = nil // Regs may change: the copy scans until it is sealed
	return &c
}

// sealed indexes s, which is about to be published and never changes
// after.
func (s *resvState) sealed() *resvState {
	s.byHost = nil
	if len(s.Regs) > resvScanMax {
		s.byHost = make(map[HostID]int, len(s.Regs))
		for i, r := range s.Regs {
			s.byHost[r.Host] = i
		}
	}
	return s
}

// reg is host's registration, or nil.
func (s *resvState) reg(host HostID) *resvReg {
	if s.byHost != nil {
		if i, ok := s.byHost[host]; ok {
			return &s.Regs[i]
		}
		return nil
	}
	for i := range s.Regs {
		if s.Regs[i].Host == host {
			return &s.Regs[i]
		}
	}
	return nil
}

// checkRegs checks registrants read from outside (a state file, the shared
// state): no host twice, no more than limits.ResvRegistrants.
func checkRegs(regs []resvReg) error {
	if len(regs) > limits.ResvRegistrants {
		return fmt.Errorf("%d registrants, more than the %d a namespace may have", len(regs), limits.ResvRegistrants)
	}
	seen := make(map[HostID]bool, len(regs))
	for _, r := range regs {
		if seen[r.Host] {
			return fmt.Errorf("host %s registered twice", r.Host)
		}
		seen[r.Host] = true
	}
	return nil
}

// holderKey is the key of the holder of a type 1-4 reservation.
func (s *resvState) holderKey() uint64 {
	if r := s.reg(s.Holder); r != nil {
		return r.Key
	}
	return 0
}

// holds reports whether host holds the reservation.
func (s *resvState) holds(host HostID) bool {
	switch {
	case s.Type == 0:
		return false
	case s.Type.AllRegistrants():
		return s.reg(host) != nil
	}
	return s.Holder == host
}

// readOps are the commands of the read group; every other I/O command
// (Flush, Write, Write Zeroes, Dataset Management, ...) is in the write
// group (base 2.0 §8.19, the command behaviour table).
func readOp(op uint8) bool {
	return op == nvme.OpRead || op == nvme.OpCompare || op == nvme.OpVerify
}

// allows reports whether host may run an I/O command of opcode op under the
// reservation (base 2.0 Table "Command Behavior in the Presence of a
// Reservation"):
//
//	type         holder  registrant  other
//	1 WE          r w     r -         r -
//	2 EA          r w     - -         - -
//	3 WE-RO       r w     r w         r -
//	4 EA-RO       r w     r w         - -
//	5 WE-AR       r w     r w         r -
//	6 EA-AR       r w     r w         - -
func (s *resvState) allows(host HostID, op uint8) bool {
	if s == nil || s.Type == 0 || s.holds(host) {
		return true
	}
	if s.Type.RegistrantsOnly() && s.reg(host) != nil {
		return true
	}
	// Not let in: readers pass only the write-exclusive types.
	return readOp(op) && !s.Type.ExclusiveAccess()
}

// resvNotice is a notification for a host: a Reservation Notification log
// entry type.
type resvNotice struct {
	host HostID
	kind uint8 // nvme.ResvNotify*
}

// resvResult is what a command did: the new state (nil: unchanged), the
// status, the hosts to notify and those preempted (whose commands a
// Preempt and Abort waits for).
type resvResult struct {
	next      *resvState
	status    nvme.Status
	notify    []resvNotice
	preempted []HostID
	abort     bool // a Preempt and Abort: the preempted hosts' commands are waited for
}

func conflict() resvResult { return resvResult{status: nvme.StatusReservationConflict.WithDNR()} }

func invalid() resvResult { return resvResult{status: nvme.StatusInvalidField.WithDNR()} }

// full refuses a new registrant past limits.ResvRegistrants. The spec has
// no status for it (SCSI has INSUFFICIENT REGISTRATION RESOURCES; NVMe's
// Capacity Exceeded and Namespace Insufficient Capacity are about a
// namespace's blocks): Internal Error, as SPDK answers past its list's
// 16 and nvmet when it cannot allocate a registrant. DNR, unlike theirs:
// the command fails the same way until another host unregisters.
func full() resvResult { return resvResult{status: nvme.StatusInternalError.WithDNR()} }

// others are the registrants other than host, to notify of kind.
func (s *resvState) others(host HostID, kind uint8) []resvNotice {
	var out []resvNotice
	for _, r := range s.Regs {
		if r.Host != host {
			out = append(out, resvNotice{r.Host, kind})
		}
	}
	return out
}

// register runs Reservation Register (RREGA action) for host.
func (s *resvState) register(host HostID, action uint8, iekey bool, crkey, nrkey uint64) resvResult {
	me := s.reg(host)
	n := s.clone()
	var res resvResult
	switch action {
	case nvme.ResvRegister:
		switch {
		case me == nil && len(s.Regs) >= limits.ResvRegistrants:
			return full()
		case me == nil:
			n.Regs = append(n.Regs, resvReg{host, nrkey})
		case me.Key != nrkey:
			return conflict()
		}
	case nvme.ResvUnregister:
		if me == nil || (!iekey && me.Key != crkey) {
			return conflict()
		}
		n.Regs = slices.DeleteFunc(n.Regs, func(r resvReg) bool { return r.Host == host })
		switch {
		case n.Type == 0:
		case n.Type.AllRegistrants():
			// The reservation lasts while a registrant is left.
			if len(n.Regs) == 0 {
				n.Type = 0
			}
		case n.Holder == host:
			if n.Type.RegistrantsOnly() {
				res.notify = n.others(host, nvme.ResvNotifyReleased)
			}
			n.Type, n.Holder = 0, HostID{}
		}
	case nvme.ResvReplace:
		switch {
		case me == nil && !iekey:
			return conflict()
		case me == nil && len(s.Regs) >= limits.ResvRegistrants:
			return full()
		case me == nil:
			// IEKEY: a host may set its key whatever its registration.
			n.Regs = append(n.Regs, resvReg{host, nrkey})
		case !iekey && me.Key != crkey:
			return conflict()
		default:
			n.reg(host).Key = nrkey
		}
	default:
		return invalid()
	}
	n.Gen++
	res.next = n
	return res
}

// acquire runs Reservation Acquire (RACQA action) of type t for host.
func (s *resvState) acquire(host HostID, action uint8, iekey bool, t nvme.ResvType, crkey, prkey uint64) resvResult {
	if iekey || !t.Valid() || action > nvme.ResvPreemptAndAbort {
		return invalid()
	}
	me := s.reg(host)
	if me == nil || me.Key != crkey {
		return conflict()
	}
	n := s.clone()
	if action == nvme.ResvAcquire {
		switch {
		case s.Type == 0:
			n.Type, n.Holder = t, host
		case s.holds(host) && s.Type == t:
			return resvResult{} // already held so: nothing changes
		default:
			return conflict()
		}
		if t.AllRegistrants() {
			n.Holder = HostID{}
		}
		return resvResult{next: n}
	}
	// Preempt, and Preempt and Abort.
	var res resvResult
	unregister := func(key uint64) {
		n.Regs = slices.DeleteFunc(n.Regs, func(r resvReg) bool {
			if r.Host == host || r.Key != key {
				return false
			}
			res.notify = append(res.notify, resvNotice{r.Host, nvme.ResvNotifyRegistrationPreempt})
			res.preempted = append(res.preempted, r.Host)
			return true
		})
	}
	switch {
	case s.Type == 0 || (s.Type.AllRegistrants() && prkey != 0) ||
		(!s.Type.AllRegistrants() && prkey != s.holderKey() && prkey != 0):
		// No reservation taken over: the registrants with PRKEY go.
		unregister(prkey)
		if len(res.preempted) == 0 {
			return conflict()
		}
	case s.Type.AllRegistrants(): // PRKEY 0: every other registrant goes
		for _, r := range s.Regs {
			if r.Host != host {
				unregister(r.Key)
			}
		}
		n.Type, n.Holder = t, host
		if t.AllRegistrants() {
			n.Holder = HostID{}
		}
	case prkey == 0:
		return invalid()
	default: // PRKEY is the holder's: host takes the reservation over
		unregister(prkey)
		if s.Type != t {
			for _, r := range n.Regs {
				if r.Host != host {
					res.notify = append(res.notify, resvNotice{r.Host, nvme.ResvNotifyReleased})
				}
			}
		}
		n.Type, n.Holder = t, host
		if t.AllRegistrants() {
			n.Holder = HostID{}
		}
	}
	n.Gen++
	res.next = n
	return res
}

// release runs Reservation Release (RRELA action) of type t for host.
func (s *resvState) release(host HostID, action uint8, iekey bool, t nvme.ResvType, crkey uint64) resvResult {
	if iekey || action > nvme.ResvClear {
		return invalid()
	}
	me := s.reg(host)
	if me == nil || me.Key != crkey {
		return conflict()
	}
	n := s.clone()
	if action == nvme.ResvClear {
		res := resvResult{notify: s.others(host, nvme.ResvNotifyPreempted)}
		n.Regs, n.Type, n.Holder = nil, 0, HostID{}
		n.Gen++
		res.next = n
		return res
	}
	if !s.holds(host) {
		return resvResult{} // nothing held: nothing to release
	}
	if s.Type != t {
		return invalid()
	}
	var res resvResult
	if s.Type.RegistrantsOnly() {
		res.notify = s.others(host, nvme.ResvNotifyReleased)
	}
	n.Type, n.Holder = 0, HostID{}
	res.next = n
	return res
}

// status is the Reservation Report of s: one entry per registrant host,
// CNTLID FFFFh (the dynamic controller model: a host's controllers come
// and go; blktests nvme/054 and nvmet report it so).
func (s *resvState) status() *nvme.ResvStatus {
	st := &nvme.ResvStatus{Gen: s.Gen, Type: s.Type, PTPL: s.PTPL}
	for _, r := range s.Regs {
		st.Registrants = append(st.Registrants, nvme.ResvRegistrant{CNTLID: nvme.CNTLIDDynamic,
			Holder: s.holds(r.Host), HostID: r.Host, Key: r.Key})
	}
	return st
}
