//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Scale (issue 21): 1,024 namespaces in one subsystem and 256 subsystems in one target, through
// the kernel host. The namespaces are in memory, 1 MiB each and mapped lazily (the host's
// partition scan touches a few pages of each), so that the 2 GiB guest holds the target, the
// host's disks and both sides' queue pairs.

const (
	scaleNamespaces = 1024 // a full page of the Identify active NSID list (CNS 02h)
	scaleSubsystems = 256
	scaleNSSize     = mib
	// scaleWait bounds how long the host may take to list them all under TCG.
	scaleWait = 5 * time.Minute
)

// scaleConfig is what a target serving 256 subsystems to one host needs beyond the defaults
// (README, "Scale"): a queue block for each admin and I/O queue, and the discovery controller
// (rdma.max_queues); as many connections for one host NQN (controller.max_connections_per_host);
// one I/O queue per controller; and 32-entry queues, which keep the registered memory (a block
// is max_queue_depth × (64 + in_capsule_data_size + 32) bytes) within the guest.
const scaleConfig = `rdma:
  max_queues: 600
  max_queue_depth: 32
  max_io_queues: 1
controller:
  max_connections_per_host: 600
`

// scaleTarget starts nvmeof-tgt in dir with spec and extra, top-level configuration keys added
// to the file, and with pprof on the metrics address (sampleMem collects garbage through it).
func scaleTarget(t *testing.T, dir string, spec Spec, extra string) *tgtProcess {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, _ := startTgt(t, spec, withDir(dir), withEnv("NVMEOF_TGT_METRICS_PPROF=true"),
		withConfigEdit(func(y string) string { return y + extra }))
	return p
}

// scaleNamespaceList is n memory namespaces of scaleNSSize, NSIDs from first.
func scaleNamespaceList(first uint32, n int) []Namespace {
	out := make([]Namespace, n)
	for i := range out {
		out[i] = memNS(first+uint32(i), scaleNSSize, 512, "")
	}
	return out
}

// tgtMem is nvmeof-tgt's memory after a garbage collection.
type tgtMem struct {
	RSS        float64 // process_resident_memory_bytes
	Heap       float64 // go_memstats_heap_alloc_bytes: the live heap
	Goroutines float64
}

func (m tgtMem) String() string {
	g := m.Goroutines
	if g > -0.05 && g < 0.05 {
		g = 0 // not "-0.0"
	}
	return fmt.Sprintf("RSS %s, heap %s, %.1f goroutines", memText(m.RSS), memText(m.Heap), g)
}

func memText(v float64) string {
	if v >= 10*mib || v <= -10*mib {
		return fmt.Sprintf("%.1f MiB", v/mib)
	}
	return fmt.Sprintf("%.1f KiB", v/kib)
}

// sampleMem collects garbage in the target (pprof's heap profile with gc=1) and reads its memory.
func sampleMem(t *testing.T) tgtMem {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("collect garbage: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("collect garbage: %s (metrics.pprof off?)", resp.Status)
	}
	m := scrapeMetrics(t)
	var out tgtMem
	var ok [3]bool
	out.RSS, ok[0] = metricSum(m, "process_resident_memory_bytes")
	out.Heap, ok[1] = metricSum(m, "go_memstats_heap_alloc_bytes")
	out.Goroutines, ok[2] = metricSum(m, "go_goroutines")
	if ok != [3]bool{true, true, true} {
		t.Fatalf("metrics lack the process and Go memory series (found %v)", ok)
	}
	return out
}

// perItem is (after - before) / n for each field.
func perItem(before, after tgtMem, n int) tgtMem {
	d := float64(n)
	return tgtMem{RSS: (after.RSS - before.RSS) / d, Heap: (after.Heap - before.Heap) / d, Goroutines: (after.Goroutines - before.Goroutines) / d}
}

// ---- the host's view ------------------------------------------------------------------------

// headDisks maps the NSIDs of the head disks (nvmeXnY) subsystem subnqn has on the host, with a
// capacity, to their names. One pass over /sys/block.
func headDisks(subnqn string) map[uint32]string {
	out := map[uint32]string{}
	for name, nsid := range blockDevsOf(subnqn) {
		if sz, _ := readSysUint(filepath.Join("/sys/block", name, "size")); sz > 0 {
			out[nsid] = name
		}
	}
	return out
}

