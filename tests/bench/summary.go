package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Throughput metrics a job is judged on (JobStats.Metric).
const (
	MetricIOPS = "iops"
	MetricBW   = "bw" // 128 KiB jobs: bandwidth is the point, not the operation count
)

// LinkMinFraction is the share of the raw link (perftest) a 128 KiB sequential job must reach.
const LinkMinFraction = 0.85

// AllocsPerIOZero is the allocations per I/O below which the RDMA path counts as allocation
// free: the idle baseline is subtracted, but what varies between two spans (a timer, the GC)
// still leaves a few objects either way.
const AllocsPerIOZero = 0.01

// IdleCPUMaxPercent is the idle budget, in percent of one core, with hosts connected.
const IdleCPUMaxPercent = 2.0

// RBDMinRatio is the share of librbd's throughput (fio's rbd engine on the same image) an RBD
// namespace must reach through the target (issue 22; ceph-nvmeof's users ask for 5–10 % off).
const RBDMinRatio = 0.95

// notMeasured is Goal.Measured when the data for a goal is missing.
const notMeasured = "not measured"

// Ratio is a quotient that may not exist: a missing run, a zero denominator, or a latency fio
// did not report. It never holds NaN or ±Inf. In JSON a valid ratio is a plain number and an
// invalid one is null (omitted from JobStats), so the report always parses.
type Ratio struct {
	Value float64
	Valid bool
}

// MarshalJSON writes the value, or null when the ratio is not valid.
func (r Ratio) MarshalJSON() ([]byte, error) {
	if !r.Valid {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, r.Value, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number as a valid ratio, and null as an invalid one.
func (r *Ratio) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = Ratio{}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("ratio: %w", err)
	}
	*r = Ratio{Value: v, Valid: true}
	return nil
}

// String is "0.90×", or "—" when the ratio is not valid.
func (r Ratio) String() string {
	if !r.Valid {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r.Value)
}

// Inverse is 1/r: kernel ÷ ours from ours ÷ kernel. It is invalid for an invalid or zero r.
func (r Ratio) Inverse() Ratio {
	if !r.Valid || r.Value == 0 {
		return Ratio{}
	}
	return Ratio{Value: 1 / r.Value, Valid: true}
}

// quotient is num/den as a Ratio: invalid when den is not positive or either is not finite.
// A zero numerator gives a valid 0 (ours moved no data while the kernel did); callers whose
// zero means "not reported" (latencies) check that themselves.
func quotient(num, den float64) Ratio {
	if !(den > 0) || num < 0 || math.IsInf(num, 0) || math.IsInf(den, 0) || math.IsNaN(num) {
		return Ratio{}
	}
	return Ratio{Value: num / den, Valid: true}
}

// Summary is what Results come to: per job, medians and ratios to the kernel target (and to
// SPDK, when it ran), and the performance goals, each met or not.
type Summary struct {
	// Reps and MaxReps are the fewest and most paired reps (runs on both targets) of any job;
	// they differ only when a job failed to run on one target in some rep.
	Reps    int `json:"reps"`
	MaxReps int `json:"max_reps"`
	// ErrorRuns counts fio runs, of any target, that reported errors.
	ErrorRuns int        `json:"error_runs"`
	Jobs      []JobStats `json:"jobs"`
	Goals     []Goal     `json:"goals"`
}

