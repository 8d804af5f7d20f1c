//go:build e2e && netlab && bench

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// The two-machine benchmark (make bench, its default; tests/lab/bench.sh): every target in the
// network lab's guest "target" (1 vCPU), the kernel host and fio in "host" (1 vCPU, this
// binary), one rxe link (a) between them. In each rep of each job, ours runs, then the
// kernel's nvmet-rdma, then SPDK's nvmf_tgt, each on the same kind of namespace in the same
// guest; then the memory and file jobs run again in the same way over NVMe/TCP on the same
// link (ours' TCP port, the kernel's nvmet-tcp, SPDK's TCP transport). The RBD jobs run ours
// (its rbd build), SPDK's bdev_rbd and fio's rbd engine in the target guest (no network), on
// one image of a one-node Ceph cluster started there for them.
// Each run's CPU per I/O is the target guest's busy time over the middle of the run
// (/proc/stat there) divided by the I/Os fio completed. It writes a raw bench.Results
// (Topology two); the machine turns it into bench/results/<date>-2m.{json,md,png}.
//
// Environment as TestBench's (BENCH_RUNTIME, BENCH_RAMP, BENCH_REPS, BENCH_JOBS, BENCH_OUT,
// BENCH_COMMIT), BENCH_TRANSPORTS (the transports of the memory and file jobs, in the order
// run: "rdma,tcp" by default, "rdma" or "tcp" alone; the RBD jobs are RDMA's), BENCH_SPDK_DIR
// (a tree spdk-build.sh built; empty: SPDK is skipped, and BENCH_NOTES says why), BENCH_RBD (0: no RBD jobs), BENCH_NOTES (lines recorded as notes),
// BENCH_PROFILE (a regexp over backend/job: profile those jobs with perf, see profile),
// BENCH_AB_BIN and BENCH_AB_RBD_BIN (an A/B run: ours against these builds of nvmeof-tgt and its
// rbd build, alone; tests/lab/ab-2m.sh).

const (
	netBenchFile  = "/scratch/bench.img" // in the target guest: ours', nvmet's and SPDK's aio file
	netBenchImage = "bench-rbd"
	netBenchAgent = 5 * time.Minute // one agent call that may wait out a slow guest
	benchPortPrev = 4423
)

// netBenchJobs are the jobs of the two-machine benchmark, in order.
var netBenchJobs = func() []benchJob {
	var out []benchJob
	for _, be := range []string{"memory", "file", bench.BackendRBD} {
		for _, j := range []string{"randread-4k-qd1", "randread-4k-qd32", "randwrite-4k-qd32", "seqread-128k-qd16", "seqwrite-128k-qd16"} {
			out = append(out, benchJob{be, j})
		}
	}
	return out
}()

type netBench struct {
	*benchEnv
	tg    *labGuest
	addr  string
	ours  *remoteTgt
	prev  *remoteTgt // the previous build, in an A/B run
	spdk  *remoteSPDK
	ports map[string]int
	nqns  map[string]string
	nsids map[string]uint32 // backend → nsid, the same on every target
	conns map[string]*controller
	// transport is the one the host connects over in the current phase (bench.TransportRDMA,
	// bench.TransportTCP); every target serves the phase's jobs over it.
	transport string
}

