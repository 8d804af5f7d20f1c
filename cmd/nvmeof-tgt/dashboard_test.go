package main

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const dashboardPath = "../../deploy/grafana/nvmeof-tgt.json"

// metricName finds the metric names in PromQL: those of the target, the Go
// runtime and the process. Label names, functions and Grafana variables do
// not carry these prefixes.
var metricName = regexp.MustCompile(`\b(?:nvmeof_tgt|go|process)_[a-zA-Z0-9_:]+`)

// queries returns every PromQL string of a Grafana dashboard: the panels'
// "expr" and the template variables' "query", at any depth (rows nest panels).
func queries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "query") {
				out = append(out, s)
				continue
			}
			out = append(out, queries(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, queries(x)...)
		}
	}
	return out
}

// TestDashboardMetrics checks that every metric the Grafana dashboard
// queries is one /metrics serves: names come from the dashboard's PromQL,
// the served ones from the registry serve builds (newRegistry), gathered.
func TestDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	used := map[string]bool{}
	for _, q := range queries(dash) {
		for _, n := range metricName.FindAllString(q, -1) {
			used[n] = true
		}
	}
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in the dashboard: %v", len(used), used)
	}

	served := map[string]bool{}
	for series := range gather(t, testRegistry(t, 1, 1)) {
		name, _, _ := strings.Cut(series, "{")
		served[name] = true
	}
	var missing []string
	for n := range used {
		if !served[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("the dashboard queries %s, which nvmeof-tgt does not export", n)
	}
	t.Logf("%d metric names in the dashboard, all served", len(used))
}

func TestQueries(t *testing.T) {
	dash := map[string]any{
		"panels": []any{
			map[string]any{"type": "row", "panels": []any{
				map[string]any{"targets": []any{map[string]any{"expr": "a"}}},
			}},
			map[string]any{"targets": []any{map[string]any{"expr": "b", "legendFormat": "x"}}},
		},
		"templating": map[string]any{"list": []any{
			map[string]any{"query": map[string]any{"query": "c"}},
			map[string]any{"query": "prometheus"},
		}},
	}
	got := queries(dash)
	sort.Strings(got)
	if want := []string{"a", "b", "c", "prometheus"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("queries = %v, want %v", got, want)
	}
	if got := metricName.FindAllString(`histogram_quantile(0.99, sum by (le, op) (rate(nvmeof_tgt_x_bucket{subnqn=~"$subnqn"}[$__rate_interval]))) / go_goroutines`, -1); strings.Join(got, ",") != "nvmeof_tgt_x_bucket,go_goroutines" {
		t.Errorf("metric names %v", got)
	}
}
