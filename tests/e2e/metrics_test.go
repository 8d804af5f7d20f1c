//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMetricsLatency checks nvmeof-tgt's latency histograms against fio: the _count of the
// read and write histograms must grow by exactly the I/Os fio reports, and the rxe port's
// hardware counters must be exported and grow while fio runs.
//
// The host does I/O of its own: partition and blkid probes after connect, and udev probes
// again when a writer closes the disk. The test waits for the counts to settle before each
// fio phase and measures each phase's own operation only (writes across the write phase,
// reads across the read phase, which starts once the re-probe after the writes is done).
func TestMetricsLatency(t *testing.T) {
	requireTgt(t, "nvmeof-tgt's own metrics")
	h := newHost(t)
	sub := nqn("metrics")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 32*mib, 0, "")},
	}}}
	_, dir := startTarget(t, spec)
	c := h.mustConnect(t, sub, 1)
	dev := c.blockDev(t, 1)
	rdmaDev := os.Getenv("LAB_RDMA_DEV")

	count := func(m map[string]float64, op string) float64 {
		v, ok := metricSum(m, "nvmeof_tgt_namespace_latency_seconds_count", `subnqn="`+sub+`"`, `nsid="1"`, `op="`+op+`"`)
		if !ok {
			t.Fatalf("no latency histogram for %s, op %s", sub, op)
		}
		return v
	}
	// settle waits until the read and write counts stay the same for a second.
	settle := func(what string) map[string]float64 {
		t.Helper()
		m := scrapeMetrics(t)
		stable := time.Now()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			time.Sleep(250 * time.Millisecond)
			n := scrapeMetrics(t)
			if count(n, "read") != count(m, "read") || count(n, "write") != count(m, "write") {
				m, stable = n, time.Now()
				continue
			}
			if time.Since(stable) >= time.Second {
				t.Logf("%s: %v reads, %v writes so far", what, count(m, "read"), count(m, "write"))
				return n
			}
		}
		t.Fatalf("%s: the host's I/O did not settle within 30s", what)
		return nil
	}
	portCounters := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for series, v := range m {
			if strings.HasPrefix(series, "nvmeof_tgt_rdma_port_stat_total{") && strings.Contains(series, `device="`+rdmaDev+`"`) {
				out[series] = v
			}
		}
		return out
	}

	before := settle("after connect")
	ports0 := portCounters(before)
	if len(ports0) == 0 {
		t.Errorf("no nvmeof_tgt_rdma_port_stat_total series for %s", rdmaDev)
	}

	fio := func(rw string) uint64 {
		t.Helper()
		report := filepath.Join(dir, "fio-metrics-"+rw+".json")
		mustRun(t, fioTimeout, "fio", "--name=metrics-"+rw, "--filename="+dev, "--ioengine=libaio", "--direct=1",
			"--rw="+rw, "--bs=4k", "--iodepth=16", "--size=8m", "--output-format=json", "--output="+report)
		raw, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var rep fioReport
		if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Jobs) != 1 {
			t.Fatalf("fio report %s: %v (%d jobs)", report, err, len(rep.Jobs))
		}
		j := rep.Jobs[0]
		if j.Error != 0 {
			t.Fatalf("fio %s: error %d", rw, j.Error)
		}
		if rw == "randwrite" {
			return j.Write.TotalIOs
		}
		return j.Read.TotalIOs
	}

	writes := fio("randwrite")
	afterWrite := scrapeMetrics(t)
	mid := settle("after the writes")
	reads := fio("randread")
	after := scrapeMetrics(t)

	for _, tc := range []struct {
		op       string
		from, to map[string]float64
		fio      uint64
	}{
		{"write", before, afterWrite, writes},
		{"read", mid, after, reads},
	} {
		t.Run(tc.op, func(t *testing.T) {
			got := count(tc.to, tc.op) - count(tc.from, tc.op)
			t.Logf("%s: histogram count +%v, fio total_ios %d", tc.op, got, tc.fio)
			if tc.fio == 0 || got != float64(tc.fio) {
				t.Errorf("%s histogram count grew by %v during fio, want fio's %d I/Os", tc.op, got, tc.fio)
			}
			ops, _ := metricSum(tc.to, "nvmeof_tgt_namespace_ops_total", `subnqn="`+sub+`"`, `nsid="1"`, `op="`+tc.op+`"`)
			if ops != count(tc.to, tc.op) {
				t.Errorf("%s: ops_total %v, histogram count %v: want them equal", tc.op, ops, count(tc.to, tc.op))
			}
			sum, _ := metricSum(tc.to, "nvmeof_tgt_namespace_latency_seconds_sum", `subnqn="`+sub+`"`, `nsid="1"`, `op="`+tc.op+`"`)
			inf, _ := metricSum(tc.to, "nvmeof_tgt_namespace_latency_seconds_bucket", `subnqn="`+sub+`"`, `nsid="1"`, `op="`+tc.op+`"`, `le="+Inf"`)
			if sum <= 0 || inf != count(tc.to, tc.op) {
				t.Errorf("%s: sum %v, +Inf bucket %v, count %v", tc.op, sum, inf, count(tc.to, tc.op))
			}
			sum0, _ := metricSum(tc.from, "nvmeof_tgt_namespace_latency_seconds_sum", `subnqn="`+sub+`"`, `nsid="1"`, `op="`+tc.op+`"`)
			if got > 0 {
				t.Logf("%s: mean latency in the target %v", tc.op, time.Duration((sum-sum0)/got*1e9))
			}
		})
	}

	t.Run("rdma-port-counters", func(t *testing.T) {
		ports1 := portCounters(after)
		var grew []string
		for series, v := range ports1 {
			if v > ports0[series] {
				grew = append(grew, fmt.Sprintf("%s +%s", series, strconv.FormatFloat(v-ports0[series], 'f', -1, 64)))
			}
		}
		t.Logf("%d port counter series for %s; grew during fio:\n%s", len(ports1), rdmaDev, strings.Join(grew, "\n"))
		if len(grew) == 0 {
			t.Errorf("no RDMA port counter of %s grew during fio (series: %v)", rdmaDev, ports1)
		}
	})

	t.Run("controllers-by-state", func(t *testing.T) {
		if v, ok := metricSum(after, "nvmeof_tgt_controllers_by_state", `subnqn="`+sub+`"`, `state="ready"`); !ok || v != 1 {
			t.Errorf("ready controllers of %s = %v (found %v), want 1", sub, v, ok)
		}
	})
}
