package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Load reads the raw Results the guest wrote.
func Load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Report is what <date>.json holds.
type Report struct {
	Results *Results `json:"results"`
	Summary Summary  `json:"summary"`
}

// Write writes <date>.json, <date>.md and <date>.png to dir, the date being the run's (UTC).
// A second run on one day gets <date>-2 and so on: results are never overwritten.
func Write(dir string, r *Results) ([]string, error) {
	day := "undated"
	if t, err := time.Parse(time.RFC3339, r.Date); err == nil {
		day = t.UTC().Format("2006-01-02")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := ""
	for n := 1; ; n++ {
		name := day
		if n > 1 {
			name = fmt.Sprintf("%s-%d", day, n)
		}
		if _, err := os.Stat(filepath.Join(dir, name+".json")); errors.Is(err, fs.ErrNotExist) {
			base = filepath.Join(dir, name)
			break
		}
	}
	s := Summarize(r)
	js, err := json.MarshalIndent(Report{Results: r, Summary: s}, "", "  ")
	if err != nil {
		return nil, err
	}
	paths := []string{base + ".json", base + ".md", base + ".png"}
	if err := os.WriteFile(paths[0], append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(paths[1], []byte(Markdown(r, s, filepath.Base(paths[2]))), 0o644); err != nil {
		return nil, err
	}
	if err := chart(paths[2], r, s); err != nil {
		return nil, err
	}
	return paths, nil
}

// Markdown renders the report; png names the chart beside it.
func Markdown(r *Results, s Summary, png string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# nvmeof-tgt vs kernel nvmet, %s\n\n", r.Date)
	fmt.Fprintf(&b, "Commit `%s`, guest kernel %s, %d vCPUs, %d MiB, QEMU TCG, Soft-RoCE (rxe). "+
		"Each fio run: %ds after %ds of ramp.\n\n", r.Commit, r.Kernel, r.CPUs, r.MemMiB, r.Runtime, r.Ramp)
	fmt.Fprintf(&b, "Both targets ran side by side in one guest boot, on the same rxe device and address, "+
		"with the same fio jobs (`deploy/fio`), alternately (ours, kernel, ours, kernel …), %d times each; "+
		"the tables show medians. The guest is emulated on a shared machine: absolute numbers say nothing "+
		"about real hardware, only the ratios measured side by side do.\n\n", s.Reps)
	fmt.Fprintf(&b, "![ratios](%s)\n\n", png)

	backends := []string{}
	for _, j := range s.Jobs {
		if !contains(backends, j.Backend) {
			backends = append(backends, j.Backend)
		}
	}
	for _, be := range backends {
		what := map[string]string{"memory": "memory (kernel: memory-backed null_blk)", "file": "file on the guest's ext4 scratch disk (kernel: nvmet file backend)"}[be]
		if what == "" {
			what = be
		}
		fmt.Fprintf(&b, "## Backend: %s\n\n", what)
		b.WriteString("| job | ours IOPS | kernel IOPS | ours MiB/s | kernel MiB/s | ours p50 / p99 µs | kernel p50 / p99 µs | ratio | vs link | errors |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, j := range s.Jobs {
			if j.Backend != be {
				continue
			}
			ratio := "—"
			if j.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f× %s", j.Ratio, map[string]string{"iops": "IOPS", "bw": "bandwidth", "p50": "p50 (kernel ÷ ours)"}[j.Metric])
			}
			link := ""
			if j.LinkFraction > 0 {
				link = pct(j.LinkFraction)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.1f | %.1f | %.0f / %.0f | %.0f / %.0f | %s | %s | %d |\n",
				j.Job, j.Ours.IOPS, j.Kernel.IOPS, j.Ours.BW/(1<<20), j.Kernel.BW/(1<<20),
				j.Ours.ClatP50/1e3, j.Ours.ClatP99/1e3, j.Kernel.ClatP50/1e3, j.Kernel.ClatP99/1e3, ratio, link, j.Errors)
		}
		b.WriteString("\n")
	}

	if len(r.Link) > 0 {
		b.WriteString("## Raw link (perftest on the same rxe device, rdma_cm)\n\n| tool | size | MiB/s | latency p50 / p99 µs |\n|---|---:|---:|---:|\n")
		for _, l := range r.Link {
			bw, lat := "", ""
			if l.BW > 0 {
				bw = fmt.Sprintf("%.1f", l.BW/(1<<20))
			}
			if l.LatP50 > 0 {
				lat = fmt.Sprintf("%.1f / %.1f", l.LatP50/1e3, l.LatP99/1e3)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", l.Tool, l.Size, bw, lat)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Goals\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
	for _, g := range s.Goals {
		met := "❌"
		if g.Met {
			met = "✅"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Target, g.Measured, met)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// chart draws one horizontal bar per job: ours ÷ kernel, higher is better, with a line at 1.
func chart(path string, r *Results, s Summary) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("nvmeof-tgt ÷ kernel nvmet (medians of %d, %s)", s.Reps, r.Date[:min(len(r.Date), 10)])
	p.X.Label.Text = "ours ÷ kernel (higher is better; QD1 jobs: p50 latency, kernel ÷ ours)"
	var vals plotter.Values
	var names []string
	for i := len(s.Jobs) - 1; i >= 0; i-- { // first job at the top
		j := s.Jobs[i]
		vals = append(vals, j.Ratio)
		names = append(names, fmt.Sprintf("%s/%s (%s)", j.Backend, j.Job, j.Metric))
	}
	if len(vals) == 0 {
		vals, names = plotter.Values{0}, []string{"no runs"}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	p.Add(bars)
	p.NominalY(names...)
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(vals)) - 0.5}})
	if err != nil {
		return err
	}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.X.Min = 0
	p.X.Max = 1.5
	for _, v := range vals {
		p.X.Max = max(p.X.Max, v*1.1)
	}
	return p.Save(9*vg.Inch, vg.Length(1.5+0.35*float64(len(vals)))*vg.Inch, path)
}
