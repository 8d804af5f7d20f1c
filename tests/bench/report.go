package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Report is what <base>.json holds: the raw results and what they come to.
type Report struct {
	Results *Results `json:"results"`
	Summary Summary  `json:"summary,omitzero"`
	// TwoMachine is the summary of two-machine results (TopologyTwo), which have no Summary.
	TwoMachine *TwoSummary `json:"two_machine,omitempty"`
}

// Load reads the raw Results JSON the guest wrote. A report written by Write is accepted too
// (its "results" are used), so that a report can be regenerated.
func Load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load results: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("load results %s: %w", path, err)
	}
	_, hasRuns := top["runs"]
	_, hasDate := top["date"]
	if raw, ok := top["results"]; ok && !hasRuns {
		b = raw
	} else if !hasRuns && !hasDate {
		return nil, fmt.Errorf("load results %s: neither \"runs\" nor \"date\": not a bench results file", path)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("load results %s: %w", path, err)
	}
	return &r, nil
}

// maxSameDay bounds the search for a free <date>-N base name.
const maxSameDay = 1000

// Write writes <base>.json (a Report), <base>.md (Markdown) and <base>.png (a chart of the
// ratios) to dir, creating dir if needed, and returns their paths in that order. The base is
// the date part (YYYY-MM-DD) of r.Date, "undated" if it has none, with "-2m" after it for
// two-machine results; when any of the three files of a base exists, -2, -3 … is appended, so
// that runs on one day never overwrite each other. Everything is rendered before the first
// file is created, and on an error the files this call created are removed.
func Write(dir string, r *Results) (paths []string, err error) {
	rep := Report{Results: r}
	var png []byte
	var markdown func(chart string) string
	day := dateOf(r.Date)
	if r.Topology == TopologyTwo {
		s := SummarizeTwo(r)
		rep.TwoMachine = &s
		png, err = ChartTwo(r, s)
		markdown = func(chart string) string { return MarkdownTwo(r, s, chart) }
		day += "-2m"
		if r.Label != "" {
			day += "-" + r.Label
		}
	} else {
		s := Summarize(r)
		rep.Summary = s
		png, err = Chart(r, s)
		markdown = func(chart string) string { return Markdown(r, s, chart) }
	}
	if err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report dir: %w", err)
	}

	for n := 1; n <= maxSameDay; n++ {
		base := day
		if n > 1 {
			base = fmt.Sprintf("%s-%d", day, n)
		}
		paths = []string{
			filepath.Join(dir, base+".json"),
			filepath.Join(dir, base+".md"),
			filepath.Join(dir, base+".png"),
		}
		taken, err := anyExists(paths)
		if err != nil {
			return nil, err
		}
		if taken {
			continue
		}
		md := markdown(filepath.Base(paths[2]))
		err = writeAll(paths, [][]byte{append(js, '\n'), []byte(md), png})
		if errors.Is(err, fs.ErrExist) { // another writer took this base since the check
			continue
		}
		if err != nil {
			return nil, err
		}
		return paths, nil
	}
	return nil, fmt.Errorf("write report: %s to %s-%d already exist in %s", day, day, maxSameDay, dir)
}

// dateOf is the YYYY-MM-DD that date (RFC 3339, UTC) starts with, or "undated".
func dateOf(date string) string {
	if len(date) >= 10 {
		if _, err := time.Parse(time.DateOnly, date[:10]); err == nil {
			return date[:10]
		}
	}
	return "undated"
}

func anyExists(paths []string) (bool, error) {
	for _, p := range paths {
		_, err := os.Lstat(p)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("write report: %w", err)
		}
	}
	return false, nil
}

// writeAll creates each path, which must not exist, with its data. On an error it removes
// the files it created.
func writeAll(paths []string, data [][]byte) (err error) {
	var created []string
	defer func() {
		if err != nil {
			for _, p := range created {
				os.Remove(p)
			}
		}
	}()
	for i, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		created = append(created, p)
		_, werr := f.Write(data[i])
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write report: %w", werr)
		}
	}
	return nil
}

