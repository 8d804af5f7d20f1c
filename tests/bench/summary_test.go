package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{9, 1, 5}, 5},
		{"even: mean of the middle two", []float64{4, 1, 10, 2}, 3},
		{"even, two", []float64{10, 30}, 20},
		{"duplicates", []float64{2, 2, 9}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			if got := median(tc.in); got != tc.want {
				t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("median reordered its input: %v, was %v", tc.in, in)
				}
			}
		})
	}
}

func TestQueueDepth(t *testing.T) {
	for _, tc := range []struct {
		job  string
		want int
	}{
		{"randread-4k-qd1", 1},
		{"seqread-128k-qd16", 16},
		{"randread-4k-qd128", 128},
		{"randread-4k-4jobs", 0},
		{"randread-4k-qdx", 0},
		{"", 0},
	} {
		if got := queueDepth(tc.job); got != tc.want {
			t.Errorf("queueDepth(%q) = %d, want %d", tc.job, got, tc.want)
		}
	}
}

func TestQuotient(t *testing.T) {
	for _, tc := range []struct {
		name     string
		num, den float64
		want     Ratio
	}{
		{"plain", 9, 10, Ratio{0.9, true}},
		{"zero numerator is a real 0", 0, 10, Ratio{0, true}},
		{"zero denominator", 5, 0, Ratio{}},
		{"both zero", 0, 0, Ratio{}},
		{"negative denominator", 5, -1, Ratio{}},
		{"NaN", math.NaN(), 1, Ratio{}},
		{"Inf", math.Inf(1), 1, Ratio{}},
		{"over Inf", 1, math.Inf(1), Ratio{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotient(tc.num, tc.den); got != tc.want {
				t.Errorf("quotient(%v, %v) = %+v, want %+v", tc.num, tc.den, got, tc.want)
			}
		})
	}
}

func TestRatioJSON(t *testing.T) {
	for _, tc := range []struct {
		r    Ratio
		json string
	}{
		{Ratio{0.9, true}, "0.9"},
		{Ratio{0, true}, "0"},
		{Ratio{2, true}, "2"},
		{Ratio{}, "null"},
	} {
		b, err := json.Marshal(tc.r)
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.r, b, err, tc.json)
			continue
		}
		var back Ratio
		if err := json.Unmarshal(b, &back); err != nil || back != tc.r {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", b, back, err, tc.r)
		}
	}
	var r Ratio
	if err := json.Unmarshal([]byte(`"x"`), &r); err == nil {
		t.Errorf(`Unmarshal("x") = %+v, want an error`, r)
	}
}

// sample: three reps each of a QD1 job, a 4 KiB QD32 job and 128 KiB sequential reads and
// writes on the memory backend, perftest, idle CPU and allocations.
func sample() *Results {
	r := &Results{
		Date: "2026-11-23T07:00:00Z", Commit: "v0.1-3-gabc", Kernel: "6.12.0", CPUs: 4, MemMiB: 4096,
		Runtime: 10, Ramp: 3, IdleSeconds: 10, IdleCPUPercent: 0.5,
		Allocs: &AllocRun{Job: "randread-4k-qd32", IOs: 1000, Allocs: 15, IdleAllocs: 10, AllocsPerIO: 0.005},
		Notes:  []string{"rxe on a veth pair"},
	}
	add := func(target, job string, iops, bw, p50 float64) {
		r.Runs = append(r.Runs, Run{Target: target, Backend: "memory", Job: job, Rep: len(r.Runs)/8 + 1,
			IOPS: iops, BW: bw, ClatP50: p50, ClatP99: 2 * p50, IOs: 1})
	}
	for _, v := range []float64{3, 1, 2} { // medians are of v = 2
		add(TargetOurs, "randread-4k-qd1", 100*v, 0, 200e3*v)
		add(TargetKernel, "randread-4k-qd1", 100*v, 0, 400e3*v)
		add(TargetOurs, "randread-4k-qd32", 900*v, 0, 1e3)
		add(TargetKernel, "randread-4k-qd32", 1000*v, 0, 1e3)
		add(TargetOurs, "seqread-128k-qd16", 1, 90e6*v, 1e3)
		add(TargetKernel, "seqread-128k-qd16", 1, 60e6*v, 1e3)
		add(TargetOurs, "seqwrite-128k-qd16", 1, 40e6*v, 1e3)
		add(TargetKernel, "seqwrite-128k-qd16", 1, 40e6*v, 1e3)
	}
	r.Link = []LinkRun{
		{Tool: "ib_write_bw", Size: 128 << 10, BW: 190e6},
		{Tool: "ib_write_bw", Size: 128 << 10, BW: 210e6}, // median 200e6
		{Tool: "ib_read_bw", Size: 128 << 10, BW: 100e6},
		{Tool: "ib_read_bw", Size: 64 << 10, BW: 1e9}, // another size: ignored
		{Tool: "ib_send_lat", Size: 2, LatP50: 20e3, LatP99: 40e3},
	}
	return r
}