// JobStats are the medians of one job on one backend, for every target, and how they compare.
// The top-level ratios are ours ÷ kernel, so for latencies lower is better; OursSPDK and
// SPDKKernel hold the comparisons with SPDK.
type JobStats struct {
	Backend string `json:"backend"`
	Job     string `json:"job"`
	// Metric is the throughput the job is judged on: MetricBW for 128 KiB jobs, else MetricIOPS.
	Metric string `json:"metric"`
	// QD1 jobs (queue depth 1) are about latency: they are judged on the p50 ratio as well.
	QD1    bool    `json:"qd1,omitempty"`
	Ours   Medians `json:"ours"`
	Kernel Medians `json:"kernel"`
	SPDK   Medians `json:"spdk,omitzero"` // Runs 0: SPDK did not run this job

	IOPSRatio Ratio `json:"iops_ratio,omitzero"`
	BWRatio   Ratio `json:"bw_ratio,omitzero"`
	P50Ratio  Ratio `json:"clat_p50_ratio,omitzero"`
	P99Ratio  Ratio `json:"clat_p99_ratio,omitzero"`

	// Jobs SPDK ran: ours ÷ SPDK and SPDK ÷ kernel (valid where both sides ran).
	OursSPDK   Comparison `json:"ours_spdk,omitzero"`
	SPDKKernel Comparison `json:"spdk_kernel,omitzero"`

	// The rbd backend's jobs: librbd's medians (fio's rbd engine) and ours ÷ librbd, which
	// they are judged on instead of a kernel ratio.
	LibRBD     Medians    `json:"librbd,omitzero"`
	OursLibRBD Comparison `json:"ours_librbd,omitzero"`

	// For 128 KiB sequential jobs: the perftest tool that moves data the same way, its median
	// bandwidth at 128 KiB, and ours' bandwidth as a fraction of it.
	LinkTool     string  `json:"link_tool,omitempty"`
	LinkBW       float64 `json:"link_bw_bytes_per_s,omitempty"`
	LinkFraction Ratio   `json:"link_fraction,omitzero"`

	Errors     int `json:"errors"`                // runs of this job, ours, kernel or librbd, with fio errors
	SPDKErrors int `json:"spdk_errors,omitempty"` // SPDK's runs of it with fio errors
}

// Comparison is one target's medians divided by another's (num ÷ den).
type Comparison struct {
	IOPS Ratio `json:"iops_ratio,omitzero"`
	BW   Ratio `json:"bw_ratio,omitzero"`
	P50  Ratio `json:"clat_p50_ratio,omitzero"`
	P99  Ratio `json:"clat_p99_ratio,omitzero"`
}

// compare is num ÷ den of two targets' medians; every ratio is invalid unless both ran.
func compare(num, den Medians) Comparison {
	if num.Runs == 0 || den.Runs == 0 {
		return Comparison{}
	}
	return Comparison{
		IOPS: quotient(num.IOPS, den.IOPS),
		BW:   quotient(num.BW, den.BW),
		P50:  latencyRatio(num.ClatP50, den.ClatP50),
		P99:  latencyRatio(num.ClatP99, den.ClatP99),
	}
}

// Throughput is the ratio a job with this metric is judged on: BW or IOPS.
func (c Comparison) Throughput(metric string) Ratio {
	if metric == MetricBW {
		return c.BW
	}
	return c.IOPS
}

// ThroughputRatio is the ratio the job is judged on: BWRatio or IOPSRatio, per Metric.
func (j JobStats) ThroughputRatio() Ratio {
	if j.Metric == MetricBW {
		return j.BWRatio
	}
	return j.IOPSRatio
}

// Medians of one target's runs of one job.
type Medians struct {
	Runs    int     `json:"runs"`
	IOPS    float64 `json:"iops"`
	BW      float64 `json:"bw_bytes_per_s"`
	ClatP50 float64 `json:"clat_p50_ns"`
	ClatP99 float64 `json:"clat_p99_ns"`
}

// Goal is one target of the performance work and whether this run met it.
type Goal struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"` // "not measured" when data is missing; Met is then false
	Met      bool   `json:"met"`
}

// median of xs, the mean of the middle two for an even count; 0 for none.
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
	pick := func(f func(Run) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return Medians{
		Runs:    len(runs),
		IOPS:    pick(func(r Run) float64 { return r.IOPS }),
		BW:      pick(func(r Run) float64 { return r.BW }),
		ClatP50: pick(func(r Run) float64 { return r.ClatP50 }),
		ClatP99: pick(func(r Run) float64 { return r.ClatP99 }),
	}
}

// queueDepth is N of a "qdN" token in a job name ("randread-4k-qd1" → 1), 0 if there is none.
func queueDepth(job string) int {
	for _, tok := range strings.Split(job, "-") {
		if rest, ok := strings.CutPrefix(tok, "qd"); ok {
			if n, err := strconv.Atoi(rest); err == nil {
				return n
			}
		}
	}
	return 0
}

// metricFor is the throughput a job is judged on.
func metricFor(job string) string {
	if strings.Contains(job, "128k") {
		return MetricBW
	}
	return MetricIOPS
}

// linkFor is the perftest tool whose bandwidth bounds a 128 KiB sequential job: host reads are
// the target's RDMA WRITEs, host writes its RDMA READs.
func linkFor(job string) (tool string, ok bool) {
	switch {
	case strings.HasPrefix(job, "seqread-128k"):
		return "ib_write_bw", true
	case strings.HasPrefix(job, "seqwrite-128k"):
		return "ib_read_bw", true
	}
	return "", false
}

