package fabric

import (
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// memSharer is a group of targets' shared reservation state in memory:
// Commit runs next on it, and Publish applies it to every peer namespace.
type memSharer struct {
	mu      sync.Mutex
	state   ReservationState
	version uint64
	peers   []*Namespace
	// stale, when set, is handed to next once before the real state: a
	// commit that lost to another target's.
	stale   *ReservationState
	commits int
	// quiet drops the publications: the other targets miss the changes
	// until a later one reaches them.
	quiet bool
}

func (m *memSharer) Commit(subnqn string, nsid nvme.NSID, next func(ReservationState) *ReservationState) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stale != nil {
		next(*m.stale) // loses: computed again on the state now
		m.stale = nil
	}
	n := next(m.state)
	if n == nil {
		return m.version, nil
	}
	m.commits++
	m.version++
	m.state = *n
	return m.version, nil
}

func (m *memSharer) Publish(version uint64) {
	m.mu.Lock()
	st, quiet := m.state, m.quiet
	m.mu.Unlock()
	if quiet {
		return
	}
	for _, ns := range m.peers {
		ns.ApplyReservation(version, st)
	}
}

// TestSharedReservations: two targets serve one namespace; a reservation
// taken through the first holds through the second, the second's commands
// run on the shared state, and an older version is never applied over a
// newer one.
func TestSharedReservations(t *testing.T) {
	sh := &memSharer{}
	share := func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Reservations = sh }
	r1, r2 := newRig(t, share), newRig(t, share)
	sh.peers = []*Namespace{r1.ns, r2.ns}
	a := r1.connectHost(testHostNQN, idA)
	b := r2.connectHost("nqn.2026-11.io.example:host2", idB)
	ok := nvme.StatusSuccess
	conflict := nvme.StatusReservationConflict.WithDNR()
	steps := []struct {
		name string
		do   func() nvme.Status
		want nvme.Status
	}{
		{"A registers through target 1", func() nvme.Status { return a.register(nvme.ResvRegister, false, 0, 0, 1) }, ok},
		{"A takes write exclusive through target 1", func() nvme.Status { return a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0) }, ok},
		{"B's write through target 2 conflicts", b.write, conflict},
		{"B reads through target 2", b.read, ok},
		{"B registers through target 2", func() nvme.Status { return b.register(nvme.ResvRegister, false, 0, 0, 2) }, ok},
		{"B cannot acquire what A holds", func() nvme.Status { return b.acquire(nvme.ResvAcquire, nvme.ResvExclusiveAccess, 2, 0) }, conflict},
		{"B preempts A through target 2", func() nvme.Status { return b.acquire(nvme.ResvPreempt, nvme.ResvExclusiveAccess, 2, 1) }, ok},
		{"A's read through target 1 conflicts", a.read, conflict},
		{"B writes", b.write, ok},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	if st := r1.ns.ReservationState(); st.Type != nvme.ResvExclusiveAccess || len(st.Registrants) != 1 || st.Registrants[0].HostID != idB {
		t.Fatalf("target 1's state %+v", st)
	}
	// A, connected to target 1 only, hears of its preemption through target 2, once: the
	// notice travels in the shared state, and a state applied again (a later version of the
	// group's, the same change) owes nothing more.
	log, st := getLog(a.admin, nvme.LogReservationNotification, 64, 0)
	if n := nvme.ParseResvNotification(log); !st.IsSuccess() || n.Type != nvme.ResvNotifyRegistrationPreempt || n.NSID != 1 || n.Count != 1 {
		t.Errorf("A's notification through target 1 of a preemption through target 2: %v %+v", st, n)
	}
	sh.mu.Lock()
	sh.version++ // another change of the group's, not of this namespace's reservations
	sh.mu.Unlock()
	sh.Publish(sh.version)
	if log, _ := getLog(a.admin, nvme.LogReservationNotification, 64, 0); nvme.ParseResvNotification(log).Type != 0 {
		t.Errorf("the notification was delivered again: %+v", nvme.ParseResvNotification(log))
	}
	if log, _ := getLog(b.admin, nvme.LogReservationNotification, 64, 0); nvme.ParseResvNotification(log).Type != 0 {
		t.Errorf("B, the preempter, was notified: %+v", nvme.ParseResvNotification(log))
	}
	// A late, older state is ignored.
	if err := r1.ns.ApplyReservation(1, ReservationState{}); err != nil {
		t.Fatal(err)
	}
	if st := r1.ns.ReservationState(); st.Type != nvme.ResvExclusiveAccess {
		t.Fatalf("an older version was applied: %+v", st)
	}
	// A commit that loses is computed again on the newer state: B holds,
	// so B's release (computed on a stale state where nothing is held)
	// must release for real.
	sh.stale = &ReservationState{}
	if got := b.release(nvme.ResvRelease, nvme.ResvExclusiveAccess, 2); got != ok {
		t.Fatalf("release: %v", got)
	}
	if st := r2.ns.ReservationState(); st.Type != 0 || len(st.Registrants) != 1 {
		t.Fatalf("after the release: %+v", st)
	}
	if st := a.write(); st != ok {
		t.Errorf("A's write after the release: %v", st)
	}
	// A malformed shared state is refused whole.
	if err := r1.ns.ApplyReservation(100, ReservationState{Type: nvme.ResvWriteExclusive, Holder: idA}); err == nil {
		t.Error("a holder that is not registered was applied")
	}
	if err := r1.ns.ApplyReservation(100, ReservationState{Seq: 99, Notices: []ReservationNotice{{idA, 7}}}); err == nil {
		t.Error("a notice of type 7 was applied")
	}
}

