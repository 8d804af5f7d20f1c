package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseProcStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		in                   string
		total, busy, softirq uint64
		wantErr              string
	}{
		{name: "6.12", in: "cpu  100 5 50 800 20 3 7 0 0 0\ncpu0 100 5 50 800 20 3 7 0 0 0\nintr 1\n",
			total: 985, busy: 165, softirq: 7},
		{name: "steal counts as busy", in: "cpu 1 0 1 10 0 0 0 4\n", total: 16, busy: 6},
		{name: "cpu0 only", in: "cpu0 1 2 3 4 5 6 7 8\n", wantErr: "no cpu line"},
		{name: "short", in: "cpu 1 2 3\n", wantErr: "short"},
		{name: "garbage", in: "cpu 1 2 x 4 5 6 7 8\n", wantErr: "cpu line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total, busy, softirq, err := ParseProcStatCPU(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || total != tc.total || busy != tc.busy || softirq != tc.softirq {
				t.Fatalf("got %d %d %d %v, want %d %d %d", total, busy, softirq, err, tc.total, tc.busy, tc.softirq)
			}
		})
	}
}

func TestCPUPerIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Run
		want float64
	}{
		{"half a vCPU at 10k IOPS", Run{IOPS: 10000, CPU: &CPUSample{CPUs: 1, Total: 1000, Busy: 500}}, 50},
		{"two vCPUs", Run{IOPS: 10000, CPU: &CPUSample{CPUs: 2, Total: 1000, Busy: 500}}, 100},
		{"no sample", Run{IOPS: 10000}, 0},
		{"no I/O", Run{CPU: &CPUSample{CPUs: 1, Total: 1000, Busy: 500}}, 0},
		{"empty span", Run{IOPS: 1, CPU: &CPUSample{CPUs: 1}}, 0},
	} {
		if got := tc.r.CPUPerIO(); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: CPUPerIO = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// twoSample: ours against the kernel and SPDK on a QD1 job over three reps, and against SPDK
// and fio-rbd on an rbd bandwidth job.
func twoSample() *Results {
	cpu := func(busy uint64, proc int64) *CPUSample {
		return &CPUSample{CPUs: 1, Total: 1000, Busy: busy, Softirq: busy / 4, Process: proc}
	}
	r := &Results{Date: "2026-12-04T08:00:00Z", Topology: TopologyTwo, CPUs: 1, MemMiB: 6144, HostCPUs: 1, HostMemMiB: 2048,
		Runtime: 15, Ramp: 3, Peers: []string{TargetKernel, TargetSPDK, TargetLibRBD}}
	for rep, v := range []struct{ ours, kernel, spdk float64 }{{1000, 800, 1250}, {1100, 1000, 1000}, {900, 1000, 1000}} {
		r.Runs = append(r.Runs,
			Run{Target: TargetOurs, Backend: "memory", Job: "randread-4k-qd1", Rep: rep + 1, IOPS: v.ours, ClatP50: 1e9 / v.ours, ClatP99: 2e9 / v.ours, IOs: 1, CPU: cpu(500, 300)},
			Run{Target: TargetKernel, Backend: "memory", Job: "randread-4k-qd1", Rep: rep + 1, IOPS: v.kernel, ClatP50: 1e9 / v.kernel, ClatP99: 2e9 / v.kernel, IOs: 1, CPU: cpu(400, -1)},
			Run{Target: TargetSPDK, Backend: "memory", Job: "randread-4k-qd1", Rep: rep + 1, IOPS: v.spdk, ClatP50: 1e9 / v.spdk, ClatP99: 2e9 / v.spdk, IOs: 1, CPU: cpu(1000, 950)},
		)
	}
	for rep := 1; rep <= 2; rep++ {
		r.Runs = append(r.Runs,
			Run{Target: TargetOurs, Backend: BackendRBD, Job: "seqread-128k-qd16", Rep: rep, IOPS: 100, BW: 100 * mib, IOs: 1, CPU: cpu(800, 200)},
			Run{Target: TargetSPDK, Backend: BackendRBD, Job: "seqread-128k-qd16", Rep: rep, IOPS: 50, BW: 50 * mib, IOs: 1, CPU: cpu(1000, 900)},
			Run{Target: TargetLibRBD, Backend: BackendRBD, Job: "seqread-128k-qd16", Rep: rep, IOPS: 200, BW: 200 * mib, IOs: 1, CPU: cpu(800, -1)},
		)
	}
	return r
}

func TestSummarizeTwo(t *testing.T) {
	s := SummarizeTwo(twoSample())
	if s.Reps != 2 || len(s.Jobs) != 2 {
		t.Fatalf("reps %d, jobs %d; want 2 and 2", s.Reps, len(s.Jobs))
	}
	qd1 := s.Jobs[0]
	if !qd1.QD1 || qd1.Metric != MetricIOPS || len(qd1.Targets) != 3 || qd1.Targets[0].Target != TargetOurs || len(qd1.Versus) != 2 {
		t.Fatalf("qd1 job: %+v", qd1)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	k := qd1.Versus[0]
	if k.Peer != TargetKernel || k.Throughput.N != 3 {
		t.Fatalf("versus kernel: %+v", k)
	}
	// Per-rep ratios 1.25, 1.1, 0.9: median 1.1, spread 0.9–1.25.
	near("throughput median", k.Throughput.Median, 1.1)
	near("throughput min", k.Throughput.Min, 0.9)
	near("throughput max", k.Throughput.Max, 1.25)
	// Latency is peer ÷ ours, so the same numbers come out (latency = 1/IOPS here).
	near("p50 median", k.P50.Median, 1.1)
	// CPU per I/O: ours 0.5/IOPS, kernel 0.4/IOPS; peer ÷ ours per rep = 0.8 × ours IOPS ÷ kernel IOPS.
	near("cpu median", k.CPU.Median, 0.8*1.1)
	if got := qd1.Targets[1].ProcessShare; got != -1 {
		t.Errorf("the kernel's process share = %v, want -1 (no process)", got)
	}
	near("ours' process share", qd1.Targets[0].ProcessShare, 0.6)
	near("ours' CPU per I/O", qd1.Targets[0].CPUPerIO, 0.5/1000*1e6)

	rbd := s.Jobs[1]
	if rbd.Metric != MetricBW || len(rbd.Versus) != 2 {
		t.Fatalf("rbd job: %+v", rbd)
	}
	near("ours ÷ SPDK bdev_rbd", rbd.Versus[0].Throughput.Median, 2)
	near("ours ÷ fio-rbd", rbd.Versus[1].Throughput.Median, 0.5)
	near("CPU SPDK ÷ ours", rbd.Versus[0].CPU.Median, (1.0/50)/(0.8/100))
	if rbd.Versus[0].P50.Valid() {
		t.Errorf("no latency reported, yet a p50 ratio: %+v", rbd.Versus[0].P50)
	}

	goals := checkGoals(t, s.Goals, map[string]bool{
		"memory/randread-4k-qd1 IOPS vs kernel nvmet":      true,
		"memory/randread-4k-qd1 IOPS vs SPDK":              false,
		"memory/randread-4k-qd1 p50 latency vs SPDK":       false,
		"memory/randread-4k-qd1 CPU per I/O vs SPDK":       true,
		"rbd/seqread-128k-qd16 bandwidth vs SPDK bdev_rbd": true,
		"rbd/seqread-128k-qd16 bandwidth vs fio-rbd":       false,
	})
	if g := goals["idle CPU of nvmeof-tgt, hosts connected"]; g.Met || g.Measured != notMeasured {
		t.Errorf("idle goal with no idle measurement: %+v", g)
	}
}

// checkGoals checks that no two goals share a name and that each of met is there, met or not
// as it says; it returns the goals by name.
func checkGoals(t *testing.T, gs []Goal, met map[string]bool) map[string]Goal {
	t.Helper()
	goals := map[string]Goal{}
	for _, g := range gs {
		if _, dup := goals[g.Name]; dup {
			t.Errorf("goal %q named twice", g.Name)
		}
		goals[g.Name] = g
	}
	for name, want := range met {
		g, ok := goals[name]
		if !ok {
			t.Errorf("no goal %q", name)
			continue
		}
		if g.Met != want {
			t.Errorf("goal %q met %v (%s), want %v", name, g.Met, g.Measured, want)
		}
	}
	return goals
}

// twoTCPSample is twoSample with the QD1 job run again over TCP after the rbd jobs, as the
// bench runs its TCP phase: ours twice as fast as the kernel's nvmet-tcp and as fast as SPDK's
// TCP transport, at half the CPU per I/O of each.
func twoTCPSample() *Results {
	r := twoSample()
	r.Transports = []string{TransportRDMA, TransportTCP}
	for rep := 1; rep <= 2; rep++ {
		for _, x := range []struct {
			target string
			iops   float64
			busy   uint64
		}{{TargetOurs, 2000, 500}, {TargetKernel, 1000, 500}, {TargetSPDK, 2000, 1000}} {
			r.Runs = append(r.Runs, Run{Target: x.target, Backend: "memory", Job: "randread-4k-qd1", Transport: TransportTCP, Rep: rep,
				IOPS: x.iops, ClatP50: 1e9 / x.iops, ClatP99: 2e9 / x.iops, IOs: 1, CPU: &CPUSample{CPUs: 1, Total: 1000, Busy: x.busy}})
		}
	}
	return r
}

// TCP rows are their own jobs, paired only with the peers' TCP runs, and stand right after the
// same job's RDMA rows whenever they ran.
func TestSummarizeTwoTransports(t *testing.T) {
	s := SummarizeTwo(twoTCPSample())
	var got []string
	for _, j := range s.Jobs {
		got = append(got, j.Backend+"/"+j.Job+"/"+j.Transport)
	}
	want := []string{"memory/randread-4k-qd1/rdma", "memory/randread-4k-qd1/tcp", "rbd/seqread-128k-qd16/rdma"}
	if !slices.Equal(got, want) {
		t.Fatalf("jobs %v, want %v", got, want)
	}
	rdma, tcp := s.Jobs[0], s.Jobs[1]
	if rdma.Targets[0].Runs != 3 || rdma.Versus[0].Throughput.N != 3 {
		t.Errorf("the RDMA job took in TCP runs: %+v", rdma)
	}
	if len(tcp.Targets) != 3 || tcp.Targets[0].Target != TargetOurs || tcp.Targets[0].Runs != 2 || len(tcp.Versus) != 2 {
		t.Fatalf("tcp job: %+v", tcp)
	}
	for i, want := range []struct {
		peer      string
		iops, cpu float64
	}{{TargetKernel, 2, 2}, {TargetSPDK, 1, 2}} {
		v := tcp.Versus[i]
		if v.Peer != want.peer || v.Throughput.N != 2 || v.Throughput.Median != want.iops || v.CPU.Median != want.cpu {
			t.Errorf("tcp versus %d: %+v, want %s at %v× IOPS, %v× CPU", i, v, want.peer, want.iops, want.cpu)
		}
	}
	checkGoals(t, s.Goals, map[string]bool{
		"memory/randread-4k-qd1 IOPS vs kernel nvmet":              true,
		"memory/randread-4k-qd1 IOPS vs kernel nvmet (TCP)":        true,
		"memory/randread-4k-qd1 CPU per I/O vs SPDK (TCP)":         true,
		"memory/randread-4k-qd1 p50 latency vs kernel nvmet (TCP)": true,
		"memory/randread-4k-qd1 IOPS vs SPDK (TCP)":                true,
	})
	seen := map[string]bool{}
	for _, b := range twoBars(s) {
		if seen[b.label] {
			t.Errorf("bar %q twice", b.label)
		}
		seen[b.label] = true
	}
	if !seen["memory/randread-4k-qd1 IOPS vs SPDK (TCP)"] {
		t.Errorf("no TCP bar against SPDK among %v", seen)
	}
}

// A run with no transport recorded (results from before TCP was measured) is an RDMA run.
func TestRunFabric(t *testing.T) {
	for _, tc := range []struct{ in, want string }{{"", TransportRDMA}, {TransportRDMA, TransportRDMA}, {TransportTCP, TransportTCP}} {
		if got := (Run{Transport: tc.in}).Fabric(); got != tc.want {
			t.Errorf("Fabric of %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A peer missing from a rep is paired with nothing: its ratio is over the reps both ran.
func TestSummarizeTwoUnpaired(t *testing.T) {
	r := &Results{Topology: TopologyTwo, Runs: []Run{
		{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", Rep: 1, IOPS: 100},
		{Target: TargetOurs, Backend: "file", Job: "randwrite-4k-qd32", Rep: 2, IOPS: 100},
		{Target: TargetKernel, Backend: "file", Job: "randwrite-4k-qd32", Rep: 2, IOPS: 50},
	}}
	s := SummarizeTwo(r)
	v := s.Jobs[0].Versus[0]
	if v.Throughput.N != 1 || v.Throughput.Median != 2 || v.CPU.Valid() {
		t.Fatalf("versus: %+v", v)
	}
	if s.Reps != 1 {
		t.Errorf("reps %d, want 1", s.Reps)
	}
}

func TestSpreadString(t *testing.T) {
	for _, tc := range []struct {
		s    Spread
		want string
	}{
		{Spread{}, "—"},
		{Spread{N: 1, Median: 1.234, Min: 1.234, Max: 1.234}, "1.23×"},
		{Spread{N: 3, Median: 1.1, Min: 0.9, Max: 1.25}, "1.10× (0.90–1.25)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestWriteTwo(t *testing.T) {
	dir := t.TempDir()
	r := twoSample()
	r.IdleSeconds, r.IdleCPUPercent = 10, 0.5
	r.IdleGuest = &CPUSample{CPUs: 1, Total: 1000, Busy: 20}
	paths, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(paths[0]) != "2026-12-04-2m.json" {
		t.Fatalf("paths %v, want the -2m base", paths)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if _, ok := rep["summary"]; ok {
		t.Error("a two-machine report has a one-guest summary")
	}
	if _, ok := rep["two_machine"]; !ok {
		t.Error("no two_machine summary")
	}
	loaded, err := Load(paths[0])
	if err != nil || loaded.Topology != TopologyTwo || len(loaded.Runs) != len(r.Runs) || loaded.Runs[0].CPU == nil {
		t.Fatalf("Load of the report: %+v, %v", loaded, err)
	}
	md, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| randread-4k-qd1 | kernel nvmet |", "| seqread-128k-qd16 | SPDK bdev_rbd |", "| seqread-128k-qd16 | fio-rbd |",
		"1.10× (0.90–1.25)", "0.50% of one core", "busy 2.0% of its vCPU", "2026-12-04-2m.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// TCP rows beside the RDMA ones, and the host's nvme-tcp in the header.
	tp, err := Write(dir, twoTCPSample())
	if err != nil {
		t.Fatal(err)
	}
	tmd, err := os.ReadFile(tp[1])
	if err != nil {
		t.Fatal(err)
	}
	rows := []string{"| randread-4k-qd1 | kernel nvmet |", "| randread-4k-qd1 | SPDK |", "| randread-4k-qd1 | kernel nvmet (TCP) |",
		"| randread-4k-qd1 | SPDK (TCP) |", "| seqread-128k-qd16 | SPDK bdev_rbd |"}
	last := -1
	for _, want := range rows {
		i := strings.Index(string(tmd), want)
		if i < last {
			t.Errorf("report lacks %q after the rows before it:\n%s", want, tmd)
		}
		last = i
	}
	for _, want := range []string{"nvme-rdma and nvme-tcp", "| memory/randread-4k-qd1 | ours (TCP) |", "2.00×"} {
		if !strings.Contains(string(tmd), want) {
			t.Errorf("report lacks %q:\n%s", want, tmd)
		}
	}
	// One-guest results keep their base.
	one, err := Write(dir, &Results{Date: "2026-12-04T08:00:00Z"})
	if err != nil || filepath.Base(one[0]) != "2026-12-04.json" {
		t.Fatalf("one-guest report %v, %v", one, err)
	}
}
