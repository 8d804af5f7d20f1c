package fabric

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// resvHost is one host's controller with an I/O queue.
type resvHost struct {
	admin, io *host
	id        [16]byte
}

// connectHost connects a controller for host nqn/id with one I/O queue.
func (r *rig) connectHost(nqn string, id [16]byte) resvHost {
	r.t.Helper()
	a := r.dial(0, 32)
	rsp := a.mustOK(connectCmd(0, 31, 0), connectData(testNQN, nqn, id, 0xffff))
	a.propSet(nvme.PropCC, ccEnable)
	io := r.dial(1, 64)
	io.mustOK(connectCmd(1, 63, 0), connectData(testNQN, nqn, id, nvme.CNTLID(rsp.DW0())))
	return resvHost{a, io, id}
}

func resvCmd(op, action uint8, iekey bool, t nvme.ResvType, cptpl uint8, k1, k2 uint64) (nvme.Command, []byte) {
	c := newCmd(op, 50)
	c.SetNSID(1)
	c.SetResv(action, iekey, t, cptpl)
	data := make([]byte, nvme.ResvKeysSize)
	binary.LittleEndian.PutUint64(data, k1)
	binary.LittleEndian.PutUint64(data[8:], k2)
	n := nvme.ResvKeysSize
	if op == nvme.OpResvRelease {
		n = nvme.ResvKeySize
	}
	return withData(c, n), data[:n]
}

func (h resvHost) register(action uint8, iekey bool, cptpl uint8, crkey, nrkey uint64) nvme.Status {
	c, d := resvCmd(nvme.OpResvRegister, action, iekey, 0, cptpl, crkey, nrkey)
	return h.io.submit(c, d).Status()
}

func (h resvHost) acquire(action uint8, t nvme.ResvType, crkey, prkey uint64) nvme.Status {
	c, d := resvCmd(nvme.OpResvAcquire, action, false, t, 0, crkey, prkey)
	return h.io.submit(c, d).Status()
}

func (h resvHost) release(action uint8, t nvme.ResvType, crkey uint64) nvme.Status {
	c, d := resvCmd(nvme.OpResvRelease, action, false, t, 0, crkey, 0)
	return h.io.submit(c, d).Status()
}

func (h resvHost) report(t *testing.T, eds bool) (*nvme.ResvStatus, nvme.Status) {
	t.Helper()
	c := newCmd(nvme.OpResvReport, 51)
	c.SetNSID(1)
	c.SetCDW(10, 1024-1)
	if eds {
		c.SetCDW(11, 1)
	}
	buf := make([]byte, 4096)
	st := h.io.submit(withData(c, len(buf)), buf).Status()
	if !st.IsSuccess() {
		return nil, st
	}
	s, ok := nvme.ParseResvStatus(buf, true)
	if !ok {
		t.Fatalf("report does not parse: % x", buf[:80])
	}
	return s, st
}

func (h resvHost) write() nvme.Status {
	return h.io.submit(ioCmd(nvme.OpWrite, 60, 0, 1), make([]byte, 512)).Status()
}

func (h resvHost) read() nvme.Status {
	return h.io.submit(ioCmd(nvme.OpRead, 61, 0, 1), make([]byte, 512)).Status()
}

var (
	idA = [16]byte{0xaa, 1}
	idB = [16]byte{0xbb, 2}
)

// TestReservationCommands: two hosts through the core, each command and a
// conflicting write, the report, and the notifications.
func TestReservationCommands(t *testing.T) {
	r := newRigOpts(t, Options{StateDir: t.TempDir()})
	a := r.connectHost(testHostNQN, idA)
	b := r.connectHost("nqn.2026-11.io.example:host2", idB)
	ok := nvme.StatusSuccess
	conflict := nvme.StatusReservationConflict.WithDNR()
	checks := []struct {
		name string
		got  nvme.Status
		want nvme.Status
	}{
		{"A registers 1", a.register(nvme.ResvRegister, false, 0, 0, 1), ok},
		{"B registers 2", b.register(nvme.ResvRegister, false, 0, 0, 2), ok},
		{"A takes write exclusive", a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0), ok},
		{"A writes", a.write(), ok},
		{"B's write conflicts", b.write(), conflict},
		{"B reads", b.read(), ok},
		{"B takes exclusive access from A", b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvExclusiveAccess, 2, 1), ok},
		{"A's read conflicts", a.read(), conflict},
		{"B writes", b.write(), ok},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	s, st := b.report(t, true)
	if !st.IsSuccess() || s.Gen != 3 || s.Type != nvme.ResvExclusiveAccess || len(s.Registrants) != 1 ||
		s.Registrants[0].HostID != idB || !s.Registrants[0].Holder || s.Registrants[0].Key != 2 || s.Registrants[0].CNTLID != 0xffff {
		t.Errorf("report %v %+v", st, s)
	}
	if _, st := b.report(t, false); st != nvme.StatusHostIDInconsistentFormat.WithDNR() {
		t.Errorf("report without EDS: %v", st)
	}
	// A was preempted: its log has a Registration Preempted entry.
	log, st := getLog(a.admin, nvme.LogReservationNotification, 64, 0)
	if n := nvme.ParseResvNotification(log); !st.IsSuccess() || n.Type != nvme.ResvNotifyRegistrationPreempt || n.NSID != 1 || n.Count != 1 {
		t.Errorf("A's notification %v %+v", st, n)
	}
	if log, _ := getLog(a.admin, nvme.LogReservationNotification, 64, 0); nvme.ParseResvNotification(log).Type != 0 {
		t.Error("the entry read is still there")
	}
	if st := b.release(nvme.ResvClear, 0, 2); !st.IsSuccess() {
		t.Errorf("clear: %v", st)
	}
	if st := a.write(); !st.IsSuccess() {
		t.Errorf("A's write after the clear: %v", st)
	}
}