// Markdown renders the report for r and its summary s; chart is the file name of the PNG
// beside it.
func Markdown(r *Results, s Summary, chart string) string {
	var b strings.Builder
	withSPDK := spdkRan(r, s)
	if withSPDK {
		fmt.Fprintf(&b, "# nvmeof-tgt vs kernel nvmet and SPDK, %s\n\n", dateOf(r.Date))
	} else {
		fmt.Fprintf(&b, "# nvmeof-tgt vs kernel nvmet, %s\n\n", dateOf(r.Date))
	}
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", orDash(r.Date))
	fmt.Fprintf(&b, "| commit | `%s` |\n", orDash(r.Commit))
	fmt.Fprintf(&b, "| guest kernel | %s |\n", orDash(r.Kernel))
	fmt.Fprintf(&b, "| guest | %d vCPUs, %d MiB (QEMU TCG, Soft-RoCE rxe) |\n", r.CPUs, r.MemMiB)
	if withSPDK {
		fmt.Fprintf(&b, "| SPDK | %s, `nvmf_tgt -m 0x1` (one reactor), malloc bdev |\n", orDash(r.SPDK))
	}
	if r.Ceph != "" {
		fmt.Fprintf(&b, "| Ceph | %s: one mon, one mgr, one memstore OSD in the guest, pool size 1 |\n", r.Ceph)
	}
	fmt.Fprintf(&b, "| fio | %d s per run after %d s ramp |\n\n", r.Runtime, r.Ramp)

	order, which := "(ours, kernel, ours, kernel …)", "Every ratio is ours ÷ kernel."
	if withSPDK {
		order = "(ours, kernel, SPDK, ours, kernel, SPDK …; SPDK in the memory jobs only)"
		which = "Ratios in the backend tables are ours ÷ kernel; the SPDK section has ours ÷ SPDK and SPDK ÷ kernel."
	}
	fmt.Fprintf(&b, "Ratios are medians over %s alternating reps %s measured "+
		"side by side in one guest boot, on the same rxe device, with the same `deploy/fio` jobs. "+
		"Absolute numbers from an emulated (QEMU TCG) guest mean nothing on their own; only the "+
		"ratios do. %s\n\n", repsText(s), order, which)
	if s.ErrorRuns > 0 {
		fmt.Fprintf(&b, "**%d fio runs reported errors** (see the errors column).\n\n", s.ErrorRuns)
	}
	fmt.Fprintf(&b, "![ours ÷ kernel](%s)\n\n", chart)

	var backends []string
	for _, j := range s.Jobs {
		if !contains(backends, j.Backend) {
			backends = append(backends, j.Backend)
		}
	}
	for _, be := range backends {
		fmt.Fprintf(&b, "## Backend: %s\n\n", backendText(be))
		if be == BackendRBD {
			rbdMarkdown(&b, s)
			continue
		}
		b.WriteString("| job | ours median | kernel median | ratio | ours p50 / p99 µs | kernel p50 / p99 µs | p50 / p99 ratio | runs | errors |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, j := range s.Jobs {
			if j.Backend != be {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s / %s | %d / %d | %d |\n",
				j.Job, throughputText(j.Metric, j.Ours), throughputText(j.Metric, j.Kernel),
				ratioText(j.ThroughputRatio(), j.Metric),
				latencyText(j.Ours), latencyText(j.Kernel), j.P50Ratio, j.P99Ratio,
				j.Ours.Runs, j.Kernel.Runs, j.Errors)
		}
		b.WriteString("\n")
	}
	if withSPDK {
		spdkMarkdown(&b, s)
	}

	b.WriteString("## Raw link (perftest on the same rxe device)\n\n")
	if len(r.Link) == 0 {
		b.WriteString("Not measured.\n\n")
	} else {
		b.WriteString("| tool | size | MiB/s | latency p50 / p99 µs |\n|---|---:|---:|---:|\n")
		for _, l := range r.Link {
			bw, lat := "—", "—"
			if l.BW > 0 {
				bw = fmt.Sprintf("%.1f", l.BW/mib)
			}
			if l.LatP50 > 0 {
				lat = fmt.Sprintf("%s / %s", micros(l.LatP50), micros(l.LatP99))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", l.Tool, sizeText(l.Size), bw, lat)
		}
		b.WriteString("\n")
	}
	var linked []JobStats
	for _, j := range s.Jobs {
		if j.LinkTool != "" {
			linked = append(linked, j)
		}
	}
	if len(linked) > 0 {
		b.WriteString("Host reads are the target's RDMA WRITEs (ib_write_bw), host writes its RDMA READs (ib_read_bw).\n\n")
		b.WriteString("| job | ours MiB/s | link | link MiB/s | fraction |\n|---|---:|---|---:|---:|\n")
		for _, j := range linked {
			link, frac := "—", "—"
			if j.LinkBW > 0 {
				link = fmt.Sprintf("%.1f", j.LinkBW/mib)
			}
			if j.LinkFraction.Valid {
				frac = fmt.Sprintf("%.0f%%", j.LinkFraction.Value*100)
			}
			fmt.Fprintf(&b, "| %s/%s | %.1f | %s %s | %s | %s |\n", j.Backend, j.Job, j.Ours.BW/mib, j.LinkTool, sizeText(linkSize), link, frac)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Goals\n\n| goal | target | measured | met |\n|---|---|---|:-:|\n")
	for _, g := range s.Goals {
		met := "❌"
		if g.Met {
			met = "✅"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Target, g.Measured, met)
	}
	b.WriteString("\n")

	b.WriteString("## Idle CPU\n\n")
	if r.IdleSeconds > 0 {
		fmt.Fprintf(&b, "nvmeof-tgt with hosts connected and no I/O: %.2f%% of one core over %.0f s.\n\n", r.IdleCPUPercent, r.IdleSeconds)
	} else {
		b.WriteString("Not measured.\n\n")
	}

	b.WriteString("## Heap allocations\n\n")
	if a := r.Allocs; a != nil && a.IOs > 0 {
		fmt.Fprintf(&b, "nvmeof-tgt during %s: %d allocations over %d I/Os, against %d in the same time idle "+
			"(runtime.MemStats.Mallocs, exact, read through /debug/pprof/heap?debug=1 at the four points): %.3f per I/O.",
			orDash(a.Job), a.Allocs, a.IOs, a.IdleAllocs, a.AllocsPerIO)
		if a.Noise() {
			b.WriteString(" The runs allocated fewer than the idle span: the difference is noise (what varies between " +
				"two spans, not the I/O path), and no allocation per I/O shows at this resolution.")
		}
		b.WriteString("\n\n")
	} else {
		b.WriteString("Not measured.\n\n")
	}

	scaleMarkdown(&b, r.Scale)

	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// scaleMarkdown is the scale section: what connecting to many subsystems and listing many
// namespaces took, and what each cost the target.
func scaleMarkdown(b *strings.Builder, sc *ScaleRun) {
	b.WriteString("## Scale\n\n")
	if sc == nil || (sc.Subsystems == 0 && sc.Namespaces == 0 && len(sc.Queues) == 0) {
		b.WriteString("Not measured.\n\n")
		return
	}
	queuesMarkdown(b, sc.Queues)
	if sc.Subsystems == 0 && sc.Namespaces == 0 {
		return
	}
	b.WriteString("nvmeof-tgt alone; memory after a garbage collection (RSS: resident set; heap: live Go heap).\n\n")
	b.WriteString("| measure | result |\n|---|---|\n")
	if sc.Subsystems > 0 {
		fmt.Fprintf(b, "| host connects to %d subsystems (nvme connect-all, 1 I/O queue each), until each has a live controller and its disk | %.1f s |\n",
			sc.Subsystems, sc.ConnectSeconds)
		fmt.Fprintf(b, "| per controller (admin + 1 I/O queue) | %s |\n", memText(PerItem(sc.Idle, sc.Connected, sc.Subsystems)))
		fmt.Fprintf(b, "| target with %d subsystems, idle / connected | %s / %s |\n", sc.Subsystems, memText(sc.Idle), memText(sc.Connected))
	}
	if sc.Namespaces > 0 {
		fmt.Fprintf(b, "| reload adding %d memory namespaces to a subsystem | %.1f s |\n", sc.Namespaces, sc.ReloadSeconds)
		fmt.Fprintf(b, "| host lists %d namespaces of one subsystem, from nvme connect | %.1f s |\n", sc.Namespaces, sc.SeeSeconds)
		fmt.Fprintf(b, "| per memory namespace (1 MiB, untouched) | %s |\n", memText(PerItem(sc.Empty, sc.Loaded, sc.Namespaces)))
		if sc.FileReloadSeconds > 0 {
			fmt.Fprintf(b, "| reload adding %d file namespaces | %.1f s |\n", sc.Namespaces, sc.FileReloadSeconds)
			fmt.Fprintf(b, "| per file namespace, never used | %s |\n", memText(PerItem(sc.Loaded, sc.FileLoaded, sc.Namespaces)))
		}
	}
	b.WriteString("\n")
}

// queuesMarkdown is the memory-per-connection table: registered bytes and resident memory at
// each point, in each receive mode, and what a queue added.
func queuesMarkdown(b *strings.Builder, qs []QueueMem) {
	if len(qs) == 0 {
		return
	}
	b.WriteString("### Memory per connection\n\n")
	b.WriteString("nvmeof-tgt with hosts connecting queues in turn (registered: `nvmeof_tgt_rdma_registered_bytes`; " +
		"RSS and heap after a garbage collection).\n\n")
	mode := func(q QueueMem) string {
		if q.SRQ {
			return "SRQ"
		}
		return "no SRQ"
	}
	for _, q := range qs {
		cfg := "defaults"
		if q.Config != "" {
			cfg = "`" + q.Config + "`"
		}
		fmt.Fprintf(b, "- %s: %s; hosts: %s.", mode(q), cfg, orDash(q.Host))
		if q.Error != "" {
			fmt.Fprintf(b, " Stopped short: %s.", q.Error)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| queues |")
	for _, q := range qs {
		fmt.Fprintf(b, " registered, %s | RSS, %s | heap, %s |", mode(q), mode(q), mode(q))
	}
	b.WriteString("\n|---:|")
	for range qs {
		b.WriteString("---:|---:|---:|")
	}
	b.WriteString("\n")
	var counts []int
	for _, q := range qs {
		for _, p := range q.Points {
			if !slices.Contains(counts, p.Queues) {
				counts = append(counts, p.Queues)
			}
		}
	}
	slices.Sort(counts)
	for _, n := range counts {
		fmt.Fprintf(b, "| %d |", n)
		for _, q := range qs {
			i := slices.IndexFunc(q.Points, func(p QueuePoint) bool { return p.Queues == n })
			if i < 0 {
				b.WriteString(" — | — | — |")
				continue
			}
			p := q.Points[i]
			fmt.Fprintf(b, " %s | %s | %s |", bytesText(p.Registered), bytesText(p.Mem.RSS), bytesText(p.Mem.Heap))
		}
		b.WriteString("\n")
	}
	b.WriteString("| per queue |")
	for _, q := range qs {
		reg, m, ok := q.Slope()
		if !ok {
			b.WriteString(" — | — | — |")
			continue
		}
		fmt.Fprintf(b, " %s | %s | %s |", bytesText(reg), bytesText(m.RSS), bytesText(m.Heap))
	}
	b.WriteString("\n\n")
}

// memText is a MemSample in KiB or MiB.
func memText(m MemSample) string {
	g := m.Goroutines
	if math.Abs(g) < 0.05 {
		g = 0 // not "-0.0"
	}
	return fmt.Sprintf("RSS %s, heap %s, %.1f goroutines", bytesText(m.RSS), bytesText(m.Heap), g)
}

func bytesText(v float64) string {
	if v >= 10*mib || v <= -10*mib {
		return fmt.Sprintf("%.1f MiB", v/mib)
	}
	return fmt.Sprintf("%.1f KiB", v/1024)
}

// rbdMarkdown is the rbd backend's table: ours against librbd (fio's rbd engine on the same
// image), the ratio the jobs are judged on.
func rbdMarkdown(b *strings.Builder, s Summary) {
	b.WriteString("| job | ours median | librbd median | ours ÷ librbd | ours p50 / p99 µs | librbd p50 / p99 µs | p50 / p99 ratio | runs | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, j := range s.Jobs {
		if j.Backend != BackendRBD {
			continue
		}
		c := j.OursLibRBD
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s / %s | %d / %d | %d |\n",
			j.Job, throughputText(j.Metric, j.Ours), throughputText(j.Metric, j.LibRBD),
			ratioText(c.Throughput(j.Metric), j.Metric), latencyText(j.Ours), latencyText(j.LibRBD), c.P50, c.P99,
			j.Ours.Runs, j.LibRBD.Runs, j.Errors)
	}
	b.WriteString("\n")
}

// spdkRan is whether SPDK was a peer in r: named in r.Peers, or with runs.
func spdkRan(r *Results, s Summary) bool {
	if contains(r.Peers, TargetSPDK) {
		return true
	}
	for _, j := range s.Jobs {
		if j.SPDK.Runs > 0 {
			return true
		}
	}
	return false
}

// spdkMarkdown is the SPDK section: per job SPDK ran, its medians, ours ÷ SPDK and SPDK ÷
// kernel; then the jobs it did not run.
func spdkMarkdown(b *strings.Builder, s Summary) {
	b.WriteString("## Versus SPDK\n\n")
	b.WriteString("SPDK's `nvmf_tgt` polls on one reactor core (`-m 0x1`) and serves a malloc bdev of the same " +
		"size and block size as the memory namespaces, over its RDMA transport with the same 8 KiB in-capsule " +
		"data, in turn with the other two targets. It runs the memory jobs only: the file-backend jobs skip it.\n\n")
	var ran, skipped []JobStats
	for _, j := range s.Jobs {
		if j.SPDK.Runs > 0 {
			ran = append(ran, j)
		} else {
			skipped = append(skipped, j)
		}
	}
	if len(ran) == 0 {
		b.WriteString("SPDK ran no job.\n\n")
	} else {
		b.WriteString("| job | SPDK median | SPDK p50 / p99 µs | ours ÷ SPDK | p50 / p99 ours ÷ SPDK | SPDK ÷ kernel | p50 / p99 SPDK ÷ kernel | SPDK runs | errors |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, j := range ran {
			fmt.Fprintf(b, "| %s/%s | %s | %s | %s | %s / %s | %s | %s / %s | %d | %d |\n",
				j.Backend, j.Job, throughputText(j.Metric, j.SPDK), latencyText(j.SPDK),
				ratioText(j.OursSPDK.Throughput(j.Metric), j.Metric), j.OursSPDK.P50, j.OursSPDK.P99,
				ratioText(j.SPDKKernel.Throughput(j.Metric), j.Metric), j.SPDKKernel.P50, j.SPDKKernel.P99,
				j.SPDK.Runs, j.SPDKErrors)
		}
		b.WriteString("\n")
	}
	if len(skipped) > 0 {
		names := make([]string, len(skipped))
		for i, j := range skipped {
			names[i] = j.Backend + "/" + j.Job
		}
		fmt.Fprintf(b, "Not run against SPDK: %s.\n\n", strings.Join(names, ", "))
	}
}

func repsText(s Summary) string {
	if s.Reps != s.MaxReps {
		return fmt.Sprintf("%d–%d", s.Reps, s.MaxReps)
	}
	return fmt.Sprint(s.Reps)
}

func backendText(be string) string {
	switch be {
	case "memory":
		return "memory (kernel: memory-backed null_blk)"
	case "file":
		return "file on the guest's scratch disk (kernel: nvmet file backend)"
	case BackendRBD:
		return "rbd, an image of the guest's Ceph cluster (nvmeof-tgt-rbd; reference: fio's rbd engine, librbd in fio's process, " +
			"on the same image with librbd's cache off as in the target; the kernel target has no rbd backend)"
	}
	return be
}

// throughputText is a target's median of the job's metric: IOPS plain below 10 000 and with a
// k suffix above, bandwidth in MiB/s.
func throughputText(metric string, m Medians) string {
	if m.Runs == 0 {
		return "—"
	}
	if metric == MetricBW {
		return fmt.Sprintf("%.1f MiB/s", m.BW/mib)
	}
	return iopsText(m.IOPS) + " IOPS"
}

func iopsText(v float64) string {
	if v < 10_000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1fk", v/1000)
}

// ratioText is "0.90× IOPS" or "1.50× BW".
func ratioText(r Ratio, metric string) string {
	if !r.Valid {
		return "—"
	}
	if metric == MetricBW {
		return r.String() + " BW"
	}
	return r.String() + " IOPS"
}

func latencyText(m Medians) string {
	if m.Runs == 0 || m.ClatP50 <= 0 {
		return "—"
	}
	return micros(m.ClatP50) + " / " + micros(m.ClatP99)
}

// micros formats nanoseconds as microseconds, with a decimal below 100 µs.
func micros(ns float64) string {
	us := ns / 1e3
	if us < 100 {
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.0f", us)
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// bar is one bar of the chart: higher is better, 1 is parity with the kernel (with librbd for
// the rbd jobs).
type bar struct {
	label string
	value Ratio
}

// bars are the chart's bars: each job's throughput ratio, and for QD1 jobs also the p50
// latency ratio turned over (kernel ÷ ours) so that higher is better there too. Jobs SPDK ran
// get the same bars against SPDK after them.
func bars(s Summary) []bar {
	var out []bar
	for _, j := range s.Jobs {
		name := j.Backend + "/" + j.Job
		unit := " IOPS"
		if j.Metric == MetricBW {
			unit = " BW"
		}
		if j.Backend == BackendRBD {
			out = append(out, bar{name + unit + " (ours ÷ librbd)", j.OursLibRBD.Throughput(j.Metric)})
			continue
		}
		out = append(out, bar{name + unit, j.ThroughputRatio()})
		if j.QD1 {
			out = append(out, bar{name + " p50 latency (kernel ÷ ours)", j.P50Ratio.Inverse()})
		}
		if j.SPDK.Runs > 0 {
			out = append(out, bar{name + unit + " (ours ÷ SPDK)", j.OursSPDK.Throughput(j.Metric)})
			if j.QD1 {
				out = append(out, bar{name + " p50 latency (SPDK ÷ ours)", j.OursSPDK.P50.Inverse()})
			}
		}
	}
	return out
}

// ratioTicks labels the ratio axis every 0.1, 0.25, 0.5, 1, 2.5, 5 … whichever gives at most
// ten labels, so that parity and its neighbourhood are readable.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 0.1
	for i := 0; (hi-lo)/step > 10; i++ {
		step *= []float64{2.5, 2, 2}[i%3]
	}
	var ticks []plot.Tick
	for n := math.Ceil(lo / step); n*step <= hi+1e-9; n++ {
		v := math.Round(n*step*1e6) / 1e6 // 0.30000000000000004 → 0.3
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}

var (
	colorAhead  = color.RGBA{R: 0x2e, G: 0x8b, B: 0x57, A: 0xff} // ≥ 1
	colorBehind = color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff} // < 1
)

// Chart renders the ratios as a PNG: one vertical bar per job (two for QD1 jobs), green at or
// above parity with the kernel and red below, with a dashed line at 1.
func Chart(r *Results, s Summary) ([]byte, error) {
	title := fmt.Sprintf("nvmeof-tgt ÷ kernel nvmet, %s (medians of %s reps)", dateOf(r.Date), repsText(s))
	ylabel := "ours ÷ kernel (higher is better)"
	if spdkRan(r, s) {
		title = fmt.Sprintf("nvmeof-tgt ÷ kernel nvmet and ÷ SPDK, %s (medians of %s reps)", dateOf(r.Date), repsText(s))
		ylabel = "ours ÷ kernel, ours ÷ SPDK (higher is better)"
	}
	for _, j := range s.Jobs {
		if j.Backend == BackendRBD {
			title += "; rbd jobs ÷ librbd"
			ylabel = strings.Replace(ylabel, " (higher", ", ours ÷ librbd (higher", 1)
			break
		}
	}
	return barChart(bars(s), title, ylabel)
}

// barChart renders bars as a PNG: green at or above parity and red below, with a dashed line
// at 1, the value over each bar.
func barChart(bs []bar, title, ylabel string) ([]byte, error) {
	if len(bs) == 0 {
		bs = []bar{{label: "no runs"}}
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Y.Max = 1.5
	p.Add(plotter.NewGrid())

	var (
		pos    plotter.XYs
		labels []string
		names  []string
		ahead  *plotter.BarChart
		behind *plotter.BarChart
	)
	for i, b := range bs {
		v := 0.0
		text := "n/a"
		if b.value.Valid {
			v, text = b.value.Value, fmt.Sprintf("%.2f", b.value.Value)
		}
		bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(22))
		if err != nil {
			return nil, fmt.Errorf("chart: %w", err)
		}
		bc.XMin = float64(i)
		bc.LineStyle.Width = 0
		bc.Color = colorBehind
		if v >= 1 {
			bc.Color = colorAhead
			ahead = bc
		} else if b.value.Valid {
			behind = bc
		}
		p.Add(bc)
		p.Y.Max = math.Max(p.Y.Max, v*1.3) // headroom for the value labels and the legend
		pos = append(pos, plotter.XY{X: float64(i), Y: v})
		labels = append(labels, text)
		names = append(names, b.label)
	}

	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(bs)) - 0.5, Y: 1}})
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	one.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	one.Width = vg.Points(1.2)
	p.Add(one)

	values, err := plotter.NewLabels(plotter.XYLabels{XYs: pos, Labels: labels})
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	for i := range values.TextStyle {
		values.TextStyle[i].XAlign = draw.XCenter
		values.TextStyle[i].Font.Size = vg.Points(9)
	}
	values.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(values)

	p.Y.Tick.Marker = ratioTicks{}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.X.Tick.Label.Font.Size = vg.Points(9)

	p.Legend.Top = true
	p.Legend.Add("parity (1.0)", one)
	if ahead != nil {
		p.Legend.Add("ours ahead", ahead)
	}
	if behind != nil {
		p.Legend.Add("ours behind", behind)
	}

	width := max(8*vg.Inch, vg.Length(len(bs))*0.55*vg.Inch+2*vg.Inch)
	wt, err := p.WriterTo(width, 7*vg.Inch, "png")
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	return buf.Bytes(), nil
}
