package fabric

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Reservations shared between targets that serve one namespace (a gateway
// group): registrants are hosts, wherever they connect, so a reservation
// taken through one target holds through all (base 2.0 §8.19.1). A
// ReservationSharer carries the state; fabric knows nothing of how.

// ReservationState is a namespace's reservations as a value.
type ReservationState struct {
	Generation  uint32
	Type        nvme.ResvType // 0: none
	Holder      HostID        // types 1-4; every registrant holds types 5 and 6
	Registrants []ReservationRegistrant
	PTPL        bool
	// Seq counts the changes committed to the shared state; Notices are
	// the Reservation Notification log entries the change numbered Seq
	// owes to hosts. The target that ran the command queues them on its
	// controllers; every other target queues them on its own when it
	// applies a state of a higher Seq than it holds, so that a host hears
	// of a preemption wherever it is connected.
	Seq     uint64
	Notices []ReservationNotice
	// Aborted are the hosts a Preempt and Abort (change Seq) took out:
	// every target that applies the change waits, bounded, until none of
	// their commands runs on it on this namespace before it acknowledges
	// the change, so that the command completes only once they ran out
	// everywhere.
	Aborted []HostID
}

// ReservationNotice is a Reservation Notification log entry a host is owed.
type ReservationNotice struct {
	HostID HostID
	Kind   uint8 // nvme.ResvNotify*
}

// ReservationSharer shares a namespace's reservations with the other
// targets that serve it. Nil (the default): they are this target's alone.
type ReservationSharer interface {
	// Commit makes the shared state next(cur), cur being the shared
	// state now: next returns nil when the command changes nothing, and
	// is called again on a newer cur when another target changed the
	// state meanwhile. It returns the committed state's version, which
	// the other targets apply (Namespace.ApplyReservation). The
	// namespace's reservation lock is held: Commit must not wait for the
	// other targets.
	Commit(subnqn string, nsid nvme.NSID, next func(cur ReservationState) *ReservationState) (version uint64, err error)
	// Publish waits, bounded, until the other targets applied version,
	// so that a command through any of them after this one completes
	// sees it.
	Publish(version uint64)
}

// SetReservationSharer makes the namespace's reservations shared through
// sh (nil: this target's alone again).
func (ns *Namespace) SetReservationSharer(sh ReservationSharer) {
	ns.resv.mu.Lock()
	defer ns.resv.mu.Unlock()
	ns.resv.sharer = sh
}

func (s *resvState) export() ReservationState {
	st := ReservationState{Generation: s.Gen, Type: s.Type, Holder: s.Holder, PTPL: s.PTPL, Seq: s.seq}
	if s.Type.AllRegistrants() || s.Type == 0 {
		st.Holder = HostID{}
	}
	for _, r := range s.Regs {
		st.Registrants = append(st.Registrants, ReservationRegistrant{r.Host, r.Key})
	}
	return st
}

// importResv checks st as restoreResv checks a state file.
func importResv(st ReservationState) (*resvState, error) {
	s := &resvState{Gen: st.Generation, Type: st.Type, PTPL: st.PTPL, seq: st.Seq}
	if s.Type != 0 && !s.Type.Valid() {
		return nil, fmt.Errorf("reservation type %d", st.Type)
	}
	for _, n := range st.Notices {
		if !validNotice(n.Kind) {
			return nil, fmt.Errorf("notification type %d", n.Kind)
		}
	}
	for _, r := range st.Registrants {
		s.Regs = append(s.Regs, resvReg{r.HostID, r.Key})
	}
	if err := checkRegs(s.Regs); err != nil {
		return nil, err
	}
	s.sealed()
	switch {
	case s.Type == 0 && st.Holder != HostID{}:
		return nil, fmt.Errorf("a holder with no reservation")
	case s.Type.AllRegistrants() && len(s.Regs) == 0:
		return nil, fmt.Errorf("a reservation with no registrant")
	case s.Type != 0 && !s.Type.AllRegistrants():
		if s.reg(st.Holder) == nil {
			return nil, fmt.Errorf("the holder %s is not registered", st.Holder)
		}
		s.Holder = st.Holder
	}
	return s, nil
}

// changeResv runs a command of host self on the namespace's state (rule
// run), shared or not, and publishes the result here: what the command
// did, a function that waits for the other targets (call it after
// unlocking), and a local failure. ns.resv.mu is held.
func (ns *Namespace) changeResv(self HostID, run func(cur *resvState) resvResult) (resvResult, func(), error) {
	nothing := func() {}
	cur := ns.resv.load()
	sh := ns.resv.sharer
	if sh == nil {
		res := run(cur)
		if res.next == nil {
			return res, nothing, nil
		}
		if err := ns.persistResv(cur, res.next); err != nil {
			return resvResult{}, nothing, err
		}
		ns.resv.state.Store(res.next.sealed())
		return res, nothing, nil
	}
	var res resvResult
	var ierr error
	// What the shared state owes this target's hosts from changes through
	// other targets it has not applied yet: this commit goes on top of
	// them, and their own publication here will then be too old to apply.
	var notices []resvNotice
	var aborted []HostID
	known := ns.resv.version > 0
	version, err := sh.Commit(ns.subnqn, ns.nsid, func(shared ReservationState) *ReservationState {
		c, err := importResv(shared)
		if err != nil {
			ierr = err
			return nil
		}
		notices, aborted = nil, nil
		if known {
			notices, aborted = owed(cur, shared)
			// The issuing host's command runs here: it is none of the
			// commands to wait for, and would wait for itself.
			aborted = slices.DeleteFunc(aborted, func(h HostID) bool { return h == self })
		}
		res = run(c)
		if res.next == nil {
			return nil
		}
		res.next.seq = shared.Seq + 1
		x := res.next.export()
		for _, n := range res.notify {
			x.Notices = append(x.Notices, ReservationNotice{n.host, n.kind})
		}
		if res.abort {
			x.Aborted = slices.Clone(res.preempted)
		}
		return &x
	})
	switch {
	case ierr != nil:
		return resvResult{}, nothing, fmt.Errorf("the shared reservation state: %w", ierr)
	case err != nil:
		return resvResult{}, nothing, err
	case res.next == nil:
		return res, nothing, nil
	}
	// The shared state is the truth; the local file is only this
	// target's copy of it.
	if err := ns.persistResv(cur, res.next); err != nil {
		ns.log.Warn("reservation state committed to the group but not saved here", "nsid", ns.nsid, "err", err)
	}
	ns.resv.state.Store(res.next.sealed())
	ns.resv.version = max(ns.resv.version, version)
	return res, func() {
		ns.deliver(notices, aborted)
		sh.Publish(version)
	}, nil
}

// sharedAbortWait bounds how long a target waits for the commands of the
// hosts another target's Preempt and Abort took out: a little less than
// that target waits for the acknowledgement (limits.GroupNotifyTimeout),
// past which waiting protects nothing.
const sharedAbortWait = limits.GroupNotifyTimeout * 4 / 5

// owed is what the shared state st owes this target's hosts, cur being the
// state the target holds: if st's last change is one it has not seen (its
// count differs: a record made anew restarts it), that change's notices,
// and the hosts whose commands to wait for. When more changes than one
// came between (or the count restarted), the earlier ones' notices are
// lost, but every host registered in cur and not in st is waited for: any
// of them may have been preempted and aborted — when st holds a
// reservation: with none, their commands are let in anyway.
func owed(cur *resvState, st ReservationState) ([]resvNotice, []HostID) {
	if st.Seq == cur.seq {
		return nil, nil
	}
	var notices []resvNotice
	for _, n := range st.Notices {
		notices = append(notices, resvNotice{n.HostID, n.Kind})
	}
	aborted := slices.Clone(st.Aborted)
	if st.Seq != cur.seq+1 && st.Type != 0 {
		for _, r := range cur.Regs {
			gone := !slices.ContainsFunc(st.Registrants, func(x ReservationRegistrant) bool { return x.HostID == r.Host })
			if gone && !slices.Contains(aborted, r.Host) {
				aborted = append(aborted, r.Host)
			}
		}
	}
	return notices, aborted
}

// deliver queues notices on this target's controllers and then waits for
// the commands of the aborted hosts. ns.resv.mu is not held.
func (ns *Namespace) deliver(notices []resvNotice, aborted []HostID) {
	if len(notices) > 0 && ns.resv.notify != nil {
		ns.resv.notify(notices)
	}
	if len(aborted) > 0 && ns.resv.wait != nil {
		ns.resv.wait(aborted)
	}
}

// ApplyReservation makes the namespace's reservations st, the shared state
// at version: another target's command. An older version than the one
// the namespace holds is ignored (a read that arrives after a newer one).
// Commands that start after it returns see it.
func (ns *Namespace) ApplyReservation(version uint64, st ReservationState) error {
	next, err := importResv(st)
	if err != nil {
		return err
	}
	var notices []resvNotice
	var aborted []HostID
	ns.resv.mu.Lock()
	defer func() {
		// After the new state is in place (new commands of the preempted
		// hosts see it): notify, then wait for those already running.
		ns.resv.mu.Unlock()
		ns.deliver(notices, aborted)
	}()
	if version <= ns.resv.version {
		return nil
	}
	cur := ns.resv.load()
	known := ns.resv.version > 0
	ns.resv.version = version
	if known {
		// A change this target has not seen: the hosts it owes a
		// notification to may be connected here (the target that ran it
		// queued them on its own controllers). A namespace's first shared
		// state (or the empty one a gateway applies while the group has
		// no record of it) is taken as it is: what it owes was owed
		// before it was served here.
		notices, aborted = owed(cur, st)
	}
	same := cur.Gen == next.Gen && cur.Type == next.Type && cur.Holder == next.Holder && cur.PTPL == next.PTPL && slices.Equal(cur.Regs, next.Regs)
	if same && cur.seq == next.seq {
		return nil
	}
	if !same {
		if err := ns.persistResv(cur, next); err != nil {
			ns.log.Warn("shared reservation state not saved here", "nsid", ns.nsid, "err", err)
		}
	}
	ns.resv.state.Store(next)
	return nil
}

// ReservationState is the namespace's reservations now.
func (ns *Namespace) ReservationState() ReservationState { return ns.resv.load().export() }

// validNotice reports whether kind is a Reservation Notification log
// entry type a change can owe a host.
func validNotice(kind uint8) bool {
	return kind >= nvme.ResvNotifyRegistrationPreempt && kind <= nvme.ResvNotifyPreempted
}
