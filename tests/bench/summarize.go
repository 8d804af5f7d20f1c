package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is what Results come to: per job, medians and ratios to the kernel target; and the
// issue's goals, each met or not.
type Summary struct {
	Reps  int        `json:"reps"`
	Jobs  []JobStats `json:"jobs"`
	Goals []Goal     `json:"goals"`
}

// JobStats are the medians of one job on one backend, for both targets.
type JobStats struct {
	Backend string `json:"backend"`
	Job     string `json:"job"`
	// Metric is what the ratio compares: "iops", "bw" (128 KiB jobs) or "p50" (queue depth 1,
	// where latency matters: the ratio is kernel/ours so that higher is better everywhere).
	Metric string  `json:"metric"`
	Ours   Medians `json:"ours"`
	Kernel Medians `json:"kernel"`
	// Ratio is ours ÷ kernel for iops and bw, kernel ÷ ours for p50; 0 when not measurable.
	Ratio float64 `json:"ratio"`
	// LinkFraction is ours' bandwidth over perftest's at the same size, for 128 KiB sequential
	// jobs; 0 otherwise.
	LinkFraction float64 `json:"link_fraction,omitempty"`
	Errors       int     `json:"errors"` // runs with a fio error
}

// Medians of a target's runs of one job.
type Medians struct {
	Runs    int     `json:"runs"`
	IOPS    float64 `json:"iops"`
	BW      float64 `json:"bw_bytes_per_s"`
	ClatP50 float64 `json:"clat_p50_ns"`
	ClatP99 float64 `json:"clat_p99_ns"`
}

// Goal is one target of the performance issue.
type Goal struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medians(runs []Run) Medians {
	var iops, bw, p50, p99 []float64
	for _, r := range runs {
		iops = append(iops, r.IOPS)
		bw = append(bw, r.BW)
		p50 = append(p50, r.ClatP50)
		p99 = append(p99, r.ClatP99)
	}
	return Medians{Runs: len(runs), IOPS: median(iops), BW: median(bw), ClatP50: median(p50), ClatP99: median(p99)}
}

// ratio is a/b, or 0 when either is not a positive number.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// metricFor is what a job is judged on.
func metricFor(job string) string {
	switch {
	case strings.Contains(job, "-qd1") && !strings.Contains(job, "-qd16"):
		return "p50"
	case strings.Contains(job, "128k"):
		return "bw"
	default:
		return "iops"
	}
}

// linkBW is the median bandwidth of tool at size, 0 if not measured.
func linkBW(link []LinkRun, tool string, size int) float64 {
	var bw []float64
	for _, l := range link {
		if l.Tool == tool && l.Size == size && l.BW > 0 {
			bw = append(bw, l.BW)
		}
	}
	return median(bw)
}

// Summarize computes medians, ratios and goals. Jobs keep the order they were first run in.
func Summarize(r *Results) Summary {
	type key struct{ backend, job string }
	var order []key
	by := map[key]map[string][]Run{}
	for _, run := range r.Runs {
		k := key{run.Backend, run.Job}
		if by[k] == nil {
			by[k] = map[string][]Run{}
			order = append(order, k)
		}
		by[k][run.Target] = append(by[k][run.Target], run)
	}
	var s Summary
	for _, k := range order {
		ours, kern := by[k][TargetOurs], by[k][TargetKernel]
		s.Reps = max(s.Reps, min(len(ours), len(kern)))
		js := JobStats{Backend: k.backend, Job: k.job, Metric: metricFor(k.job), Ours: medians(ours), Kernel: medians(kern)}
		for _, run := range append(slices.Clone(ours), kern...) {
			if run.Errors != 0 {
				js.Errors++
			}
		}
		switch js.Metric {
		case "p50":
			js.Ratio = ratio(js.Kernel.ClatP50, js.Ours.ClatP50)
		case "bw":
			js.Ratio = ratio(js.Ours.BW, js.Kernel.BW)
		default:
			js.Ratio = ratio(js.Ours.IOPS, js.Kernel.IOPS)
		}
		switch {
		case strings.HasPrefix(k.job, "seqread-128k"): // host reads: the target's RDMA WRITEs
			js.LinkFraction = ratio(js.Ours.BW, linkBW(r.Link, "ib_write_bw", 128<<10))
		case strings.HasPrefix(k.job, "seqwrite-128k"): // host writes: the target's RDMA READs
			js.LinkFraction = ratio(js.Ours.BW, linkBW(r.Link, "ib_read_bw", 128<<10))
		}
		s.Jobs = append(s.Jobs, js)
	}
	s.Goals = goals(r, s.Jobs)
	return s
}

func goals(r *Results, jobs []JobStats) []Goal {
	var g []Goal
	for _, j := range jobs {
		name := j.Backend + "/" + j.Job
		switch j.Metric {
		case "p50":
			g = append(g, ratioGoal(name+" p50 latency", "≤ 1.0× kernel", 1/nonzero(j.Ratio), j.Ratio > 0 && j.Ratio >= 1, j.Ratio > 0))
			g = append(g, ratioGoal(name+" IOPS", "≥ 1.0× kernel", ratio(j.Ours.IOPS, j.Kernel.IOPS), ratio(j.Ours.IOPS, j.Kernel.IOPS) >= 1, ratio(j.Ours.IOPS, j.Kernel.IOPS) > 0))
		case "bw":
			g = append(g, ratioGoal(name+" bandwidth", "≥ 1.0× kernel", j.Ratio, j.Ratio >= 1, j.Ratio > 0))
		default:
			g = append(g, ratioGoal(name+" IOPS", "≥ 1.0× kernel", j.Ratio, j.Ratio >= 1, j.Ratio > 0))
		}
		if strings.HasPrefix(j.Job, "seq") && strings.Contains(j.Job, "128k") {
			g = append(g, Goal{Name: name + " bandwidth vs raw link", Target: "≥ 85% of perftest",
				Measured: pct(j.LinkFraction), Met: j.LinkFraction >= 0.85})
		}
	}
	if a := r.Allocs; a != nil && a.IOs > 0 {
		g = append(g, Goal{Name: "heap allocations per I/O (RDMA path)", Target: "0",
			Measured: fmt.Sprintf("%.3f (%d allocations in %d I/Os, %d idle)", a.AllocsPerIO, a.Allocs, a.IOs, a.IdleAllocs),
			Met:      a.AllocsPerIO < 0.01})
	} else {
		g = append(g, Goal{Name: "heap allocations per I/O (RDMA path)", Target: "0", Measured: "not measured"})
	}
	if r.IdleSeconds > 0 {
		g = append(g, Goal{Name: "idle CPU, hosts connected", Target: "< 2% of a core",
			Measured: fmt.Sprintf("%.2f%% over %.0fs", r.IdleCPUPercent, r.IdleSeconds), Met: r.IdleCPUPercent < 2})
	} else {
		g = append(g, Goal{Name: "idle CPU, hosts connected", Target: "< 2% of a core", Measured: "not measured"})
	}
	return g
}

func ratioGoal(name, target string, v float64, met, measured bool) Goal {
	if !measured {
		return Goal{Name: name, Target: target, Measured: "not measured"}
	}
	return Goal{Name: name, Target: target, Measured: fmt.Sprintf("%.2f×", v), Met: met}
}

func nonzero(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

func pct(f float64) string {
	if f <= 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}