func jobOf(t *testing.T, s Summary, backend, job string) JobStats {
	t.Helper()
	for _, j := range s.Jobs {
		if j.Backend == backend && j.Job == job {
			return j
		}
	}
	t.Fatalf("no %s/%s in %+v", backend, job, s.Jobs)
	return JobStats{}
}

func TestSummarize(t *testing.T) {
	s := Summarize(sample())
	if s.Reps != 3 || s.MaxReps != 3 || s.ErrorRuns != 0 {
		t.Errorf("reps %d–%d, error runs %d; want 3–3, 0", s.Reps, s.MaxReps, s.ErrorRuns)
	}
	var order []string
	for _, j := range s.Jobs {
		order = append(order, j.Job)
	}
	if got, want := strings.Join(order, " "), "randread-4k-qd1 randread-4k-qd32 seqread-128k-qd16 seqwrite-128k-qd16"; got != want {
		t.Errorf("job order %q, want %q", got, want)
	}
	valid := func(v float64) Ratio { return Ratio{v, true} }
	for _, tc := range []struct {
		job             string
		metric          string
		qd1             bool
		ours, kernel    Medians
		iops, bw        Ratio
		p50, p99        Ratio
		linkTool        string
		linkBW          float64
		link, throughpt Ratio
	}{
		{
			job: "randread-4k-qd1", metric: MetricIOPS, qd1: true,
			ours:   Medians{Runs: 3, IOPS: 200, ClatP50: 400e3, ClatP99: 800e3},
			kernel: Medians{Runs: 3, IOPS: 200, ClatP50: 800e3, ClatP99: 1600e3},
			iops:   valid(1), p50: valid(0.5), p99: valid(0.5), throughpt: valid(1),
		},
		{
			job: "randread-4k-qd32", metric: MetricIOPS,
			ours:   Medians{Runs: 3, IOPS: 1800, ClatP50: 1e3, ClatP99: 2e3},
			kernel: Medians{Runs: 3, IOPS: 2000, ClatP50: 1e3, ClatP99: 2e3},
			iops:   valid(0.9), p50: valid(1), p99: valid(1), throughpt: valid(0.9),
		},
		{
			job: "seqread-128k-qd16", metric: MetricBW,
			ours:   Medians{Runs: 3, IOPS: 1, BW: 180e6, ClatP50: 1e3, ClatP99: 2e3},
			kernel: Medians{Runs: 3, IOPS: 1, BW: 120e6, ClatP50: 1e3, ClatP99: 2e3},
			iops:   valid(1), bw: valid(1.5), p50: valid(1), p99: valid(1), throughpt: valid(1.5),
			linkTool: "ib_write_bw", linkBW: 200e6, link: valid(0.9),
		},
		{
			job: "seqwrite-128k-qd16", metric: MetricBW,
			ours:   Medians{Runs: 3, IOPS: 1, BW: 80e6, ClatP50: 1e3, ClatP99: 2e3},
			kernel: Medians{Runs: 3, IOPS: 1, BW: 80e6, ClatP50: 1e3, ClatP99: 2e3},
			iops:   valid(1), bw: valid(1), p50: valid(1), p99: valid(1), throughpt: valid(1),
			linkTool: "ib_read_bw", linkBW: 100e6, link: valid(0.8),
		},
	} {
		t.Run(tc.job, func(t *testing.T) {
			j := jobOf(t, s, "memory", tc.job)
			if j.Metric != tc.metric || j.QD1 != tc.qd1 {
				t.Errorf("metric %q qd1 %v, want %q %v", j.Metric, j.QD1, tc.metric, tc.qd1)
			}
			if j.Ours != tc.ours || j.Kernel != tc.kernel {
				t.Errorf("medians ours %+v kernel %+v, want %+v %+v", j.Ours, j.Kernel, tc.ours, tc.kernel)
			}
			for _, r := range []struct {
				name      string
				got, want Ratio
			}{
				{"iops", j.IOPSRatio, tc.iops},
				{"bw", j.BWRatio, tc.bw},
				{"p50", j.P50Ratio, tc.p50},
				{"p99", j.P99Ratio, tc.p99},
				{"link", j.LinkFraction, tc.link},
				{"throughput", j.ThroughputRatio(), tc.throughpt},
			} {
				if r.got.Valid != r.want.Valid || math.Abs(r.got.Value-r.want.Value) > 1e-9 {
					t.Errorf("%s ratio %+v, want %+v", r.name, r.got, r.want)
				}
			}
			if j.LinkTool != tc.linkTool || j.LinkBW != tc.linkBW {
				t.Errorf("link %s %v, want %s %v", j.LinkTool, j.LinkBW, tc.linkTool, tc.linkBW)
			}
		})
	}
}