// waitDisks waits until the host lists want's NSIDs, and no other, as head disks of subnqn.
func waitDisks(t *testing.T, subnqn string, want []uint32, timeout time.Duration) map[uint32]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := headDisks(subnqn)
		ok := len(got) == len(want)
		for _, id := range want {
			_, has := got[id]
			ok = ok && has
		}
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the host lists %d disks of %s, want %d", timeout, len(got), subnqn, len(want))
		}
		time.Sleep(time.Second)
	}
}

func nsidRange(first uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = first + uint32(i)
	}
	return out
}

var listNSLine = regexp.MustCompile(`(?m)^\[\s*\d+\]:(0x[0-9a-fA-F]+)$`)

// listNS is `nvme list-ns` on a controller: the active NSID list (CNS 02h) of the NSIDs greater
// than after (nvme-cli 2.3 sends -n minus one).
func listNS(t *testing.T, ctrl string, after uint32) []uint32 {
	t.Helper()
	out := mustRun(t, cmdTimeout, "nvme", "list-ns", "/dev/"+ctrl, "-n", strconv.FormatUint(uint64(after)+1, 10))
	var ids []uint32
	for _, m := range listNSLine.FindAllStringSubmatch(string(out), -1) {
		v, err := strconv.ParseUint(m[1], 0, 32)
		if err != nil {
			t.Fatalf("list-ns line %q: %v", m[0], err)
		}
		ids = append(ids, uint32(v))
	}
	return ids
}

// ---- the guest's kernel -----------------------------------------------------------------------

// Kernel tracing is not used here: turning a trace event on or off patches the kernel's text,
// and under QEMU's multi-threaded TCG that once crashed the guest (an int3 oops in
// ttwu_do_activate while an event was turned off). The target's debug log says what it sent.

// eventsSent are the asynchronous event results (completion DW0) nvmeof-tgt logged sending to
// controller cntlid of subnqn ("async event sent", log level debug), from byte from of its log.
func eventsSent(t *testing.T, p *tgtProcess, from int, subnqn string, cntlid uint64) []uint32 {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for _, line := range strings.Split(string(b[min(from, len(b)):]), "\n") {
		if !strings.Contains(line, `msg="async event sent"`) || !strings.Contains(line, "subnqn="+subnqn+" ") ||
			!strings.Contains(line, fmt.Sprintf("cntlid=%d ", cntlid)) {
			continue
		}
		if m := eventResult.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(m[1], 0, 32)
			out = append(out, uint32(v))
		}
	}
	return out
}

var eventResult = regexp.MustCompile(`result=(0x[0-9a-fA-F]+)`)

func logSize(t *testing.T, p *tgtProcess) int {
	t.Helper()
	st, err := os.Stat(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Size())
}

// nsChangedAEN is a Notice (type 2) of Namespace Attribute Changed (info 0) pointing at the
// Changed Namespace List (log page 04h).
const nsChangedAEN = 0x04_00_02

// ---- 1,024 namespaces ------------------------------------------------------------------------

// nsScale is what seeNamespaces measured.
type nsScale struct {
	p    *tgtProcess
	h    host
	sub  string
	spec Spec // as the last reload set it
	ctrl string
	// others are the host's controllers on the early subsystems, by NQN.
	others map[string]string
	// Reload is how long the reload that added the namespaces took.
	Reload time.Duration
	// See is from the start of nvme connect until the host listed every namespace.
	See time.Duration
	// Memory with the subsystem empty, with its namespaces, and with a host connected to it.
	Empty, Loaded, Connected tgtMem
}

