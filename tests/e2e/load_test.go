//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoad's shape: loadHosts host NQNs, each with its own subsystem and controller of
// loadIOQueues I/O queues, all held at once; the target has room for exactly their queues.
const (
	loadHosts    = 64
	loadIOQueues = 4
	loadDepth    = 32 // every queue's depth, and the target's rdma.max_queue_depth
	loadNSSize   = 1 * mib
	// loadConnectors is how many nvme connects (and disconnects) run at once.
	loadConnectors = 3
)

// loadSizing is the rdma configuration TestLoad gives the target (environment overrides), small
// enough for the guest's memory and for one poller's completion queue: each queue takes
// depth·(1+RDMA operations of MDTS) entries of it, and depth more without a shared receive
// queue (rdma/listener.go admit), of at most 65536 (rdma/poller.go).
type loadSizing struct {
	maxQueues, depth        int
	icd, mdts, ioUnit, pool int64
}

func newLoadSizing() loadSizing {
	return loadSizing{maxQueues: loadHosts * (1 + loadIOQueues), depth: loadDepth,
		icd: 8 * kib, mdts: 128 * kib, ioUnit: 64 * kib, pool: 16 * mib}
}

func (s loadSizing) env() []string {
	return []string{
		"NVMEOF_TGT_RDMA_MAX_QUEUES=" + strconv.Itoa(s.maxQueues),
		"NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=" + strconv.Itoa(s.depth),
		"NVMEOF_TGT_RDMA_IN_CAPSULE_DATA_SIZE=" + strconv.FormatInt(s.icd, 10),
		"NVMEOF_TGT_RDMA_MDTS=" + strconv.FormatInt(s.mdts, 10),
		"NVMEOF_TGT_RDMA_IO_UNIT_SIZE=" + strconv.FormatInt(s.ioUnit, 10),
		"NVMEOF_TGT_RDMA_BUFFER_POOL_SIZE=" + strconv.FormatInt(s.pool, 10),
	}
}

// maxRegistered is the most the RDMA transport may register with s (one region, mapped with
// MAP_POPULATE: resident from the start): without a shared receive queue, for each of
// max_queues queue blocks depth command capsules of 64 bytes, their in-capsule data and
// 2·depth responses of 16 bytes, then the data buffer pool; each part aligned, to the page or
// the io unit. With an SRQ the blocks hold only their responses, and the receive buffers are
// the pollers' (limits.RDMASRQDepth each): less.
func (s loadSizing) maxRegistered() int64 {
	b, d := int64(s.maxQueues), int64(s.depth)
	return b*d*(64+s.icd+2*16) + s.pool + 3*s.ioUnit
}

// Allowances of rssBound beyond what the configuration registers and the namespaces hold.
const (
	// loadPerQueue is a queue's share of everything else: its QP's send and receive rings
	// (Soft-RoCE maps them into the process), the rdma and fabric request slots (2·depth each)
	// and the controller's state.
	loadPerQueue = 128 * kib
	// loadBase is the process without queues: the Go runtime and heap, the binary's pages, the
	// completion queue and io_uring, libibverbs.
	loadBase = 96 * mib
)

// rssBound is the most resident memory the target may have with registered bytes
// registered, nsBytes of namespaces in memory, and queues queues connected. Everything
// TestLoad asserts on memory comes from here.
func rssBound(registered, nsBytes int64, queues int) int64 {
	return registered + nsBytes + int64(queues)*loadPerQueue + loadBase
}

