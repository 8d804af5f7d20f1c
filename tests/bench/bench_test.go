package bench

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.in); got != tc.want {
				t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// sample has three reps of a QD1 job, a 4 KiB QD32 job and a 128 KiB read, plus link runs.
func sample() *Results {
	r := &Results{Date: "2026-11-23T07:00:00Z", Runtime: 10, Ramp: 3, IdleSeconds: 10, IdleCPUPercent: 0.5,
		Allocs: &AllocRun{IOs: 1000, Allocs: 10, IdleAllocs: 10}}
	add := func(target, job string, iops, bw, p50 float64) {
		r.Runs = append(r.Runs, Run{Target: target, Backend: "memory", Job: job, Rep: len(r.Runs), IOPS: iops, BW: bw, ClatP50: p50, ClatP99: 2 * p50, IOs: 1})
	}
	for _, v := range []float64{1, 2, 3} {
		add(TargetOurs, "randread-4k-qd1", 100*v, 0, 200e3*v)
		add(TargetKernel, "randread-4k-qd1", 100*v, 0, 400e3*v)
		add(TargetOurs, "randread-4k-qd32", 900*v, 0, 1)
		add(TargetKernel, "randread-4k-qd32", 1000*v, 0, 1)
		add(TargetOurs, "seqread-128k-qd16", 1, 90e6*v, 1)
		add(TargetKernel, "seqread-128k-qd16", 1, 60e6*v, 1)
	}
	r.Link = []LinkRun{{Tool: "ib_write_bw", Size: 128 << 10, BW: 200e6}, {Tool: "ib_read_bw", Size: 128 << 10, BW: 100e6}}
	return r
}

func TestSummarize(t *testing.T) {
	s := Summarize(sample())
	if s.Reps != 3 || len(s.Jobs) != 3 {
		t.Fatalf("reps %d, jobs %d; want 3, 3", s.Reps, len(s.Jobs))
	}
	for _, tc := range []struct {
		job, metric string
		ratio, link float64
	}{
		{"randread-4k-qd1", "p50", 2, 0},      // kernel p50 400us ÷ ours 200us
		{"randread-4k-qd32", "iops", 0.9, 0},  // 1800 ÷ 2000
		{"seqread-128k-qd16", "bw", 1.5, 0.9}, // 180e6 ÷ 120e6; 180e6 ÷ ib_write_bw 200e6
	} {
		var j *JobStats
		for i := range s.Jobs {
			if s.Jobs[i].Job == tc.job {
				j = &s.Jobs[i]
			}
		}
		if j == nil {
			t.Fatalf("no %s in %+v", tc.job, s.Jobs)
		}
		if j.Metric != tc.metric || math.Abs(j.Ratio-tc.ratio) > 1e-9 || math.Abs(j.LinkFraction-tc.link) > 1e-9 {
			t.Errorf("%s: metric %s ratio %v link %v, want %s %v %v", tc.job, j.Metric, j.Ratio, j.LinkFraction, tc.metric, tc.ratio, tc.link)
		}
	}
	met := map[string]bool{}
	for _, g := range s.Goals {
		met[g.Name] = g.Met
	}
	for name, want := range map[string]bool{
		"memory/randread-4k-qd1 p50 latency":             true,
		"memory/randread-4k-qd32 IOPS":                   false,
		"memory/seqread-128k-qd16 bandwidth":             true,
		"memory/seqread-128k-qd16 bandwidth vs raw link": true,
		"heap allocations per I/O (RDMA path)":           true,
		"idle CPU, hosts connected":                      true,
	} {
		if got, ok := met[name]; !ok || got != want {
			t.Errorf("goal %q met = %v (present %v), want %v", name, got, ok, want)
		}
	}
}

func TestGoalsNotMeasured(t *testing.T) {
	r := &Results{Runs: []Run{{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 5}}}
	for _, g := range Summarize(r).Goals {
		if g.Met || g.Measured != "not measured" {
			t.Errorf("goal %q: met %v, measured %q; want not measured", g.Name, g.Met, g.Measured)
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	r.Runs = append(r.Runs, Run{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 1}) // no kernel run: ratio 0
	first, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-11-23.json", "2026-11-23.md", "2026-11-23.png"}
	for i, p := range first {
		if filepath.Base(p) != want[i] {
			t.Errorf("path %d = %s, want %s", i, p, want[i])
		}
	}
	second, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(second[0]) != "2026-11-23-2.json" {
		t.Errorf("second run wrote %s, want 2026-11-23-2.json", second[0])
	}

	b, err := os.ReadFile(first[0])
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if len(rep.Results.Runs) != len(r.Runs) || len(rep.Summary.Jobs) != 4 {
		t.Errorf("round trip: %d runs, %d jobs; want %d, 4", len(rep.Results.Runs), len(rep.Summary.Jobs), len(r.Runs))
	}

	md, err := os.ReadFile(first[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| randread-4k-qd32 |", "0.90× IOPS", "2026-11-23.png", "## Goals"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("markdown lacks %q", s)
		}
	}

	f, err := os.Open(first[2])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("chart is %v", b)
	}
}
