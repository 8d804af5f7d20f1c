package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The two-machine report (Results.Topology == TopologyTwo): every target in the target guest,
// the kernel host in the host guest. Each job, over each transport it ran on, is compared with
// each peer that ran it over the same transport, rep by rep (ours in rep i against the peer in rep i, which ran right after it), and each
// comparison is reported as its median with the spread over the reps. Every ratio is put so
// that above 1 is ours ahead: throughput ours ÷ peer, latency and CPU per I/O peer ÷ ours.

// TwoSummary is what two-machine Results come to.
type TwoSummary struct {
	// Reps is the fewest paired reps of any comparison.
	Reps      int      `json:"reps"`
	ErrorRuns int      `json:"error_runs"`
	Jobs      []TwoJob `json:"jobs"`
	Goals     []Goal   `json:"goals"`
}

// TwoJob is one job on one backend over one transport: each target's medians, and ours
// against each peer.
type TwoJob struct {
	Backend   string `json:"backend"`
	Job       string `json:"job"`
	Transport string `json:"transport"` // TransportRDMA or TransportTCP
	Metric    string `json:"metric"`
	QD1       bool   `json:"qd1,omitempty"`
	// Targets in the order they ran in each rep, ours first.
	Targets []TargetStats `json:"targets"`
	Versus  []Versus      `json:"versus"`
	Errors  int           `json:"errors"`
}

// TargetStats are one target's medians of a job, with its CPU per I/O.
type TargetStats struct {
	Target string `json:"target"`
	Medians
	// CPUPerIO is the median over its runs of the target guest's busy CPU time per I/O, µs;
	// BusyCores the median busy vCPUs, and ProcessShare the median share of the busy time that
	// was the target's own process (-1: none, the kernel's nvmet).
	CPUPerIO     float64 `json:"cpu_us_per_io"`
	BusyCores    float64 `json:"busy_cores"`
	ProcessShare float64 `json:"process_share"`
}

// Versus is ours against one peer in one job, over the reps both ran. Above 1 is ours ahead.
type Versus struct {
	Peer string `json:"peer"`
	// Throughput is ours ÷ the peer in the job's metric (IOPS or bandwidth).
	Throughput Spread `json:"throughput"`
	// P50 and P99 are the peer's completion latency ÷ ours.
	P50 Spread `json:"clat_p50"`
	P99 Spread `json:"clat_p99"`
	// CPU is the peer's CPU per I/O ÷ ours.
	CPU Spread `json:"cpu_per_io"`
}

// Spread is a ratio over reps: its median, lowest and highest; N 0 when no rep had both.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median,omitempty"`
	Min    float64 `json:"min,omitempty"`
	Max    float64 `json:"max,omitempty"`
}

// Valid is whether any rep gave the ratio.
func (s Spread) Valid() bool { return s.N > 0 }

