//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

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

			c.disconnect(t)
			waitTornDown(t)
			checkBuffersReleased(t)
		})
	}

	// The SRQ limit event on rxe: the faultinject build gives the SRQ 64 receive buffers,
	// 16 of them posted at start and the limit armed at 4, and a host writes to a file at
	// depth 14: capsules wait for the backend holding their buffers, the SRQ runs below its
	// limit (13 held), and the event gives it as many buffers again (32, the limit at 8, which
	// 14 commands never reach again). The SRQ never runs empty: a host whose capsules meet RNR
	// NAKs from an empty SRQ in a storm (depth 128 on 64 buffers) saw its rxe QP flushed after
	// a few seconds and reconnected in a loop, which is not what this tests.
	t.Run("grows", func(t *testing.T) {
		bin := faultBin(t)
		sub := nqn("srq-grows")
		spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true,
			Namespaces: []Namespace{fileNS(t, 1, 64*mib, 4096, "")}}}}
		p, dir := startTgt(t, spec, withBinary(bin), withEnv("NVMEOF_TGT_FAULT_SRQ_DEPTH=64", "GORACE=halt_on_error=1 exitcode=66"))
		c, err := newHost(t).connectWith(t, sub, portRDMA, "-i", "2", "-W", "2")
		if err != nil {
			t.Fatal(err)
		}
		runFio(t, c.blockDev(t, 1), dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 14, size: 8 * mib})
		events, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_srq_limit_events_total")
		log, _ := os.ReadFile(p.logPath)
		grew := strings.Count(string(log), "shared receive queue ran low")
		t.Logf("SRQ limit events: %v; grown %d times", events, grew)
		if events != 1 || grew != 1 {
			t.Errorf("%v SRQ limit events, %d logged: want one (16 → 32 buffers), logged", events, grew)
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
