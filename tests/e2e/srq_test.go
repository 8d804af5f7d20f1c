//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// TestSRQ: the RDMA transport with a shared receive queue per poller
// (rdma.srq auto, which the rest of the suite runs with: rxe has SRQs) and
// without (rdma.srq: off, the suite's one run of it). Either way a host with
// several I/O queues writes and verifies data at depth 1 and 32, in the
// capsule and with RDMA READs; the target says at start which it took, and
// registers what that implies (nvmeof_tgt_rdma_registered_bytes): without
// SRQ, receive buffers for every queue block (rdma.max_queues by the
// device: 64); with SRQ, 2048 per poller, and for each of its 1024 queue
// blocks only responses. Afterwards every queue and buffer is released. And the SRQ grows when
// it runs low (subtest grows).
func TestSRQ(t *testing.T) {
	requireTgt(t, "nvmeof-tgt's rdma.srq")
	const (
		depth  = limits.MaxQueueDepth
		icd    = limits.RDMAInCapsuleDataSize
		recv   = 64 + icd // a receive buffer: the command and its in-capsule data
		rsp    = 2 * depth * 16
		pool   = limits.RDMABufferPoolSize
		slack  = 3 * limits.RDMAIOUnitSize // the parts' alignment
		noSRQ  = limits.RDMAMaxQueues*(depth*recv+rsp) + pool
		theSRQ = limits.RDMASRQDepth*recv + limits.RDMAMaxQueuesSRQ*rsp + pool
	)
	for _, tc := range []struct {
		name       string
		env        []string
		srqDepth   int
		registered int64
	}{
		{"on", nil, limits.RDMASRQDepth, theSRQ},
		{"off", []string{"NVMEOF_TGT_RDMA_SRQ=off"}, 0, noSRQ},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := nqn("srq-" + tc.name)
			spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true,
				Namespaces: []Namespace{memNS(1, 64*mib, 512, "")}}}}
			p, dir := startTgt(t, spec, withEnv(tc.env...))
			c, err := newHost(t).connectWith(t, sub, portRDMA, "-i", "2", "-W", "2")
			if err != nil {
				t.Fatal(err)
			}
			dev := c.blockDev(t, 1)
			for _, fc := range []fioCase{
				{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib},
				{rw: "write", bs: 128 * kib, iodepth: 32, size: 16 * mib},
				{rw: "randwrite", bs: 4 * kib, iodepth: 1, size: 2 * mib},
			} {
				t.Run(fc.name(), func(t *testing.T) { runFio(t, dev, dir, fc) })
			}

			log, err := os.ReadFile(p.logPath)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`msg="RDMA device ready".* srq_depth=(\d+)`).FindSubmatch(log)
			if m == nil {
				t.Fatalf("the target's log says nothing of its SRQ (%s)", p.logPath)
			}
			if got, _ := strconv.Atoi(string(m[1])); got != tc.srqDepth {
				t.Errorf("device ready with srq_depth=%d, want %d", got, tc.srqDepth)
			}
			for _, bad := range []string{"arm the shared receive queue", "post SRQ receives", "wait line full"} {
				if strings.Contains(string(log), bad) {
					t.Errorf("the target's log has %q (%s)", bad, p.logPath)
				}
			}
			reg, ok := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_registered_bytes")
			if !ok || reg < float64(tc.registered) || reg > float64(tc.registered+slack) {
				t.Errorf("nvmeof_tgt_rdma_registered_bytes = %v (found %v), want %d up to %d more for alignment",
					reg, ok, tc.registered, slack)
			}
			t.Logf("rdma.srq %s: %s registered", tc.name, fmt.Sprintf("%.1f MiB", reg/mib))
			// Every receive buffer is given to the SRQ at start: posted, or
			// held by a command the target has (the host's AERs).
			sm := scrapeMetrics(t)
			posted, _ := metricSum(sm, "nvmeof_tgt_rdma_srq_posted")
			held, _ := metricSum(sm, "nvmeof_tgt_rdma_srq_held")
			if posted+held != float64(tc.srqDepth) {
				t.Errorf("SRQ buffers posted %v and held %v, want %d in all", posted, held, tc.srqDepth)
			}

			c.disconnect(t)
			waitTornDown(t)
			checkBuffersReleased(t)
			checkSRQBuffers(t, tc.srqDepth)
			// The QPs went on their IBV_EVENT_QP_LAST_WQE_REACHED (rxe sends
			// it), not on the timeout.
			if log, _ := os.ReadFile(p.logPath); strings.Contains(string(log), "no IBV_EVENT_QP_LAST_WQE_REACHED") {
				t.Errorf("the target's log has queues destroyed without their last WQE event (%s)", p.logPath)
			}
		})
	}

	// The default setup under a burst of many queues: srqBurstCtrls controllers, each
	// with its own host, subsystem and file namespace (slow enough in the guest that
	// capsules pile up in the target), written at depth 128 at once: up to 768 commands on
	// the one poller, more than a quarter of its SRQ (what used to be posted at start). No
	// host meets an empty SRQ: none reconnects, no queue is torn down, no limit event
	// comes, and every write verifies.
	t.Run("burst", func(t *testing.T) {
		const srqBurstCtrls = 6
		spec := Spec{Port: rdmaPort()}
		for i := range srqBurstCtrls {
			// NSIDs differ so that the files do (fileNS names them by NSID).
			spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn(fmt.Sprintf("srq-burst-%d", i)), AllowAnyHost: true,
				Namespaces: []Namespace{fileNS(t, uint32(i+1), 32*mib, 4096, "")}})
		}
		p, dir := startTgt(t, spec)
		var ctrls []*controller
		var devs []string
		for i, sub := range spec.Subsystems {
			c, err := newHost(t).connectWith(t, sub.NQN, portRDMA, "-i", "2", "-W", "2")
			if err != nil {
				t.Fatal(err)
			}
			ctrls = append(ctrls, c)
			devs = append(devs, c.blockDev(t, uint32(i+1)))
		}
		before := scrapeMetrics(t)
		accepted, _ := metricSum(before, "nvmeof_tgt_rdma_connections_total", `event="accepted"`)
		peak := make(chan float64, 1)
		stop := make(chan struct{})
		go func() { // the most capsules held at once, for the log
			top := 0.0
			for {
				select {
				case <-stop:
					peak <- top
					return
				case <-time.After(100 * time.Millisecond):
				}
				if v, ok := metricSumOK(metricsURL, "nvmeof_tgt_rdma_srq_held"); ok {
					top = max(top, v)
				}
			}
		}()
		var once sync.Once
		defer once.Do(func() { close(stop) }) // when fio fails
		runFioJobs(t, devs, dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 128, size: 16 * mib})
		once.Do(func() { close(stop) })
		after := scrapeMetrics(t)
		t.Logf("burst of %d controllers at depth 128: at most %v SRQ buffers held at once", srqBurstCtrls, <-peak)
		if a, _ := metricSum(after, "nvmeof_tgt_rdma_connections_total", `event="accepted"`); a != accepted {
			t.Errorf("%v queues accepted during the burst: hosts reconnected", a-accepted)
		}
		if ev, _ := metricSum(after, "nvmeof_tgt_rdma_srq_limit_events_total"); ev != 0 {
			t.Errorf("%v SRQ limit events at the defaults, want none: every buffer is posted at start", ev)
		}
		log, _ := os.ReadFile(p.logPath)
		for _, bad := range []string{"queue disconnecting", "post SRQ receives", "wait line full", "shared receive queue"} {
			if strings.Contains(string(log), bad) {
				t.Errorf("the target's log has %q during the burst (%s)", bad, p.logPath)
			}
		}
		for _, c := range ctrls {
			c.disconnect(t)
		}
		waitTornDown(t)
		checkBuffersReleased(t)
		checkSRQBuffers(t, limits.RDMASRQDepth)
	})

	// The SRQ limit event on rxe: the faultinject build gives the SRQ 64 receive buffers and
	// posts only 16 of them at start (as if a post had left the rest out), the limit armed at
	// 4, and a host writes to a file at depth 14: capsules wait for the backend holding their
	// buffers, the SRQ runs below its limit (13 held), and the event gives it its spare
	// buffers (32, the limit at 8, and maybe all 64 on a second event). The SRQ never runs
	// empty: a host whose capsules meet RNR NAKs from an empty SRQ in a storm (depth 128 on 64
	// buffers) saw its rxe QP flushed after a few seconds and reconnected in a loop, which is
	// not what this tests.
	t.Run("grows", func(t *testing.T) {
		bin := faultBin(t)
		sub := nqn("srq-grows")
		spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true,
			Namespaces: []Namespace{fileNS(t, 1, 64*mib, 4096, "")}}}}
		p, dir := startTgt(t, spec, withBinary(bin), withEnv("NVMEOF_TGT_FAULT_SRQ_DEPTH=64", "NVMEOF_TGT_FAULT_SRQ_START=16",
			"GORACE=halt_on_error=1 exitcode=66"))
		c, err := newHost(t).connectWith(t, sub, portRDMA, "-i", "2", "-W", "2")
		if err != nil {
			t.Fatal(err)
		}
		runFio(t, c.blockDev(t, 1), dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 14, size: 8 * mib})
		m := scrapeMetrics(t)
		events, _ := metricSum(m, "nvmeof_tgt_rdma_srq_limit_events_total")
		posted, _ := metricSum(m, "nvmeof_tgt_rdma_srq_posted")
		held, _ := metricSum(m, "nvmeof_tgt_rdma_srq_held")
		log, _ := os.ReadFile(p.logPath)
		grew := strings.Count(string(log), "shared receive queue ran low")
		t.Logf("SRQ limit events: %v; grown %d times; %v buffers posted and %v held", events, grew, posted, held)
		if events < 1 || int(events) != grew {
			t.Errorf("%v SRQ limit events, %d logged: want at least one, each logged", events, grew)
		}
		if given := posted + held; given <= 16 {
			t.Errorf("the SRQ was given %v buffers, want more than the 16 posted at start", given)
		}
		for _, bad := range []string{"arm the shared receive queue", "DATA RACE", "wait line full"} {
			if strings.Contains(string(log), bad) {
				t.Errorf("the target's log has %q (%s)", bad, p.logPath)
			}
		}
		c.disconnect(t)
		waitTornDown(t)
		checkBuffersReleased(t)
	})
}

