//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// faultPosts is how many batch posts the fault build fails: alternately a QP's sends and its
// receives, half of them going in, as a full queue on a NIC would (verbs.FaultEnv).
const faultPosts = 4

// TestPostFailure runs nvmeof-tgt built with the faultinject tag and the race detector
// (NVMEOF_TGT_FAULT_BIN, built by tests/lab/e2e.sh), whose batch posts fail part-way on
// purpose. A post never fails on rxe otherwise, so this is the only test of that path: the
// queue must be torn down, exactly the requests whose work did not go in released, and the
// rest drained through their flushed completions. The kernel initiator then reconnects and
// retries, so fio's writes and crc32c verify must still succeed, and after the host leaves
// every queue must be gone (which needs every request back in its queue's free list) and the
// target must stop cleanly, with no data race reported.
func TestPostFailure(t *testing.T) {
	if targetKind == kindKernel {
		t.Skip("nvmeof-tgt only: the kernel target has no fault injection")
	}
	bin := os.Getenv("NVMEOF_TGT_FAULT_BIN")
	if bin == "" {
		t.Fatal("NVMEOF_TGT_FAULT_BIN is not set (tests/lab/e2e.sh builds bin/nvmeof-tgt-faultinject)")
	}
	h := newHost(t)
	sub := nqn("faults")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		// A file (its I/O in flight on the poller's io_uring when a queue dies) and memory.
		Namespaces: []Namespace{fileNS(t, 1, 16*mib, 4096, ""), memNS(2, 16*mib, 4096, "")},
	}}}
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	p := &tgtProcess{bin: bin, dir: dir, env: []string{
		fmt.Sprintf("NVMEOF_TGT_FAULT_POST=250:%d", faultPosts),
		"GORACE=halt_on_error=1 exitcode=66",
	}}
	p.Start(t, spec)
	logText := func() string {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Fatalf("target log: %v", err)
		}
		return string(b)
	}
	if !strings.Contains(logText(), "batch posts fail on purpose") {
		t.Fatalf("%s does not announce fault injection: not a faultinject build?", bin)
	}
	failed := func() int { return strings.Count(logText(), `msg="post work requests"`) }

	c := h.mustConnect(t, sub, 1, 2)
	// Write and verify until every planned fault has fired; each run must pass on its own.
	const maxRuns = 8
	for run := 0; failed() < faultPosts; run++ {
		if run == maxRuns {
			t.Fatalf("only %d of %d planned post failures after %d fio runs", failed(), faultPosts, maxRuns)
		}
		nsid := uint32(1 + run%2)
		runFio(t, c.blockDev(t, nsid), dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib})
		t.Logf("fio run %d on nsid %d done; %d post failures so far", run+1, nsid, failed())
	}
	text := logText()
	for _, want := range []string{"ibv_post_send: cannot allocate memory", "ibv_post_recv: cannot allocate memory"} {
		if !strings.Contains(text, want) {
			t.Errorf("target log has no %q: the plan alternates sends and receives", want)
		}
	}
	if n := failed(); n != faultPosts {
		t.Errorf("%d post failures logged, want exactly the %d planned", n, faultPosts)
	}

	c.disconnect(t)
	waitTornDown(t)
	p.Stop(t)
	if strings.Contains(logText(), "DATA RACE") {
		t.Errorf("the race detector reported a data race (see %s)", p.logPath)
	}
}