// seeNamespaces starts a target in dir whose subsystem sub gets n memory namespaces (NSIDs
// 1..n) by a reload, beside the subsystems of others, then connects a host and waits until it
// lists them. The host connects to those of others named in early first: nvme-cli's connect
// is slow once the host has a thousand namespaces (it opens every one).
func seeNamespaces(t *testing.T, dir, sub string, n int, others []Subsystem, early ...string) *nsScale {
	t.Helper()
	spec := Spec{Port: rdmaPort(), Subsystems: append([]Subsystem{{NQN: sub, AllowAnyHost: true}}, others...)}
	p := scaleTarget(t, dir, spec, "")
	r := &nsScale{p: p, h: newHost(t), sub: sub, spec: spec, others: map[string]string{}}
	for _, o := range early {
		r.others[o], _ = scaleConnect(t, r.h, o)
	}
	r.Empty = sampleMem(t)

	r.spec.Subsystems[0].Namespaces = scaleNamespaceList(1, n)
	r.Reload = r.reload(t)
	r.Loaded = sampleMem(t)
	t.Logf("reload added %d namespaces in %v; target %v (empty: %v): %v per namespace",
		n, r.Reload.Round(time.Millisecond), r.Loaded, r.Empty, perItem(r.Empty, r.Loaded, n))

	start := time.Now()
	var took time.Duration
	r.ctrl, took = scaleConnect(t, r.h, sub)
	waitDisks(t, sub, nsidRange(1, n), scaleWait)
	r.See = time.Since(start)
	r.Connected = sampleMem(t)
	t.Logf("the host lists %d namespaces %v after nvme connect started (connect itself %v); target %v",
		n, r.See.Round(time.Millisecond), took.Round(time.Millisecond), r.Connected)
	return r
}

// scaleConnect connects h to sub with nvme connect and returns the controller. Every controller
// of h is deleted when the test ends, with deleteControllersOf: a thousand namespaces take longer
// to go than the harness's disconnect waits.
func scaleConnect(t *testing.T, h host, sub string) (string, time.Duration) {
	t.Helper()
	raiseFileLimit(t)
	t.Cleanup(func() { deleteControllersOf(t, h.NQN) })
	args := append([]string{"connect"}, fabricFlags()...)
	args = append(args, "-n", sub)
	args = append(args, h.flags()...)
	args = append(args, fmt.Sprintf("--ctrl-loss-tmo=%d", int(ctrlLossTmo.Seconds())),
		fmt.Sprintf("--reconnect-delay=%d", int(reconnectDelay.Seconds())))
	res := run(t, connectTimeout, "nvme", args...)
	ctrls := controllersOf(sub, h.NQN)
	if res.err != nil || len(ctrls) != 1 {
		t.Fatalf("connect %s: %v; controllers %v", sub, res.err, ctrls)
	}
	return ctrls[0], res.took
}

// raiseFileLimit lets nvme-cli, which the test runs, open a descriptor per namespace: libnvme
// 1.3 (nvme-cli 2.3) keeps one open for each namespace of the topology it scans (nvme connect,
// disconnect and list-subsys do), and with over a thousand namespaces the default 1,024 runs
// out ("Too many open files"). The limit stays raised for the rest of the run.
func raiseFileLimit(t *testing.T) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: max(n, old.Max)}); err != nil {
		t.Fatalf("open files limit: %v", err)
	}
}