// TestReservationPTPL: with PTPL set, the state is in the state directory
// and a new target restores it; cleared, the file goes; a file that does
// not parse refuses the namespace.
func TestReservationPTPL(t *testing.T) {
	dir := t.TempDir()
	r := newRigOpts(t, Options{StateDir: dir})
	a := r.connectHost(testHostNQN, idA)
	if st := a.register(nvme.ResvRegister, false, nvme.CPTPLSet, 0, 7); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := a.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 7, 0); !st.IsSuccess() {
		t.Fatal(st)
	}
	path := r.ns.statePath
	if !strings.HasPrefix(path, filepath.Join(dir, ResvStateDir)) {
		t.Fatalf("state path %s", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same namespace on a new target (a restart) has the state.
	add := func(stateDir string) (*Namespace, error) {
		tgt := NewTarget(Options{StateDir: stateDir})
		t.Cleanup(func() { tgt.Close() })
		s, err := tgt.AddSubsystem(SubsystemConfig{NQN: testNQN, AllowAnyHost: true})
		if err != nil {
			t.Fatal(err)
		}
		dev, _ := blockdev.NewMemory(4<<20, 512)
		return s.AddNamespace(NamespaceConfig{NSID: 1, Device: dev, UUID: [16]byte{0xaa, 1}})
	}
	ns, err := add(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info := ns.Reservation(); !info.PTPL || info.Type != nvme.ResvWriteExclusiveRegOnly || len(info.Holders) != 1 ||
		info.Holders[0] != idA || len(info.Registrants) != 1 || info.Registrants[0].Key != 7 {
		t.Fatalf("restored %+v", info)
	}
	// A broken file is refused, never dropped.
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := add(dir); err == nil || !strings.Contains(err.Error(), "reservation state") {
		t.Fatalf("a broken state file: %v", err)
	}
	os.WriteFile(path, data, 0o600)
	// Without PTPL (CPTPL 2) the file goes, and a restart starts empty.
	if st := a.register(nvme.ResvRegister, false, nvme.CPTPLClear, 0, 7); !st.IsSuccess() {
		t.Fatal(st)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("state file after PTPL cleared: %v", err)
	}
	if ns, err := add(dir); err != nil || ns.Reservation().Type != 0 {
		t.Fatalf("restart without PTPL: %v %+v", err, ns.Reservation())
	}
	// No state directory: PTPL cannot be set.
	r2 := newRig(t)
	h := r2.connectHost(testHostNQN, idA)
	if st := h.register(nvme.ResvRegister, false, nvme.CPTPLSet, 0, 7); st != nvme.StatusInvalidField.WithDNR() {
		t.Fatalf("CPTPL 3 without a state directory: %v", st)
	}
}

// TestReservationFeatures: Host Identifier cannot be set over fabrics; the
// notification mask keeps a masked kind out of the log; PTPL through 83h.
func TestReservationFeatures(t *testing.T) {
	r := newRigOpts(t, Options{StateDir: t.TempDir()})
	a := r.connectHost(testHostNQN, idA)
	b := r.connectHost("nqn.2026-11.io.example:host2", idB)
	set := func(h *host, fid uint8, nsid nvme.NSID, v uint32) nvme.Status {
		c := newCmd(nvme.OpAdminSetFeatures, 20)
		c.SetNSID(nsid)
		c.SetCDW(10, uint32(fid))
		c.SetCDW(11, v)
		return h.submit(c, nil).Status()
	}
	get := func(h *host, fid uint8, nsid nvme.NSID) (uint32, nvme.Status) {
		c := newCmd(nvme.OpAdminGetFeatures, 21)
		c.SetNSID(nsid)
		c.SetCDW(10, uint32(fid))
		rsp := h.submit(c, nil)
		return rsp.DW0(), rsp.Status()
	}
	if st := set(a.admin, nvme.FeatHostIdentifier, 0, 0); st != nvme.StatusCommandSequenceError.WithDNR() {
		t.Errorf("set host identifier: %v", st)
	}
	if st := set(a.admin, nvme.FeatReservationMask, 1, 1<<5); st != nvme.StatusInvalidField.WithDNR() {
		t.Errorf("mask with a reserved bit: %v", st)
	}
	if st := set(a.admin, nvme.FeatReservationMask, 9, nvme.ResvMaskReleased); st != nvme.StatusInvalidNamespace.WithDNR() {
		t.Errorf("mask of an inactive namespace: %v", st)
	}
	if st := set(a.admin, nvme.FeatReservationMask, nvme.NSIDAll, nvme.ResvMaskReleased); !st.IsSuccess() {
		t.Errorf("mask for all: %v", st)
	}
	if v, st := get(a.admin, nvme.FeatReservationMask, 1); !st.IsSuccess() || v != nvme.ResvMaskReleased {
		t.Errorf("get mask %v %#x", st, v)
	}
	// B holds WE-RO and releases it: A, who masked Released, hears nothing.
	a.register(nvme.ResvRegister, false, 0, 0, 1)
	b.register(nvme.ResvRegister, false, 0, 0, 2)
	b.acquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 2, 0)
	if st := b.release(nvme.ResvRelease, nvme.ResvWriteExclusiveRegOnly, 2); !st.IsSuccess() {
		t.Fatal(st)
	}
	if log, _ := getLog(a.admin, nvme.LogReservationNotification, 64, 0); nvme.ParseResvNotification(log).Type != 0 {
		t.Errorf("a masked notification was logged: %+v", nvme.ParseResvNotification(log))
	}
	if st := set(a.admin, nvme.FeatReservationPersist, 1, 1); !st.IsSuccess() {
		t.Errorf("set PTPL: %v", st)
	}
	if v, st := get(b.admin, nvme.FeatReservationPersist, 1); !st.IsSuccess() || v != 1 {
		t.Errorf("get PTPL %v %#x", st, v)
	}
	if s, _ := a.report(t, true); !s.PTPL {
		t.Error("report PTPLS 0 after 83h set it")
	}
}

// TestReservationAEN: a notification draws the Reservation Log Page
// Available event, once until the log is read.
func TestReservationAEN(t *testing.T) {
	r := newRig(t)
	a := r.connectHost(testHostNQN, idA)
	b := r.connectHost("nqn.2026-11.io.example:host2", idB)
	ev := aer(a.admin, 100)
	a.register(nvme.ResvRegister, false, 0, 0, 1)
	b.register(nvme.ResvRegister, false, 0, 0, 2)
	if st := b.acquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 2, 1); !st.IsSuccess() {
		t.Fatal(st)
	}
	wantEvent(t, ev, nvme.MakeAsyncEventResult(nvme.AsyncEventTypeIO, nvme.AsyncInfoReservationLog, nvme.LogReservationNotification))
	if id, _ := identify(a.admin, nvme.CNSNamespace, 1); nvme.IdentifyNamespace(id).RESCAP() != nvme.RESCAPTypes|nvme.RESCAPIEKEY {
		t.Errorf("RESCAP %#x without a state directory", nvme.IdentifyNamespace(id).RESCAP())
	}
}