func TestSummarizeEvenRepsAndErrors(t *testing.T) {
	r := &Results{Runs: []Run{
		{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 10, ClatP50: 100},
		{Target: TargetKernel, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 20, ClatP50: 300},
		{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 30, ClatP50: 300, Errors: 1},
		{Target: TargetKernel, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 24, ClatP50: 500},
		{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 100, ClatP50: 1}, // a third ours run: unpaired
		{Target: TargetOurs, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5, Errors: -5},
		{Target: TargetKernel, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5},
		{Target: TargetOurs, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5},
		{Target: TargetKernel, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5},
		{Target: TargetOurs, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5},
		{Target: TargetKernel, Backend: "memory", Job: "randwrite-4k-qd32", IOPS: 5},
	}}
	s := Summarize(r)
	if s.Reps != 2 || s.MaxReps != 3 || s.ErrorRuns != 2 {
		t.Errorf("reps %d–%d, error runs %d; want 2–3, 2", s.Reps, s.MaxReps, s.ErrorRuns)
	}
	if len(s.Jobs) != 2 || s.Jobs[0].Backend != "file" || s.Jobs[1].Backend != "memory" {
		t.Fatalf("jobs %+v, want file then memory", s.Jobs)
	}
	f := s.Jobs[0]
	// ours: IOPS 10, 30, 100 → 30; p50 100, 300, 1 → 100. kernel (even): IOPS 22, p50 400.
	if f.Ours.IOPS != 30 || f.Kernel.IOPS != 22 || f.Ours.ClatP50 != 100 || f.Kernel.ClatP50 != 400 || f.Errors != 1 {
		t.Errorf("file job: %+v", f)
	}
	if math.Abs(f.IOPSRatio.Value-30.0/22) > 1e-9 || math.Abs(f.P50Ratio.Value-0.25) > 1e-9 {
		t.Errorf("file ratios iops %+v p50 %+v, want %v 0.25", f.IOPSRatio, f.P50Ratio, 30.0/22)
	}
	if s.Jobs[1].Errors != 1 {
		t.Errorf("memory job errors %d, want 1", s.Jobs[1].Errors)
	}
	g := goalMap(s)
	if got := g["file/randwrite-4k-qd32 IOPS"]; !got.Met || got.Measured != "1.36× (1 run with errors)" {
		t.Errorf("file goal %+v", got)
	}
}