// linkSize is the perftest message size the 128 KiB jobs are compared at.
const linkSize = 128 << 10

// linkBW is the median bandwidth perftest's tool measured at size; 0 if it did not.
func linkBW(link []LinkRun, tool string, size int) float64 {
	var bw []float64
	for _, l := range link {
		if l.Tool == tool && l.Size == size && l.BW > 0 {
			bw = append(bw, l.BW)
		}
	}
	return median(bw)
}

// latencyRatio is num ÷ den of a latency, where 0 means fio did not report it.
func latencyRatio(num, den float64) Ratio {
	if !(num > 0) {
		return Ratio{}
	}
	return quotient(num, den)
}

// Summarize computes per-job medians and ratios and evaluates the goals. Jobs keep the order
// their (backend, job) pair first appears in r.Runs.
func Summarize(r *Results) Summary {
	type key struct{ backend, job string }
	var order []key
	byKey := map[key]map[string][]Run{}
	var s Summary
	for _, run := range r.Runs {
		k := key{run.Backend, run.Job}
		if byKey[k] == nil {
			byKey[k] = map[string][]Run{}
			order = append(order, k)
		}
		byKey[k][run.Target] = append(byKey[k][run.Target], run)
		if run.Errors != 0 {
			s.ErrorRuns++
		}
	}
	var pairs []int // per job with runs on both targets: how many reps were paired
	for _, k := range order {
		ours, kernel, spdk, librbd := byKey[k][TargetOurs], byKey[k][TargetKernel], byKey[k][TargetSPDK], byKey[k][TargetLibRBD]
		j := JobStats{
			Backend: k.backend,
			Job:     k.job,
			Metric:  metricFor(k.job),
			QD1:     queueDepth(k.job) == 1,
			Ours:    medians(ours),
			Kernel:  medians(kernel),
			SPDK:    medians(spdk),
			LibRBD:  medians(librbd),
		}
		for _, run := range slices.Concat(ours, kernel, librbd) {
			if run.Errors != 0 {
				j.Errors++
			}
		}
		for _, run := range spdk {
			if run.Errors != 0 {
				j.SPDKErrors++
			}
		}
		vk := compare(j.Ours, j.Kernel)
		j.IOPSRatio, j.BWRatio, j.P50Ratio, j.P99Ratio = vk.IOPS, vk.BW, vk.P50, vk.P99
		if len(ours) > 0 && len(kernel) > 0 {
			pairs = append(pairs, min(len(ours), len(kernel)))
		}
		if len(ours) > 0 && len(librbd) > 0 {
			pairs = append(pairs, min(len(ours), len(librbd)))
		}
		j.OursSPDK = compare(j.Ours, j.SPDK)
		j.SPDKKernel = compare(j.SPDK, j.Kernel)
		j.OursLibRBD = compare(j.Ours, j.LibRBD)
		// The rbd jobs are bounded by the cluster, not by the link.
		if tool, ok := linkFor(k.job); ok && k.backend != BackendRBD {
			j.LinkTool = tool
			j.LinkBW = linkBW(r.Link, tool, linkSize)
			if len(ours) > 0 {
				j.LinkFraction = quotient(j.Ours.BW, j.LinkBW)
			}
		}
		s.Jobs = append(s.Jobs, j)
	}
	if len(pairs) > 0 {
		s.Reps, s.MaxReps = slices.Min(pairs), slices.Max(pairs)
	}
	s.Goals = goals(r, s.Jobs)
	return s
}