// checkSRQBuffers asserts that the pollers' shared receive queues
// (nvmeof_tgt_rdma_srq_posted and _held) have depth buffers each, all
// posted: none bound to a queue, and none of their overflow holding a
// capsule. depth 0: no SRQ, and no such series.
func checkSRQBuffers(t *testing.T, depth int) {
	t.Helper()
	m := scrapeMetrics(t)
	posted, ok := metricSum(m, "nvmeof_tgt_rdma_srq_posted")
	held, _ := metricSum(m, "nvmeof_tgt_rdma_srq_held")
	over, _ := metricSum(m, "nvmeof_tgt_rdma_srq_overflow_held")
	switch {
	case depth == 0 && ok:
		t.Errorf("nvmeof_tgt_rdma_srq_posted = %v without an SRQ, want no series", posted)
	case depth > 0 && (posted != float64(depth) || held != 0 || over != 0):
		t.Errorf("SRQ buffers posted %v (found %v), held %v, overflow held %v; want %d, 0 and 0", posted, ok, held, over, depth)
	}
}

// metricSumOK is metricSum over a scrape of url that reports failure
// instead of failing the test: for a goroutine of its own.
func metricSumOK(url, name string) (float64, bool) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				m[line[:i]] = v
			}
		}
	}
	return metricSum(m, name)
}