func goalMap(s Summary) map[string]Goal {
	m := map[string]Goal{}
	for _, g := range s.Goals {
		m[g.Name] = g
	}
	return m
}

func TestGoals(t *testing.T) {
	s := Summarize(sample())
	want := []Goal{
		{Name: "memory/randread-4k-qd1 IOPS", Measured: "1.00×", Met: true},
		{Name: "memory/randread-4k-qd1 p50 latency", Measured: "0.50×", Met: true},
		{Name: "memory/randread-4k-qd32 IOPS", Measured: "0.90×", Met: false},
		{Name: "memory/seqread-128k-qd16 bandwidth", Measured: "1.50×", Met: true},
		{Name: "memory/seqread-128k-qd16 bandwidth vs raw link", Measured: "90% (171.7 of 190.7 MiB/s)", Met: true},
		{Name: "memory/seqwrite-128k-qd16 bandwidth", Measured: "1.00×", Met: true},
		{Name: "memory/seqwrite-128k-qd16 bandwidth vs raw link", Measured: "80% (76.3 of 95.4 MiB/s)", Met: false},
		{Name: "heap allocations per I/O (RDMA path)", Measured: "0.005", Met: true},
		{Name: "idle CPU, hosts connected", Measured: "0.50%", Met: true},
	}
	if len(s.Goals) != len(want) {
		t.Errorf("%d goals, want %d: %+v", len(s.Goals), len(want), s.Goals)
	}
	for i, w := range want {
		if i >= len(s.Goals) {
			break
		}
		g := s.Goals[i]
		if g.Name != w.Name || g.Measured != w.Measured || g.Met != w.Met || g.Target == "" {
			t.Errorf("goal %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestGoalThresholds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Results)
		goal   string
		met    bool
		measur string
	}{
		{"p50 latency worse than the kernel", func(r *Results) {
			for i := range r.Runs {
				if r.Runs[i].Target == TargetOurs && r.Runs[i].Job == "randread-4k-qd1" {
					r.Runs[i].ClatP50 *= 5 // ours 2000 µs, kernel 800 µs
				}
			}
		}, "memory/randread-4k-qd1 p50 latency", false, "2.50×"},
		{"p50 not reported by fio", func(r *Results) {
			for i := range r.Runs {
				if r.Runs[i].Job == "randread-4k-qd1" {
					r.Runs[i].ClatP50 = 0
				}
			}
		}, "memory/randread-4k-qd1 p50 latency", false, notMeasured},
		{"allocations at the limit", func(r *Results) { r.Allocs.AllocsPerIO = 0.01 }, "heap allocations per I/O (RDMA path)", false, "0.010"},
		{"allocations: no I/O", func(r *Results) { r.Allocs.IOs = 0 }, "heap allocations per I/O (RDMA path)", false, notMeasured},
		{"allocations: none", func(r *Results) { r.Allocs = nil }, "heap allocations per I/O (RDMA path)", false, notMeasured},
		{"allocations: zero", func(r *Results) { r.Allocs.AllocsPerIO = 0 }, "heap allocations per I/O (RDMA path)", true, "0.000"},
		{"allocations: below the idle baseline", func(r *Results) { r.Allocs = NewAllocRun("j", 1000, 10, 30) },
			"heap allocations per I/O (RDMA path)", true, "-0.020 (below the idle baseline: noise)"},
		{"idle CPU over budget", func(r *Results) { r.IdleCPUPercent = 2 }, "idle CPU, hosts connected", false, "2.00%"},
		{"idle CPU not measured", func(r *Results) { r.IdleSeconds = 0 }, "idle CPU, hosts connected", false, notMeasured},
		{"link at exactly 85%", func(r *Results) { r.Link[2].BW = 94117647 }, "memory/seqwrite-128k-qd16 bandwidth vs raw link", true, "85% (76.3 of 89.8 MiB/s)"},
		{"no perftest", func(r *Results) { r.Link = nil }, "memory/seqread-128k-qd16 bandwidth vs raw link", false, notMeasured},
		{"kernel missing", func(r *Results) {
			var runs []Run
			for _, run := range r.Runs {
				if run.Target == TargetOurs || run.Job != "randread-4k-qd32" {
					runs = append(runs, run)
				}
			}
			r.Runs = runs
		}, "memory/randread-4k-qd32 IOPS", false, notMeasured},
		{"ours moved nothing", func(r *Results) {
			for i := range r.Runs {
				if r.Runs[i].Target == TargetOurs && r.Runs[i].Job == "randread-4k-qd32" {
					r.Runs[i].IOPS = 0
				}
			}
		}, "memory/randread-4k-qd32 IOPS", false, "0.00×"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			g, ok := goalMap(Summarize(r))[tc.goal]
			if !ok || g.Met != tc.met || g.Measured != tc.measur {
				t.Errorf("goal %q = %+v (present %v), want met %v measured %q", tc.goal, g, ok, tc.met, tc.measur)
			}
		})
	}
}

func TestGoalsNotMeasured(t *testing.T) {
	r := &Results{Runs: []Run{{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 5}}}
	s := Summarize(r)
	want := []string{
		"file/randwrite-4k-qd32 IOPS",
		"seqread-128k bandwidth vs raw link",
		"seqwrite-128k bandwidth vs raw link",
		"heap allocations per I/O (RDMA path)",
		"idle CPU, hosts connected",
	}
	if len(s.Goals) != len(want) {
		t.Fatalf("goals %+v, want %d", s.Goals, len(want))
	}
	for i, g := range s.Goals {
		if g.Name != want[i] || g.Met || g.Measured != notMeasured {
			t.Errorf("goal %d = %+v; want %q, not measured", i, g, want[i])
		}
	}
	if s.Reps != 0 || s.MaxReps != 0 {
		t.Errorf("reps %d–%d with no kernel runs, want 0", s.Reps, s.MaxReps)
	}
}

// Zero denominators (no kernel IOPS, latencies fio did not report, no perftest) must leave the
// ratios out, never write NaN or Inf (encoding/json refuses them).
func TestZeroDenominatorsJSON(t *testing.T) {
	r := &Results{
		Runs: []Run{
			{Target: TargetOurs, Backend: "memory", Job: "randread-4k-qd1", IOPS: 5, BW: 5},
			{Target: TargetKernel, Backend: "memory", Job: "randread-4k-qd1"},
			{Target: TargetOurs, Backend: "memory", Job: "seqread-128k-qd16", BW: 5},
			{Target: TargetKernel, Backend: "memory", Job: "seqread-128k-qd16"},
		},
		Link: []LinkRun{{Tool: "ib_write_bw", Size: 128 << 10}},
	}
	s := Summarize(r)
	for _, j := range s.Jobs {
		for _, v := range []Ratio{j.IOPSRatio, j.BWRatio, j.P50Ratio, j.P99Ratio, j.LinkFraction} {
			if v.Valid || math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
				t.Errorf("%s: ratio %+v, want invalid", j.Job, v)
			}
		}
	}
	b, err := json.Marshal(Report{Results: r, Summary: s})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, bad := range []string{"NaN", "Inf", "_ratio", "link_fraction"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("JSON contains %q: %s", bad, b)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if back.Summary.Jobs[0].IOPSRatio.Valid {
		t.Errorf("round trip made an absent ratio valid: %+v", back.Summary.Jobs[0])
	}
}

func TestCompare(t *testing.T) {
	valid := func(v float64) Ratio { return Ratio{v, true} }
	m := func(runs int, iops, bw, p50, p99 float64) Medians {
		return Medians{Runs: runs, IOPS: iops, BW: bw, ClatP50: p50, ClatP99: p99}
	}
	for _, tc := range []struct {
		name     string
		num, den Medians
		want     Comparison
	}{
		{"both ran", m(3, 50, 100, 10, 40), m(3, 100, 50, 20, 20), Comparison{valid(0.5), valid(2), valid(0.5), valid(2)}},
		{"numerator did not run", m(0, 0, 0, 0, 0), m(3, 100, 50, 20, 20), Comparison{}},
		{"denominator did not run", m(3, 50, 100, 10, 40), m(0, 0, 0, 0, 0), Comparison{}},
		{"no bandwidth below: only that ratio is invalid", m(1, 50, 100, 10, 40), m(1, 100, 0, 20, 20), Comparison{IOPS: valid(0.5), P50: valid(0.5), P99: valid(2)}},
		{"latency not reported above", m(1, 50, 100, 0, 0), m(1, 100, 50, 20, 20), Comparison{IOPS: valid(0.5), BW: valid(2)}},
		{"latency not reported below", m(1, 50, 100, 10, 40), m(1, 100, 50, 0, 0), Comparison{IOPS: valid(0.5), BW: valid(2)}},
		{"moved nothing: a real 0", m(1, 0, 0, 10, 40), m(1, 100, 50, 20, 20), Comparison{valid(0), valid(0), valid(0.5), valid(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := compare(tc.num, tc.den); got != tc.want {
				t.Errorf("compare = %+v, want %+v", got, tc.want)
			}
		})
	}
	c := Comparison{IOPS: valid(1), BW: valid(2)}
	if c.Throughput(MetricIOPS) != valid(1) || c.Throughput(MetricBW) != valid(2) {
		t.Errorf("Throughput: iops %v bw %v, want 1 and 2", c.Throughput(MetricIOPS), c.Throughput(MetricBW))
	}
}

// sampleSPDK is sample() with SPDK as a third target in three of the four memory jobs (not
// seqwrite-128k) and a file job it skips, as make bench PEERS="kernel spdk" runs them.
func sampleSPDK() *Results {
	r := sample()
	r.Peers = []string{TargetKernel, TargetSPDK}
	r.SPDK = "SPDK v24.05 git sha1 0000000"
	add := func(job string, iops, bw, p50 float64, errs int) {
		r.Runs = append(r.Runs, Run{Target: TargetSPDK, Backend: "memory", Job: job, Rep: 1,
			IOPS: iops, BW: bw, ClatP50: p50, ClatP99: 2 * p50, IOs: 1, Errors: errs})
	}
	for i, v := range []float64{3, 1, 2} { // medians are of v = 2
		add("randread-4k-qd1", 200*v, 0, 100e3*v, 0)
		add("randread-4k-qd32", 1000*v, 0, 1e3, 0)
		errs := 0
		if i == 0 {
			errs = 1
		}
		add("seqread-128k-qd16", 1, 90e6*v, 1e3, errs)
	}
	r.Runs = append(r.Runs,
		Run{Target: TargetOurs, Backend: "file", Job: "randread-4k-qd1", IOPS: 100, ClatP50: 5e3, ClatP99: 9e3, IOs: 1},
		Run{Target: TargetKernel, Backend: "file", Job: "randread-4k-qd1", IOPS: 100, ClatP50: 5e3, ClatP99: 9e3, IOs: 1})
	return r
}

func TestSummarizeSPDK(t *testing.T) {
	s := Summarize(sampleSPDK())
	// Reps pair ours with the kernel; SPDK's runs change neither them nor the goals.
	base := Summarize(sample())
	if s.Reps != 1 || s.MaxReps != 3 || s.ErrorRuns != 1 {
		t.Errorf("reps %d–%d, error runs %d; want 1–3 (the file job ran once), 1 (an SPDK run)", s.Reps, s.MaxReps, s.ErrorRuns)
	}
	// The file job adds its two goals; every other goal is as without SPDK, and an SPDK run's
	// error does not mark ours ÷ kernel.
	g := goalMap(s)
	if len(s.Goals) != len(base.Goals)+2 {
		t.Errorf("%d goals, want %d: %+v", len(s.Goals), len(base.Goals)+2, s.Goals)
	}
	for _, bg := range base.Goals {
		if g[bg.Name] != bg {
			t.Errorf("goal %q = %+v with SPDK runs, %+v without", bg.Name, g[bg.Name], bg)
		}
	}
	valid := func(v float64) Ratio { return Ratio{v, true} }
	for _, tc := range []struct {
		backend, job string
		spdk         Medians
		oursSPDK     Comparison
		spdkKernel   Comparison
		errors       int
	}{
		{
			backend: "memory", job: "randread-4k-qd1",
			spdk: Medians{Runs: 3, IOPS: 400, ClatP50: 200e3, ClatP99: 400e3},
			// ours 200 IOPS, p50 400 µs; kernel 200 IOPS, p50 800 µs. No bandwidth: BW invalid.
			oursSPDK:   Comparison{IOPS: valid(0.5), P50: valid(2), P99: valid(2)},
			spdkKernel: Comparison{IOPS: valid(2), P50: valid(0.25), P99: valid(0.25)},
		},
		{
			backend: "memory", job: "randread-4k-qd32",
			spdk:       Medians{Runs: 3, IOPS: 2000, ClatP50: 1e3, ClatP99: 2e3},
			oursSPDK:   Comparison{IOPS: valid(0.9), P50: valid(1), P99: valid(1)},
			spdkKernel: Comparison{IOPS: valid(1), P50: valid(1), P99: valid(1)},
		},
		{
			backend: "memory", job: "seqread-128k-qd16",
			spdk:       Medians{Runs: 3, IOPS: 1, BW: 180e6, ClatP50: 1e3, ClatP99: 2e3},
			oursSPDK:   Comparison{IOPS: valid(1), BW: valid(1), P50: valid(1), P99: valid(1)},
			spdkKernel: Comparison{IOPS: valid(1), BW: valid(1.5), P50: valid(1), P99: valid(1)},
			errors:     1,
		},
		{backend: "memory", job: "seqwrite-128k-qd16"}, // SPDK did not run it: no ratios
		{backend: "file", job: "randread-4k-qd1"},
	} {
		t.Run(tc.backend+"/"+tc.job, func(t *testing.T) {
			j := jobOf(t, s, tc.backend, tc.job)
			if j.SPDK != tc.spdk {
				t.Errorf("SPDK medians %+v, want %+v", j.SPDK, tc.spdk)
			}
			for _, c := range []struct {
				name      string
				got, want Comparison
			}{{"ours ÷ SPDK", j.OursSPDK, tc.oursSPDK}, {"SPDK ÷ kernel", j.SPDKKernel, tc.spdkKernel}} {
				for _, r := range []struct {
					what      string
					got, want Ratio
				}{{"iops", c.got.IOPS, c.want.IOPS}, {"bw", c.got.BW, c.want.BW}, {"p50", c.got.P50, c.want.P50}, {"p99", c.got.P99, c.want.P99}} {
					if r.got.Valid != r.want.Valid || math.Abs(r.got.Value-r.want.Value) > 1e-9 {
						t.Errorf("%s %s = %+v, want %+v", c.name, r.what, r.got, r.want)
					}
				}
			}
			if j.Errors != 0 || j.SPDKErrors != tc.errors {
				t.Errorf("errors %d, SPDK errors %d; want 0, %d", j.Errors, j.SPDKErrors, tc.errors)
			}
		})
	}
}

// Results without SPDK keep their JSON: no spdk, ours_spdk or spdk_kernel keys.
func TestSummaryJSONWithoutSPDK(t *testing.T) {
	b, err := json.Marshal(Summarize(sample()))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"spdk"`, `"ours_spdk"`, `"spdk_kernel"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("summary without SPDK has %s: %s", key, b)
		}
	}
	b, err = json.Marshal(Summarize(sampleSPDK()))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"spdk":{"runs":3`, `"ours_spdk":{"iops_ratio":0.5`, `"spdk_kernel":{"iops_ratio":2`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("summary with SPDK lacks %s: %s", key, b)
		}
	}
}

// sampleRBD is sample with the rbd backend's jobs, on ours and librbd (the kernel has none),
// three reps each.
func sampleRBD() *Results {
	r := sample()
	r.Ceph = "ceph version 16.2.15"
	add := func(target, job string, iops, bw, p50 float64, errs int) {
		r.Runs = append(r.Runs, Run{Target: target, Backend: BackendRBD, Job: job, IOPS: iops, BW: bw, ClatP50: p50, ClatP99: 2 * p50, IOs: 1, Errors: errs})
	}
	for i, v := range []float64{3, 1, 2} { // medians are of v = 2
		add(TargetOurs, "randread-4k-qd32", 960*v, 0, 100e3, 0)
		add(TargetLibRBD, "randread-4k-qd32", 1000*v, 0, 90e3, 0)
		add(TargetOurs, "randwrite-4k-qd32", 400*v, 0, 300e3, 0)
		add(TargetLibRBD, "randwrite-4k-qd32", 500*v, 0, 200e3, 0)
		errs := 0
		if i == 0 {
			errs = 1
		}
		add(TargetOurs, "seqread-128k-qd16", 1, 50e6*v, 1e3, 0)
		add(TargetLibRBD, "seqread-128k-qd16", 1, 50e6*v, 1e3, errs)
	}
	return r
}

// The rbd jobs are judged on ours ÷ librbd against RBDMinRatio, not on a kernel ratio or the
// link; the other jobs' goals are as without them.
func TestSummarizeRBD(t *testing.T) {
	s := Summarize(sampleRBD())
	base := Summarize(sample())
	valid := func(v float64) Ratio { return Ratio{v, true} }
	for _, tc := range []struct {
		job    string
		librbd Medians
		ratio  Ratio
		errors int
	}{
		{"randread-4k-qd32", Medians{Runs: 3, IOPS: 2000, ClatP50: 90e3, ClatP99: 180e3}, valid(0.96), 0},
		{"randwrite-4k-qd32", Medians{Runs: 3, IOPS: 1000, ClatP50: 200e3, ClatP99: 400e3}, valid(0.8), 0},
		{"seqread-128k-qd16", Medians{Runs: 3, IOPS: 1, BW: 100e6, ClatP50: 1e3, ClatP99: 2e3}, valid(1), 1},
	} {
		j := jobOf(t, s, BackendRBD, tc.job)
		got := j.OursLibRBD.Throughput(j.Metric)
		if j.LibRBD != tc.librbd || got.Valid != tc.ratio.Valid || math.Abs(got.Value-tc.ratio.Value) > 1e-9 || j.Errors != tc.errors {
			t.Errorf("%s: librbd %+v, ratio %+v, errors %d; want %+v, %+v, %d", tc.job, j.LibRBD, got, j.Errors, tc.librbd, tc.ratio, tc.errors)
		}
		if j.ThroughputRatio().Valid || j.LinkTool != "" {
			t.Errorf("%s: a kernel ratio %+v or a link %q", tc.job, j.ThroughputRatio(), j.LinkTool)
		}
	}
	g := goalMap(s)
	for name, want := range map[string]Goal{
		"rbd/randread-4k-qd32 IOPS":       {Name: "rbd/randread-4k-qd32 IOPS", Target: "≥ 0.95× librbd", Measured: "0.96×", Met: true},
		"rbd/randwrite-4k-qd32 IOPS":      {Name: "rbd/randwrite-4k-qd32 IOPS", Target: "≥ 0.95× librbd", Measured: "0.80×", Met: false},
		"rbd/seqread-128k-qd16 bandwidth": {Name: "rbd/seqread-128k-qd16 bandwidth", Target: "≥ 0.95× librbd", Measured: "1.00× (1 run with errors)", Met: true},
	} {
		if g[name] != want {
			t.Errorf("goal %q = %+v, want %+v", name, g[name], want)
		}
	}
	if len(s.Goals) != len(base.Goals)+3 {
		t.Errorf("%d goals, want %d", len(s.Goals), len(base.Goals)+3)
	}
	for _, bg := range base.Goals {
		if g[bg.Name] != bg {
			t.Errorf("goal %q = %+v with rbd runs, %+v without", bg.Name, g[bg.Name], bg)
		}
	}
	if s.Reps != 3 || s.MaxReps != 3 || s.ErrorRuns != 1 {
		t.Errorf("reps %d–%d, error runs %d", s.Reps, s.MaxReps, s.ErrorRuns)
	}
}
