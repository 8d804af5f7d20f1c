package fabric

import (
	"encoding/binary"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

var (
	hostA = HostID{0xa}
	hostB = HostID{0xb}
	hostC = HostID{0xc}
)

// TestResvAllows checks every type against the spec's table of the
// commands a holder, a registrant and another host may run.
func TestResvAllows(t *testing.T) {
	type rw struct{ r, w bool }
	cases := []struct {
		t                  nvme.ResvType
		holder, reg, other rw
	}{
		{nvme.ResvWriteExclusive, rw{true, true}, rw{true, false}, rw{true, false}},
		{nvme.ResvExclusiveAccess, rw{true, true}, rw{false, false}, rw{false, false}},
		{nvme.ResvWriteExclusiveRegOnly, rw{true, true}, rw{true, true}, rw{true, false}},
		{nvme.ResvExclusiveAccessRegOnly, rw{true, true}, rw{true, true}, rw{false, false}},
		{nvme.ResvWriteExclusiveAllRegs, rw{true, true}, rw{true, true}, rw{true, false}},
		{nvme.ResvExclusiveAccessAllRegs, rw{true, true}, rw{true, true}, rw{false, false}},
	}
	writes := []uint8{nvme.OpWrite, nvme.OpFlush, nvme.OpWriteZeroes, nvme.OpDSM, nvme.OpWriteUncorrectable}
	reads := []uint8{nvme.OpRead, nvme.OpCompare, nvme.OpVerify}
	for _, c := range cases {
		s := &resvState{Type: c.t, Holder: hostA, Regs: []resvReg{{hostA, 1}, {hostB, 2}}}
		if c.t.AllRegistrants() {
			s.Holder = HostID{}
		}
		for _, who := range []struct {
			name string
			host HostID
			want rw
		}{{"holder", hostA, c.holder}, {"registrant", hostB, c.reg}, {"other", hostC, c.other}} {
			for _, op := range reads {
				if got := s.allows(who.host, op); got != who.want.r {
					t.Errorf("%v, %s, read opcode %#x: allowed %v, want %v", c.t, who.name, op, got, who.want.r)
				}
			}
			for _, op := range writes {
				if got := s.allows(who.host, op); got != who.want.w {
					t.Errorf("%v, %s, write opcode %#x: allowed %v, want %v", c.t, who.name, op, got, who.want.w)
				}
			}
		}
	}
	// No reservation: registrants or not, everything runs.
	s := &resvState{Regs: []resvReg{{hostA, 1}}}
	if !s.allows(hostC, nvme.OpWrite) || !(*resvState)(nil).allows(hostC, nvme.OpWrite) {
		t.Error("a write refused with no reservation")
	}
}

// step is one reservation command in a sequence.
type step struct {
	name   string
	do     func(s *resvState) resvResult
	status nvme.Status
	// after the step (when it succeeded)
	gen     uint32
	typ     nvme.ResvType
	holder  HostID
	regs    int
	notify  []resvNotice
	preempt []HostID
}

func runSteps(t *testing.T, steps []step) {
	t.Helper()
	s := &resvState{}
	for _, st := range steps {
		res := st.do(s)
		if res.status != st.status {
			t.Fatalf("%s: status %v, want %v", st.name, res.status, st.status)
		}
		if res.next != nil {
			s = res.next
		}
		if s.Gen != st.gen || s.Type != st.typ || s.Holder != st.holder || len(s.Regs) != st.regs {
			t.Fatalf("%s: gen %d type %v holder %x regs %d, want %d %v %x %d", st.name, s.Gen, s.Type, s.Holder[0],
				len(s.Regs), st.gen, st.typ, st.holder[0], st.regs)
		}
		if len(res.notify) != len(st.notify) {
			t.Fatalf("%s: notified %+v, want %+v", st.name, res.notify, st.notify)
		}
		for i := range res.notify {
			if res.notify[i] != st.notify[i] {
				t.Fatalf("%s: notified %+v, want %+v", st.name, res.notify, st.notify)
			}
		}
		if len(res.preempted) != len(st.preempt) {
			t.Fatalf("%s: preempted %x, want %x", st.name, res.preempted, st.preempt)
		}
	}
}

var conflictSt, invalidSt = nvme.StatusReservationConflict.WithDNR(), nvme.StatusInvalidField.WithDNR()

func reg(h HostID, action uint8, iekey bool, crkey, nrkey uint64) func(s *resvState) resvResult {
	return func(s *resvState) resvResult { return s.register(h, action, iekey, crkey, nrkey) }
}

func acq(h HostID, action uint8, typ nvme.ResvType, crkey, prkey uint64) func(s *resvState) resvResult {
	return func(s *resvState) resvResult { return s.acquire(h, action, false, typ, crkey, prkey) }
}

func rel(h HostID, action uint8, typ nvme.ResvType, crkey uint64) func(s *resvState) resvResult {
	return func(s *resvState) resvResult { return s.release(h, action, false, typ, crkey) }
}

// TestResvBlktests054 is blktests nvme/054's sequence (since its f939e6e)
// and the generation it expects after each step.
func TestResvBlktests054(t *testing.T) {
	we, ea := nvme.ResvWriteExclusive, nvme.ResvExclusiveAccess
	runSteps(t, []step{
		{name: "register 4", do: reg(hostA, nvme.ResvRegister, false, 0, 4), gen: 1, regs: 1},
		{name: "replace 4 by 5", do: reg(hostA, nvme.ResvReplace, false, 4, 5), gen: 2, regs: 1},
		{name: "unregister", do: reg(hostA, nvme.ResvUnregister, false, 5, 0), gen: 3},
		{name: "register 4 again", do: reg(hostA, nvme.ResvRegister, false, 0, 4), gen: 4, regs: 1},
		{name: "acquire WE", do: acq(hostA, nvme.ResvAcquire, we, 4, 0), gen: 4, typ: we, holder: hostA, regs: 1},
		{name: "preempt itself to EA", do: acq(hostA, nvme.ResvPreempt, ea, 4, 4), gen: 5, typ: ea, holder: hostA, regs: 1},
		{name: "release EA", do: rel(hostA, nvme.ResvRelease, ea, 4), gen: 5, regs: 1},
		{name: "acquire WE again", do: acq(hostA, nvme.ResvAcquire, we, 4, 0), gen: 5, typ: we, holder: hostA, regs: 1},
		{name: "clear", do: rel(hostA, nvme.ResvClear, 0, 4), gen: 6},
	})
}

// TestResvRules: registration, acquire, preempt and release between hosts,
// with the notifications each sends.
func TestResvRules(t *testing.T) {
	we, weRO, weAR := nvme.ResvWriteExclusive, nvme.ResvWriteExclusiveRegOnly, nvme.ResvWriteExclusiveAllRegs
	ea := nvme.ResvExclusiveAccess
	t.Run("register", func(t *testing.T) {
		runSteps(t, []step{
			{name: "A registers 1", do: reg(hostA, nvme.ResvRegister, false, 0, 1), gen: 1, regs: 1},
			{name: "A again with 1", do: reg(hostA, nvme.ResvRegister, false, 0, 1), gen: 2, regs: 1},
			{name: "A again with 2", do: reg(hostA, nvme.ResvRegister, false, 0, 2), status: conflictSt, gen: 2, regs: 1},
			{name: "A unregisters with a wrong key", do: reg(hostA, nvme.ResvUnregister, false, 9, 0), status: conflictSt, gen: 2, regs: 1},
			{name: "B unregisters unregistered", do: reg(hostB, nvme.ResvUnregister, true, 0, 0), status: conflictSt, gen: 2, regs: 1},
			{name: "B replaces unregistered", do: reg(hostB, nvme.ResvReplace, false, 0, 3), status: conflictSt, gen: 2, regs: 1},
			{name: "B replaces with IEKEY", do: reg(hostB, nvme.ResvReplace, true, 0, 3), gen: 3, regs: 2},
			{name: "A replaces with IEKEY, any key", do: reg(hostA, nvme.ResvReplace, true, 77, 5), gen: 4, regs: 2},
			{name: "A unregisters with IEKEY", do: reg(hostA, nvme.ResvUnregister, true, 0, 0), gen: 5, regs: 1},
			{name: "reserved action", do: reg(hostA, 3, false, 0, 1), status: invalidSt, gen: 5, regs: 1},
		})
	})
	t.Run("acquire", func(t *testing.T) {
		runSteps(t, []step{
			{name: "A acquires unregistered", do: acq(hostA, nvme.ResvAcquire, we, 1, 0), status: conflictSt},
			{name: "A registers", do: reg(hostA, nvme.ResvRegister, false, 0, 1), gen: 1, regs: 1},
			{name: "B registers", do: reg(hostB, nvme.ResvRegister, false, 0, 2), gen: 2, regs: 2},
			{name: "A with a wrong key", do: acq(hostA, nvme.ResvAcquire, we, 2, 0), status: conflictSt, gen: 2, regs: 2},
			{name: "A acquires WE-RO", do: acq(hostA, nvme.ResvAcquire, weRO, 1, 0), gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "A again, same type", do: acq(hostA, nvme.ResvAcquire, weRO, 1, 0), gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "A again, another type", do: acq(hostA, nvme.ResvAcquire, we, 1, 0), status: conflictSt, gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "B acquires held", do: acq(hostB, nvme.ResvAcquire, weRO, 2, 0), status: conflictSt, gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "invalid type", do: acq(hostA, nvme.ResvAcquire, 7, 1, 0), status: invalidSt, gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "B releases, not holder", do: rel(hostB, nvme.ResvRelease, weRO, 2), gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "A releases, wrong type", do: rel(hostA, nvme.ResvRelease, we, 1), status: invalidSt, gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "A releases: B told", do: rel(hostA, nvme.ResvRelease, weRO, 1), gen: 2, regs: 2,
				notify: []resvNotice{{hostB, nvme.ResvNotifyReleased}}},
			{name: "A takes WE-RO again", do: acq(hostA, nvme.ResvAcquire, weRO, 1, 0), gen: 2, typ: weRO, holder: hostA, regs: 2},
			{name: "A unregisters, releasing: B told", do: reg(hostA, nvme.ResvUnregister, false, 1, 0), gen: 3, regs: 1,
				notify: []resvNotice{{hostB, nvme.ResvNotifyReleased}}},
		})
	})
	t.Run("preempt", func(t *testing.T) {
		runSteps(t, []step{
			{name: "A registers", do: reg(hostA, nvme.ResvRegister, false, 0, 1), gen: 1, regs: 1},
			{name: "B registers", do: reg(hostB, nvme.ResvRegister, false, 0, 2), gen: 2, regs: 2},
			{name: "C registers", do: reg(hostC, nvme.ResvRegister, false, 0, 3), gen: 3, regs: 3},
			{name: "A acquires WE", do: acq(hostA, nvme.ResvAcquire, we, 1, 0), gen: 3, typ: we, holder: hostA, regs: 3},
			{name: "B preempts with no key", do: acq(hostB, nvme.ResvPreempt, ea, 2, 0), status: invalidSt, gen: 3, typ: we, holder: hostA, regs: 3},
			{name: "B preempts a key no one has", do: acq(hostB, nvme.ResvPreempt, ea, 2, 9), status: conflictSt, gen: 3, typ: we, holder: hostA, regs: 3},
			{name: "B preempts C's registration", do: acq(hostB, nvme.ResvPreempt, ea, 2, 3), gen: 4, typ: we, holder: hostA, regs: 2,
				notify: []resvNotice{{hostC, nvme.ResvNotifyRegistrationPreempt}}, preempt: []HostID{hostC}},
			{name: "B preempts A and takes EA", do: acq(hostB, nvme.ResvPreemptAndAbort, ea, 2, 1), gen: 5, typ: ea, holder: hostB, regs: 1,
				notify: []resvNotice{{hostA, nvme.ResvNotifyRegistrationPreempt}}, preempt: []HostID{hostA}},
			{name: "A, preempted, cannot acquire", do: acq(hostA, nvme.ResvAcquire, ea, 1, 0), status: conflictSt, gen: 5, typ: ea, holder: hostB, regs: 1},
			{name: "A and C register", do: func(s *resvState) resvResult {
				s = s.register(hostA, nvme.ResvRegister, false, 0, 1).next
				return s.register(hostC, nvme.ResvRegister, false, 0, 3)
			}, gen: 7, typ: ea, holder: hostB, regs: 3},
			{name: "B clears: A and C told", do: rel(hostB, nvme.ResvClear, 0, 2), gen: 8,
				notify: []resvNotice{{hostA, nvme.ResvNotifyPreempted}, {hostC, nvme.ResvNotifyPreempted}}},
		})
	})
	t.Run("all registrants", func(t *testing.T) {
		runSteps(t, []step{
			{name: "A registers", do: reg(hostA, nvme.ResvRegister, false, 0, 1), gen: 1, regs: 1},
			{name: "B registers", do: reg(hostB, nvme.ResvRegister, false, 0, 2), gen: 2, regs: 2},
			{name: "A acquires WE-AR", do: acq(hostA, nvme.ResvAcquire, weAR, 1, 0), gen: 2, typ: weAR, regs: 2},
			{name: "B, a holder too, acquires it", do: acq(hostB, nvme.ResvAcquire, weAR, 2, 0), gen: 2, typ: weAR, regs: 2},
			{name: "A unregisters: B keeps it", do: reg(hostA, nvme.ResvUnregister, false, 1, 0), gen: 3, typ: weAR, regs: 1},
			{name: "C registers", do: reg(hostC, nvme.ResvRegister, false, 0, 3), gen: 4, typ: weAR, regs: 2},
			{name: "C preempts all with key 0", do: acq(hostC, nvme.ResvPreempt, we, 3, 0), gen: 5, typ: we, holder: hostC, regs: 1,
				notify: []resvNotice{{hostB, nvme.ResvNotifyRegistrationPreempt}}, preempt: []HostID{hostB}},
			{name: "C unregisters, the last: it ends", do: reg(hostC, nvme.ResvUnregister, false, 3, 0), gen: 6},
		})
	})
}

// TestResvStatus: the report lists registrants in order, the holder marked
// (every registrant under the all-registrants types), CNTLID FFFFh.
func TestResvStatus(t *testing.T) {
	s := &resvState{Gen: 3, Type: nvme.ResvWriteExclusive, Holder: hostB, Regs: []resvReg{{hostA, 1}, {hostB, 2}}, PTPL: true}
	st := s.status()
	if st.Gen != 3 || st.Type != nvme.ResvWriteExclusive || !st.PTPL || len(st.Registrants) != 2 ||
		st.Registrants[0].Holder || !st.Registrants[1].Holder || st.Registrants[1].Key != 2 ||
		st.Registrants[0].CNTLID != nvme.CNTLIDDynamic || st.Registrants[0].HostID != [16]byte(hostA) {
		t.Fatalf("%+v", st)
	}
	s.Type = nvme.ResvExclusiveAccessAllRegs
	if st := s.status(); !st.Registrants[0].Holder || !st.Registrants[1].Holder {
		t.Fatalf("all registrants: %+v", st)
	}
}

// fullResv is a state of limits.ResvRegistrants registrants, hosts 1...
func fullResv() *resvState {
	s := &resvState{Type: nvme.ResvWriteExclusiveRegOnly}
	for i := range limits.ResvRegistrants {
		s.Regs = append(s.Regs, resvReg{numHost(i + 1), uint64(i + 1)})
	}
	s.Holder = s.Regs[0].Host
	return s
}

func numHost(i int) HostID {
	var h HostID
	binary.BigEndian.PutUint32(h[12:], uint32(i))
	return h
}

// TestResvRegistrantCap: past limits.ResvRegistrants a new host cannot
// register (nor set a key with IEKEY), and nothing changes; registrants
// already there go on as before, and a place freed is taken again.
func TestResvRegistrantCap(t *testing.T) {
	full := nvme.StatusInternalError.WithDNR()
	newHost := numHost(limits.ResvRegistrants + 1)
	last := numHost(limits.ResvRegistrants)
	s := fullResv()
	for _, c := range []struct {
		name string
		res  resvResult
		want nvme.Status
		regs int
	}{
		{"a new host registers", s.register(newHost, nvme.ResvRegister, false, 0, 7), full, 0},
		{"a new host replaces with IEKEY", s.register(newHost, nvme.ResvReplace, true, 0, 7), full, 0},
		{"the last registers again, same key", s.register(last, nvme.ResvRegister, false, 0, uint64(limits.ResvRegistrants)), nvme.StatusSuccess, limits.ResvRegistrants},
		{"the last replaces its key", s.register(last, nvme.ResvReplace, false, uint64(limits.ResvRegistrants), 9), nvme.StatusSuccess, limits.ResvRegistrants},
	} {
		if c.res.status != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.res.status, c.want)
		}
		if got := 0; c.res.next != nil {
			got = len(c.res.next.Regs)
			if got != c.regs {
				t.Errorf("%s: %d registrants after, want %d", c.name, got, c.regs)
			}
		} else if c.want == full && len(s.Regs) != limits.ResvRegistrants {
			t.Errorf("%s: the state changed", c.name)
		}
	}
	n := s.register(last, nvme.ResvUnregister, false, uint64(limits.ResvRegistrants), 0).next
	if res := n.register(newHost, nvme.ResvRegister, false, 0, 7); res.status != nvme.StatusSuccess || len(res.next.Regs) != limits.ResvRegistrants {
		t.Errorf("a new host, once one left: %v", res.status)
	}
}