// writeTo writes one block of namespace nsid.
func (h resvHost) writeTo(nsid nvme.NSID) nvme.Status {
	c := ioCmd(nvme.OpWrite, 62, 0, 1)
	c.SetNSID(nsid)
	return h.io.submit(c, make([]byte, 512)).Status()
}

// TestPreemptAbortWaitsPerNamespace: a Preempt and Abort waits for the
// preempted host's commands on the namespace it names, and only those: a
// write of that host held on another namespace does not hold it (the
// Linux host's I/O timeout, 30 s, would fence it out).
func TestPreemptAbortWaitsPerNamespace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  nvme.NSID // the namespace of A's held write
		waits bool
	}{
		{"a write on the namespace preempted", 1, true},
		{"a write on another namespace", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := blockdev.NewMemory(4<<20, 512)
			if err != nil {
				t.Fatal(err)
			}
			gate := &gatedDevice{Device: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
			r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
				if tc.held == 1 {
					nc.Device, nc.Workers = gate, 1
				}
			})
			ns2 := memNS(t, 2, 1<<20)
			if tc.held == 2 {
				ns2.Device, ns2.Workers = gate, 1
			}
			if _, err := r.sub.AddNamespace(ns2); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			release := func() { once.Do(func() { close(gate.release) }) }
			t.Cleanup(release)
			a := r.connectHost(testHostNQN, idA)
			b := r.connectHost("nqn.2026-11.io.example:host2", idB)
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
			go func() { wrote <- a.writeTo(tc.held) }()
			<-gate.entered
			preempted := make(chan nvme.Status, 1)
			go func() { preempted <- b.acquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 2, 1) }()
			if tc.waits {
				select {
				case st := <-preempted:
					t.Fatalf("the preempt and abort completed (%v) while A's write on the namespace still ran", st)
				case <-time.After(300 * time.Millisecond):
				}
				release()
			}
			select {
			case st := <-preempted:
				if st != ok {
					t.Errorf("preempt and abort: %v", st)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the preempt and abort did not complete")
			}
			release()
			if st := <-wrote; st != ok {
				t.Errorf("A's write, started before the preemption: %v", st)
			}
			if st := a.write(); st != nvme.StatusReservationConflict.WithDNR() {
				t.Errorf("A's write on namespace 1 after the preemption: %v, want a conflict", st)
			}
		})
	}
}