// TestLoad holds loadHosts hosts × loadIOQueues I/O queues at once, each host running a short
// fio verify on its namespace while all are connected, and checks that: the target's resident
// memory stays within what its configuration implies (rssBound); a connection past
// rdma.max_queues is refused by the CM with the NVMe/RDMA status "no resources", which the host
// logs; once hosts leave, a new host connects and does I/O. The first and last hosts' connect
// times and fio latencies are written to load.txt in the test's results directory.
func TestLoad(t *testing.T) {
	requireTgt(t, "sized through nvmeof-tgt's rdma.* configuration")
	sz := newLoadSizing()
	spec := Spec{Port: rdmaPort()}
	for i := range loadHosts + 1 { // one more subsystem for the host that comes later
		spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn(fmt.Sprintf("load-%02d", i)),
			AllowAnyHost: true, Namespaces: []Namespace{memNS(1, loadNSSize, 512, "")}})
	}
	p, dir := startTgt(t, spec, withEnv(sz.env()...))
	// The queue counts of the host: -i is capped at the guest's CPUs, write queues are not. A
	// keep-alive timeout of 30 s, not the host's 5: in the emulated guest, 64 hosts leaving at
	// once kept keep-alives waiting past 5 s, and their controllers went into error recovery.
	qflags := []string{"-i", strconv.Itoa(loadIOQueues / 2), "-W", strconv.Itoa(loadIOQueues - loadIOQueues/2),
		"-Q", strconv.Itoa(loadDepth), "-k", "30"}

	// The first host connects alone and the last with every other host held; those two are
	// timed. The ones between connect a few at a time: the kernel creates one controller at a
	// time anyway (nvmf_dev_mutex), but nvme-cli, udev and the namespace scan overlap.
	start := time.Now()
	hosts := make([]host, loadHosts+1)
	ctrls := make([]*controller, loadHosts)
	for i := range hosts {
		hosts[i] = newHost(t)
	}
	connect := func(i int) error {
		c, err := hosts[i].connectWith(t, spec.Subsystems[i].NQN, portRDMA, qflags...)
		if err != nil {
			return fmt.Errorf("host %d of %d: connect: %w", i+1, loadHosts, err)
		}
		ctrls[i] = c
		return nil
	}
	if err := connect(0); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, loadHosts)
	work := make(chan int)
	for range loadConnectors {
		go func() {
			for i := range work {
				errs <- connect(i)
			}
		}()
	}
	for i := 1; i < loadHosts-1; i++ {
		work <- i
	}
	close(work)
	for range loadHosts - 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if err := connect(loadHosts - 1); err != nil {
		t.Fatal(err)
	}
	devs := make([]string, loadHosts)
	for i, c := range ctrls {
		if n, _ := readSysUint(filepath.Join("/sys/class/nvme", c.name, "queue_count")); n != 1+loadIOQueues {
			t.Fatalf("host %d: %s has %d queues, want %d", i+1, c.name, n, 1+loadIOQueues)
		}
		devs[i] = c.blockDev(t, 1)
	}
	connected := time.Since(start)
	m := scrapeMetrics(t)
	if q, _ := metricSum(m, "nvmeof_tgt_queues"); q != float64(sz.maxQueues) {
		t.Fatalf("target reports %v queues with every host connected, want %d", q, sz.maxQueues)
	}

	// Every host verifies its namespace at once, in one fio run of one job per host. Without
	// disk utilisation statistics (not read here): fio finds each job's sysfs directory by
	// walking every directory under /sys/block, and the 64 walks took 30 s of a run whose jobs
	// moved data for 6.
	report := filepath.Join(dir, "fio-load.json")
	args := []string{"--ioengine=libaio", "--direct=1", "--disk_util=0", "--rw=randwrite", "--bs=16k", "--iodepth=8",
		"--size=" + strconv.Itoa(loadNSSize), "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
		"--verify_state_save=0", "--output-format=json", "--output=" + report}
	for i, d := range devs {
		args = append(args, fmt.Sprintf("--name=h%02d", i+1), "--filename="+d)
	}
	stop, rssPeak := make(chan struct{}), make(chan int64, 1)
	go func() { // sampled while every queue moves data
		var peak int64
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := processRSS(p.cmd.Process.Pid); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-stop:
				rssPeak <- peak
				return
			case <-tick.C:
			}
		}
	}()
	r := run(t, fioTimeout, "fio", args...)
	close(stop)
	peak := <-rssPeak
	raw, _ := os.ReadFile(report)
	if r.err != nil {
		t.Fatalf("fio on %d hosts: %v\n%s", loadHosts, r.err, limit(raw))
	}
	jobs := loadJobs(t, raw)
	for i, j := range jobs {
		if j.Error != 0 || j.Write.IOBytes != loadNSSize || j.Read.IOBytes != loadNSSize {
			t.Errorf("host %d: fio error %d, wrote %d and verified %d bytes; want 0, %d, %d",
				i+1, j.Error, j.Write.IOBytes, j.Read.IOBytes, loadNSSize, loadNSSize)
		}
	}

	reg, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_registered_bytes")
	registered := int64(reg)
	if registered <= 0 || registered > sz.maxRegistered() {
		t.Errorf("the target registered %d bytes, want some, at most the %d of max_queues=%d blocks with their own receive buffers",
			registered, sz.maxRegistered(), sz.maxQueues)
	}
	bound := rssBound(registered, loadHosts*loadNSSize, sz.maxQueues)
	if peak == 0 {
		t.Fatal("no resident memory sample of the target")
	}
	if peak > bound {
		t.Errorf("target resident memory %d MiB with %d queues, above the %d MiB its configuration implies (registered %d MiB)",
			peak>>20, sz.maxQueues, bound>>20, registered>>20)
	}

	// One connection more than rdma.max_queues: the CM refuses it, and the host says why.
	late := loadHosts
	hosts[late] = newHost(t)
	mark := dmesgLen(t)
	if c, err := hosts[late].connectWith(t, spec.Subsystems[late].NQN, portRDMA, qflags...); err == nil {
		c.disconnect(t)
		t.Fatalf("host %d connected past rdma.max_queues=%d", late+1, sz.maxQueues)
	}
	const noRsc = "nvme status 6 (resource not found)" // NVME_RDMA_CM_NO_RSC, in the host's words
	if msg := dmesgSince(t, mark); !strings.Contains(msg, noRsc) {
		t.Errorf("the host's log after the refused connect lacks %q:\n%s", noRsc, tail([]byte(msg), 10))
	}
	if n, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_connections_total", `event="rejected"`); n < 1 {
		t.Errorf("rdma_connections_total{event=\"rejected\"} = %v after a refused connection, want >= 1", n)
	}

	// Two hosts leave; the late one now connects and does I/O.
	for _, c := range ctrls[:2] {
		c.disconnect(t)
	}
	want := float64(sz.maxQueues - 2*(1+loadIOQueues))
	if err := waitFor(30*time.Second, func() bool {
		q, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_queues_live")
		return q == want
	}); err != nil {
		t.Fatalf("RDMA queues after two hosts left: want %v: %v", want, err)
	}
	c, err := hosts[late].connectWith(t, spec.Subsystems[late].NQN, portRDMA, qflags...)
	if err != nil {
		t.Fatalf("a new host cannot connect once others left: %v", err)
	}
	runFio(t, c.blockDev(t, 1), dir, fioCase{rw: "randwrite", bs: 16 * kib, iodepth: 8, size: loadNSSize})

	first, last := jobs[0], jobs[loadHosts-1]
	lat := func(j fioJob) float64 { return (j.Write.ClatNS.Mean + j.Read.ClatNS.Mean) / 2 / 1e3 }
	summary := fmt.Sprintf("hosts %d × %d I/O queues (%d queues, depth %d) held together; all connected in %v\n"+
		"connect: host 1 %v, host %d %v (%.2fx)\n"+
		"fio mean completion latency (write, verify read averaged): host 1 %.0fus, host %d %.0fus (%.2fx)\n"+
		"target RSS peak %d MiB, bound %d MiB (%.2f of it; registered %d MiB)\n",
		loadHosts, loadIOQueues, sz.maxQueues, loadDepth, connected.Round(time.Millisecond),
		ctrls[0].took.Round(time.Millisecond), loadHosts, ctrls[loadHosts-1].took.Round(time.Millisecond),
		float64(ctrls[loadHosts-1].took)/float64(ctrls[0].took),
		lat(first), loadHosts, lat(last), lat(last)/lat(first),
		peak>>20, bound>>20, float64(peak)/float64(bound), registered>>20)
	t.Log(summary)
	// Everyone leaves, a few at a time (the cleanups would, one by one), through sysfs: nvme-cli
	// 2.3 scans the whole topology for a disconnect, and two at once crashed it (double free).
	work = make(chan int)
	done := make(chan struct{})
	for range loadConnectors {
		go func() {
			for i := range work {
				deleteController(t, ctrls[i])
			}
			done <- struct{}{}
		}()
	}
	for i := range ctrls {
		work <- i
	}
	close(work)
	for range loadConnectors {
		<-done
	}
	if err := os.WriteFile(filepath.Join(dir, "load.txt"), []byte(summary), 0o644); err != nil {
		t.Error(err)
	}
}