// runFioJobs runs c on every device at once, one fio job each in one fio
// process, writing and then verifying every block, and asserts that each
// job wrote and read back all of it without error.
func runFioJobs(t *testing.T, devs []string, outDir string, c fioCase) {
	t.Helper()
	report := filepath.Join(outDir, "fio-jobs-"+c.name()+".json")
	args := []string{"--ioengine=libaio", "--direct=1", "--rw=" + c.rw, "--bs=" + strconv.Itoa(c.bs),
		"--iodepth=" + strconv.Itoa(c.iodepth), "--size=" + strconv.FormatInt(c.size, 10), "--offset=0",
		"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0",
		"--output-format=json", "--output=" + report}
	for i, d := range devs {
		args = append(args, fmt.Sprintf("--name=job%d", i), "--filename="+d)
	}
	r := run(t, fioTimeout, "fio", args...)
	raw, rerr := os.ReadFile(report)
	if r.err != nil {
		t.Fatalf("fio: %v\nreport:\n%s", r.err, limit(raw))
	}
	if rerr != nil {
		t.Fatalf("fio report: %v", rerr)
	}
	var rep fioReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("fio report %s: %v", report, err)
	}
	if len(rep.Jobs) != len(devs) {
		t.Fatalf("fio report has %d jobs, want %d", len(rep.Jobs), len(devs))
	}
	for _, j := range rep.Jobs {
		if j.Error != 0 || j.Write.IOBytes != uint64(c.size) || j.Read.IOBytes != uint64(c.size) {
			t.Errorf("fio %s: error %d, wrote %d and verified %d bytes; want 0, %d, %d", j.Jobname, j.Error,
				j.Write.IOBytes, j.Read.IOBytes, c.size, c.size)
		}
		t.Logf("fio %s: write %.0f IOPS, verify %.1f MB/s", j.Jobname, j.Write.IOPS, j.Read.BW/1e6)
	}
}
