//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// twoTargetsYAML is one of two nvmeof-tgt processes serving one subsystem on one shared file:
// its own port, port ID, controller-ID range, metrics address and state directory; group 1's
// state through its port.
func twoTargetsYAML(sub, img string, service, portID, cntlidMin, cntlidMax int, state, metrics, stateDir string) string {
	return fmt.Sprintf(`ports:
  - {id: %d, transport: rdma, address: %q, port: %d, ana_groups: {1: %s}}
state_dir: %q
subsystems:
  - nqn: %q
    allow_any_host: true
    cntlid_min: %d
    cntlid_max: %d
    namespaces:
      - {nsid: 1, path: %q, size: 64MiB}
metrics: {listen: %q}
log: {level: debug}
`, portID, labAddr, service, state, stateDir, sub, cntlidMin, cntlidMax, img, metrics)
}

// ctrlState is the host's state of controller ctrl (/sys/class/nvme/nvmeN/state).
func ctrlState(ctrl string) string { return readSys(filepath.Join("/sys/class/nvme", ctrl, "state")) }

// TestTwoTargets: two nvmeof-tgt processes serve one subsystem on one shared file, each on its
// own port with a disjoint controller-ID range; the host sees one subsystem with two paths (the
// same namespace identifiers from both). Killing the optimized one with SIGKILL while fio
// verifies loses nothing and fails nothing: I/O moves to the other path. Restarted, the killed
// one's path comes back and is optimized again.
func TestTwoTargets(t *testing.T) {
	requireTgt(t, "two nvmeof-tgt processes serving one subsystem")
	h := newHost(t)
	sub := nqn("two-targets")
	ns := fileNS(t, 1, 64*mib, 0, "")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{ns}}}}
	dir := testDir(t)
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	a, _ := startTgt(t, spec, withDir(dirA), withConfig(twoTargetsYAML(sub, ns.Path, portRDMA, 1, 1, 999,
		"optimized", "127.0.0.1:9771", filepath.Join(dirA, "state"))))
	b, _ := startTgt(t, spec, withDir(dirB), withConfig(twoTargetsYAML(sub, ns.Path, mpPort2, 2, 1000, 1999,
		"non-optimized", "127.0.0.1:9772", filepath.Join(dirB, "state"))))

	ca := mpConnect(t, h, sub, labAddr, portRDMA)
	cb := mpConnect(t, h, sub, labAddr, mpPort2)
	if ctrls := controllersOf(sub, h.NQN); len(ctrls) != 2 {
		t.Fatalf("the host sees %d controllers of %s, want one per target: %v", len(ctrls), sub, ctrls)
	}
	// Each target hands out controller IDs from its own range.
	for _, c := range []struct {
		ctrl     string
		min, max uint64
	}{{ca, 1, 999}, {cb, 1000, 1999}} {
		if id, err := readSysUint(filepath.Join("/sys/class/nvme", c.ctrl, "cntlid")); err != nil || id < c.min || id > c.max {
			t.Errorf("%s: cntlid %d (%v), want %d..%d", c.ctrl, id, err, c.min, c.max)
		}
	}
	// One subsystem, one namespace head with two paths: the host matched the identifiers.
	dev := headDev(t, sub, 1)
	if n := len(blockDevsOf(sub)); n != 1 {
		t.Fatalf("the host made %d block devices of %s, want one namespace head", n, sub)
	}
	waitPathStates(t, "at connect", []string{ca, cb}, [3]map[uint32]string{{1: "optimized"}, {1: "non-optimized"}, nil}, 10*time.Second)

	fio := mpFio(t, dev, dir, 4096, 40*time.Second)
	time.Sleep(10 * time.Second)
	a.Crash(t)
	t.Logf("target A killed; path %s is %s", ca, ctrlState(ca))
	time.Sleep(10 * time.Second)
	a.Start(t, spec)
	if err := waitFor(time.Minute, func() bool { return ctrlState(ca) == "live" }); err != nil {
		t.Fatalf("the killed target's path did not come back: %s is %s", ca, ctrlState(ca))
	}
	waitPathStates(t, "after the restart", []string{ca, cb}, [3]map[uint32]string{{1: "optimized"}, {1: "non-optimized"}, nil}, 10*time.Second)
	if err := <-fio; err != nil {
		t.Fatal(err)
	}
	if !b.status(t).connected(sub, h.NQN) {
		t.Error("target B lost the host")
	}
}
