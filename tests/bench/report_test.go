package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDateOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-11-23T07:00:00Z", "2026-11-23"},
		{"2026-11-23", "2026-11-23"},
		{"", "undated"},
		{"yesterday", "undated"},
		{"../../etc/passwd", "undated"},
		{"2026-13-01T00:00:00Z", "undated"},
	} {
		if got := dateOf(tc.in); got != tc.want {
			t.Errorf("dateOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results") // Write creates it
	r := sample()
	r.Runs = append(r.Runs, Run{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", IOPS: 1}) // no kernel run: no ratio

	first, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-11-23.json", "2026-11-23.md", "2026-11-23.png"}
	if len(first) != len(want) {
		t.Fatalf("paths %v, want %v", first, want)
	}
	for i, p := range first {
		if filepath.Base(p) != want[i] || filepath.Dir(p) != dir {
			t.Errorf("path %d = %s, want %s in %s", i, p, want[i], dir)
		}
	}

	// Re-runs on the same day never overwrite: -2, then -3 once any file of -2 exists.
	before, err := os.ReadFile(first[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prepare string // a file to create first, taking its base
		want    string
	}{
		{"", "2026-11-23-2"},
		{"2026-11-23-3.png", "2026-11-23-4"},
	} {
		if tc.prepare != "" {
			if err := os.WriteFile(filepath.Join(dir, tc.prepare), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		again, err := Write(dir, r)
		if err != nil {
			t.Fatal(err)
		}
		for i, ext := range []string{".json", ".md", ".png"} {
			if got := filepath.Base(again[i]); got != tc.want+ext {
				t.Errorf("re-run wrote %s, want %s", got, tc.want+ext)
			}
		}
	}
	if after, err := os.ReadFile(first[0]); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the first report changed (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "2026-11-23-3.png")); err != nil || fi.Size() != 0 {
		t.Errorf("the file in the way was touched: %v, %v", fi, err)
	}

	t.Run("json", func(t *testing.T) {
		b, err := os.ReadFile(first[0])
		if err != nil {
			t.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("report JSON: %v", err)
		}
		if !reflect.DeepEqual(rep.Results, r) {
			t.Errorf("results did not round-trip:\n got %+v\nwant %+v", rep.Results, r)
		}
		if s := Summarize(r); !reflect.DeepEqual(rep.Summary, s) {
			t.Errorf("summary did not round-trip:\n got %+v\nwant %+v", rep.Summary, s)
		}
		if len(rep.Summary.Jobs) != 5 || rep.Summary.Jobs[4].IOPSRatio.Valid {
			t.Errorf("jobs %+v; want 5, the last without a ratio", rep.Summary.Jobs)
		}
		if !bytes.Contains(b, []byte("\n  \"summary\": {")) {
			t.Errorf("report JSON is not indented:\n%s", b[:min(len(b), 300)])
		}
	})

	t.Run("markdown", func(t *testing.T) {
		md, err := os.ReadFile(first[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{
			"# nvmeof-tgt vs kernel nvmet, 2026-11-23",
			"| commit | `v0.1-3-gabc` |",
			"| guest kernel | 6.12.0 |",
			"| guest | 4 vCPUs, 4096 MiB",
			"| fio | 10 s per run after 3 s ramp |",
			"medians over 3 alternating reps",
			"mean nothing on their own",
			"![ours ÷ kernel](2026-11-23.png)",
			"## Backend: memory",
			"## Backend: file",
			"| randread-4k-qd1 | 200 IOPS | 200 IOPS | 1.00× IOPS | 400 / 800 | 800 / 1600 | 0.50× / 0.50× | 3 / 3 | 0 |",
			"| randread-4k-qd32 | 1800 IOPS | 2000 IOPS | 0.90× IOPS |",
			"| seqread-128k-qd16 | 171.7 MiB/s | 114.4 MiB/s | 1.50× BW | 1.0 / 2.0 |",
			"| randwrite-4k-qd32 | 1 IOPS | — | — | — | — | — / — | 1 / 0 | 0 |",
			"| ib_write_bw | 128 KiB | 181.2 |",
			"| ib_send_lat | 2 B | — | 20.0 / 40.0 |",
			"| memory/seqread-128k-qd16 | 171.7 | ib_write_bw 128 KiB | 190.7 | 90% |",
			"| memory/seqwrite-128k-qd16 bandwidth vs raw link | ≥ 85% of ib_read_bw | 80% (76.3 of 95.4 MiB/s) | ❌ |",
			"| memory/seqread-128k-qd16 bandwidth vs raw link | ≥ 85% of ib_write_bw | 90% (171.7 of 190.7 MiB/s) | ✅ |",
			"| idle CPU, hosts connected | < 2% of a core | 0.50% | ✅ |",
			"0.50% of one core over 10 s",
			"15 allocations over 1000 I/Os, against 10 in the same time idle",
			"- rxe on a veth pair",
		} {
			if !strings.Contains(string(md), s) {
				t.Errorf("markdown lacks %q", s)
			}
		}
		if strings.Contains(string(md), "NaN") || strings.Contains(string(md), "Inf") {
			t.Errorf("markdown has NaN or Inf:\n%s", md)
		}
	})

	t.Run("allocations below the idle baseline", func(t *testing.T) {
		r := sample()
		r.Allocs = NewAllocRun("memory/randread-4k-qd32", 1000, 10, 30)
		md := Markdown(r, Summarize(r), "x.png")
		for _, s := range []string{
			"10 allocations over 1000 I/Os, against 30 in the same time idle",
			"-0.020 per I/O",
			"fewer than the idle span: the difference is noise",
		} {
			if !strings.Contains(md, s) {
				t.Errorf("markdown lacks %q:\n%s", s, md[strings.Index(md, "## Heap"):])
			}
		}
	})

	t.Run("png", func(t *testing.T) {
		f, err := os.Open(first[2])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("chart: %v", err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 || b.Dx() > 5000 || b.Dy() > 5000 {
			t.Errorf("chart is %v", b)
		}
	})
}

func TestBars(t *testing.T) {
	s := Summarize(sample())
	got := bars(s)
	want := []struct {
		label string
		value float64
	}{
		{"memory/randread-4k-qd1 IOPS", 1},
		{"memory/randread-4k-qd1 p50 latency (kernel ÷ ours)", 2}, // ours 400 µs, kernel 800 µs
		{"memory/randread-4k-qd32 IOPS", 0.9},
		{"memory/seqread-128k-qd16 BW", 1.5},
		{"memory/seqwrite-128k-qd16 BW", 1},
	}
	if len(got) != len(want) {
		t.Fatalf("bars %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].label != w.label || !got[i].value.Valid || got[i].value.Value != w.value {
			t.Errorf("bar %d = %+v, want %s %v", i, got[i], w.label, w.value)
		}
	}
}

func TestChartEmpty(t *testing.T) {
	b, err := Chart(&Results{}, Summary{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("chart without runs: %v", err)
	}
}

func TestWriteUndated(t *testing.T) {
	dir := t.TempDir()
	paths, err := Write(dir, &Results{})
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(paths[0]); got != "undated.json" {
		t.Errorf("wrote %s, want undated.json", got)
	}
}

func TestWriteError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(filepath.Join(file, "results"), sample()); err == nil {
		t.Error("Write under a regular file succeeded")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	rawPath := filepath.Join(dir, "raw.json")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := Write(filepath.Join(dir, "out"), r)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		path    string
		wantErr string
	}{
		{"raw results", rawPath, ""},
		{"a written report", paths[0], ""},
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"not JSON", write("bad.json", "{"), "unexpected end"},
		{"not results", write("other.json", `{"foo": 1}`), "not a bench results file"},
		{"wrong type", write("type.json", `{"date": "x", "runs": 3}`), "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Load = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Errorf("Load = %+v, want %+v", got, r)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "nope.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestRatioTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 1.5, "0 0.25 0.5 0.75 1 1.25 1.5"},
		{0, 0.6, "0 0.1 0.2 0.3 0.4 0.5 0.6"},
		{0, 2.6, "0 0.5 1 1.5 2 2.5"},
		{0, 9, "0 1 2 3 4 5 6 7 8 9"},
		{0, 30, "0 5 10 15 20 25 30"},
	} {
		var got []string
		for _, tk := range (ratioTicks{}).Ticks(tc.lo, tc.hi) {
			got = append(got, tk.Label)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Ticks(%v, %v) = %v, want %s", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// writeAll never replaces a file (a concurrent Write may have taken the base since the check)
// and removes what it created when it fails.
func TestWriteAllExclusive(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "a.md")
	if err := os.WriteFile(b, []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := writeAll([]string{a, b}, [][]byte{[]byte("ours"), []byte("ours")})
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("writeAll over an existing file: %v, want fs.ErrExist", err)
	}
	if _, err := os.Stat(a); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left behind: %v", a, err)
	}
	if got, _ := os.ReadFile(b); string(got) != "theirs" {
		t.Errorf("existing file now holds %q", got)
	}
}

func TestMarkdownSPDK(t *testing.T) {
	noSPDKRuns := sample()
	noSPDKRuns.Peers = []string{TargetKernel, TargetSPDK} // a peer whose jobs were all filtered out
	for _, tc := range []struct {
		name    string
		r       *Results
		want    []string
		notWant []string
	}{
		{
			name:    "without SPDK the report is as before",
			r:       sample(),
			want:    []string{"# nvmeof-tgt vs kernel nvmet, 2026-11-23", "(ours, kernel, ours, kernel …)", "Every ratio is ours ÷ kernel."},
			notWant: []string{"SPDK"},
		},
		{
			name: "SPDK in three memory jobs",
			r:    sampleSPDK(),
			want: []string{
				"# nvmeof-tgt vs kernel nvmet and SPDK, 2026-11-23",
				"| SPDK | SPDK v24.05 git sha1 0000000, `nvmf_tgt -m 0x1` (one reactor), malloc bdev |",
				"(ours, kernel, SPDK, ours, kernel, SPDK …; SPDK in the memory jobs only)",
				"## Versus SPDK",
				"the file-backend jobs skip it",
				"| job | SPDK median | SPDK p50 / p99 µs | ours ÷ SPDK | p50 / p99 ours ÷ SPDK | SPDK ÷ kernel | p50 / p99 SPDK ÷ kernel | SPDK runs | errors |",
				"| memory/randread-4k-qd1 | 400 IOPS | 200 / 400 | 0.50× IOPS | 2.00× / 2.00× | 2.00× IOPS | 0.25× / 0.25× | 3 | 0 |",
				"| memory/randread-4k-qd32 | 2000 IOPS | 1.0 / 2.0 | 0.90× IOPS | 1.00× / 1.00× | 1.00× IOPS | 1.00× / 1.00× | 3 | 0 |",
				"| memory/seqread-128k-qd16 | 171.7 MiB/s | 1.0 / 2.0 | 1.00× BW | 1.00× / 1.00× | 1.50× BW | 1.00× / 1.00× | 3 | 1 |",
				"Not run against SPDK: memory/seqwrite-128k-qd16, file/randread-4k-qd1.",
				// The ours ÷ kernel tables are unchanged.
				"| randread-4k-qd1 | 200 IOPS | 200 IOPS | 1.00× IOPS | 400 / 800 | 800 / 1600 | 0.50× / 0.50× | 3 / 3 | 0 |",
				"**1 fio runs reported errors**",
			},
			notWant: []string{"Every ratio is ours ÷ kernel.", "SPDK ran no job"},
		},
		{
			name: "SPDK a peer without runs",
			r:    noSPDKRuns,
			want: []string{"# nvmeof-tgt vs kernel nvmet and SPDK", "| SPDK | —, `nvmf_tgt -m 0x1`", "SPDK ran no job.",
				"Not run against SPDK: memory/randread-4k-qd1, memory/randread-4k-qd32, memory/seqread-128k-qd16, memory/seqwrite-128k-qd16."},
			notWant: []string{"| job | SPDK median"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := Markdown(tc.r, Summarize(tc.r), "x.png")
			for _, s := range tc.want {
				if !strings.Contains(md, s) {
					t.Errorf("markdown lacks %q", s)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(md, s) {
					t.Errorf("markdown has %q", s)
				}
			}
			if t.Failed() {
				t.Logf("markdown:\n%s", md)
			}
		})
	}
}

func TestBarsSPDK(t *testing.T) {
	got := bars(Summarize(sampleSPDK()))
	want := []struct {
		label string
		value float64 // -1: invalid
	}{
		{"memory/randread-4k-qd1 IOPS", 1},
		{"memory/randread-4k-qd1 p50 latency (kernel ÷ ours)", 2},
		{"memory/randread-4k-qd1 IOPS (ours ÷ SPDK)", 0.5},
		{"memory/randread-4k-qd1 p50 latency (SPDK ÷ ours)", 0.5}, // SPDK 200 µs, ours 400 µs
		{"memory/randread-4k-qd32 IOPS", 0.9},
		{"memory/randread-4k-qd32 IOPS (ours ÷ SPDK)", 0.9},
		{"memory/seqread-128k-qd16 BW", 1.5},
		{"memory/seqread-128k-qd16 BW (ours ÷ SPDK)", 1},
		{"memory/seqwrite-128k-qd16 BW", 1}, // SPDK did not run it: no SPDK bar
		{"file/randread-4k-qd1 IOPS", 1},
		{"file/randread-4k-qd1 p50 latency (kernel ÷ ours)", 1},
	}
	if len(got) != len(want) {
		t.Fatalf("bars %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].label != w.label || !got[i].value.Valid || math.Abs(got[i].value.Value-w.value) > 1e-9 {
			t.Errorf("bar %d = %+v, want %s %v", i, got[i], w.label, w.value)
		}
	}
	png, err := Chart(sampleSPDK(), Summarize(sampleSPDK()))
	if err != nil || len(png) == 0 {
		t.Errorf("chart with SPDK: %d bytes, %v", len(png), err)
	}
}

func TestMarkdownScale(t *testing.T) {
	full := sample()
	full.Scale = &ScaleRun{
		Subsystems: 256, ConnectSeconds: 95.25,
		Idle:       MemSample{RSS: 300 << 20, Heap: 20 << 20, Goroutines: 40},
		Connected:  MemSample{RSS: 301 << 20, Heap: 24 << 20, Goroutines: 40},
		Namespaces: 1024, ReloadSeconds: 1.5, SeeSeconds: 40,
		Empty:             MemSample{RSS: 30 << 20, Heap: 10 << 20},
		Loaded:            MemSample{RSS: 50 << 20, Heap: 30 << 20},
		FileReloadSeconds: 2,
		FileLoaded:        MemSample{RSS: 70 << 20, Heap: 50 << 20},
	}
	onlySubsystems := sample()
	onlySubsystems.Scale = &ScaleRun{Subsystems: 4, ConnectSeconds: 1, Idle: MemSample{Goroutines: 12}, Connected: MemSample{RSS: 4096, Goroutines: 11.9}}
	for _, tc := range []struct {
		name    string
		r       *Results
		want    []string
		notWant []string
	}{
		{"not run", sample(), []string{"## Scale\n\nNot measured."}, []string{"per controller"}},
		{"every part", full, []string{
			"| host connects to 256 subsystems (nvme connect-all, 1 I/O queue each), until each has a live controller and its disk | 95.2 s |",
			"| per controller (admin + 1 I/O queue) | RSS 4.0 KiB, heap 16.0 KiB, 0.0 goroutines |",
			"| target with 256 subsystems, idle / connected | RSS 300.0 MiB, heap 20.0 MiB, 40.0 goroutines / RSS 301.0 MiB, heap 24.0 MiB, 40.0 goroutines |",
			"| reload adding 1024 memory namespaces to a subsystem | 1.5 s |",
			"| host lists 1024 namespaces of one subsystem, from nvme connect | 40.0 s |",
			"| per memory namespace (1 MiB, untouched) | RSS 20.0 KiB, heap 20.0 KiB, 0.0 goroutines |",
			"| per file namespace, never used | RSS 20.0 KiB, heap 20.0 KiB, 0.0 goroutines |",
		}, []string{"Not measured.\n\n## Notes"}},
		{"subsystems only", onlySubsystems, []string{"| host connects to 4 subsystems", "| per controller (admin + 1 I/O queue) | RSS 1.0 KiB, heap 0.0 KiB, 0.0 goroutines |"},
			[]string{"namespaces of one subsystem", "file namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := Markdown(tc.r, Summarize(tc.r), "x.png")
			for _, s := range tc.want {
				if !strings.Contains(md, s) {
					t.Errorf("markdown lacks %q", s)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(md, s) {
					t.Errorf("markdown has %q", s)
				}
			}
			if t.Failed() {
				t.Logf("markdown:\n%s", md)
			}
		})
	}
	// The raw file keeps the phase.
	dir := t.TempDir()
	raw, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "raw.json")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil || !reflect.DeepEqual(got.Scale, full.Scale) {
		t.Fatalf("Load: %+v, %v; want %+v", got.Scale, err, full.Scale)
	}
}

// TestQueuesReport: the memory-per-connection phase in the report: a row per queue count
// measured in either mode, a dash where one mode has no sample, what a queue added, and its
// goals when it ran with a shared receive queue.
func TestQueuesReport(t *testing.T) {
	r := sample()
	pt := func(queues int, reg, rss float64) QueuePoint {
		return QueuePoint{Queues: queues, Registered: reg, Mem: MemSample{RSS: rss, Heap: rss / 4}}
	}
	r.Scale = &ScaleRun{Queues: []QueueMem{
		{SRQ: true, Host: "16 queues per controller, depth 32",
			Points: []QueuePoint{pt(0, 100*mib, 200*mib), pt(64, 100*mib, 210*mib), pt(256, 100*mib, 240*mib), pt(1000, 100*mib, 300*mib)}},
		{SRQ: false, Config: "rdma.max_queues: 1024, rdma.max_queue_depth: 32", Host: "16 queues per controller, depth 32",
			Points: []QueuePoint{pt(0, 400*mib, 500*mib), pt(64, 400*mib, 510*mib)}, Error: "host 5: connect: refused"},
	}}
	s := Summarize(r)
	md := Markdown(r, s, "x.png")
	for _, want := range []string{
		"### Memory per connection",
		"- SRQ: defaults; hosts: 16 queues per controller, depth 32.",
		"- no SRQ: `rdma.max_queues: 1024, rdma.max_queue_depth: 32`; hosts: 16 queues per controller, depth 32. Stopped short: host 5: connect: refused.",
		"| queues | registered, SRQ | RSS, SRQ | heap, SRQ | registered, no SRQ | RSS, no SRQ | heap, no SRQ |",
		"| 0 | 100.0 MiB | 200.0 MiB | 50.0 MiB | 400.0 MiB | 500.0 MiB | 125.0 MiB |",
		"| 1000 | 100.0 MiB | 300.0 MiB | 75.0 MiB | — | — | — |",
		"| per queue | 0.0 KiB | 102.4 KiB | 25.6 KiB | 0.0 KiB | 160.0 KiB | 40.0 KiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md[strings.Index(md, "## Scale"):])
		}
	}
	goals := goalMap(s)
	if g := goals["registered memory as queues connect (SRQ)"]; !g.Met || g.Measured != "+0 bytes from 0 to 1000 queues" {
		t.Errorf("flat goal %+v", g)
	}
	if g := goals["queues on one device with the default pools (SRQ)"]; !g.Met || g.Measured != "1000" {
		t.Errorf("queues goal %+v", g)
	}
	r.Scale.Queues[0].Points[3].Registered++
	r.Scale.Queues[0].Config = "rdma.max_queues: 1024"
	goals = goalMap(Summarize(r))
	if g := goals["registered memory as queues connect (SRQ)"]; g.Met {
		t.Errorf("flat goal met with a byte more: %+v", g)
	}
	if g := goals["queues on one device with the default pools (SRQ)"]; g.Met {
		t.Errorf("queues goal met without the defaults: %+v", g)
	}
}

func TestMarkdownRBD(t *testing.T) {
	r := sampleRBD()
	s := Summarize(r)
	md := Markdown(r, s, "x.png")
	for _, want := range []string{
		"| Ceph | ceph version 16.2.15: one mon, one mgr, one memstore OSD in the guest, pool size 1 |",
		"## Backend: rbd, an image of the guest's Ceph cluster",
		"| job | ours median | librbd median | ours ÷ librbd |",
		"| randread-4k-qd32 | 1920 IOPS | 2000 IOPS | 0.96× IOPS | 100 / 200 | 90.0 / 180 | 1.11× / 1.11× | 3 / 3 | 0 |",
		"| seqread-128k-qd16 | 95.4 MiB/s | 95.4 MiB/s | 1.00× BW |",
		"| rbd/randwrite-4k-qd32 IOPS | ≥ 0.95× librbd | 0.80× | ❌ |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "rbd/seqread-128k-qd16 bandwidth vs raw link") {
		t.Error("an rbd job judged against the link")
	}
	if t.Failed() {
		t.Logf("markdown:\n%s", md)
	}
	var rbdBars []bar
	for _, b := range bars(s) {
		if strings.HasPrefix(b.label, "rbd/") {
			rbdBars = append(rbdBars, b)
		}
	}
	if len(rbdBars) != 3 || rbdBars[0].label != "rbd/randread-4k-qd32 IOPS (ours ÷ librbd)" || math.Abs(rbdBars[0].value.Value-0.96) > 1e-9 ||
		rbdBars[2].label != "rbd/seqread-128k-qd16 BW (ours ÷ librbd)" {
		t.Errorf("rbd bars %+v", rbdBars)
	}
	if png, err := Chart(r, s); err != nil || len(png) == 0 {
		t.Errorf("chart with rbd jobs: %d bytes, %v", len(png), err)
	}
}