// fioJob is one job of a fio JSON report, with what TestLoad compares.
type fioJob struct {
	Jobname string `json:"jobname"`
	Error   int    `json:"error"`
	Read    struct {
		IOBytes uint64 `json:"io_bytes"`
		ClatNS  struct {
			Mean float64 `json:"mean"`
		} `json:"clat_ns"`
	} `json:"read"`
	Write struct {
		IOBytes uint64 `json:"io_bytes"`
		ClatNS  struct {
			Mean float64 `json:"mean"`
		} `json:"clat_ns"`
	} `json:"write"`
}

// loadJobs parses the report of TestLoad's fio run: one job per host, in order.
func loadJobs(t *testing.T, raw []byte) []fioJob {
	t.Helper()
	var rep struct {
		Jobs []fioJob `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("fio report: %v", err)
	}
	if len(rep.Jobs) != loadHosts {
		t.Fatalf("fio report has %d jobs, want %d", len(rep.Jobs), loadHosts)
	}
	for i, j := range rep.Jobs {
		if want := fmt.Sprintf("h%02d", i+1); j.Jobname != want {
			t.Fatalf("fio job %d is %q, want %q", i, j.Jobname, want)
		}
	}
	return rep.Jobs
}

// processRSS is pid's resident set (VmRSS) in bytes.
func processRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * kib, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// dmesgLen is how long the kernel log is now, for dmesgSince.
func dmesgLen(t *testing.T) int { return len(mustRun(t, cmdTimeout, "dmesg")) }

// dmesgSince is what the kernel logged after mark.
func dmesgSince(t *testing.T, mark int) string {
	out := mustRun(t, cmdTimeout, "dmesg")
	if mark > len(out) { // the ring buffer wrapped
		mark = 0
	}
	return string(out[mark:])
}

// deleteController removes c through the kernel's delete_controller attribute and waits for it
// to go; safe to run for several controllers at once.
func deleteController(t *testing.T, c *controller) {
	if c.gone {
		return
	}
	c.gone = true
	dir := filepath.Join("/sys/class/nvme", c.name)
	if err := os.WriteFile(filepath.Join(dir, "delete_controller"), []byte("1"), 0o200); err != nil {
		t.Errorf("delete %s: %v", c.name, err)
		return
	}
	if err := waitFor(deviceTimeout, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}); err != nil {
		t.Errorf("%s still there %v after delete_controller", c.name, deviceTimeout)
	}
}

// TestHostConnectionCap: controller.max_connections_per_host bounds the queues one host NQN may
// hold over all its controllers. With a cap of 2, a host holding a controller of one I/O queue
// (2 queues) cannot create a second controller: the target refuses its admin Connect with
// Controller Busy, counted in nvmeof_tgt_connect_host_limit_total. Another host NQN is not
// affected, and once the first host's controller is gone it connects again.
func TestHostConnectionCap(t *testing.T) {
	requireTgt(t, "the kernel's nvmet has no per-host cap")
	spec := Spec{Port: rdmaPort()}
	for _, name := range []string{"cap-a", "cap-b"} {
		spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn(name), AllowAnyHost: true,
			Namespaces: []Namespace{memNS(1, loadNSSize, 512, "")}})
	}
	startTgt(t, spec, withEnv("NVMEOF_TGT_CONTROLLER_MAX_CONNECTIONS_PER_HOST=2"))
	a, b := newHost(t), newHost(t)
	one := []string{"-i", "1", "-W", "0", "-P", "0"}
	subA, subB := spec.Subsystems[0].NQN, spec.Subsystems[1].NQN

	first, err := a.connectWith(t, subA, portRDMA, one...)
	if err != nil {
		t.Fatalf("host a, first controller (2 queues, the cap): %v", err)
	}
	before, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_connect_host_limit_total")
	if c, err := a.connectWith(t, subB, portRDMA, one...); err == nil {
		c.disconnect(t)
		t.Fatal("host a connected a second controller past its cap of 2 queues")
	}
	after, found := metricSum(scrapeMetrics(t), "nvmeof_tgt_connect_host_limit_total")
	if !found || after < before+1 {
		t.Fatalf("nvmeof_tgt_connect_host_limit_total %v -> %v (found %v), want one more refusal", before, after, found)
	}

	// Another host is not held to a's count, and does I/O.
	other, err := b.connectWith(t, subB, portRDMA, one...)
	if err != nil {
		t.Fatalf("host b, under its own cap: %v", err)
	}
	capWriteRead(t, other, 1)

	// a's queues are released with its controller: it connects again. (To subA: nvme-cli
	// takes b's controller of subB, same address, for a's and says "already connected".)
	first.disconnect(t)
	// The target releases a's places as it tears the queues down, just after the host has
	// gone: wait for b's 2 queues to be all that is left.
	if err := waitFor(15*time.Second, func() bool {
		v, ok := metricSum(scrapeMetrics(t), "nvmeof_tgt_queues")
		return ok && v == 2
	}); err != nil {
		t.Fatalf("a's queues not released: %v", err)
	}
	second, err := a.connectWith(t, subA, portRDMA, one...)
	if err != nil {
		t.Fatalf("host a after its first controller left: %v", err)
	}
	capWriteRead(t, second, 2)
	second.disconnect(t)
	other.disconnect(t)
	waitTornDown(t)
}
