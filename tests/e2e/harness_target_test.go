//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"
)

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

// startTarget starts the target E2E_TARGET selects with spec for this test and returns it and
// the directory of its files (the test's results directory). Options configure nvmeof-tgt: a
// test that passes any needs nvmeof-tgt (requireTgt), and startTgt gives it the process.
func startTarget(t *testing.T, spec Spec, opts ...tgtOption) (target, string) {
	t.Helper()
	if targetKind == kindKernel {
		if len(opts) > 0 {
			t.Fatal("startTarget: options configure nvmeof-tgt, and this run tests the kernel target (requireTgt first)")
		}
		dir := testDir(t)
		dumpDmesgOnFailure(t, dir)
		k := &kernelTarget{dir: dir}
		k.Start(t, spec)
		return k, dir
	}
	return startTgt(t, spec, opts...)
}

// startTgt starts nvmeof-tgt with spec and opts for this test and returns it and the directory of
// its files. A test that calls it needs nvmeof-tgt: it says so with requireTgt first.
func startTgt(t *testing.T, spec Spec, opts ...tgtOption) (*tgtProcess, string) {
	t.Helper()
	if targetKind != kindNvmeofTgt {
		t.Fatal("startTgt: this run tests the kernel target (requireTgt first)")
	}
	p := &tgtProcess{bin: tgtBin}
	for _, o := range opts {
		o(p)
	}
	if p.dir == "" {
		p.dir = testDir(t)
	} else if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatalf("target dir: %v", err)
	}
	dumpDmesgOnFailure(t, p.dir)
	p.Start(t, spec)
	return p, p.dir
}

// tgtOption configures the nvmeof-tgt process of startTgt (or startTarget). Options hold across
// Restart.
type tgtOption func(*tgtProcess)

// withEnv adds KEY=VALUE pairs to the target's environment: NVMEOF_TGT_* settings, fault plans,
// WATCHDOG_USEC.
func withEnv(kv ...string) tgtOption {
	return func(p *tgtProcess) { p.env = append(p.env, kv...) }
}

// withBinary runs bin instead of $NVMEOF_TGT_BIN, e.g. the faultinject build (faultBin).
func withBinary(bin string) tgtOption {
	return func(p *tgtProcess) { p.bin = bin }
}

// withNotify has fn see every systemd notify datagram the target sends, as it arrives.
func withNotify(fn func(msg string)) tgtOption {
	return func(p *tgtProcess) { p.onNotify = fn }
}

// withConfig starts the target with yaml as its whole configuration file instead of the one
// rendered from the spec: for what Spec does not model (several ports, port IDs, ANA groups,
// referrals, state_dir...). The harness appends the api section, whose socket is new at each
// start, so yaml must have none. The rendered file also puts metrics on metricsURL and logs at
// debug: a whole file that wants either says so itself. The spec still names the namespaces
// whose images and loop devices the harness makes and removes.
func withConfig(yaml string) tgtOption {
	return withConfigEdit(func(string) string { return yaml })
}

// withConfigEdit starts the target with edit(rendered) as its configuration file, rendered
// being the file made from the spec (tgtConfigYAML: block namespaces on their loop devices,
// metrics on metricsURL) without its api section, which the harness appends afterwards. Edits
// apply in the order given; withSubsystem is one.
func withConfigEdit(edit func(rendered string) string) tgtOption {
	return func(p *tgtProcess) {
		prev := p.config
		p.config = func(y string) string {
			if prev != nil {
				y = prev(y)
			}
			return edit(y)
		}
	}
}

// withDir puts the target's configuration file and log in dir, made if missing, instead of the
// test's results directory (TestBench and TestTwoTargets keep each target's files apart).
func withDir(dir string) tgtOption {
	return func(p *tgtProcess) { p.dir = dir }
}

// requireTgt skips the test, or the subtest, in a run against the kernel target: what follows
// holds for nvmeof-tgt only, for the reason why. got, if given, is what the kernel target reported
// instead, logged so that the parsing behind the assertion still runs. It is the suite's one
// skip.
func requireTgt(t *testing.T, why string, got ...any) {
	t.Helper()
	if targetKind != kindKernel {
		return
	}
	if len(got) > 0 {
		t.Skipf("nvmeof-tgt only: %s (kernel nvmet reports %v; not asserted)", why, fmt.Sprint(got...))
	}
	t.Skipf("nvmeof-tgt only: %s", why)
}
