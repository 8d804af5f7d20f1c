//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// faultPosts is how many batch posts the fault build fails: alternately a QP's sends and its
// receives (with a shared receive queue, the SRQ's), half of them going in, as a full queue on
// a NIC would (verbs.FaultEnv).
const faultPosts = 8

// TestPostFailure runs nvmeof-tgt built with the faultinject tag and the race detector
// (NVMEOF_TGT_FAULT_BIN, built by tests/lab/e2e.sh), whose batch posts fail part-way on
// purpose. A post never fails on rxe otherwise, so this is the only test of that path: the
// queue must be torn down, exactly the requests whose work did not go in released, and the
// rest drained through their flushed completions. With a shared receive queue (rxe has them)
// the receive failures are the SRQ's: no queue is torn down for them, and the buffers left out
// wait for the SRQ to grow. The kernel initiator then reconnects and
// retries, so fio's writes and crc32c verify must still succeed, and after the host leaves
// every queue must be gone (which needs every request back in its queue's free list) and the
// target must stop cleanly, with no data race and no request released twice.
//
// The fio runs cycle through 1 MiB (two READs per write, so a cut can fall inside one
// request's READ chain), 128 KiB (writes fetched with one RDMA READ, reads answered with
// WRITE+SEND chains) and 4 KiB (in-capsule writes), on a file and a memory namespace, with two
// pollers posting concurrently. Which requests a cut hits is up to timing.
func TestPostFailure(t *testing.T) {
	bin := faultBin(t)
	h := newHost(t)
	sub := nqn("faults")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		// A file (its I/O in flight on the poller's io_uring when a queue dies) and memory.
		Namespaces: []Namespace{fileNS(t, 1, 16*mib, 4096, ""), memNS(2, 16*mib, 4096, "")},
	}}}
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	// The log is appended to (a -count run reuses the directory): read only this run's part.
	logPath := filepath.Join(dir, tgtLogName)
	var logStart int64
	if st, err := os.Stat(logPath); err == nil {
		logStart = st.Size()
	}
	logText := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatalf("target log: %v", err)
		}
		return string(b[min(logStart, int64(len(b))):])
	}
	// Runs after the target's own cleanup stops it. A race halts the target at once, so
	// the test may fail in fio first: this still says why.
	t.Cleanup(func() {
		if strings.Contains(logText(), "DATA RACE") {
			t.Errorf("the race detector reported a data race (see %s)", logPath)
		}
	})
	p, _ := startTgt(t, spec, withBinary(bin), withEnv(
		fmt.Sprintf("NVMEOF_TGT_FAULT_POST=20:%d", faultPosts),
		"NVMEOF_TGT_RDMA_POLLERS=2",
		"GORACE=halt_on_error=1 exitcode=66",
	))
	if !strings.Contains(logText(), "faults injected on purpose") {
		t.Fatalf("%s does not announce fault injection: not a faultinject build?", bin)
	}
	failed := func() int {
		text := logText()
		return strings.Count(text, `msg="post work requests"`) + strings.Count(text, `msg="post SRQ receives"`)
	}
	srq := !regexp.MustCompile(`msg="RDMA device ready".* srq_depth=0 `).MatchString(logText())

	// A queue lost while the host sets a controller up again is noticed only when the admin
	// command on it times out (60 s by default): shorten that for this controller.
	shortAdminTimeout(t, 5)
	c := h.mustConnect(t, sub, 1, 2)
	// Write and verify, every block size at least once, until every planned fault has fired;
	// each run must pass on its own. Large requests first: they make few posts, and the small
	// ones spend what is left of the plan.
	const maxRuns = 12
	sizes := []int{mib, 128 * kib, 4 * kib}
	for run := 0; run < len(sizes) || failed() < faultPosts; run++ {
		if run == maxRuns {
			m := scrapeMetrics(t)
			posts, _ := metricSum(m, "nvmeof_tgt_rdma_post_calls_total")
			t.Fatalf("only %d of %d planned post failures after %d fio runs (%v batch posts)", failed(), faultPosts, maxRuns, posts)
		}
		nsid, bs := uint32(1+run%2), sizes[run%len(sizes)]
		runFio(t, c.blockDev(t, nsid), dir, fioCase{rw: "randwrite", bs: bs, iodepth: 32, size: 16 * mib})
		t.Logf("fio run %d (nsid %d, %s) done; %d post failures so far", run+1, nsid, sizeName(int64(bs)), failed())
	}
	text := logText()
	// Each injected failure must have torn down a live queue, on both kinds of work request.
	torn := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, `msg="queue disconnecting"`) && strings.Contains(line, `reason="post failed"`) {
			torn++
		}
	}
	wantTorn, recvErr := faultPosts, "ibv_post_recv: cannot allocate memory"
	if srq {
		wantTorn, recvErr = faultPosts/2, "ibv_post_srq_recv: cannot allocate memory"
	}
	if torn != wantTorn {
		t.Errorf("%d queues torn down for a failed post, want %d (one per injected failure of a queue's own work)", torn, wantTorn)
	}
	for _, want := range []string{"ibv_post_send: cannot allocate memory", recvErr} {
		if !strings.Contains(text, want) {
			t.Errorf("target log has no %q: the plan alternates sends and receives", want)
		}
	}

	c.disconnect(t)
	waitTornDown(t)
	p.Stop(t)
	// A wait line that refused a request is a sizing bug (rdma/fifo.go).
	if strings.Contains(logText(), "wait line full") {
		t.Errorf("a request found its wait line full (see %s)", p.logPath)
	}
}

