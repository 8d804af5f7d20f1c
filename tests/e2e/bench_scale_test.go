//go:build e2e && bench

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
)

// The scale phase of make bench (BENCH_JOBS names its parts scale/subsystems and
// scale/namespaces): the host connecting to 256 subsystems, and seeing 1,024 namespaces of one,
// with what each controller and namespace costs the target. It runs on nvmeof-tgt alone,
// before the fio phase, on the lab port.

// runScale runs the selected parts in dir and stops their targets.
func runScale(t *testing.T, dir string, selected func(string) bool) *bench.ScaleRun {
	t.Helper()
	sc := &bench.ScaleRun{}
	if selected("scale/subsystems") {
		r := startSubsystems(t, filepath.Join(dir, "subsystems"), scaleSubsystems)
		r.connectAll(t)
		sc.Subsystems, sc.ConnectSeconds = len(r.nqns), r.Connect.Seconds()
		sc.Idle, sc.Connected = benchMem(r.Idle), benchMem(r.Connected)
		deleteControllersOf(t, r.h.NQN)
		r.p.Stop(t)
	}
	if selected("scale/namespaces") {
		r := seeNamespaces(t, filepath.Join(dir, "namespaces"), nqn("bench-scale-ns"), scaleNamespaces, nil)
		sc.Namespaces, sc.ReloadSeconds, sc.SeeSeconds = scaleNamespaces, r.Reload.Seconds(), r.See.Seconds()
		sc.Empty, sc.Loaded = benchMem(r.Empty), benchMem(r.Loaded)
		deleteControllersOf(t, r.h.NQN)

		// As many file namespaces, never used, in a second subsystem: the target creates them.
		files := Subsystem{NQN: nqn("bench-scale-files"), AllowAnyHost: true}
		for i := 1; i <= scaleNamespaces; i++ {
			path := filepath.Join(scratchDir, fmt.Sprintf("bench-scale-ns%d.img", i))
			t.Cleanup(func() { os.Remove(path) })
			files.Namespaces = append(files.Namespaces, Namespace{NSID: uint32(i), Backend: BackendFile, Path: path, Size: scaleNSSize, BlockSize: 512})
		}
		r.spec.Subsystems = append(r.spec.Subsystems, files)
		sc.FileReloadSeconds = r.reload(t).Seconds()
		fileLoaded := sampleMem(t)
		sc.FileLoaded = benchMem(fileLoaded)
		t.Logf("a reload added %d file namespaces in %.1f s: target %v, %v per namespace",
			scaleNamespaces, sc.FileReloadSeconds, fileLoaded, perItem(r.Loaded, fileLoaded, scaleNamespaces))
		r.p.Stop(t)
	}
	return sc
}

func benchMem(m tgtMem) bench.MemSample {
	return bench.MemSample{RSS: m.RSS, Heap: m.Heap, Goroutines: m.Goroutines}
}
