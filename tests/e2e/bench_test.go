//go:build e2e && bench

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
)

// The benchmark (make bench): in one guest boot, the same fio jobs from deploy/fio through the
// kernel initiator against nvmeof-tgt and against its peers, the kernel's nvmet and optionally
// SPDK's nvmf_tgt (memory jobs only), alternately, plus perftest on the same rxe device as the
// raw link. It writes a raw bench.Results JSON; the host turns it into
// bench/results/<date>.{json,md,png} (tests/bench/cmd/benchreport).
//
// First, on nvmeof-tgt alone, the scale phase (bench_scale_test.go): jobs scale/subsystems,
// scale/namespaces, scale/queues-srq and scale/queues-nosrq.
//
// The rbd jobs serve an image of the guest's Ceph cluster (needCeph) through nvmeof-tgt's rbd
// build, which then is the target of every job, and compare it with fio's rbd engine (librbd
// in fio's process) on the same image, alternately: the kernel target has no rbd backend.
//
// Environment: BENCH_RUNTIME and BENCH_RAMP (seconds per fio run), BENCH_REPS (rounds of ours
// and each peer per job), BENCH_OUT (the raw JSON), BENCH_COMMIT (recorded), BENCH_JOBS (a
// regexp over "backend/job" and the scale jobs to run fewer; with no fio job selected, only the
// scale phase runs), BENCH_PEERS ("kernel", "spdk" or both, in the
// order they run after ours; default "kernel"), BENCH_SPDK_DIR (a tree spdk-build.sh built).

const (
	benchPortKernel = 4420
	benchPortOurs   = 4421
	benchPortSPDK   = 4422
	benchNSSize     = 256 * mib
)

// benchJob is a fio job of deploy/fio on one backend.
type benchJob struct{ backend, job string }

// benchJobs are the fio jobs of deploy/fio run against each backend, in order.
var benchJobs = []benchJob{
	{"memory", "randread-4k-qd1"},
	{"memory", "randread-4k-qd32"},
	{"memory", "randwrite-4k-qd32"},
	{"memory", "seqread-128k-qd16"},
	{"memory", "seqwrite-128k-qd16"},
	{"memory", "randread-4k-4jobs"},
	{"file", "randread-4k-qd1"},
	{"file", "randwrite-4k-qd32"},
	{"file", "seqread-128k-qd16"},
	{"file", "seqwrite-128k-qd16"},
	{bench.BackendRBD, "randread-4k-qd32"},
	{bench.BackendRBD, "randwrite-4k-qd32"},
	{bench.BackendRBD, "seqread-128k-qd16"},
	{bench.BackendRBD, "seqwrite-128k-qd16"},
}

// benchRBDImage is the image the rbd jobs run on, through the target and through librbd.
const benchRBDImage = "bench-rbd"

type benchEnv struct {
	runtime, ramp, reps int
	fioDir              string
	dir                 string
	devs                map[string]map[string]string // target → backend → block device
	ours                *tgtProcess
	spdk                *spdkTarget // nil unless SPDK is a peer
	host                host
	// librbdConf is the Ceph configuration fio's rbd engine reads: the cluster's, with
	// librbd's cache off as in the target.
	librbdConf string
}