// reload writes r.spec to the target's configuration file and reloads it.
func (r *nsScale) reload(t *testing.T) time.Duration {
	t.Helper()
	if err := os.WriteFile(r.p.cfgPath, []byte(r.p.configYAML(t, r.spec)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.p.ctl(t, "reload")
	return time.Since(start)
}

// TestScaleNamespaces: a subsystem with 1,024 namespaces, a full page of the active NSID list.
// The host lists every namespace, and a 1,025th draws a Namespace Attribute Changed event and
// appears with no rescan: the host's scan reads the list from 0 and, the first page being full,
// again from 1024, the only way it can learn of NSID 1025. While namespaces come and go on the
// target, another subsystem's host keeps its keep-alives and its I/O.
func TestScaleNamespaces(t *testing.T) {
	subA, subB, subC := nqn("scale-ns"), nqn("scale-ns-other"), nqn("scale-ns-idle")
	requireTgt(t, "it changes namespaces through nvmeof-tgt's API and reads its metrics")
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	r := seeNamespaces(t, dir, subA, scaleNamespaces, []Subsystem{
		{NQN: subB, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 512, "")}},
		{NQN: subC, AllowAnyHost: true}, // no host: changes to it draw no rescan
	}, subB)
	ctrl := r.ctrl

	t.Run("active-list", func(t *testing.T) {
		if got := listNS(t, ctrl, 0); !slices.Equal(got, nsidRange(1, scaleNamespaces)) {
			t.Errorf("list-ns from 0: %d NSIDs (%v ... ), want 1..%d", len(got), got[:min(len(got), 4)], scaleNamespaces)
		}
		if got := listNS(t, ctrl, scaleNamespaces); len(got) != 0 {
			t.Errorf("list-ns after %d: %v, want none", scaleNamespaces, got)
		}
	})

	t.Run("add-1025th", func(t *testing.T) {
		const nsid = scaleNamespaces + 1
		cntlid, err := readSysUint("/sys/class/nvme/" + ctrl + "/cntlid")
		if err != nil {
			t.Fatal(err)
		}
		from := logSize(t, r.p)
		start := time.Now()
		r.p.ctl(t, "ns", "add", subA, "--nsid", strconv.Itoa(nsid), "--backend", "memory", "--size", "1MiB")
		disks := waitDisks(t, subA, nsidRange(1, nsid), deviceTimeout)
		t.Logf("the host lists namespace %d as %s %v after ns add", nsid, disks[nsid], time.Since(start).Round(time.Millisecond))
		if got := eventsSent(t, r.p, from, subA, cntlid); !slices.Equal(got, []uint32{nsChangedAEN}) {
			t.Errorf("events sent to %s (cntlid %d): %#x, want one Namespace Attribute Changed %#x", ctrl, cntlid, got, nsChangedAEN)
		}
		if got := listNS(t, ctrl, scaleNamespaces); !slices.Equal(got, []uint32{nsid}) {
			t.Errorf("list-ns after %d: %v, want [%d]", scaleNamespaces, got, nsid)
		}
		if st := readSys("/sys/class/nvme/" + ctrl + "/state"); st != "live" {
			t.Errorf("controller %s is %s, want live (no reset)", ctrl, st)
		}
	})

	t.Run("churn-beside-other-subsystem", func(t *testing.T) {
		churnBeside(t, r, subB, subC)
	})
}

// churnBeside runs fio on subsystem other while namespaces are added and removed through the
// API: first quiet, then on subsystem idle, which no host uses (what the target does for a
// change), then on r's subsystem, where each change draws an event and its host's rescan of
// over a thousand namespaces (that work too, in the same guest). other's controller stays
// live, no keep-alive expires, and the latencies are logged side by side.
func churnBeside(t *testing.T, r *nsScale, other, idle string) {
	t.Helper()
	ctrl := r.others[other]
	dev := "/dev/" + waitDisks(t, other, []uint32{1}, deviceTimeout)[1]
	dir := testDir(t)
	ka0, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total")

	var states sync.Map // controller states seen
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
				states.Store(readSys("/sys/class/nvme/"+ctrl+"/state"), true)
			}
		}
	}()

	const span = 10 * time.Second
	quiet := fioLatency(t, dev, dir, "quiet", span)
	hostless, n1 := churnDuring(t, r.p, idle, func() fioLat { return fioLatency(t, dev, dir, "churn-hostless", span) })
	hosted, n2 := churnDuring(t, r.p, r.sub, func() fioLat { return fioLatency(t, dev, dir, "churn-hosted", span) })
	close(stopWatch)
	<-watched

	t.Logf("fio on %s, 4 KiB random reads at QD1, %v each:", other, span)
	t.Logf("  quiet: %v", quiet)
	t.Logf("  %d namespace changes on %s (no host): %v", n1, idle, hostless)
	t.Logf("  %d namespace changes on %s (its host rescans %d namespaces each time): %v", n2, r.sub, scaleNamespaces+1, hosted)
	if n1 == 0 || n2 == 0 {
		t.Fatalf("namespace changes: %d and %d, want some in each run", n1, n2)
	}
	var seen []string
	states.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if !slices.Equal(seen, []string{"live"}) {
		t.Errorf("controller %s of %s went through states %v, want live only", ctrl, other, seen)
	}
	if ka, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total"); ka != ka0 {
		t.Errorf("keep-alive expiries went from %v to %v", ka0, ka)
	}
	// Nothing on the target waits for a namespace change, but the guest's two vCPUs run the
	// CLI, the target and the host's rescans too: only a stall of the order of a keep-alive
	// period would be the target's.
	for _, l := range []fioLat{hostless, hosted} {
		if l.Max > 5*time.Second {
			t.Errorf("an I/O on %s took %v while namespaces changed", other, l.Max)
		}
	}
}

