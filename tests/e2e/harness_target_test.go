//go:build e2e

package e2e

import "testing"

// startTarget starts the selected target with spec for this test and returns it and the test's
// results directory.
func startTarget(t *testing.T, spec Spec) (target, string) {
	t.Helper()
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	tgt := newTarget(t, dir)
	tgt.Start(t, spec)
	return tgt, dir
}

// target is a running NVMe-oF target under test.
type target interface {
	// Start configures and starts the target and returns once the port accepts connections.
	// It registers a cleanup that stops the target.
	Start(t *testing.T, spec Spec)
	// Stop shuts the target down and asserts that it did so cleanly.
	Stop(t *testing.T)
	// Restart stops the target and starts it again with the same spec. File-backed namespaces
	// keep their data; memory-backed ones start empty.
	Restart(t *testing.T)
}

// newTarget returns the target that E2E_TARGET selects, writing its files under dir.
func newTarget(t *testing.T, dir string) target {
	t.Helper()
	switch targetKind {
	case kindKernel:
		return &kernelTarget{dir: dir}
	default:
		return &tgtProcess{bin: tgtBin, dir: dir}
	}
}

// onlyNvmeofTgt ends the current subtest in kernel mode. got is what the kernel reported, logged so
// that the parsing behind the assertion is still exercised.
func onlyNvmeofTgt(t *testing.T, what string, got any) {
	t.Helper()
	if targetKind == kindKernel {
		t.Skipf("nvmeof-tgt only: %s (kernel nvmet reports %v; not asserted)", what, got)
	}
}
