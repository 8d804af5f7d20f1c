//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricsURL is where tgtConfigYAML puts the target's Prometheus endpoint.
const metricsURL = "http://127.0.0.1:9771/metrics"

// scrapeMetrics reads the target's Prometheus text exposition into a map from series (name with
// its labels, as exposed) to value. Comment lines are skipped.
func scrapeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	return parseMetrics(t, body)
}

// parseMetrics reads a Prometheus text exposition (scrapeMetrics).
func parseMetrics(t testing.TB, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// metricSum adds up the series of metric name whose labels include every one of labels (each as
// exposed, e.g. `op="write"`).
func metricSum(m map[string]float64, name string, labels ...string) (sum float64, found bool) {
	for series, v := range m {
		base, lbl, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(lbl, l)
		}
		if ok {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// waitTornDown waits for nvmeof-tgt to report no live controller, host queue or RDMA queue pair,
// as it must once every host has disconnected.
func waitTornDown(t *testing.T) {
	t.Helper()
	names := []string{"nvmeof_tgt_controllers", "nvmeof_tgt_queues", "nvmeof_tgt_rdma_queues_live"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := scrapeMetrics(t)
		var live []string
		for _, n := range names {
			if v, ok := metricSum(m, n); !ok || v != 0 {
				live = append(live, fmt.Sprintf("%s=%v (found %v)", n, v, ok))
			}
		}
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after disconnect the target still reports %s", strings.Join(live, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkBuffersReleased waits for nvmeof_tgt_rdma_buffers_in_use, and the
// receive buffers the pollers' shared receive queues have bound to queues
// (nvmeof_tgt_rdma_srq_held, absent without SRQ), to reach 0.
func checkBuffersReleased(t *testing.T) {
	t.Helper()
	var v, held float64
	err := waitFor(15*time.Second, func() bool {
		var ok bool
		m := scrapeMetrics(t)
		v, ok = metricSum(m, "nvmeof_tgt_rdma_buffers_in_use")
		held, _ = metricSum(m, "nvmeof_tgt_rdma_srq_held")
		return ok && v == 0 && held == 0
	})
	if err != nil {
		t.Errorf("after every host left: nvmeof_tgt_rdma_buffers_in_use is %v, nvmeof_tgt_rdma_srq_held %v; want 0 and 0", v, held)
	}
}