// String is "1.05× (0.98–1.10)", the median and the range over the reps; "—" when invalid.
func (s Spread) String() string {
	switch {
	case !s.Valid():
		return "—"
	case s.N == 1:
		return fmt.Sprintf("%.2f×", s.Median)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	return Spread{N: len(xs), Median: median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
}

// throughputOf is a run's value in metric.
func throughputOf(r Run, metric string) float64 {
	if metric == MetricBW {
		return r.BW
	}
	return r.IOPS
}

// pairRatios is f(ours, peer) for every rep both ran, where f's result is finite and positive.
func pairRatios(ours, peer []Run, f func(o, p Run) Ratio) []float64 {
	var out []float64
	for _, o := range ours {
		i := slices.IndexFunc(peer, func(p Run) bool { return p.Rep == o.Rep })
		if i < 0 {
			continue
		}
		if r := f(o, peer[i]); r.Valid && r.Value > 0 && !math.IsInf(r.Value, 0) {
			out = append(out, r.Value)
		}
	}
	return out
}

// versus compares ours with a peer rep by rep.
func versus(peer string, metric string, ours, theirs []Run) Versus {
	return Versus{
		Peer: peer,
		Throughput: spreadOf(pairRatios(ours, theirs, func(o, p Run) Ratio {
			return quotient(throughputOf(o, metric), throughputOf(p, metric))
		})),
		P50: spreadOf(pairRatios(ours, theirs, func(o, p Run) Ratio { return latencyRatio(p.ClatP50, o.ClatP50) })),
		P99: spreadOf(pairRatios(ours, theirs, func(o, p Run) Ratio { return latencyRatio(p.ClatP99, o.ClatP99) })),
		CPU: spreadOf(pairRatios(ours, theirs, func(o, p Run) Ratio {
			oc, pc := o.CPUPerIO(), p.CPUPerIO()
			if !(oc > 0) || !(pc > 0) {
				return Ratio{}
			}
			return quotient(pc, oc)
		})),
	}
}

func targetStats(target string, runs []Run) TargetStats {
	ts := TargetStats{Target: target, Medians: medians(runs), ProcessShare: -1}
	var cpu, busy, share []float64
	for _, r := range runs {
		if c := r.CPUPerIO(); c > 0 {
			cpu = append(cpu, c)
			busy = append(busy, r.CPU.BusyCores())
			if r.CPU.Process >= 0 && r.CPU.Busy > 0 {
				share = append(share, float64(r.CPU.Process)/float64(r.CPU.Busy))
			}
		}
	}
	ts.CPUPerIO, ts.BusyCores = median(cpu), median(busy)
	if len(share) > 0 {
		ts.ProcessShare = median(share)
	}
	return ts
}

// SummarizeTwo computes the two-machine summary. Jobs keep the order their (backend, job)
// first appears in r.Runs, each job's transports the order they first ran it in (so that a
// job's TCP rows stand beside its RDMA ones), and targets within a job the order they first
// ran.
func SummarizeTwo(r *Results) TwoSummary {
	type key struct{ backend, job, transport string }
	var order []key
	byKey := map[key]map[string][]Run{}
	targetOrder := map[key][]string{}
	firstOf := map[[2]string]int{} // (backend, job) → when it first ran
	var s TwoSummary
	for _, run := range r.Runs {
		k := key{run.Backend, run.Job, run.Fabric()}
		if byKey[k] == nil {
			byKey[k] = map[string][]Run{}
			order = append(order, k)
		}
		if _, ok := firstOf[[2]string{k.backend, k.job}]; !ok {
			firstOf[[2]string{k.backend, k.job}] = len(firstOf)
		}
		if !slices.Contains(targetOrder[k], run.Target) {
			targetOrder[k] = append(targetOrder[k], run.Target)
		}
		byKey[k][run.Target] = append(byKey[k][run.Target], run)
		if run.Errors != 0 {
			s.ErrorRuns++
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Compare(firstOf[[2]string{a.backend, a.job}], firstOf[[2]string{b.backend, b.job}])
	})
	reps := -1
	for _, k := range order {
		j := TwoJob{Backend: k.backend, Job: k.job, Transport: k.transport, Metric: metricFor(k.job), QD1: queueDepth(k.job) == 1}
		targets := targetOrder[k]
		// Ours first, whatever ran first.
		if i := slices.Index(targets, TargetOurs); i > 0 {
			targets = slices.Concat([]string{TargetOurs}, targets[:i], targets[i+1:])
		}
		for _, tg := range targets {
			runs := byKey[k][tg]
			j.Targets = append(j.Targets, targetStats(tg, runs))
			for _, run := range runs {
				if run.Errors != 0 {
					j.Errors++
				}
			}
			if tg == TargetOurs {
				continue
			}
			v := versus(tg, j.Metric, byKey[k][TargetOurs], runs)
			j.Versus = append(j.Versus, v)
			if reps < 0 || v.Throughput.N < reps {
				reps = v.Throughput.N
			}
		}
		s.Jobs = append(s.Jobs, j)
	}
	s.Reps = max(reps, 0)
	s.Goals = twoGoals(r, s.Jobs)
	return s
}

// PeerName is how the report names a target: SPDK on an rbd job is its bdev_rbd, and a target
// reached over TCP has "(TCP)" after its name, so that no row, goal or bar is named twice.
func PeerName(target, backend, transport string) string {
	if transport == TransportTCP {
		return PeerName(target, backend, TransportRDMA) + " (TCP)"
	}
	switch target {
	case TargetOurs:
		return "ours"
	case TargetKernel:
		return "kernel nvmet"
	case TargetSPDK:
		if backend == BackendRBD {
			return "SPDK bdev_rbd"
		}
		return "SPDK"
	case TargetLibRBD:
		return "fio-rbd"
	case TargetPrev:
		return "previous build"
	}
	return target
}

// twoGoals: on every job, ours at least at parity with each peer in throughput (and p50
// latency for QD1) and in CPU per I/O; the idle target under the budget; no allocation per I/O.
func twoGoals(r *Results, jobs []TwoJob) []Goal {
	var g []Goal
	for _, j := range jobs {
		name := j.Backend + "/" + j.Job
		for _, v := range j.Versus {
			peer := PeerName(v.Peer, j.Backend, j.Transport)
			what := "IOPS"
			if j.Metric == MetricBW {
				what = "bandwidth"
			}
			g = append(g, spreadGoal(fmt.Sprintf("%s %s vs %s", name, what, peer), "≥ 1.00× (ours ÷ peer)", v.Throughput, j.Errors))
			if j.QD1 {
				g = append(g, spreadGoal(fmt.Sprintf("%s p50 latency vs %s", name, peer), "≥ 1.00× (peer ÷ ours)", v.P50, j.Errors))
			}
			g = append(g, spreadGoal(fmt.Sprintf("%s CPU per I/O vs %s", name, peer), "≥ 1.00× (peer ÷ ours)", v.CPU, j.Errors))
		}
	}
	path := "RDMA"
	if r.Allocs != nil && r.Allocs.Transport == TransportTCP {
		path = "TCP"
	}
	ag := Goal{Name: "heap allocations per I/O (" + path + " path)", Target: "0 (< 0.01)", Measured: notMeasured}
	if a := r.Allocs; a != nil && a.IOs > 0 {
		ag.Measured = fmt.Sprintf("%.3f", a.AllocsPerIO)
		if a.Noise() {
			ag.Measured += " (below the idle baseline: noise)"
		}
		ag.Met = a.AllocsPerIO < AllocsPerIOZero
	}
	ig := Goal{Name: "idle CPU of nvmeof-tgt, hosts connected", Target: fmt.Sprintf("< %g%% of a core", IdleCPUMaxPercent), Measured: notMeasured}
	if r.IdleSeconds > 0 {
		ig.Measured = fmt.Sprintf("%.2f%%", r.IdleCPUPercent)
		ig.Met = r.IdleCPUPercent < IdleCPUMaxPercent
	}
	return append(g, ag, ig)
}

func spreadGoal(name, target string, s Spread, errors int) Goal {
	if !s.Valid() {
		return Goal{Name: name, Target: target, Measured: notMeasured}
	}
	g := Goal{Name: name, Target: target, Measured: s.String(), Met: s.Median >= 1}
	if errors > 0 {
		g.Measured += fmt.Sprintf(" (%d %s with errors)", errors, plural(errors, "run", "runs"))
	}
	return g
}

// MarkdownTwo renders the two-machine report; chart is the PNG's file name beside it.
func MarkdownTwo(r *Results, s TwoSummary, chart string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# nvmeof-tgt on its own machine vs kernel nvmet and SPDK, %s\n\n", dateOf(r.Date))
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", orDash(r.Date))
	fmt.Fprintf(&b, "| commit | `%s` |\n", orDash(r.Commit))
	fmt.Fprintf(&b, "| guest kernel | %s |\n", orDash(r.Kernel))
	fmt.Fprintf(&b, "| target guest | %d vCPU, %d MiB: every target, one at a time in its turn |\n", r.CPUs, r.MemMiB)
	tcp := slices.ContainsFunc(s.Jobs, func(j TwoJob) bool { return j.Transport == TransportTCP })
	initiators, link := "nvme-rdma", ""
	if tcp {
		initiators, link = "nvme-rdma and nvme-tcp,", "; NVMe/TCP over the same link's IP addresses"
	}
	fmt.Fprintf(&b, "| host guest | %d vCPU, %d MiB: the kernel's %s and fio |\n", r.HostCPUs, r.HostMemMiB, initiators)
	fmt.Fprintf(&b, "| link | one virtio-net link, Soft-RoCE (rxe) at each end (QEMU TCG)%s |\n", link)
	if r.SPDK != "" {
		fmt.Fprintf(&b, "| SPDK | %s, `nvmf_tgt -m 0x1` (one reactor on the target's vCPU) |\n", r.SPDK)
	}
	if r.Ceph != "" {
		fmt.Fprintf(&b, "| Ceph | %s: one mon, one mgr, one memstore OSD in the target guest, pool size 1 |\n", r.Ceph)
	}
	fmt.Fprintf(&b, "| fio | %d s per run after %d s ramp, %d reps |\n\n", r.Runtime, r.Ramp, s.Reps)

	b.WriteString("Every job ran on each target in turn in each rep (ours first, then each peer), in one boot of the two guests. " +
		"Ratios are medians over the reps of the per-rep ratio (ours in rep i against the peer in rep i), with the lowest and " +
		"highest in brackets, and are put so that **above 1.00× is ours ahead**: throughput is ours ÷ peer, latency and CPU " +
		"per I/O are peer ÷ ours. The guests are emulated (QEMU TCG on a shared machine): only ratios measured side by side mean " +
		"anything, never the absolute numbers.\n\n")
	b.WriteString("CPU per I/O is the target guest's busy time (`/proc/stat`: all but idle and iowait, so the target's " +
		"process, the kernel's softirq and rxe together) over the middle of each run, divided by the I/Os completed in it, in µs. " +
		"SPDK's reactor polls its vCPU all the time, so its busy time is the whole vCPU whatever the load.\n\n")
	if tcp {
		b.WriteString("Rows whose peer is marked (TCP) ran the same jobs over NVMe/TCP on the same link, the host connecting with " +
			"`nvme connect -t tcp` (no digests): ours with a `transport: tcp` port, the kernel's nvmet-tcp and SPDK's TCP transport, " +
			"each with 8 KiB of in-capsule data; ours in those rows is ours over TCP. Their CPU per I/O holds the guest's TCP/IP " +
			"stack where the RDMA rows hold rxe.\n\n")
	}
	if s.ErrorRuns > 0 {
		fmt.Fprintf(&b, "**%d fio runs reported errors** (see the runs column).\n\n", s.ErrorRuns)
	}
	fmt.Fprintf(&b, "![ours against each peer](%s)\n\n", chart)

	var backends []string
	for _, j := range s.Jobs {
		if !slices.Contains(backends, j.Backend) {
			backends = append(backends, j.Backend)
		}
	}
	for _, be := range backends {
		fmt.Fprintf(&b, "## %s\n\n", twoBackendText(be))
		b.WriteString("| job | vs | ours | peer | throughput ours ÷ peer | p50 / p99 µs ours; peer | latency peer ÷ ours p50; p99 | CPU µs/I/O ours / peer | CPU peer ÷ ours | runs |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, j := range s.Jobs {
			if j.Backend != be {
				continue
			}
			ours := j.Targets[0]
			for _, v := range j.Versus {
				i := slices.IndexFunc(j.Targets, func(ts TargetStats) bool { return ts.Target == v.Peer })
				peer := j.Targets[i]
				lat := "—"
				if j.QD1 {
					lat = v.P50.String() + "; " + v.P99.String()
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s; %s | %s | %s / %s | %s | %d / %d |\n",
					j.Job, PeerName(v.Peer, be, j.Transport), throughputText(j.Metric, ours.Medians), throughputText(j.Metric, peer.Medians),
					v.Throughput, latencyText(ours.Medians), latencyText(peer.Medians), lat,
					cpuText(ours.CPUPerIO), cpuText(peer.CPUPerIO), v.CPU, ours.Runs, peer.Runs)
			}
		}
		b.WriteString("\n")
	}

	b.WriteString("## Where the target guest's CPU went\n\n")
	b.WriteString("Median busy vCPU of the target guest during each target's runs, and the share of it that was the target's own " +
		"process (the rest: softirq, rxe, the block layer, the kernel's nvmet, which has no process).\n\n")
	b.WriteString("| job | target | busy vCPU | own process |\n|---|---|---:|---:|\n")
	for _, j := range s.Jobs {
		for _, ts := range j.Targets {
			share := "—"
			if ts.ProcessShare >= 0 {
				share = fmt.Sprintf("%.0f%%", ts.ProcessShare*100)
			}
			busy := "—"
			if ts.BusyCores > 0 {
				busy = fmt.Sprintf("%.2f", ts.BusyCores)
			}
			fmt.Fprintf(&b, "| %s/%s | %s | %s | %s |\n", j.Backend, j.Job, PeerName(ts.Target, j.Backend, j.Transport), busy, share)
		}
	}
	b.WriteString("\n")

	b.WriteString("## Goals\n\n| goal | target | measured | met |\n|---|---|---|:-:|\n")
	for _, g := range s.Goals {
		met := "❌"
		if g.Met {
			met = "✅"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Target, g.Measured, met)
	}
	b.WriteString("\n")

	b.WriteString("## Idle\n\n")
	if r.IdleSeconds > 0 {
		fmt.Fprintf(&b, "nvmeof-tgt with the host connected to it and to the kernel's nvmet, no I/O: %.2f%% of one core over %.0f s.", r.IdleCPUPercent, r.IdleSeconds)
		if c := r.IdleGuest; c != nil && c.Total > 0 {
			fmt.Fprintf(&b, " The whole target guest was busy %.1f%% of its vCPU meanwhile: the floor under every CPU per I/O above.", c.BusyCores()*100)
		}
		b.WriteString("\n\n")
	} else {
		b.WriteString("Not measured.\n\n")
	}
	b.WriteString("## Heap allocations\n\n")
	if a := r.Allocs; a != nil && a.IOs > 0 {
		over := ""
		if a.Transport == TransportTCP {
			over = " over TCP"
		}
		fmt.Fprintf(&b, "nvmeof-tgt during %s%s: %d allocations over %d I/Os, against %d in the same time idle: %.3f per I/O.\n\n",
			orDash(a.Job), over, a.Allocs, a.IOs, a.IdleAllocs, a.AllocsPerIO)
	} else {
		b.WriteString("Not measured.\n\n")
	}
	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cpuText(us float64) string {
	if !(us > 0) {
		return "—"
	}
	if us < 100 {
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.0f", us)
}

func twoBackendText(be string) string {
	switch be {
	case "memory":
		return "Memory (kernel: memory-backed null_blk; SPDK: malloc bdev)"
	case "file":
		return "File, one image on the target guest's disk (kernel: nvmet's file backend; SPDK: aio bdev)"
	case BackendRBD:
		return "RBD, one image of the target guest's Ceph cluster (ours: nvmeof-tgt-rbd; SPDK: bdev_rbd; fio-rbd: fio's rbd engine in the target guest, no network)"
	}
	return be
}

// twoBars are the chart's bars: per job and peer, the throughput ratio, the p50 ratio for QD1
// jobs, and the CPU per I/O ratio; above 1 is ours ahead in each.
func twoBars(s TwoSummary) []bar {
	var out []bar
	val := func(sp Spread) Ratio { return Ratio{Value: sp.Median, Valid: sp.Valid()} }
	for _, j := range s.Jobs {
		name := j.Backend + "/" + j.Job
		unit := "IOPS"
		if j.Metric == MetricBW {
			unit = "BW"
		}
		for _, v := range j.Versus {
			peer := PeerName(v.Peer, j.Backend, j.Transport)
			out = append(out, bar{fmt.Sprintf("%s %s vs %s", name, unit, peer), val(v.Throughput)})
			if j.QD1 {
				out = append(out, bar{fmt.Sprintf("%s p50 vs %s", name, peer), val(v.P50)})
			}
			out = append(out, bar{fmt.Sprintf("%s CPU/IO vs %s", name, peer), val(v.CPU)})
		}
	}
	return out
}

// ChartTwo renders the two-machine ratios as a PNG.
func ChartTwo(r *Results, s TwoSummary) ([]byte, error) {
	return barChart(twoBars(s),
		fmt.Sprintf("nvmeof-tgt on its own machine vs each peer, %s (medians of %d reps)", dateOf(r.Date), s.Reps),
		"ours ahead above 1: throughput ours ÷ peer; latency, CPU per I/O peer ÷ ours")
}