func goals(r *Results, jobs []JobStats) []Goal {
	var g []Goal
	linkJobs := map[string]bool{} // seqread-128k, seqwrite-128k: seen in some backend
	for _, j := range jobs {
		name := j.Backend + "/" + j.Job
		if j.Backend == BackendRBD {
			what, target := name+" IOPS", fmt.Sprintf("≥ %.2f× librbd", RBDMinRatio)
			if j.Metric == MetricBW {
				what = name + " bandwidth"
			}
			v := j.OursLibRBD.Throughput(j.Metric)
			g = append(g, ratioGoal(what, target, v, v.Value >= RBDMinRatio, j.Errors))
			continue
		}
		if j.Metric == MetricBW {
			g = append(g, ratioGoal(name+" bandwidth", "≥ 1.00× kernel", j.BWRatio, j.BWRatio.Value >= 1, j.Errors))
		} else {
			g = append(g, ratioGoal(name+" IOPS", "≥ 1.00× kernel", j.IOPSRatio, j.IOPSRatio.Value >= 1, j.Errors))
		}
		if j.QD1 {
			g = append(g, ratioGoal(name+" p50 latency", "≤ 1.00× kernel", j.P50Ratio, j.P50Ratio.Value <= 1, j.Errors))
		}
		if j.LinkTool != "" {
			linkJobs[strings.SplitN(j.Job, "-", 3)[0]] = true
			lg := Goal{Name: name + " bandwidth vs raw link", Target: fmt.Sprintf("≥ %.0f%% of %s", LinkMinFraction*100, j.LinkTool), Measured: notMeasured}
			if f := j.LinkFraction; f.Valid {
				lg.Measured = fmt.Sprintf("%.0f%% (%.1f of %.1f MiB/s)", f.Value*100, j.Ours.BW/mib, j.LinkBW/mib)
				lg.Met = f.Value >= LinkMinFraction
			}
			g = append(g, lg)
		}
	}
	// Both directions are goals even when a run filtered their jobs out.
	for _, job := range []string{"seqread", "seqwrite"} {
		if !linkJobs[job] {
			tool, _ := linkFor(job + "-128k")
			g = append(g, Goal{Name: job + "-128k bandwidth vs raw link", Target: fmt.Sprintf("≥ %.0f%% of %s", LinkMinFraction*100, tool), Measured: notMeasured})
		}
	}

	ag := Goal{Name: "heap allocations per I/O (RDMA path)", Target: "0 (< 0.01)", Measured: notMeasured}
	if a := r.Allocs; a != nil && a.IOs > 0 {
		ag.Measured = fmt.Sprintf("%.3f", a.AllocsPerIO)
		if a.Noise() {
			ag.Measured += " (below the idle baseline: noise)"
		}
		ag.Met = a.AllocsPerIO < AllocsPerIOZero
	}
	g = append(g, ag)

	g = append(g, queueGoals(r.Scale)...)

	ig := Goal{Name: "idle CPU, hosts connected", Target: fmt.Sprintf("< %g%% of a core", IdleCPUMaxPercent), Measured: notMeasured}
	if r.IdleSeconds > 0 {
		ig.Measured = fmt.Sprintf("%.2f%%", r.IdleCPUPercent)
		ig.Met = r.IdleCPUPercent < IdleCPUMaxPercent
	}
	return append(g, ig)
}

// QueuesWithDefaults is how many queues one device must take with the default pools and a
// shared receive queue (issue 23).
const QueuesWithDefaults = 1000

// queueGoals are the goals of the memory-per-connection phase, when it ran with a shared
// receive queue: what is registered does not grow with the connections, and the default
// pools take QueuesWithDefaults queues.
func queueGoals(sc *ScaleRun) []Goal {
	if sc == nil {
		return nil
	}
	var g []Goal
	for _, q := range sc.Queues {
		if !q.SRQ || len(q.Points) == 0 {
			continue
		}
		first, last := q.Points[0], q.Points[len(q.Points)-1]
		flat := Goal{Name: "registered memory as queues connect (SRQ)", Target: "flat", Measured: notMeasured}
		if len(q.Points) > 1 {
			flat.Measured = fmt.Sprintf("%+.0f bytes from %d to %d queues", last.Registered-first.Registered, first.Queues, last.Queues)
			flat.Met = last.Registered == first.Registered
		}
		taken := Goal{Name: "queues on one device with the default pools (SRQ)", Target: fmt.Sprintf("≥ %d", QueuesWithDefaults),
			Measured: fmt.Sprintf("%d", last.Queues)}
		taken.Met = q.Config == "" && last.Queues >= QueuesWithDefaults
		if q.Config != "" {
			taken.Measured += " (not the defaults: " + q.Config + ")"
		}
		g = append(g, flat, taken)
	}
	return g
}

// ratioGoal is a goal on a ratio of ours (÷ kernel, ÷ librbd); met is only consulted for a
// valid ratio.
func ratioGoal(name, target string, v Ratio, met bool, errors int) Goal {
	if !v.Valid {
		return Goal{Name: name, Target: target, Measured: notMeasured}
	}
	g := Goal{Name: name, Target: target, Measured: v.String(), Met: met}
	if errors > 0 {
		g.Measured += fmt.Sprintf(" (%d %s with errors)", errors, plural(errors, "run", "runs"))
	}
	return g
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

const mib = 1 << 20