// churnDuring adds and removes a namespace of subnqn through the CLI, over and over, while run
// runs, and returns run's result and how many changes were made.
func churnDuring(t *testing.T, p *tgtProcess, subnqn string, run func() fioLat) (fioLat, int) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan error, 1)
	changes := 0
	go func() {
		for nsid := scaleNamespaces + 2; ; nsid++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			id := strconv.Itoa(nsid)
			if _, err := p.ctlErr("ns", "add", subnqn, "--nsid", id, "--backend", "memory", "--size", "1MiB"); err != nil {
				done <- err
				return
			}
			if _, err := p.ctlErr("ns", "remove", subnqn, id); err != nil {
				done <- err
				return
			}
			changes += 2
		}
	}()
	l := run()
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("namespace changes on %s: %v", subnqn, err)
	}
	return l, changes
}

// fioLat is a fio run's completion latencies.
type fioLat struct {
	P50, P99, Max time.Duration
	IOs           uint64
}

func (l fioLat) String() string {
	return fmt.Sprintf("p50 %v p99 %v max %v (%d I/Os)", l.P50, l.P99, l.Max, l.IOs)
}

// fioLatency runs 4 KiB random reads at queue depth 1 on dev for span. Without fio's disk
// utilisation statistics (--disk_util=0, not read here): fio finds the device's sysfs directory
// by walking every directory under /sys/block, which with the scale tests' thousands of disks
// took 20-35 s of the guest's CPU per run.
func fioLatency(t *testing.T, dev, dir, name string, span time.Duration) fioLat {
	t.Helper()
	report := filepath.Join(dir, "fio-"+name+".json")
	mustRun(t, span+fioTimeout, "fio", "--name="+name, "--filename="+dev, "--ioengine=libaio", "--direct=1", "--disk_util=0",
		"--rw=randread", "--bs=4k", "--iodepth=1", "--time_based", "--runtime="+strconv.Itoa(int(span.Seconds())),
		"--output-format=json", "--output="+report)
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep fioReadReport
	if err := json.Unmarshal(fioJSON(raw), &rep); err != nil {
		t.Fatalf("fio report %s: %v", report, err)
	}
	if len(rep.Jobs) != 1 || rep.Jobs[0].Error != 0 || rep.Jobs[0].Read.TotalIOs == 0 {
		t.Fatalf("fio %s: %s", name, limit(raw))
	}
	j := rep.Jobs[0].Read
	ns := func(v float64) time.Duration { return time.Duration(v).Round(time.Microsecond) }
	return fioLat{P50: ns(j.Clat.Percentile["50.000000"]), P99: ns(j.Clat.Percentile["99.000000"]), Max: ns(j.Clat.Max), IOs: j.TotalIOs}
}

// expediteRCU makes the guest kernel's RCU and SRCU grace periods expedited
// (/sys/kernel/rcu_expedited) until the returned function restores the setting: the host's
// work in the scale tests, not the target's. The host removes each namespace of a controller it deletes with several grace periods (SRCU for the
// multipath head, a queue freeze and a quiesce for the path disk and for the head disk, each an
// RCU grace period): a few jiffies each in the TCG guest, so that deleting a controller of over
// a thousand namespaces took two minutes.
func expediteRCU(t *testing.T) func() {
	t.Helper()
	const knob = "/sys/kernel/rcu_expedited"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Logf("RCU grace periods not expedited: %v", err)
		return func() {}
	}
	if err := os.WriteFile(knob, []byte("1"), 0); err != nil {
		t.Logf("RCU grace periods not expedited: %v", err)
		return func() {}
	}
	return func() {
		if err := os.WriteFile(knob, old, 0); err != nil {
			t.Errorf("restoring %s: %v", knob, err)
		}
	}
}