// gatedPair is two targets sharing one namespace's reservations, the
// namespace of rigs[gated] behind a device that holds writes until release
// (called at the end of the test at the latest, before the rigs' teardown,
// which a held write would hold).
func gatedPair(t *testing.T, gated int) (*memSharer, [2]*rig, *gatedDevice, func()) {
	t.Helper()
	mem, err := blockdev.NewMemory(4<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedDevice{Device: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
	sh := &memSharer{}
	var rigs [2]*rig
	for i := range rigs {
		rigs[i] = newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
			nc.Reservations = sh
			if i == gated {
				nc.Device, nc.Workers = gate, 1
			}
		})
	}
	sh.peers = []*Namespace{rigs[0].ns, rigs[1].ns}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	return sh, rigs, gate, release
}

// TestSharedPreemptAbortWaits: a Preempt and Abort through one target
// completes only once the preempted host's command in flight on another
// target has finished, as it does for commands on its own target.
func TestSharedPreemptAbortWaits(t *testing.T) {
	_, rigs, gate, release := gatedPair(t, 0)
	r1, r2 := rigs[0], rigs[1]
	a := r1.connectHost(testHostNQN, idA)
	b := r2.connectHost("nqn.2026-11.io.example:host2", idB)
	ok := nvme.StatusSuccess
	if st := a.register(nvme.ResvRegister, false, 0, 0, 1); st != ok {
		t.Fatal(st)
	}
	if st := b.register(nvme.ResvRegister, false, 0, 0, 2); st != ok {
		t.Fatal(st)
	}
	if st := a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0); st != ok {
		t.Fatal(st)
	}
	wrote := make(chan nvme.Status, 1)
	go func() { wrote <- a.write() }()
	<-gate.entered // A's write runs on target 1
	preempted := make(chan nvme.Status, 1)
	go func() { preempted <- b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 2, 1) }()
	select {
	case st := <-preempted:
		t.Fatalf("the preempt and abort through target 2 completed (%v) while A's write still ran on target 1", st)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if st := <-wrote; st != ok {
		t.Errorf("A's write, started before the preemption: %v", st)
	}
	select {
	case st := <-preempted:
		if st != ok {
			t.Errorf("preempt and abort: %v", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the preempt and abort did not complete once A's write finished")
	}
	if st := a.write(); st != nvme.StatusReservationConflict.WithDNR() {
		t.Errorf("A's write after the preemption: %v, want a conflict", st)
	}
}

func (m *memSharer) setQuiet(q bool) {
	m.mu.Lock()
	m.quiet = q
	m.mu.Unlock()
}

// TestSharedMissedChanges: what a change through another target owes this
// one's hosts is not lost when this target misses its publication. A
// command here that commits on top of the missed change delivers its
// notices; a state that skips changes (two while this target missed both)
// waits for every host that left the registrants, any of which may have
// been preempted and aborted.
func TestSharedMissedChanges(t *testing.T) {
	sh, rigs, gate, release := gatedPair(t, 1)
	r1, r2 := rigs[0], rigs[1]
	idC := [16]byte{0xcc, 3}
	a := r2.connectHost(testHostNQN, idA)
	b := r1.connectHost("nqn.2026-11.io.example:host2", idB)
	c := r2.connectHost("nqn.2026-11.io.example:host3", idC)
	ok := nvme.StatusSuccess
	must := func(what string, st nvme.Status) {
		t.Helper()
		if st != ok {
			t.Fatalf("%s: %v", what, st)
		}
	}
	must("A registers", a.register(nvme.ResvRegister, false, 0, 0, 1))
	must("B registers", b.register(nvme.ResvRegister, false, 0, 0, 2))

	// Target 2 misses B's preemption of A; C's registration through target 2 commits on top of it.
	sh.setQuiet(true)
	must("B preempts A through target 1", b.acquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 2, 1))
	sh.setQuiet(false)
	must("C registers through target 2", c.register(nvme.ResvRegister, false, 0, 0, 3))
	log, st := getLog(a.admin, nvme.LogReservationNotification, 64, 0)
	if n := nvme.ParseResvNotification(log); !st.IsSuccess() || n.Type != nvme.ResvNotifyRegistrationPreempt {
		t.Errorf("A, on target 2, after a commit there on top of its missed preemption: %v %+v", st, n)
	}

	// A registers again, takes write exclusive and writes through target 2 (held there); target 2
	// misses two changes: B preempts and aborts A, taking the reservation over, then replaces
	// its own key. The state after both names no abort.
	must("A registers again", a.register(nvme.ResvRegister, false, 0, 0, 4))
	must("A takes write exclusive", a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 4, 0))
	wrote := make(chan nvme.Status, 1)
	go func() { wrote <- a.write() }()
	<-gate.entered
	sh.setQuiet(true)
	v := sh.version
	must("B preempts and aborts A", b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 2, 4))
	must("B replaces its key", b.register(nvme.ResvReplace, false, 0, 2, 5))
	sh.setQuiet(false)
	if sh.version != v+2 || len(sh.state.Aborted) != 0 {
		t.Fatalf("the shared state went from version %d to %d, aborting %v; want two changes, the last aborting none", v, sh.version, sh.state.Aborted)
	}
	applied := make(chan struct{})
	go func() { sh.Publish(sh.version); close(applied) }()
	select {
	case <-applied:
		t.Error("target 2 applied a state two changes on without waiting for A's write, which the first aborted")
	case <-time.After(300 * time.Millisecond):
	}
	release()
	<-wrote
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatal("target 2 still waits after A's write finished")
	}

	// A's own command through target 2, on top of a preemption and abort of A that target 2
	// missed, does not wait for A's commands: it is one of them.
	must("A registers again", a.register(nvme.ResvRegister, false, 0, 0, 6))
	sh.setQuiet(true)
	must("B preempts and aborts A", b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 5, 6))
	sh.setQuiet(false)
	start := time.Now()
	must("A registers once more through target 2", a.register(nvme.ResvRegister, false, 0, 0, 7))
	if d := time.Since(start); d >= sharedAbortWait/2 {
		t.Errorf("A's register through target 2 took %v: it waited for its own command", d)
	}
}