// TestResvIndex: a published state finds its registrants by host as a
// scan does, and a state changed from it (a clone) is not misled by it.
func TestResvIndex(t *testing.T) {
	for _, n := range []int{0, 1, 8, 9, 1000} {
		s := &resvState{Type: nvme.ResvWriteExclusiveAllRegs}
		for i := range n {
			s.Regs = append(s.Regs, resvReg{numHost(i + 1), uint64(i + 1)})
		}
		s.sealed()
		for i := range n + 2 {
			h := numHost(i)
			r := s.reg(h)
			if want := i >= 1 && i <= n; (r != nil) != want || (r != nil && (r.Host != h || r.Key != uint64(i))) {
				t.Fatalf("%d registrants: host %d found as %+v", n, i, r)
			}
			if s.allows(h, nvme.OpWrite) != (i >= 1 && i <= n) {
				t.Fatalf("%d registrants: host %d's write", n, i)
			}
		}
		if n == 0 {
			continue
		}
		// The first unregisters: the state after knows it gone, and the
		// others where they now are.
		after := s.register(numHost(1), nvme.ResvUnregister, false, 1, 0).next
		for _, x := range []*resvState{after, after.clone().sealed()} {
			if x.reg(numHost(1)) != nil {
				t.Fatalf("%d registrants: the host that unregistered is still found", n)
			}
			if r := x.reg(numHost(n)); n > 1 && (r == nil || r.Key != uint64(n)) {
				t.Fatalf("%d registrants: the last found as %+v", n, r)
			}
		}
	}
}
