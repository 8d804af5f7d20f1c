package fabric

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Scale (issue 21): a subsystem with more namespaces than one page of the active NSID list,
// and what a namespace costs while no command uses it.

// activeNSFrom reads the active NSID list (Identify CNS 02h) of NSIDs greater than after.
func activeNSFrom(t *testing.T, h *host, after nvme.NSID) []nvme.NSID {
	t.Helper()
	c := newCmd(nvme.OpAdminIdentify, 22)
	c.SetNSID(after)
	c.SetIdentify(nvme.CNSActiveNSList, 0, 0)
	buf := make([]byte, nvme.IdentifyDataSize)
	h.mustOK(withData(c, len(buf)), buf)
	return nsidList(buf)
}

func nsidsFrom(first, last nvme.NSID) []nvme.NSID {
	var out []nvme.NSID
	for id := first; id <= last; id++ {
		out = append(out, id)
	}
	return out
}

// TestManyNamespaces: 1,025 namespaces added while a host is connected. The active NSID list
// holds 1,024 a page, so the host pages (from 0, then from the last NSID it got, as the Linux
// host's nvme_scan_ns_list does); the Changed Namespace List, which holds 1,024, says "all";
// Identify Controller's NN and MNAN cover the largest NSID.
func TestManyNamespaces(t *testing.T) {
	const n = nvme.MaxNSListEntries + 1
	r := newRig(t) // namespace 1
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	setAEC(h, nvme.AECNSAttrNotices)
	ev := aer(h, 100)
	start := time.Now()
	for id := uint32(2); id <= n; id++ {
		if _, err := r.sub.AddNamespace(memNS(t, id, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("added %d namespaces in %v", n-1, time.Since(start))
	wantEvent(t, ev, nsChangedEvent) // once, until the list is read

	if got := activeNSFrom(t, h, 0); !slices.Equal(got, nsidsFrom(1, nvme.MaxNSListEntries)) {
		t.Fatalf("first page: %d NSIDs, want 1..%d", len(got), nvme.MaxNSListEntries)
	}
	if got := activeNSFrom(t, h, nvme.MaxNSListEntries); !slices.Equal(got, []nvme.NSID{n}) {
		t.Fatalf("second page: %v, want [%d]", got, n)
	}
	if got := activeNSFrom(t, h, n); len(got) != 0 {
		t.Fatalf("past the last: %v, want none", got)
	}
	// 1,024 distinct NSIDs changed (2..1025): the list holds them all. Reading it empties it.
	if got := changedNS(t, h, true); !slices.Equal(got, nsidsFrom(2, n)) {
		t.Fatalf("changed list: %d NSIDs, want 2..%d", len(got), n)
	}
	c := newCmd(nvme.OpAdminIdentify, 30)
	c.SetIdentify(nvme.CNSController, 0, 0)
	buf := make([]byte, nvme.IdentifyDataSize)
	h.mustOK(withData(c, len(buf)), buf)
	id := nvme.IdentifyController(buf)
	if id.NN() != n || id.MNAN() != n {
		t.Fatalf("NN %d MNAN %d, want %d", id.NN(), id.MNAN(), n)
	}
	if got := nsze(t, h, n); got != (1<<20)/512 {
		t.Fatalf("Identify Namespace %d: NSZE %d", n, got)
	}

	// All 1,025 removed: past 1,024 the list says "all".
	for id := nvme.NSID(1); id <= n; id++ {
		if err := r.sub.RemoveNamespace(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{nvme.NSIDAll}) {
		t.Fatalf("changed list after 1,025 changes: %v, want [FFFFFFFFh]", got)
	}
	if got := activeNSFrom(t, h, 0); len(got) != 0 {
		t.Fatalf("active list with none left: %v", got)
	}
}

// TestNamespaceWorkersOnDemand: a file or block namespace's workers start as commands wait
// for them, up to its Workers, so that a thousand namespaces nobody uses cost no goroutines
// and little memory; the workers still run commands side by side.
func TestNamespaceWorkersOnDemand(t *testing.T) {
	const nss, workers = 256, 32
	gate := &gatedDevice{entered: make(chan struct{}, 8), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
		mem, err := blockdev.NewMemory(1<<20, 512)
		if err != nil {
			t.Fatal(err)
		}
		gate.Device = mem
		nc.Device, nc.Workers = gate, workers
	})

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	for id := uint32(2); id < 2+nss; id++ {
		ns := memNS(t, id, 1<<20)
		ns.Workers = workers
		if _, err := r.sub.AddNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if g := runtime.NumGoroutine() - g0; g > 0 {
		t.Errorf("%d idle namespaces started %d goroutines, want none", nss, g)
	}
	// Counters sharded per queue slot (about 17 KiB) are most of a namespace.
	if per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / nss; per > 32<<10 {
		t.Errorf("an idle namespace takes %d bytes of heap, want at most 32 KiB", per)
	}

	// Three writes at once to namespace 1: three workers run them side by side.
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	g1 := runtime.NumGoroutine()
	done := make(chan nvme.Status, 3)
	for i := 0; i < 3; i++ {
		q := r.ioConnect(nvme.QID(i+1), cntlid)
		go func() { done <- q.submit(ioCmd(nvme.OpWrite, uint16(i+1), 0, 8), make([]byte, 4096)).Status() }()
	}
	for i := 0; i < 3; i++ {
		select {
		case <-gate.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 3 writes reached the device at once, want 3", i)
		}
	}
	release()
	for i := 0; i < 3; i++ {
		if st := <-done; !st.IsSuccess() {
			t.Fatalf("write: %v", st)
		}
	}
	// The loop queues' own goroutines come and go; the workers are at most Workers.
	if g := runtime.NumGoroutine() - g1; g > workers+8 {
		t.Errorf("%d more goroutines after three writes, want at most %d workers", g, workers)
	}
}

// readLog reads n bytes of log page lid at offset off.
func readLog(t *testing.T, h *host, lid uint8, n int, off uint64, retain bool) []byte {
	t.Helper()
	c := newCmd(nvme.OpAdminGetLogPage, 40)
	c.SetGetLogPage(lid, uint32(n/4), off)
	if retain {
		c.SetCDW(10, c.CDW(10)|1<<15)
	}
	buf := make([]byte, n)
	h.mustOK(withData(c, n), buf)
	return buf
}

// discoveryNQNs reads the discovery log as libnvme 1.3 does (nvme_discovery_log): the
// 1 KiB header, then the whole log in 4 KiB pieces, retaining the event but for the last. It
// returns the generation of the header and of the whole log's first piece, and the NQNs.
func discoveryNQNs(t *testing.T, h *host) (genHeader, genLog uint64, nqns []string) {
	t.Helper()
	hdr := readLog(t, h, nvme.LogDiscovery, nvme.DiscoveryLogHeaderSize, 0, true)
	genHeader = binary.LittleEndian.Uint64(hdr[0:])
	numrec := binary.LittleEndian.Uint64(hdr[8:])
	size := nvme.DiscoveryLogHeaderSize + int(numrec)*nvme.DiscoveryLogEntrySize
	log := make([]byte, 0, size)
	for off := 0; off < size; off += 4096 {
		n := min(4096, size-off)
		log = append(log, readLog(t, h, nvme.LogDiscovery, n, uint64(off), off+n < size)...)
	}
	genLog = binary.LittleEndian.Uint64(log[0:])
	if got := binary.LittleEndian.Uint64(log[8:]); got != numrec {
		t.Fatalf("NUMREC %d in the log, %d in its header", got, numrec)
	}
	for i := 0; i < int(numrec); i++ {
		e := log[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:][:nvme.DiscoveryLogEntrySize]
		nqns = append(nqns, strings.TrimRight(string(e[256:512]), "\x00"))
	}
	return genHeader, genLog, nqns
}

// TestDiscoveryLogInPieces: 256 subsystems make a 257 KiB discovery log, which the host reads
// in 4 KiB pieces at increasing offsets; every subsystem is in it once.
func TestDiscoveryLogInPieces(t *testing.T) {
	r := newRig(t)
	want := []string{testNQN}
	for i := 1; i < 256; i++ {
		nqn := fmt.Sprintf("%s-%03d", testNQN, i)
		if _, err := r.tgt.AddSubsystem(SubsystemConfig{NQN: nqn, AllowAnyHost: true}); err != nil {
			t.Fatal(err)
		}
		want = append(want, nqn)
	}
	disc, _ := r.adminConnect(nvme.DiscoveryNQN, testHostNQN, 0)
	g1, g2, got := discoveryNQNs(t, disc)
	if g1 != g2 {
		t.Fatalf("generation %d in the header, %d in the log, with nothing changed", g1, g2)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("discovery log lists %d subsystems, want the %d", len(got), len(want))
	}
}

// TestDiscoveryLogGenerationFirst: a subsystem added while a log is being built. The log
// carries the generation from before the change, so that a host comparing it with its next
// read sees the change and reads again (libnvme retries while the generation moves); with the
// later generation, the host would keep a log that lacks the subsystem.
func TestDiscoveryLogGenerationFirst(t *testing.T) {
	r := newRig(t)
	disc, _ := r.adminConnect(nvme.DiscoveryNQN, testHostNQN, 0)
	late := testNQN + "-late"
	var once sync.Once
	discoveryListed = func() {
		once.Do(func() {
			if _, err := r.tgt.AddSubsystem(SubsystemConfig{NQN: late, AllowAnyHost: true}); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { discoveryListed = func() {} })
	first := readLog(t, disc, nvme.LogDiscovery, 4096, 0, false)
	second := readLog(t, disc, nvme.LogDiscovery, 4096, 0, false)
	n1, n2 := binary.LittleEndian.Uint64(first[8:]), binary.LittleEndian.Uint64(second[8:])
	g1, g2 := binary.LittleEndian.Uint64(first[0:]), binary.LittleEndian.Uint64(second[0:])
	if n1 != 1 || n2 != 2 {
		t.Fatalf("records %d then %d, want 1 (built before the change) then 2", n1, n2)
	}
	if g1 == g2 {
		t.Fatalf("generation %d on the log built before the change and on the one after", g1)
	}
}