func TestBench(t *testing.T) {
	if targetKind != kindNvmeofTgt {
		t.Fatalf("TestBench compares nvmeof-tgt with kernel nvmet: run it with E2E_TARGET=%s", kindNvmeofTgt)
	}
	peers, err := bench.ParsePeers(envOr("BENCH_PEERS", "kernel"))
	if err != nil {
		t.Fatalf("BENCH_PEERS: %v", err)
	}
	env := &benchEnv{
		runtime: envInt(t, "BENCH_RUNTIME", 10),
		ramp:    envInt(t, "BENCH_RAMP", 3),
		reps:    envInt(t, "BENCH_REPS", 3),
		fioDir:  envOr("BENCH_FIO_DIR", "deploy/fio"),
		dir:     testDir(t),
	}
	dumpDmesgOnFailure(t, env.dir)
	res := &bench.Results{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Commit:  os.Getenv("BENCH_COMMIT"),
		Kernel:  strings.TrimSpace(readSys("/proc/sys/kernel/osrelease")),
		CPUs:    runtime.NumCPU(),
		MemMiB:  memTotalMiB(),
		Runtime: env.runtime,
		Ramp:    env.ramp,
		Peers:   peers,
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

	// The scale phase first: its target takes the lab port and the metrics address, and is
	// stopped before the others start.
	if slices.ContainsFunc(scaleJobs, selected) {
		res.Scale = runScale(t, filepath.Join(env.dir, "scale"), selected)
	}
	var jobs []benchJob
	for _, j := range benchJobs {
		if selected(j.backend + "/" + j.job) {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		res.Notes = append(res.Notes, "no fio job selected: no fio, perftest, idle or allocation measurement")
		return
	}

	// All targets at once, on the same rxe device and address, each with a memory namespace
	// (null_blk for the kernel, a malloc bdev for SPDK) and, but for SPDK, a file namespace on the
	// same filesystem.
	h := newHost(t)
	env.host = h
	specFor := func(name string, port int) Spec {
		return Spec{Port: Port{Transport: "rdma", Address: labAddr, Service: port}, Subsystems: []Subsystem{{
			NQN: nqn(name), AllowAnyHost: true,
			Namespaces: []Namespace{
				memNS(1, benchNSSize, 512, ""),
				{NSID: 2, Backend: BackendFile, Path: filepath.Join(scratchDir, name+".img"), Size: benchNSSize, BlockSize: 512},
			},
		}}}
	}
	kspec, ospec := specFor("bench-kernel", benchPortKernel), specFor("bench-tgt", benchPortOurs)
	for _, sub := range []string{"kernel", "tgt", "spdk"} {
		if err := os.MkdirAll(filepath.Join(env.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	withRBD := slices.ContainsFunc(jobs, func(j benchJob) bool { return j.backend == bench.BackendRBD })
	var tgtOpts []tgtOption
	if withRBD {
		needCeph(t)
		tgtOpts = append(tgtOpts, withBinary(needRBDBin(t)))
		removeImage(t, benchRBDImage) // left by an interrupted run
		t.Cleanup(func() { removeImage(t, benchRBDImage) })
		ospec.Subsystems[0].Namespaces = append(ospec.Subsystems[0].Namespaces,
			Namespace{NSID: 3, Backend: BackendRBD, Pool: cephPool, Image: benchRBDImage, Size: benchNSSize})
		env.librbdConf = filepath.Join(env.dir, "librbd-ceph.conf")
		conf, err := os.ReadFile(cephConf)
		if err == nil {
			err = os.WriteFile(env.librbdConf, append(conf, "\n[client]\nrbd cache = false\n"...), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		res.Ceph = strings.TrimSpace(string(mustRun(t, cmdTimeout, "ceph", "--version")))
		res.Peers = append(res.Peers, bench.TargetLibRBD)
		res.Notes = append(res.Notes, "nvmeof-tgt ran as its rbd build (bin/nvmeof-tgt-rbd) in every job. The rbd jobs ran on one "+
			"image of the guest's one-node Ceph cluster (memstore OSD), in turn through nvmeof-tgt (namespace 3) and through fio's "+
			"rbd engine (librbd in fio's process, ioengine=rbd, the same job otherwise), both with librbd's cache off. "+
			"The kernel host, Soft-RoCE and the target share the guest's vCPUs with the OSD, which librbd in fio does not: "+
			"compare the rbd jobs with the raw link measured in the same run.")
	}
	// pprof: measureAllocs reads the exact allocation count from the heap profile.
	tgtOpts = append(tgtOpts, withDir(filepath.Join(env.dir, "tgt")), withEnv("NVMEOF_TGT_METRICS_PPROF=true"))
	env.ours, _ = startTgt(t, ospec, tgtOpts...)
	nsids := []uint32{1, 2}
	if withRBD {
		nsids = append(nsids, 3)
	}
	oc := h.mustConnectPort(t, ospec.Subsystems[0].NQN, benchPortOurs, nsids...)
	env.devs = map[string]map[string]string{
		bench.TargetOurs: {"memory": oc.blockDev(t, 1), "file": oc.blockDev(t, 2)},
	}
	if withRBD {
		env.devs[bench.TargetOurs][bench.BackendRBD] = oc.blockDev(t, 3)
	}
	if slices.Contains(peers, bench.TargetKernel) {
		k := &kernelTarget{dir: filepath.Join(env.dir, "kernel"), nativeFile: true}
		k.Start(t, kspec)
		kc := h.mustConnectPort(t, kspec.Subsystems[0].NQN, benchPortKernel, 1, 2)
		env.devs[bench.TargetKernel] = map[string]string{"memory": kc.blockDev(t, 1), "file": kc.blockDev(t, 2)}
	}
	t.Logf("devices: %v", env.devs)

	// Reads must find data, not holes or unallocated null_blk pages.
	prefill := func(dev string) {
		mustRun(t, fioTimeout, "fio", "--name=prefill", "--filename="+dev, "--rw=write",
			"--bs=1m", "--iodepth=16", "--direct=1", "--ioengine=libaio", "--size="+strconv.Itoa(benchNSSize))
	}
	for _, tg := range []string{bench.TargetOurs, bench.TargetKernel} {
		for _, be := range []string{"memory", "file", bench.BackendRBD} {
			if dev, ok := env.devs[tg][be]; ok {
				prefill(dev)
			}
		}
	}

	if slices.Contains(peers, bench.TargetSPDK) {
		dir := os.Getenv("BENCH_SPDK_DIR")
		if dir == "" {
			t.Fatal("BENCH_PEERS has spdk but BENCH_SPDK_DIR is not set (make bench SPDK_DIR=...)")
		}
		env.spdk = &spdkTarget{dir: dir, out: filepath.Join(env.dir, "spdk")}
		env.spdk.Start(t, nqn("bench-spdk"), benchPortSPDK, memNS(1, benchNSSize, 512, ""))
		res.SPDK = env.spdk.Version
		res.Notes = append(res.Notes, "SPDK ran the memory jobs only (a malloc bdev); the file-backend jobs skip it. "+
			"Its reactor polls a vCPU all the time, so between its runs the host disconnects from it and "+
			"the process is stopped (SIGSTOP); each of its runs starts with a fresh connect.")
		sc := h.mustConnectPort(t, env.spdk.nqn, benchPortSPDK, 1)
		prefill(sc.blockDev(t, 1))
		sc.disconnect(t)
		env.spdk.pause(t)
	}

	res.Link = runPerftest(t)

	// Idle: both hosts connected (keep-alives flowing), no I/O.
	const idle = 10 * time.Second
	cpu0 := procCPUTicks(t, env.ours.cmd.Process.Pid)
	time.Sleep(idle)
	cpu1 := procCPUTicks(t, env.ours.cmd.Process.Pid)
	res.IdleSeconds = idle.Seconds()
	res.IdleCPUPercent = float64(cpu1-cpu0) / clockTicks / idle.Seconds() * 100
	t.Logf("idle CPU: %.2f%% of a core over %v", res.IdleCPUPercent, idle)

	for _, j := range jobs {
		targets := append([]string{bench.TargetOurs}, peers...)
		if j.backend == bench.BackendRBD {
			targets = []string{bench.TargetOurs, bench.TargetLibRBD}
		}
		for rep := 1; rep <= env.reps; rep++ {
			for _, tg := range targets {
				var r bench.Run
				switch {
				case tg == bench.TargetLibRBD:
					r = env.runLibRBD(t, j.job, rep)
				case tg != bench.TargetSPDK:
					r = env.runJob(t, tg, j.backend, j.job, rep)
				case j.backend == "memory":
					r = env.runSPDK(t, j.job, rep)
				default:
					continue // SPDK has only a memory namespace
				}
				res.Runs = append(res.Runs, r)
				t.Logf("%s %s/%s #%d: %.0f IOPS %.1f MiB/s p50 %.0fµs p99 %.0fµs", tg, j.backend, j.job, rep,
					r.IOPS, r.BW/mib, r.ClatP50/1e3, r.ClatP99/1e3)
			}
		}
	}

	// Last, so the target is in steady state: its threads, goroutines and pools all warmed up.
	res.Allocs = env.measureAllocs(t)
}

// runSPDK runs a memory job against SPDK: resume it, connect, run, disconnect, pause it.
func (e *benchEnv) runSPDK(t *testing.T, job string, rep int) bench.Run {
	t.Helper()
	e.spdk.resume(t)
	c := e.host.mustConnectPort(t, e.spdk.nqn, benchPortSPDK, 1)
	e.devs[bench.TargetSPDK] = map[string]string{"memory": c.blockDev(t, 1)}
	r := e.runJob(t, bench.TargetSPDK, "memory", job, rep)
	c.disconnect(t)
	e.spdk.pause(t)
	return r
}

// runJob runs deploy/fio/<job>.fio against one target's device.
func (e *benchEnv) runJob(t *testing.T, target, backend, job string, rep int) bench.Run {
	t.Helper()
	return e.runFioJob(t, target, backend, job, rep, filepath.Join(e.fioDir, job+".fio"), "DEV="+e.devs[target][backend])
}

// runLibRBD runs deploy/fio/<job>.fio with fio's rbd engine on the rbd jobs' image instead of
// a block device: librbd in fio's process, the reference the target's rbd namespace is held to.
func (e *benchEnv) runLibRBD(t *testing.T, job string, rep int) bench.Run {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(e.fioDir, job+".fio"))
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(e.dir, "librbd-"+job+".fio")
	if err := os.WriteFile(jobFile, []byte(librbdJob(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	return e.runFioJob(t, bench.TargetLibRBD, bench.BackendRBD, job, rep, jobFile,
		"CEPH_CONF="+e.librbdConf, "RBD_POOL="+cephPool, "RBD_IMAGE="+benchRBDImage)
}

// librbdJob turns a deploy/fio job on ${DEV} into the same job on fio's rbd engine: the
// device and the kernel's I/O engine give way to the image, and direct I/O, which means nothing
// to librbd, goes.
func librbdJob(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		switch strings.TrimSpace(line) {
		case "filename=${DEV}":
			b.WriteString("ioengine=rbd\nclientname=admin\npool=${RBD_POOL}\nrbdname=${RBD_IMAGE}\n")
			continue
		case "ioengine=io_uring", "ioengine=libaio", "direct=1":
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// runFioJob runs a fio job file with env (RUNTIME and RAMP added) and reads its report.
func (e *benchEnv) runFioJob(t *testing.T, target, backend, job string, rep int, jobFile string, env ...string) bench.Run {
	t.Helper()
	report := filepath.Join(e.dir, fmt.Sprintf("%s-%s-%s-%d.json", target, backend, job, rep))
	timeout := time.Duration(e.runtime+e.ramp)*time.Second + 2*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", "--output-format=json", "--output="+report, jobFile)
	cmd.Env = append(append(os.Environ(), env...), "RUNTIME="+strconv.Itoa(e.runtime), "RAMP="+strconv.Itoa(e.ramp))
	cmd.WaitDelay = 5 * time.Second
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fio %s on %s %s: %v\n%s", job, target, backend, err, limit(outb))
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("fio report: %v", err)
	}
	r, err := parseBenchFio(raw)
	if err != nil {
		t.Fatalf("fio report %s: %v", report, err)
	}
	r.Target, r.Backend, r.Job, r.Rep = target, backend, job, rep
	if r.Errors != 0 || r.IOs == 0 {
		t.Errorf("fio %s on %s %s: error %d, %d I/Os", job, target, backend, r.Errors, r.IOs)
	}
	return r
}

// benchFio is the part of fio's JSON report the benchmark reads.
type benchFio struct {
	Jobs []struct {
		Error int           `json:"error"`
		Read  benchFioStats `json:"read"`
		Write benchFioStats `json:"write"`
	} `json:"jobs"`
}

type benchFioStats struct {
	IOPS     float64 `json:"iops"`
	BW       float64 `json:"bw_bytes"`
	TotalIOs uint64  `json:"total_ios"`
	Clat     struct {
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// parseBenchFio sums a group-reported fio run; latency percentiles come from the direction
// that did the most I/O.
func parseBenchFio(raw []byte) (bench.Run, error) {
	// fio may print notes before the JSON document.
	if i := strings.IndexByte(string(raw), '{'); i > 0 {
		raw = raw[i:]
	}
	var rep benchFio
	if err := json.Unmarshal(raw, &rep); err != nil {
		return bench.Run{}, err
	}
	if len(rep.Jobs) != 1 {
		return bench.Run{}, fmt.Errorf("%d job reports, want 1 (group_reporting)", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	lat := j.Read
	if j.Write.TotalIOs > j.Read.TotalIOs {
		lat = j.Write
	}
	return bench.Run{
		IOPS: j.Read.IOPS + j.Write.IOPS, BW: j.Read.BW + j.Write.BW,
		ClatP50: lat.Clat.Percentile["50.000000"], ClatP99: lat.Clat.Percentile["99.000000"],
		IOs: j.Read.TotalIOs + j.Write.TotalIOs, Errors: j.Error,
	}, nil
}

// measureAllocs counts nvmeof-tgt's heap allocations across two fio runs that cover both data
// directions and both backends, against the same span idle; I/Os are the target's own
// per-namespace counts. The count is runtime.MemStats.Mallocs, exact, read through the heap
// profile at all four points (heapMallocs): go_memstats_mallocs_total books small allocations
// only when a span is refilled, so its differences are off by up to a span's objects.
func (e *benchEnv) measureAllocs(t *testing.T) *bench.AllocRun {
	t.Helper()
	ops := func() uint64 { v, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_namespace_ops_total"); return uint64(v) }

	job := "memory/randread-4k-qd32 + file/randwrite-4k-qd32"
	start := time.Now()
	o0 := ops()
	m0 := heapMallocs(t)
	e.runJob(t, bench.TargetOurs, "memory", "randread-4k-qd32", 0)
	e.runJob(t, bench.TargetOurs, "file", "randwrite-4k-qd32", 0)
	if _, ok := e.devs[bench.TargetOurs][bench.BackendRBD]; ok {
		// librbd's completions too, reaped by the pollers.
		e.runJob(t, bench.TargetOurs, bench.BackendRBD, "randwrite-4k-qd32", 0)
		job += " + rbd/randwrite-4k-qd32"
	}
	m1 := heapMallocs(t)
	o1 := ops()
	span := time.Since(start)

	i0 := heapMallocs(t)
	time.Sleep(span)
	i1 := heapMallocs(t)

	a := bench.NewAllocRun(job, o1-o0, m1-m0, i1-i0)
	noise := ""
	if a.Noise() {
		noise = " (below the idle baseline: noise)"
	}
	t.Logf("allocations: %d during %d I/Os, %d idle over the same %v: %.4f per I/O%s",
		a.Allocs, a.IOs, a.IdleAllocs, span.Round(time.Second), a.AllocsPerIO, noise)
	return a
}

// heapURL is the target's heap profile in text, which ends with runtime.MemStats (the bench's
// target serves pprof: metrics.pprof).
const heapURL = "http://127.0.0.1:9771/debug/pprof/heap?debug=1"

// heapMallocs is the target's runtime.MemStats.Mallocs: every heap allocation so far.
func heapMallocs(t *testing.T) uint64 {
	t.Helper()
	resp, err := http.Get(heapURL)
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile: %s, %v (is metrics.pprof on?)", resp.Status, err)
	}
	n, err := bench.ParseMallocs(string(body))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// perftestTimeout bounds each perftest client and server run.
const perftestTimeout = 2 * time.Minute

// runPerftest measures the raw link with perftest over rdma_cm on the lab's rxe device: the
// server and the client are both in this guest, on the same address.
func runPerftest(t *testing.T) []bench.LinkRun {
	t.Helper()
	dev := os.Getenv("LAB_RDMA_DEV")
	var out []bench.LinkRun
	for _, c := range []struct {
		tool string
		size int
		args []string
	}{
		{"ib_read_bw", 128 * kib, []string{"-D", "5"}},
		{"ib_write_bw", 128 * kib, []string{"-D", "5"}},
		{"ib_send_lat", 64, []string{"-n", "2000"}},
	} {
		args := append([]string{"-d", dev, "-R", "-F", "-s", strconv.Itoa(c.size)}, c.args...)
		// The server is killed once its time is up, so that one that never sees its client,
		// or hangs (ib_send_lat has), cannot hang the benchmark.
		ctx, cancel := context.WithTimeout(context.Background(), perftestTimeout)
		srv := exec.CommandContext(ctx, c.tool, args...)
		srv.WaitDelay = 5 * time.Second
		var srvOut bytes.Buffer
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start(); err != nil {
			cancel()
			t.Fatalf("%s server: %v", c.tool, err)
		}
		time.Sleep(2 * time.Second)
		cli, err := runOut(perftestTimeout, c.tool, append(args, labAddr)...)
		serr := srv.Wait()
		killed := ctx.Err() != nil
		cancel()
		if killed {
			t.Fatalf("%s server still running after %v, killed (client: %v)\n%s\nserver:\n%s", c.tool, perftestTimeout, err, cli, limit(srvOut.Bytes()))
		}
		if serr != nil {
			t.Logf("%s server: %v\n%s", c.tool, serr, limit(srvOut.Bytes()))
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.tool, err, cli)
		}
		r, err := parsePerftest(c.tool, cli)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.tool, err, cli)
		}
		r.Size = c.size
		t.Logf("%s %d B: %.1f MiB/s, latency p50 %.1fµs p99 %.1fµs", c.tool, c.size, r.BW/mib, r.LatP50/1e3, r.LatP99/1e3)
		out = append(out, r)
	}
	return out
}

// parsePerftest reads the result line of a perftest client: for _bw tools "#bytes #iterations
// BW-peak BW-average MsgRate" (MB/sec, perftest's MB being 2^20 bytes), for _lat tools
// "#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%" (µs).
func parsePerftest(tool, text string) (bench.LinkRun, error) {
	r := bench.LinkRun{Tool: tool}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue
		}
		num := func(i int) (float64, error) {
			if i >= len(f) {
				return 0, fmt.Errorf("result line %q: no field %d", sc.Text(), i)
			}
			return strconv.ParseFloat(f[i], 64)
		}
		if strings.HasSuffix(tool, "_bw") {
			avg, err := num(3)
			if err != nil {
				return r, err
			}
			r.BW = avg * mib
			return r, nil
		}
		typ, err := num(4)
		if err != nil {
			return r, err
		}
		p99, err := num(7)
		if err != nil {
			return r, err
		}
		r.LatP50, r.LatP99 = typ*1e3, p99*1e3
		return r, nil
	}
	return r, fmt.Errorf("no result line")
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on every Linux arch Go runs on).
const clockTicks = 100

// procCPUTicks is a process's user plus system CPU time, in clock ticks.
func procCPUTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("cpu time: %v", err)
	}
	// The command name may hold spaces; fields after it start at ") ".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("cpu time: bad /proc/%d/stat: %q", pid, s)
	}
	return ut + st
}

func memTotalMiB() int {
	for _, line := range strings.Split(readSys("/proc/meminfo"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return int(math.Round(float64(kb) / 1024))
		}
	}
	return 0
}

func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}