// TestCreateQPFailure: a connection whose queue pair cannot be created is
// refused, everything its setup took is given back, and the target serves
// the host's next attempt.
func TestCreateQPFailure(t *testing.T) {
	bin := faultBin(t)
	h := newHost(t)
	sub := nqn("createqp")
	// The second QP is the host's first I/O queue: its admin queue is set
	// up by then, and must be undone by the host's failed connect.
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}}}},
		withBinary(bin), withEnv("NVMEOF_TGT_FAULT_CREATEQP=2", "GORACE=halt_on_error=1 exitcode=66"))
	if _, err := h.connect(t, sub); err == nil {
		t.Fatal("connect succeeded although the target could not create its I/O queue's QP")
	}
	b, _ := os.ReadFile(p.logPath)
	if !strings.Contains(string(b), "create QP failed") {
		t.Fatalf("no \"create QP failed\" rejection in the target's log")
	}
	waitTornDown(t)
	c := h.mustConnect(t, sub, 1)
	ddWrite(t, c.blockDev(t, 1), 0, pattern(mib, 41))
	checkSame(t, "after a refused connection", 0, ddRead(t, c.blockDev(t, 1), 0, mib), pattern(mib, 41))
	c.disconnect(t)
	waitTornDown(t)
	p.Stop(t)
	if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "DATA RACE") {
		t.Errorf("the race detector reported a data race (see %s)", p.logPath)
	}
}

// shortAdminTimeout sets the host's admin command timeout (seconds) for controllers created
// from now until the test ends.
func shortAdminTimeout(t *testing.T, secs int) {
	t.Helper()
	const param = "/sys/module/nvme_core/parameters/admin_timeout"
	old, err := os.ReadFile(param)
	if err != nil {
		t.Fatalf("admin timeout: %v", err)
	}
	if err := os.WriteFile(param, []byte(strconv.Itoa(secs)), 0o644); err != nil {
		t.Fatalf("admin timeout: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(param, bytes.TrimSpace(old), 0o644); err != nil {
			t.Errorf("restore admin timeout: %v", err)
		}
	})
}

// faultBin is the faultinject build of nvmeof-tgt that tests/lab/e2e.sh
// makes. The kernel target has no fault injection: those runs skip.
func faultBin(t *testing.T) string {
	t.Helper()
	requireTgt(t, "the kernel target has no fault injection")
	bin := os.Getenv("NVMEOF_TGT_FAULT_BIN")
	if bin == "" {
		t.Fatal("NVMEOF_TGT_FAULT_BIN is not set (tests/lab/e2e.sh builds bin/nvmeof-tgt-faultinject)")
	}
	return bin
}