// ---- 256 subsystems ---------------------------------------------------------------------------

// ssScale is what connectSubsystems measured.
type ssScale struct {
	p    *tgtProcess
	h    host
	nqns []string
	// Connect is from the start of nvme connect-all until the host had a live controller and
	// the disk of every subsystem.
	Connect time.Duration
	// Memory before and with the host's controllers.
	Idle, Connected tgtMem
	ctrls           map[string]string // subsystem → controller
}

// scaleSubsystemSpec is n subsystems with one memory namespace each.
func scaleSubsystemSpec(n int) Spec {
	spec := Spec{Port: rdmaPort()}
	for i := 0; i < n; i++ {
		spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn(fmt.Sprintf("scale-ss%03d", i)), AllowAnyHost: true,
			Namespaces: []Namespace{memNS(1, scaleNSSize, 512, "")}})
	}
	return spec
}

// startSubsystems starts a target in dir with n subsystems and the scale configuration.
func startSubsystems(t *testing.T, dir string, n int) *ssScale {
	t.Helper()
	spec := scaleSubsystemSpec(n)
	r := &ssScale{p: scaleTarget(t, dir, spec, scaleConfig), h: newHost(t)}
	for _, ss := range spec.Subsystems {
		r.nqns = append(r.nqns, ss.NQN)
	}
	r.Idle = sampleMem(t)
	return r
}

// connectAll connects the host to every subsystem through the discovery service (nvme
// connect-all, one I/O queue each), and waits for each one's controller and disk. The
// controllers are deleted when the test ends.
func (r *ssScale) connectAll(t *testing.T) {
	t.Helper()
	raiseFileLimit(t)
	t.Cleanup(func() { deleteControllersOf(t, r.h.NQN) })
	// The host makes each controller with queue freezes (RCU grace periods) too.
	defer expediteRCU(t)()
	start := time.Now()
	args := append([]string{"connect-all"}, fabricFlags()...)
	args = append(args, r.h.flags()...)
	args = append(args, "--nr-io-queues=1", fmt.Sprintf("--ctrl-loss-tmo=%d", int(ctrlLossTmo.Seconds())),
		fmt.Sprintf("--reconnect-delay=%d", int(reconnectDelay.Seconds())))
	res := run(t, scaleWait, "nvme", args...)
	if res.err != nil {
		t.Fatalf("nvme connect-all: %v", res.err)
	}
	t.Logf("nvme connect-all returned after %v", res.took.Round(time.Millisecond))
	deadline := time.Now().Add(scaleWait)
	for {
		ctrls, disks := hostView(r.h.NQN)
		missing := 0
		for _, sub := range r.nqns {
			if ctrls[sub] == "" || disks[sub] == 0 {
				missing++
			}
		}
		if missing == 0 {
			r.ctrls = ctrls
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of %d subsystems have no live controller or no disk on the host", scaleWait, missing, len(r.nqns))
		}
		time.Sleep(time.Second)
	}
	r.Connect = time.Since(start)
	r.Connected = sampleMem(t)
	t.Logf("the host has a live controller and the disk of all %d subsystems %v after connect-all started; target %v (before: %v): %v per controller",
		len(r.nqns), r.Connect.Round(time.Millisecond), r.Connected, r.Idle, perItem(r.Idle, r.Connected, len(r.nqns)))
}

// hostView is, in one pass over sysfs, the live controller of host hostnqn on each subsystem
// and the number of head disks of each subsystem.
func hostView(hostnqn string) (ctrls map[string]string, disks map[string]int) {
	ctrls, disks = map[string]string{}, map[string]int{}
	ents, _ := os.ReadDir("/sys/class/nvme")
	for _, e := range ents {
		dir := filepath.Join("/sys/class/nvme", e.Name())
		if readSys(filepath.Join(dir, "hostnqn")) == hostnqn && readSys(filepath.Join(dir, "state")) == "live" {
			ctrls[readSys(filepath.Join(dir, "subsysnqn"))] = e.Name()
		}
	}
	blocks, _ := os.ReadDir("/sys/block")
	for _, e := range blocks {
		if headDisk.MatchString(e.Name()) {
			disks[readSys(filepath.Join("/sys/block", e.Name(), "device", "subsysnqn"))]++
		}
	}
	return ctrls, disks
}