// TestSharedPreemptAbortOtherNamespace: a target applying another's
// Preempt and Abort of a namespace waits for the preempted host's commands
// on that namespace only: a write of that host held on another namespace
// of the target does not hold the change.
func TestSharedPreemptAbortOtherNamespace(t *testing.T) {
	sh := &memSharer{}
	var rigs [2]*rig
	for i := range rigs {
		rigs[i] = newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Reservations = sh })
	}
	sh.peers = []*Namespace{rigs[0].ns, rigs[1].ns}
	mem, err := blockdev.NewMemory(1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedDevice{Device: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
	if _, err := rigs[0].sub.AddNamespace(NamespaceConfig{NSID: 2, Device: gate, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	a := rigs[0].connectHost(testHostNQN, idA)
	b := rigs[1].connectHost("nqn.2026-11.io.example:host2", idB)
	ok := nvme.StatusSuccess
	for _, st := range []nvme.Status{
		a.register(nvme.ResvRegister, false, 0, 0, 1),
		b.register(nvme.ResvRegister, false, 0, 0, 2),
		a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0),
	} {
		if st != ok {
			t.Fatal(st)
		}
	}
	wrote := make(chan nvme.Status, 1)
	go func() { wrote <- a.writeTo(2) }()
	<-gate.entered // A's write runs on namespace 2 of target 1
	preempted := make(chan nvme.Status, 1)
	go func() { preempted <- b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 2, 1) }()
	select {
	case st := <-preempted:
		if st != ok {
			t.Errorf("preempt and abort: %v", st)
		}
	case <-time.After(sharedAbortWait / 2):
		t.Fatal("the preempt and abort of namespace 1 through target 2 waited for A's write on namespace 2 of target 1")
	}
	release()
	if st := <-wrote; st != ok {
		t.Errorf("A's write on namespace 2: %v", st)
	}
	if st := a.write(); st != nvme.StatusReservationConflict.WithDNR() {
		t.Errorf("A's write on namespace 1 after the preemption: %v, want a conflict", st)
	}
}

// TestResvRestoreCap: a state file or a shared state with more registrants
// than limits.ResvRegistrants is refused, as a malformed one is.
func TestResvRestoreCap(t *testing.T) {
	over := fullResv()
	over.Regs = append(over.Regs, resvReg{numHost(limits.ResvRegistrants + 1), 1})
	r := newRig(t)
	if err := r.ns.ApplyReservation(1, over.export()); err == nil {
		t.Error("a shared state past the cap was applied")
	}
	if err := r.ns.ApplyReservation(1, fullResv().export()); err != nil {
		t.Errorf("a shared state at the cap: %v", err)
	}

	dir := t.TempDir()
	r2 := newRigOpts(t, Options{StateDir: dir})
	ns := r2.ns
	for _, c := range []struct {
		name string
		st   *resvState
		ok   bool
	}{{"at the cap", fullResv(), true}, {"past the cap", over, false}} {
		st := c.st.clone()
		st.PTPL = true
		ns.resv.mu.Lock()
		err := ns.persistResv(&resvState{}, st)
		ns.resv.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		err = ns.restoreResv()
		if (err == nil) != c.ok {
			t.Errorf("a state file %s: %v", c.name, err)
		}
	}
}