func TestNetBench(t *testing.T) {
	lab := needNetLab(t)
	tg := lab.guest(t, "target")
	link := lab.link(t, "a")
	nb := &netBench{
		benchEnv: &benchEnv{
			runtime: envInt(t, "BENCH_RUNTIME", 15),
			ramp:    envInt(t, "BENCH_RAMP", 3),
			reps:    envInt(t, "BENCH_REPS", 3),
			fioDir:  envOr("BENCH_FIO_DIR", "deploy/fio"),
			dir:     testDir(t),
			devs:    map[string]map[string]string{},
			host:    newHost(t),
		},
		tg:    tg,
		addr:  link.addr(t, tg),
		ports: map[string]int{bench.TargetKernel: benchPortKernel, bench.TargetOurs: benchPortOurs, bench.TargetSPDK: benchPortSPDK},
		nqns:  map[string]string{bench.TargetKernel: nqn("bench-kernel"), bench.TargetOurs: nqn("bench-tgt"), bench.TargetSPDK: nqn("bench-spdk")},
		nsids: map[string]uint32{"memory": 1, "file": 2, bench.BackendRBD: 3},
		conns: map[string]*controller{},
	}
	transports, err := bench.ParseTransports(envOr("BENCH_TRANSPORTS", "rdma,tcp"))
	if err != nil {
		t.Fatalf("BENCH_TRANSPORTS: %v", err)
	}
	res := &bench.Results{
		Date:       time.Now().UTC().Format(time.RFC3339),
		Commit:     os.Getenv("BENCH_COMMIT"),
		Kernel:     strings.TrimSpace(readSys("/proc/sys/kernel/osrelease")),
		Topology:   bench.TopologyTwo,
		Label:      os.Getenv("BENCH_LABEL"),
		HostCPUs:   runtime.NumCPU(),
		HostMemMiB: memTotalMiB(),
		Runtime:    nb.runtime,
		Ramp:       nb.ramp,
		Peers:      []string{bench.TargetKernel},
		Transports: transports,
	}
	res.CPUs, _ = strconv.Atoi(strings.TrimSpace(string(tg.mustRun(t, cmdTimeout, "nproc"))))
	res.MemMiB = remoteMemMiB(t, tg)
	for _, n := range strings.Split(os.Getenv("BENCH_NOTES"), "\n") {
		if n = strings.TrimSpace(n); n != "" {
			res.Notes = append(res.Notes, n)
		}
	}
	out := envOr("BENCH_OUT", filepath.Join(resultsDir, "bench-raw.json"))
	t.Cleanup(func() {
		if t.Failed() {
			res.Notes = append(res.Notes, "incomplete: the benchmark run failed part way; see the test log")
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(out, b, 0o644)
		}
		if err != nil {
			t.Errorf("write %s: %v", out, err)
			return
		}
		t.Logf("raw results: %s", out)
	})
	selected := func(string) bool { return true }
	if f := os.Getenv("BENCH_JOBS"); f != "" {
		re, err := regexp.Compile(f)
		if err != nil {
			t.Fatalf("BENCH_JOBS: %v", err)
		}
		selected = re.MatchString
		res.Notes = append(res.Notes, "only the jobs matching "+strconv.Quote(f))
	}
	var jobs, rbdJobs []benchJob
	for _, j := range netBenchJobs {
		switch {
		case !selected(j.backend + "/" + j.job):
		case j.backend == bench.BackendRBD && os.Getenv("BENCH_RBD") == "0":
			// bench-2m.sh said why (BENCH_NOTES).
		case j.backend == bench.BackendRBD:
			rbdJobs = append(rbdJobs, j)
		default:
			jobs = append(jobs, j)
		}
	}
	if len(jobs)+len(rbdJobs) == 0 {
		t.Fatal("BENCH_JOBS selects no job of the two-machine benchmark")
	}
	spdkDir := os.Getenv("BENCH_SPDK_DIR")
	// An A/B run: ours against another build of it (the previous commit's) alone.
	abBin, abRBDBin := os.Getenv("BENCH_AB_BIN"), os.Getenv("BENCH_AB_RBD_BIN")
	if abBin != "" {
		res.Peers = []string{bench.TargetPrev}
		spdkDir = ""
		res.Notes = append(res.Notes, "A/B run: ours is the build under test, the previous build is "+abBin+" ("+abRBDBin+" for the RBD jobs), "+
			"both in the target guest, alternating.")
		nb.ports[bench.TargetPrev], nb.nqns[bench.TargetPrev] = benchPortPrev, nqn("bench-prev")
	} else if spdkDir != "" {
		res.Peers = append(res.Peers, bench.TargetSPDK)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Targets in the target guest (%d vCPU), the kernel host and fio in the host guest (%d vCPU), "+
		"one virtio-net link with rxe at each end (%s on link a). One file (%s on the target guest's own disk) backs "+
		"the file namespace of every target, and one image the RBD namespace.", res.CPUs, res.HostCPUs, nb.addr, netBenchFile))
	if slices.Contains(transports, bench.TransportTCP) && len(jobs) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("The memory and file jobs ran over %s, one transport after the other, "+
			"with every target serving each (one process of ours with a port of each transport, one nvmet subsystem on a port of each, "+
			"one SPDK subsystem with a listener of each) and the host connected over one at a time. NVMe/TCP went to %s on the same "+
			"link, the host's nvme-tcp without digests, 8 KiB of in-capsule data on every target; the RBD jobs ran over RDMA alone.",
			strings.Join(transports, " then "), nb.addr))
	}
	for _, sub := range []string{"kernel", "spdk"} {
		if err := os.MkdirAll(filepath.Join(nb.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The memory and file phase: all three targets at once, each serving over every transport,
	// only one of them busy at a time; the host goes over one transport after the other.
	if len(jobs) > 0 {
		nss := []Namespace{memNS(1, benchNSSize, 512, ""),
			{NSID: 2, Backend: BackendFile, Path: netBenchFile, Size: benchNSSize, BlockSize: 512}}
		nb.startOurs(t, tgtBin, transports, nss...)
		if abBin != "" {
			nb.prev = nb.startPrev(t, abBin, transports, nss...)
		} else {
			nb.startKernel(t, transports)
		}
		if spdkDir != "" {
			nb.spdk = startRemoteSPDK(t, tg, spdkDir, filepath.Join(nb.dir, "spdk"))
			res.SPDK = nb.spdk.version
			nb.spdk.setup(t, nb.nqns[bench.TargetSPDK], nb.addr, benchPortSPDK, transports...)
			nb.spdk.pause(t, nb.nqns[bench.TargetSPDK])
		}
		for i, tr := range transports {
			nb.memoryFilePhase(t, res, jobs, tr, i == 0)
		}
		nb.ours.Stop(t)
		if nb.prev != nil {
			nb.prev.Stop(t)
		}
	}

	if len(rbdJobs) > 0 {
		nb.rbdPhase(t, res, rbdJobs, spdkDir, abRBDBin)
	}
}

// memoryFilePhase runs the memory and file jobs over transport: the host connects to ours and
// the second target (the kernel, or the previous build) over it and runs each job's reps, each
// rep on every target in turn. The first phase fills the namespaces, which keep their data
// through the next (every target runs throughout), and measures the idle target and ours'
// allocations. The host disconnects at the end: a controller over each transport at once would
// be two paths to one subsystem.
func (nb *netBench) memoryFilePhase(t *testing.T, res *bench.Results, jobs []benchJob, transport string, first bool) {
	t.Helper()
	nb.transport = transport
	second := res.Peers[0] // the kernel, or the previous build
	for _, tgt := range []string{bench.TargetOurs, second} {
		nb.connect(t, tgt, 1, 2)
	}
	if first {
		// Reads must find data: ours' and the kernel's memory, and the one file through ours.
		nb.prefill(t, nb.devs[bench.TargetOurs]["memory"])
		nb.prefill(t, nb.devs[second]["memory"])
		nb.prefill(t, nb.devs[bench.TargetOurs]["file"])
		if nb.spdk != nil {
			nb.spdkTurn(t, "memory", func() { nb.prefill(t, nb.devs[bench.TargetSPDK]["memory"]) })
		}
		nb.idle(t, res)
	}
	for _, j := range jobs {
		for rep := 1; rep <= nb.reps; rep++ {
			nb.record(t, res, nb.run(t, bench.TargetOurs, j, rep))
			for _, tgt := range res.Peers {
				if tgt == bench.TargetSPDK {
					nb.spdkTurn(t, j.backend, func() { nb.record(t, res, nb.run(t, bench.TargetSPDK, j, rep)) })
					continue
				}
				nb.record(t, res, nb.run(t, tgt, j, rep))
			}
		}
	}
	for _, j := range jobs {
		nb.profile(t, res, j, bench.TargetOurs, second)
	}
	if first {
		res.Allocs = nb.measureAllocs(t, jobs)
	}
	for _, tgt := range []string{bench.TargetOurs, second} {
		nb.conns[tgt].disconnect(t)
	}
}

// record appends a run and logs it.
func (nb *netBench) record(t *testing.T, res *bench.Results, r bench.Run) {
	t.Helper()
	res.Runs = append(res.Runs, r)
	t.Logf("%s %s/%s over %s #%d: %.0f IOPS %.1f MiB/s p50 %.0fµs p99 %.0fµs, %.1f µs CPU per I/O (%.2f busy vCPU)", r.Target, r.Backend, r.Job, r.Fabric(), r.Rep,
		r.IOPS, r.BW/mib, r.ClatP50/1e3, r.ClatP99/1e3, r.CPUPerIO(), r.CPU.BusyCores())
}

// startOurs starts nvmeof-tgt (bin) in the target guest with nss over transports, pprof on.
func (nb *netBench) startOurs(t *testing.T, bin string, transports []string, nss ...Namespace) {
	t.Helper()
	nb.ours = startRemoteTgtWith(t, nb.tg, nb.spec(bench.TargetOurs, transports, nss), bin, "NVMEOF_TGT_METRICS_PPROF=true")
}

// spec is ours (or the previous build, target) with one subsystem of nss, on its port number
// over each of transports.
func (nb *netBench) spec(target string, transports []string, nss []Namespace) Spec {
	var ports []Port
	for _, tr := range transports {
		ports = append(ports, Port{Transport: tr, Address: nb.addr, Service: nb.ports[target]})
	}
	return Spec{Port: ports[0], More: ports[1:],
		Subsystems: []Subsystem{{NQN: nb.nqns[target], AllowAnyHost: true, Namespaces: nss}}}
}

// connect connects the host to a target over the phase's transport and finds the disks of
// nsids.
func (nb *netBench) connect(t *testing.T, target string, nsids ...uint32) {
	t.Helper()
	c, err := nb.host.connectTo(t, nb.transport, nb.addr, nb.nqns[target], nb.ports[target])
	if err != nil {
		t.Fatalf("connect to %s over %s: %v", target, nb.transport, err)
	}
	nb.conns[target] = c
	if nb.devs[target] == nil {
		nb.devs[target] = map[string]string{}
	}
	for be, nsid := range nb.nsids {
		if slices.Contains(nsids, nsid) {
			nb.devs[target][be] = c.blockDev(t, nsid)
		}
	}
}

func (nb *netBench) prefill(t *testing.T, dev string) {
	t.Helper()
	mustRun(t, fioTimeout, "fio", "--name=prefill", "--filename="+dev, "--rw=write",
		"--bs=1m", "--iodepth=16", "--direct=1", "--ioengine=libaio", "--size="+strconv.Itoa(benchNSSize))
}

// run runs one job against target through the host, sampling the target guest's CPU.
func (nb *netBench) run(t *testing.T, target string, j benchJob, rep int) bench.Run {
	t.Helper()
	pid := -1
	switch target {
	case bench.TargetOurs:
		pid = nb.ours.pid
	case bench.TargetPrev:
		pid = nb.prev.pid
	case bench.TargetSPDK:
		pid = nb.spdk.pid
	}
	sample := nb.sampleCPU(pid)
	r := nb.runJob(t, target, j.backend, j.job, rep)
	r.Transport = nb.transport
	cs := <-sample
	if cs.err != nil {
		t.Fatalf("CPU sample in the target guest during %s %s/%s: %v", target, j.backend, j.job, cs.err)
	}
	r.CPU = &cs.CPUSample
	return r
}

type cpuResult struct {
	bench.CPUSample
	err error
}

// sampleCPU reads /proc/stat (and the process's stat, pid > 0) in the target guest from ramp+1 s
// after now until 1 s before the run's end, in the background: the middle of the fio run that
// starts now, clear of its ramp, its start-up and its end.
func (nb *netBench) sampleCPU(pid int) <-chan cpuResult {
	after := nb.ramp + 1
	span := max(nb.runtime-2, 1)
	return nb.tg.sampleCPU(after, span, pid)
}

// sampleCPU reads the guest's CPU times after `after` seconds and again span seconds later.
func (g *labGuest) sampleCPU(after, span, pid int) <-chan cpuResult {
	ch := make(chan cpuResult, 1)
	script := `p=$3
snap() { head -n1 /proc/stat; if [ "$p" -gt 0 ]; then cat /proc/$p/stat; else echo none; fi; }
sleep "$1"; snap; sleep "$2"; snap; nproc`
	go func() {
		r := g.exec(time.Duration(after+span)*time.Second+netBenchAgent, "sh", "-c", script, "sh",
			strconv.Itoa(after), strconv.Itoa(span), strconv.Itoa(pid))
		if r.err != nil {
			ch <- cpuResult{err: fmt.Errorf("%s: %v %s", r.line, r.err, limit(r.stderr))}
			return
		}
		s, err := parseCPUSample(string(r.stdout))
		ch <- cpuResult{s, err}
	}()
	return ch
}

// parseCPUSample reads the sampler's output: two snapshots of /proc/stat's cpu line and the
// process's stat line (or "none"), then nproc.
func parseCPUSample(out string) (bench.CPUSample, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		return bench.CPUSample{}, fmt.Errorf("sampler output: %d lines, want 5: %q", len(lines), out)
	}
	t0, b0, s0, err := bench.ParseProcStatCPU(lines[0])
	if err != nil {
		return bench.CPUSample{}, err
	}
	t1, b1, s1, err := bench.ParseProcStatCPU(lines[2])
	if err != nil {
		return bench.CPUSample{}, err
	}
	cpus, err := strconv.Atoi(strings.TrimSpace(lines[4]))
	if err != nil {
		return bench.CPUSample{}, fmt.Errorf("sampler output: nproc %q", lines[4])
	}
	cs := bench.CPUSample{CPUs: cpus, Total: t1 - t0, Busy: b1 - b0, Softirq: s1 - s0, Process: -1}
	if lines[1] != "none" && lines[3] != "none" {
		p0, err0 := statTicks(lines[1])
		p1, err1 := statTicks(lines[3])
		if err0 != nil || err1 != nil {
			return cs, fmt.Errorf("process stat: %v %v", err0, err1)
		}
		cs.Process = int64(p1 - p0)
	}
	return cs, nil
}

// statTicks is utime+stime of a /proc/PID/stat line.
func statTicks(s string) (uint64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 || len(s) < i+2 {
		return 0, fmt.Errorf("bad stat line %q", s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("bad stat line %q", s)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat line %q", s)
	}
	return ut + st, nil
}

// idle measures ours' CPU and the whole target guest's with the host connected to ours and to
// the kernel target, and no I/O.
func (nb *netBench) idle(t *testing.T, res *bench.Results) {
	t.Helper()
	const idle = 10
	cs := <-nb.tg.sampleCPU(0, idle, nb.ours.pid)
	if cs.err != nil {
		t.Fatalf("idle CPU: %v", cs.err)
	}
	res.IdleSeconds = float64(cs.Total) / clockTicks / float64(max(cs.CPUs, 1))
	res.IdleCPUPercent = float64(cs.Process) / float64(cs.Total) * float64(max(cs.CPUs, 1)) * 100
	res.IdleGuest = &cs.CPUSample
	t.Logf("idle: nvmeof-tgt %.2f%% of a core, the target guest %.1f%% busy, over %.0f s", res.IdleCPUPercent, cs.BusyCores()*100, res.IdleSeconds)
}

// startKernel configures the kernel's nvmet in the target guest: a memory-backed null_blk
// disk (nsid 1) and the benchmark's file on nvmet's own file backend (nsid 2), on a port of
// each of transports, 8 KiB of in-capsule data as the other targets. The test's end takes it
// down.
func (nb *netBench) startKernel(t *testing.T, transports []string) {
	t.Helper()
	mem := memNvmetDisk(t, nb.tg, "benchmem", benchNSSize/mib)
	nb.tg.sh(t, `[ -e "$1" ] || truncate -s "$2" "$1"`, netBenchFile, strconv.Itoa(benchNSSize))
	k := startRemoteNvmetSubsystem(t, nb.tg, nb.nqns[bench.TargetKernel], mem, netBenchFile)
	for _, tr := range transports {
		k.addPort(t, tr, nb.addr, benchPortKernel)
	}
}

// spdkTurn resumes SPDK, connects the host to it, runs fn, disconnects and pauses it again: its
// reactor would spin the target guest's one vCPU through every other target's runs.
func (nb *netBench) spdkTurn(t *testing.T, backend string, fn func()) {
	t.Helper()
	nb.spdk.resume(t)
	nb.connect(t, bench.TargetSPDK, nb.nsids[backend])
	fn()
	nb.conns[bench.TargetSPDK].disconnect(t)
	nb.spdk.pause(t, nb.nqns[bench.TargetSPDK])
}

// measureAllocs counts ours' heap allocations across a memory read and a file write run,
// against the same time idle (as TestBench does, through the guest's agent).
func (nb *netBench) measureAllocs(t *testing.T, jobs []benchJob) *bench.AllocRun {
	t.Helper()
	ops := func() uint64 {
		v, _ := metricSum(nb.ours.metrics(t), "nvmeof_tgt_namespace_ops_total")
		return uint64(v)
	}
	mallocs := func() uint64 {
		out := nb.tg.mustRun(t, cmdTimeout, "curl", "-sSf", "--max-time", "60", heapURL)
		n, err := bench.ParseMallocs(string(out))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var runs []benchJob
	for _, j := range []benchJob{{"memory", "randread-4k-qd32"}, {"file", "randwrite-4k-qd32"}} {
		if slices.ContainsFunc(jobs, func(x benchJob) bool { return x.backend == j.backend }) {
			runs = append(runs, j)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	var names []string
	start := time.Now()
	o0, m0 := ops(), mallocs()
	for _, j := range runs {
		nb.runJob(t, bench.TargetOurs, j.backend, j.job, 0)
		names = append(names, j.backend+"/"+j.job)
	}
	m1, o1 := mallocs(), ops()
	span := time.Since(start)
	i0 := mallocs()
	time.Sleep(span)
	i1 := mallocs()
	a := bench.NewAllocRun(strings.Join(names, " + "), o1-o0, m1-m0, i1-i0)
	a.Transport = nb.transport
	t.Logf("allocations: %d during %d I/Os, %d idle over the same %v: %.4f per I/O", a.Allocs, a.IOs, a.IdleAllocs, span.Round(time.Second), a.AllocsPerIO)
	return a
}

// rbdPhase starts the target guest's Ceph cluster and runs the RBD jobs: ours (its rbd build)
// serving the image, SPDK's bdev_rbd on it, and fio's rbd engine in the target guest.
func (nb *netBench) rbdPhase(t *testing.T, res *bench.Results, jobs []benchJob, spdkDir, abBin string) {
	t.Helper()
	rbdBinPath, err := filepath.Abs(needRBDBin(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	up := nb.tg.run(t, 10*time.Minute, "env", "CEPH_DIR="+cephDir, "CEPH_CONF="+cephConf, "CEPH_TIMEOUT="+cephUpSeconds,
		filepath.Join(repoDir(t), "tests/lab/ceph-up.sh"))
	if up.err != nil {
		t.Fatalf("ceph-up.sh in %s: %v\n%s\n%s", nb.tg, up.err, limit(up.stdout), limit(up.stderr))
	}
	t.Cleanup(func() {
		_ = nb.tg.exec(2*time.Minute, "env", "CEPH_DIR="+cephDir, "CEPH_CONF="+cephConf, filepath.Join(repoDir(t), "tests/lab/ceph-down.sh"), "--purge")
	})
	// librbd's cache off for every client, as ours has it (SPDK's bdev_rbd and fio's rbd engine
	// read this file).
	nb.tg.sh(t, `printf '\n[client.admin]\nrbd cache = false\n' >>"$1"`, cephConf)
	res.Ceph = strings.TrimSpace(string(nb.tg.mustRun(t, cmdTimeout, "ceph", "--version")))
	t.Logf("Ceph up in %s after %v", nb.tg, time.Since(start).Round(time.Second))

	nb.transport = bench.TransportRDMA
	rdma := []string{bench.TransportRDMA}
	rbdNS := Namespace{NSID: 3, Backend: BackendRBD, Pool: cephPool, Image: netBenchImage, Size: benchNSSize}
	nb.startOurs(t, rbdBinPath, rdma, rbdNS)
	nb.connect(t, bench.TargetOurs, 3)
	nb.prefill(t, nb.devs[bench.TargetOurs][bench.BackendRBD])
	targets := []string{bench.TargetOurs}
	if abBin != "" {
		nb.prev = nb.startPrev(t, abBin, rdma, rbdNS)
		nb.connect(t, bench.TargetPrev, 3)
		targets = append(targets, bench.TargetPrev)
	} else if spdkDir != "" {
		if nb.spdk == nil {
			nb.spdk = startRemoteSPDK(t, nb.tg, spdkDir, filepath.Join(nb.dir, "spdk"))
			res.SPDK = nb.spdk.version
			nb.spdk.setup(t, nb.nqns[bench.TargetSPDK], nb.addr, benchPortSPDK, rdma...)
			nb.spdk.pause(t, nb.nqns[bench.TargetSPDK])
		}
		targets = append(targets, bench.TargetSPDK)
	}
	if abBin == "" {
		targets = append(targets, bench.TargetLibRBD)
		if !slices.Contains(res.Peers, bench.TargetLibRBD) {
			res.Peers = append(res.Peers, bench.TargetLibRBD)
		}
	}
	res.Notes = append(res.Notes, "The RBD jobs ran on one 256 MiB image (layering, no exclusive-lock) of a one-node Ceph cluster "+
		"(memstore OSD) in the target guest, started for them after the memory and file jobs, with librbd's cache off for every client: "+
		"through ours (bin/nvmeof-tgt-rbd, namespace 3), through SPDK's bdev_rbd (attached for each of its runs and detached after, "+
		"so that a stopped SPDK holds no image open), and with fio's rbd engine run in the target guest (no target, no network). "+
		"The OSD shares the target guest's vCPU with every one of them.")
	for _, j := range jobs {
		for rep := 1; rep <= nb.reps; rep++ {
			for _, tgt := range targets {
				switch tgt {
				case bench.TargetOurs, bench.TargetPrev:
					nb.record(t, res, nb.run(t, tgt, j, rep))
				case bench.TargetSPDK:
					nb.spdk.resume(t)
					nb.spdk.attachRBD(t, nb.nqns[bench.TargetSPDK], cephPool, netBenchImage)
					nb.connect(t, bench.TargetSPDK, 3)
					nb.record(t, res, nb.run(t, tgt, j, rep))
					nb.conns[bench.TargetSPDK].disconnect(t)
					nb.spdk.detachRBD(t, nb.nqns[bench.TargetSPDK])
					nb.spdk.pause(t, nb.nqns[bench.TargetSPDK])
				case bench.TargetLibRBD:
					nb.record(t, res, nb.runRemoteLibRBD(t, j.job, rep))
				}
			}
		}
	}
	profiled := []string{bench.TargetOurs}
	if nb.prev != nil {
		profiled = append(profiled, bench.TargetPrev)
	}
	for _, j := range jobs {
		nb.profile(t, res, j, profiled...)
	}
	nb.conns[bench.TargetOurs].disconnect(t)
	nb.ours.Stop(t)
	if nb.prev != nil {
		nb.conns[bench.TargetPrev].disconnect(t)
		nb.prev.Stop(t)
	}
}

// startPrev starts the previous build of nvmeof-tgt (an A/B run) beside ours: its own port,
// subsystem, directory and metrics address.
func (nb *netBench) startPrev(t *testing.T, bin string, transports []string, nss ...Namespace) *remoteTgt {
	t.Helper()
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return startRemoteTgtAs(t, nb.tg, "tgt-prev", "127.0.0.1:9772", nb.spec(bench.TargetPrev, transports, nss), bin)
}

// profile runs job j once more on each of targets and counts, over the middle of the run,
// the target guest's kernel events per I/O: system calls by name, context switches, hardware
// interrupts, softirqs by vector, hrtimer expiries (perf stat on tracepoints, and
// /proc/softirqs); for nvmeof-tgt, a Go CPU profile too (pprof, which the bench enables). It
// writes them beside the raw results, for the jobs BENCH_PROFILE (a regexp over backend/job)
// selects. These runs are not among the results. Counting, not sampling: under TCG, perf's
// cpu-clock samples land in the idle loop however busy the guest is (a whole run's samples
// were 98 % pv_native_safe_halt at 0.8 busy vCPU), and there are no hardware counters.
func (nb *netBench) profile(t *testing.T, res *bench.Results, j benchJob, targets ...string) {
	t.Helper()
	pat := os.Getenv("BENCH_PROFILE")
	if pat == "" {
		return
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		t.Fatalf("BENCH_PROFILE: %v", err)
	}
	if !re.MatchString(j.backend + "/" + j.job) {
		return
	}
	for _, target := range targets {
		name := fmt.Sprintf("profile-%s-%s-%s", target, j.backend, j.job)
		if nb.transport != bench.TransportRDMA {
			name += "-" + nb.transport
		}
		counts := filepath.Join(nb.dir, name+".counts")
		after, span := nb.ramp+1, max(nb.runtime-2, 1)
		done := make(chan cmdResult, 2)
		go func() {
			done <- nb.tg.exec(time.Duration(after+span)*time.Second+netBenchAgent, "sh", "-c", profileCounts, "sh",
				strconv.Itoa(after), strconv.Itoa(span), counts)
		}()
		pprofOut := ""
		if addr := nb.metricsAddr(target); addr != "" {
			pprofOut = filepath.Join(nb.dir, name+".pprof")
			go func() {
				done <- nb.tg.exec(time.Duration(after+span)*time.Second+netBenchAgent, "sh", "-c",
					`sleep "$1"; exec curl -sf -o "$4" "http://$3/debug/pprof/profile?seconds=$2"`, "sh",
					strconv.Itoa(after), strconv.Itoa(span), addr, pprofOut)
			}()
		} else {
			done <- cmdResult{}
		}
		run := nb.runJob(t, target, j.backend, j.job, 0)
		failed := false
		for range 2 {
			if r := <-done; r.err != nil {
				t.Errorf("profile of %s in %s: %s: %v %s", target, nb.tg, r.line, r.err, limit(r.stderr))
				failed = true
			}
		}
		if failed {
			continue
		}
		raw, err := os.ReadFile(counts)
		if err != nil {
			t.Errorf("profile of %s: %v", target, err)
			continue
		}
		out := filepath.Join(nb.dir, name+".txt")
		txt := perIOCounts(string(raw), run.IOPS*float64(span))
		if pprofOut != "" {
			txt += "\nGo CPU profile: " + filepath.Base(pprofOut) + " (go tool pprof -top bin/nvmeof-tgt " + filepath.Base(pprofOut) + ")\n"
		}
		if err := os.WriteFile(out, []byte(fmt.Sprintf("# %s: %.0f IOPS in the profiled run, counts over %d s\n%s", name, run.IOPS, span, txt)), 0o644); err != nil {
			t.Fatal(err)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("Profile of %s on %s/%s over %s (one more run, not among the results): %s",
			target, j.backend, j.job, nb.transport, filepath.Base(out)))
		t.Logf("profile of %s on %s/%s over %s: %s\n%s", target, j.backend, j.job, nb.transport, out, txt)
	}
}

// metricsAddr is the metrics (and pprof) address of target in the target guest, or "" for
// a target that has none.
func (nb *netBench) metricsAddr(target string) string {
	switch {
	case target == bench.TargetOurs && nb.ours != nil:
		return cmp.Or(nb.ours.metricsAddr, "127.0.0.1:9771")
	}
	return ""
}

// profileCounts, in the target guest ($1 seconds to wait, $2 the span, $3 the output): perf
// stat's counts of kernel events over the span, whole guest, and /proc/softirqs before and
// after, each as "name count" lines.
const profileCounts = `set -e
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
sirq() { awk 'NR>1 { s=0; for (i=2; i<=NF; i++) s+=$i; sub(":", "", $1); print "softirq:" $1, s }' /proc/softirqs; }
sleep "$1"
sirq >"$3.before"
perf stat -a -x, -o "$3.perf" -e raw_syscalls:sys_enter,sched:sched_switch,irq:irq_handler_entry,irq:softirq_entry,timer:hrtimer_expire_entry,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_ppoll,syscalls:sys_enter_poll,syscalls:sys_enter_nanosleep,syscalls:sys_enter_clock_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_sched_yield -- sleep "$2"
sirq >"$3.after"
{ awk -F, '$1 ~ /^[0-9]+$/ { print $3 " " $1 }' "$3.perf"
  awk 'NR==FNR { b[$1]=$2; next } { print $1 " " $2-b[$1] }' "$3.before" "$3.after"; } >"$3"
rm -f "$3.perf" "$3.before" "$3.after"`

// perIOCounts turns profileCounts' "name count" lines into a table of counts per I/O.
func perIOCounts(raw string, ios float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-42s %12s %10s\n", "event", "count", "per I/O")
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		per := 0.0
		if ios > 0 {
			per = n / ios
		}
		fmt.Fprintf(&b, "%-42s %12.0f %10.2f\n", f[0], n, per)
	}
	return b.String()
}

// runRemoteLibRBD runs the job with fio's rbd engine in the target guest, sampling its CPU.
func (nb *netBench) runRemoteLibRBD(t *testing.T, job string, rep int) bench.Run {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(nb.fioDir, job+".fio"))
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(nb.dir, "librbd-"+job+".fio")
	if err := os.WriteFile(jobFile, []byte(librbdJob(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(nb.dir, fmt.Sprintf("%s-%s-%s-%d.json", bench.TargetLibRBD, bench.BackendRBD, job, rep))
	sample := nb.sampleCPU(-1)
	timeout := time.Duration(nb.runtime+nb.ramp)*time.Second + 2*time.Minute
	resp, err := nb.tg.agent.Do(context.Background(), netlab.Request{Op: netlab.OpRun,
		Argv: []string{"fio", "--output-format=json", "--output=" + report, jobFile}, Timeout: timeout,
		Env: []string{"CEPH_CONF=" + cephConf, "RBD_POOL=" + cephPool, "RBD_IMAGE=" + netBenchImage,
			"RUNTIME=" + strconv.Itoa(nb.runtime), "RAMP=" + strconv.Itoa(nb.ramp)}})
	cs := <-sample
	if err != nil || resp.Exit != 0 || resp.TimedOut {
		t.Fatalf("fio-rbd %s in %s: %v exit %d timed out %v\n%s%s", job, nb.tg, err, resp.Exit, resp.TimedOut, limit(resp.Stdout), limit(resp.Stderr))
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("fio report: %v", err)
	}
	r, err := parseBenchFio(raw)
	if err != nil {
		t.Fatalf("fio report %s: %v", report, err)
	}
	r.Target, r.Backend, r.Job, r.Rep = bench.TargetLibRBD, bench.BackendRBD, job, rep
	if r.Errors != 0 || r.IOs == 0 {
		t.Errorf("fio-rbd %s: error %d, %d I/Os", job, r.Errors, r.IOs)
	}
	if cs.err != nil {
		t.Fatalf("CPU sample during fio-rbd %s: %v", job, cs.err)
	}
	r.CPU = &cs.CPUSample
	return r
}

// remoteSPDK is SPDK's nvmf_tgt in another guest of the network lab: one reactor (-m 0x1) on
// that guest's vCPU, 2 MiB hugepages, configured through scripts/rpc.py run there.
type remoteSPDK struct {
	g       *labGuest
	dir     string // a tree spdk-build.sh built
	logPath string
	sock    string
	pid     int
	paused  bool
	version string
}

func startRemoteSPDK(t *testing.T, g *labGuest, dir, out string) *remoteSPDK {
	t.Helper()
	s := &remoteSPDK{g: g, dir: dir, logPath: filepath.Join(out, "nvmf_tgt.log"), sock: "/run/e2e-spdk.sock"}
	// Hugepages and hugetlbfs in the guest (its memory must hold them).
	g.sh(t, `echo "$1" >/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
n=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages); [ "$n" -ge "$1" ] || { echo "only $n hugepages" >&2; exit 1; }
grep -q " hugetlbfs " /proc/mounts || { mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages; }`, strconv.Itoa(spdkHugepages))
	resp, err := g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpStart,
		Argv: []string{filepath.Join(dir, "build/bin/nvmf_tgt"), "-m", "0x1", "-u", "-r", s.sock}, Log: s.logPath})
	if err != nil || resp.PID == 0 {
		t.Fatalf("start nvmf_tgt in %s: %v %s", g, err, resp.Error)
	}
	s.pid = resp.PID
	t.Cleanup(func() { s.stop(t) })
	start := time.Now()
	var version []byte
	err = waitFor(spdkReadyTimeout, func() bool {
		r := s.rpcErr("spdk_get_version")
		version = r.stdout
		return r.err == nil
	})
	if err != nil {
		s.logTail(t)
		t.Fatalf("nvmf_tgt in %s did not answer spdk_get_version within %v", g, spdkReadyTimeout)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(version, &v); err != nil || v.Version == "" {
		t.Fatalf("spdk_get_version: %q (%v)", version, err)
	}
	s.version = v.Version
	t.Logf("%s pid %d in %s answering after %v", s.version, s.pid, g, time.Since(start).Round(time.Millisecond))
	return s
}

// setup makes each of transports ("rdma", "tcp"; as TestBench's SPDK: 8 KiB in-capsule data
// and I/O unit, 128 KiB maximum I/O), a malloc bdev (nsid 1) and an aio bdev on the benchmark's
// file (nsid 2) in one subsystem, and a listener of each transport.
func (s *remoteSPDK) setup(t *testing.T, subnqn, addr string, port int, transports ...string) {
	t.Helper()
	var calls [][]string
	for _, tr := range transports {
		calls = append(calls, []string{"nvmf_create_transport", "-t", strings.ToUpper(tr), "-u", "8192", "-i", "131072", "-c", "8192"})
	}
	calls = append(calls, [][]string{
		{"bdev_malloc_create", "-b", "Malloc0", strconv.Itoa(benchNSSize / mib), "512"},
		{"bdev_aio_create", netBenchFile, "Aio0", "512"},
		{"nvmf_create_subsystem", subnqn, "-a", "-s", "SPDK00000000000001", "-d", "SPDK bench"},
		{"nvmf_subsystem_add_ns", "-n", "1", subnqn, "Malloc0"},
		{"nvmf_subsystem_add_ns", "-n", "2", subnqn, "Aio0"},
	}...)
	for _, tr := range transports {
		calls = append(calls, []string{"nvmf_subsystem_add_listener", subnqn, "-t", tr, "-f", "ipv4", "-a", addr, "-s", strconv.Itoa(port)})
	}
	for _, args := range calls {
		s.rpc(t, args...)
	}
	t.Logf("SPDK in %s: %s, malloc and aio (%s) bdevs, on %s:%d over %v", s.g, subnqn, netBenchFile, addr, port, transports)
}

// attachRBD adds a bdev_rbd on the image as nsid 3; detachRBD takes it away again.
func (s *remoteSPDK) attachRBD(t *testing.T, subnqn, pool, image string) {
	t.Helper()
	s.rpc(t, "bdev_rbd_create", "-b", "Rbd0", pool, image, "512")
	s.rpc(t, "nvmf_subsystem_add_ns", "-n", "3", subnqn, "Rbd0")
}

func (s *remoteSPDK) detachRBD(t *testing.T, subnqn string) {
	t.Helper()
	s.rpc(t, "nvmf_subsystem_remove_ns", subnqn, "3")
	s.rpc(t, "bdev_rbd_delete", "Rbd0")
}

func (s *remoteSPDK) rpcErr(args ...string) cmdResult {
	if s.paused {
		return cmdResult{err: fmt.Errorf("nvmf_tgt is stopped (SIGSTOP)")}
	}
	return s.g.exec(cmdTimeout, append([]string{"python3", filepath.Join(s.dir, "scripts/rpc.py"), "-s", s.sock}, args...)...)
}

func (s *remoteSPDK) rpc(t *testing.T, args ...string) []byte {
	t.Helper()
	r := s.rpcErr(args...)
	if r.err != nil {
		s.logTail(t)
		t.Fatalf("SPDK rpc %s in %s: %v %s", strings.Join(args, " "), s.g, r.err, limit(r.stderr))
	}
	return r.stdout
}

func (s *remoteSPDK) signal(sig syscall.Signal) error {
	_, err := s.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpSignal, PID: s.pid, Signal: int(sig)})
	return err
}

// pause stops the process (SIGSTOP) once the host's queues are gone.
func (s *remoteSPDK) pause(t *testing.T, subnqn string) {
	t.Helper()
	err := waitFor(30*time.Second, func() bool {
		r := s.rpcErr("nvmf_subsystem_get_qpairs", subnqn)
		var qp []json.RawMessage
		return r.err == nil && json.Unmarshal(r.stdout, &qp) == nil && len(qp) == 0
	})
	if err != nil {
		t.Fatalf("SPDK still has queue pairs of %s 30 s after the host disconnected", subnqn)
	}
	if err := s.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP nvmf_tgt: %v", err)
	}
	s.paused = true
	if err := waitFor(10*time.Second, func() bool {
		r := s.g.exec(cmdTimeout, "cat", fmt.Sprintf("/proc/%d/stat", s.pid))
		st := string(r.stdout)
		i := strings.LastIndexByte(st, ')')
		return r.err == nil && i > 0 && len(st) > i+2 && st[i+2] == 'T'
	}); err != nil {
		t.Fatal("nvmf_tgt did not stop")
	}
}

func (s *remoteSPDK) resume(t *testing.T) {
	t.Helper()
	if !s.paused {
		return
	}
	if err := s.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT nvmf_tgt: %v", err)
	}
	s.paused = false
}

func (s *remoteSPDK) stop(t *testing.T) {
	t.Helper()
	if s.pid == 0 {
		return
	}
	if s.paused {
		_ = s.signal(syscall.SIGCONT)
		s.paused = false
	}
	_ = s.signal(syscall.SIGTERM)
	resp, err := s.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpWait, PID: s.pid, Timeout: spdkStopTimeout})
	if err != nil || !resp.Exited {
		_ = s.signal(syscall.SIGKILL)
		_, _ = s.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpWait, PID: s.pid, Timeout: 10 * time.Second})
	}
	s.pid = 0
	_ = s.g.exec(cmdTimeout, "sh", "-c", "echo 0 >/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
	if t.Failed() {
		s.logTail(t)
	}
}

func (s *remoteSPDK) logTail(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(s.logPath); err == nil {
		t.Logf("nvmf_tgt log (%s), last lines:\n%s", s.logPath, tail(b, 30))
	}
}

func remoteMemMiB(t *testing.T, g *labGuest) int {
	t.Helper()
	for _, line := range strings.Split(string(g.mustRun(t, cmdTimeout, "cat", "/proc/meminfo")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return (kb + 512) / 1024
		}
	}
	return 0
}

// repoDir is the repository this binary runs from (its working directory, which every guest
// shares at the same path).
func repoDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