// deleteControllersOf deletes every controller of host hostnqn, as nvme disconnect does
// (delete_controller), many at once.
func deleteControllersOf(t *testing.T, hostnqn string) {
	t.Helper()
	var names []string
	ents, _ := os.ReadDir("/sys/class/nvme")
	for _, e := range ents {
		if readSys(filepath.Join("/sys/class/nvme", e.Name(), "hostnqn")) == hostnqn {
			names = append(names, e.Name())
		}
	}
	defer expediteRCU(t)()
	start := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = os.WriteFile(filepath.Join("/sys/class/nvme", name, "delete_controller"), []byte("1"), 0)
		}()
	}
	wg.Wait()
	err := waitFor(scaleWait, func() bool {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join("/sys/class/nvme", name)); err == nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Errorf("controllers of %s still there %v after deleting them", hostnqn, scaleWait)
	}
	t.Logf("deleted %d controllers in %v", len(names), time.Since(start).Round(time.Millisecond))
}

// TestScaleSubsystems: 256 subsystems in one target. nvme discover lists every one (a 257 KiB
// discovery log, which libnvme reads in 4 KiB pieces), nvme connect-all connects to all of
// them, nvme list-subsys lists them live, and their keep-alives hold.
func TestScaleSubsystems(t *testing.T) {
	requireTgt(t, "it sets nvmeof-tgt's limits and reads its metrics")
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	r := startSubsystems(t, dir, scaleSubsystems)

	t.Run("discover", func(t *testing.T) {
		// The log is 1 KiB of header and 1 KiB per record. libnvme reads the header, then the
		// whole log in 4 KiB pieces at increasing offsets, and checks NUMREC and the
		// generation: every record arriving whole is the target serving each piece right.
		log := r.h.discover(t)
		var got []string
		for _, rec := range log.Records {
			got = append(got, rec.Subnqn)
		}
		slices.Sort(got)
		if !slices.Equal(got, r.nqns) {
			t.Errorf("discovery log: %d records, want one for each of the %d subsystems", len(got), len(r.nqns))
		}
		t.Logf("nvme discover: genctr %d, %d records", log.Genctr, len(log.Records))
	})

	r.connectAll(t)

	t.Run("list-subsys", func(t *testing.T) {
		var v any
		nvmeJSON(t, &v, "list-subsys")
		live := map[string]bool{}
		collectLive(v, live)
		missing := 0
		for _, sub := range r.nqns {
			if !live[sub] {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("nvme list-subsys shows %d of the %d subsystems without a live path", missing, len(r.nqns))
		}
	})

	t.Run("keep-alive", func(t *testing.T) {
		// Two keep-alive timeouts (the host's default is 5 s): every controller is still there.
		time.Sleep(10 * time.Second)
		ctrls, _ := hostView(r.h.NQN)
		for _, sub := range r.nqns {
			if ctrls[sub] != r.ctrls[sub] {
				t.Errorf("%s: live controller %q, was %q", sub, ctrls[sub], r.ctrls[sub])
			}
		}
		if ka, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total"); ka != 0 {
			t.Errorf("%v keep-alive expiries", ka)
		}
	})
}

// collectLive walks `nvme list-subsys -o json` and marks each subsystem NQN that has a live
// path; it does not depend on how nvme-cli nests them.
func collectLive(v any, live map[string]bool) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			collectLive(e, live)
		}
	case map[string]any:
		if nqn, ok := x["NQN"].(string); ok {
			if paths, ok := x["Paths"].([]any); ok {
				for _, p := range paths {
					if m, ok := p.(map[string]any); ok && m["State"] == "live" {
						live[nqn] = true
					}
				}
			}
		}
		for _, e := range x {
			collectLive(e, live)
		}
	}
}
