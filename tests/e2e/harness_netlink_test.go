//go:build e2e && netlab

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Helpers of the link-fault tests (net_link_test.go): one end's carrier, fio jobs that run side
// by side and stop when the test says, the host's traffic per link, and what the remote target
// reports (status, ports, exported rxe counters, RDMA resources).

// cutEnd takes the carrier of g's NIC on the link away (QEMU's set_link on that NIC alone): g
// sees NO-CARRIER and its rxe port goes down, while the other end keeps its carrier and sees
// nothing. Nothing passes either way: QEMU drops what reaches a NIC whose link is down, and g
// sends nothing without a carrier. The test's end gives it back if the test has not.
func (k *labLink) cutEnd(t *testing.T, g *labGuest) {
	t.Helper()
	k.end(t, g)
	t.Cleanup(func() {
		if !g.isOff() {
			if err := k.carrier(g.name, true); err != nil {
				t.Error(err)
			}
		}
	})
	if err := k.carrier(g.name, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("link %s: %s's end cut (no carrier there; the other end keeps its own)", k.Name, g.name)
}

// restoreEnd gives g's NIC on the link its carrier back.
func (k *labLink) restoreEnd(t *testing.T, g *labGuest) {
	t.Helper()
	if err := k.carrier(g.name, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("link %s: %s's end restored", k.Name, g.name)
}

// portActive waits up to d for g's rxe port on the link to be ACTIVE again (after a carrier
// comes back the netdev and then rxe follow, asynchronously).
func (k *labLink) portActive(t *testing.T, g *labGuest, d time.Duration) {
	t.Helper()
	dev := k.rdmaDev(t, g)
	var out string
	err := waitFor(d, func() bool {
		out = string(g.run(t, cmdTimeout, "rdma", "link", "show", dev+"/1").stdout)
		return strings.Contains(out, "state ACTIVE")
	})
	if err != nil {
		t.Fatalf("%s's %s/1 not ACTIVE %v after its carrier came back: %s", g, dev, d, out)
	}
}

// nlJob is one fio job of an nlFio run: time-based random writes on Dev, each block verified
// (crc32c) by a read as fio goes (verify_backlog), within the first Size bytes.
type nlJob struct {
	Name string
	Dev  string
	BS   int
	QD   int
	Size int64
}

// nlJobResult is how one job went.
type nlJobResult struct {
	Name                  string
	Error                 int // fio's errno for the job: 0, or the I/O or verify error that ended it
	WriteBytes, ReadBytes uint64
	Runtime               time.Duration
	MaxLat                time.Duration // the longest read's or write's completion latency: the longest stall
}

// throughput is what the job moved (written and read back) per second of its run.
func (r nlJobResult) throughput() float64 {
	if r.Runtime <= 0 {
		return 0
	}
	return float64(r.WriteBytes+r.ReadBytes) / r.Runtime.Seconds()
}

func (r nlJobResult) String() string {
	return fmt.Sprintf("%s: wrote %.1f MiB, verified %.1f MiB in %v (%.2f MB/s), longest I/O %v, error %d", r.Name,
		float64(r.WriteBytes)/mib, float64(r.ReadBytes)/mib, r.Runtime.Round(time.Millisecond), r.throughput()/1e6,
		r.MaxLat.Round(time.Millisecond), r.Error)
}

// nlFio is a fio run in this guest (the host) of jobs side by side.
type nlFio struct {
	name    string
	cmd     *exec.Cmd
	report  string
	stderr  bytes.Buffer
	done    chan struct{}
	err     error
	stopped atomic.Bool
}

// startNLFio starts the jobs in one fio process, for runtime unless stopped first (stop).
func startNLFio(t *testing.T, dir, name string, runtime time.Duration, jobs ...nlJob) *nlFio {
	t.Helper()
	f := &nlFio{name: name, report: filepath.Join(dir, "fio-"+name+".json"), done: make(chan struct{})}
	args := []string{"--ioengine=libaio", "--direct=1", "--rw=randwrite", "--time_based",
		"--runtime=" + strconv.Itoa(int(runtime.Seconds())), "--verify=crc32c", "--verify_backlog=16",
		"--verify_fatal=1", "--verify_state_save=0", "--output-format=json", "--output=" + f.report}
	for _, j := range jobs {
		args = append(args, "--name="+j.Name, "--filename="+j.Dev, "--bs="+strconv.Itoa(j.BS),
			"--iodepth="+strconv.Itoa(j.QD), "--size="+strconv.FormatInt(j.Size, 10))
	}
	f.cmd = exec.Command("fio", args...)
	f.cmd.Stderr = &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("fio %s: %v", name, err)
	}
	// Never left behind: a test that ends early stops it.
	t.Cleanup(func() {
		select {
		case <-f.done:
		default:
			f.stop()
			select {
			case <-f.done:
			case <-time.After(fioTimeout):
				f.kill()
			}
		}
	})
	go func() {
		f.err = f.cmd.Wait()
		close(f.done)
	}()
	return f
}

// kill kills fio and waits a minute at most for it to go: a process blocked on I/O that the
// host holds with no path (requeued until a path comes back) does not die until it does, and
// the test must end and say so rather than hang.
func (f *nlFio) kill() {
	_ = f.cmd.Process.Kill()
	select {
	case <-f.done:
	case <-time.After(time.Minute):
	}
}

// errFioOverdue is wait's error for a run that did not end in time.
var errFioOverdue = errors.New("overdue")

// stop ends the run as fio's own runtime would: SIGINT makes it finish its jobs and write its
// report (and exit with status 128).
func (f *nlFio) stop() {
	if f.stopped.CompareAndSwap(false, true) {
		_ = f.cmd.Process.Signal(syscall.SIGINT)
	}
}

// wait waits for the run to end and returns each job's result; the error says what failed: fio
// itself, or a job (an I/O or verify error).
func (f *nlFio) wait(t *testing.T, timeout time.Duration) ([]nlJobResult, error) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
		f.stop()
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			f.kill()
		}
		return nil, fmt.Errorf("%w: fio %s still ran %v after it was due to end; stopped", errFioOverdue, f.name, timeout)
	}
	raw, _ := os.ReadFile(f.report)
	var rep struct {
		Jobs []struct {
			Jobname string `json:"jobname"`
			Error   int    `json:"error"`
			Runtime int64  `json:"job_runtime"` // ms
			Read    struct {
				IOBytes uint64 `json:"io_bytes"`
				Clat    struct {
					Max float64 `json:"max"`
				} `json:"clat_ns"`
			} `json:"read"`
			Write struct {
				IOBytes uint64 `json:"io_bytes"`
				Clat    struct {
					Max float64 `json:"max"`
				} `json:"clat_ns"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(fioJSON(raw), &rep); err != nil {
		return nil, fmt.Errorf("fio %s: %v; report %s: %v\n%s\n%s", f.name, f.err, f.report, err, limit(f.stderr.Bytes()), limit(raw))
	}
	var res []nlJobResult
	var failed []string
	for _, j := range rep.Jobs {
		r := nlJobResult{Name: j.Jobname, Error: j.Error, WriteBytes: j.Write.IOBytes, ReadBytes: j.Read.IOBytes,
			Runtime: time.Duration(j.Runtime) * time.Millisecond, MaxLat: time.Duration(max(j.Write.Clat.Max, j.Read.Clat.Max))}
		res = append(res, r)
		t.Logf("fio %s %s", f.name, r)
		if r.Error != 0 || r.WriteBytes == 0 || r.ReadBytes == 0 {
			failed = append(failed, r.String())
		}
	}
	var ee *exec.ExitError
	switch {
	case f.err != nil && !(f.stopped.Load() && errors.As(f.err, &ee) && ee.ExitCode() == 128):
		return res, fmt.Errorf("fio %s: %v: %s\n%s", f.name, f.err, strings.Join(failed, "; "), limit(f.stderr.Bytes()))
	case len(failed) > 0:
		return res, fmt.Errorf("fio %s: %s\n%s", f.name, strings.Join(failed, "; "), limit(f.stderr.Bytes()))
	case len(res) == 0:
		return nil, fmt.Errorf("fio %s: no job in its report\n%s", f.name, limit(raw))
	}
	return res, nil
}

// linkPackets is what g's rxe device dev sent and received (hw_counters sent_pkts + rcvd_pkts).
// In this guest it reads sysfs itself: a command per sample is slow under fio on an emulated CPU.
func linkPackets(t testing.TB, g *labGuest, dev string) uint64 {
	t.Helper()
	if g.agent != nil {
		c := g.rxeCounters(t, dev)
		return c["sent_pkts"] + c["rcvd_pkts"]
	}
	var n uint64
	for _, f := range []string{"sent_pkts", "rcvd_pkts"} {
		p := filepath.Join("/sys/class/infiniband", dev, "ports/1/hw_counters", f)
		v, err := readSysUint(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n += v
	}
	return n
}

// Which link carries the I/O: over a window, the busy link's rxe device moves at least
// ioMinPackets and ioDominance times as many packets as the other's. An idle path only carries
// keep-alives (one command every KATO/2 = 2.5 s: a few packets a second), and fio at any depth
// moves hundreds of packets a second even under emulation, so neither bound is near what is
// measured (the tests log both counts).
const (
	ioWindow     = 2 * time.Second
	ioMinPackets = 200
	ioDominance  = 10
)

// ioOn waits up to d for a window of ioWindow in which the I/O goes over busy rather than idle
// (g's rxe devices), and returns when that window ended; it fails the test if none does.
func ioOn(t *testing.T, what string, g *labGuest, busy, idle string, d time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	var nb, ni uint64
	for {
		b0, i0 := linkPackets(t, g, busy), linkPackets(t, g, idle)
		time.Sleep(ioWindow)
		nb, ni = linkPackets(t, g, busy)-b0, linkPackets(t, g, idle)-i0
		if nb >= ioMinPackets && nb >= ioDominance*ni {
			t.Logf("%s: %d packets on %s, %d on %s in %v", what, nb, busy, ni, idle, ioWindow)
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no window of %v within %v with the I/O on %s: the last had %d packets on %s, %d on %s",
				what, ioWindow, d, busy, nb, busy, ni, idle)
		}
	}
}

// nlConnect connects one path (controller) of subnqn through addr, port 4420, and returns its
// nvmeN, disconnected when the test ends unless it is gone by then. KATO is nlKATO (the Linux
// host's default, stated so that the tests' bounds do not hang on it); after a failure the host
// tries to reconnect every reconnectDelay until ctrlLoss has passed (nvme connect's
// --ctrl-loss-tmo and --reconnect-delay: it makes ctrlLoss/reconnectDelay attempts).
func nlConnect(t *testing.T, h host, subnqn, addr string, ctrlLoss, reconnectDelay time.Duration) string {
	t.Helper()
	before := nvmeControllers()
	args := append([]string{"connect", "-t", "rdma", "-a", addr, "-s", strconv.Itoa(portRDMA), "-n", subnqn}, h.flags()...)
	args = append(args, "--keep-alive-tmo="+strconv.Itoa(int(nlKATO.Seconds())),
		"--ctrl-loss-tmo="+strconv.Itoa(int(ctrlLoss.Seconds())), "--reconnect-delay="+strconv.Itoa(int(reconnectDelay.Seconds())))
	mustRun(t, connectTimeout, "nvme", args...)
	for name := range nvmeControllers() {
		if !before[name] && readSys(filepath.Join("/sys/class/nvme", name, "subsysnqn")) == subnqn {
			t.Cleanup(func() {
				if _, err := os.Stat(filepath.Join("/sys/class/nvme", name)); err == nil {
					_ = runQuiet(cmdTimeout, "nvme", "disconnect", "-d", name)
				}
			})
			t.Logf("connected %s to %s through %s as %s (cntlid %s)", h.NQN, subnqn, addr, name, hostCNTLID(name))
			return name
		}
	}
	t.Fatalf("connect %s through %s: no new controller", subnqn, addr)
	return ""
}

// nlKATO is the keep-alive timeout the tests' hosts ask for.
const nlKATO = 5 * time.Second

// hostCNTLID is the controller ID the host holds for its controller ctrl (nvmeN).
func hostCNTLID(ctrl string) string { return readSys(filepath.Join("/sys/class/nvme", ctrl, "cntlid")) }

// recoveryLines are the lines of the host's kernel log after before that say controller ctrl
// went through error recovery, a reset or a reconnect.
func recoveryLines(before, after, ctrl string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimPrefix(after, before), "\n") {
		if strings.Contains(line, ctrl+":") && kernelRecovery.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// nlCtrl is a controller in the target's `status --json`.
type nlCtrl struct {
	SubNQN   string `json:"subnqn"`
	HostNQN  string `json:"hostnqn"`
	CNTLID   uint16 `json:"cntlid"`
	PortID   uint16 `json:"port_id"`
	IOQueues int    `json:"io_queues"`
}

// controllers is the target's controller list (status --json).
func (p *remoteTgt) controllers(t *testing.T) []nlCtrl {
	t.Helper()
	var st struct {
		Controllers []nlCtrl `json:"controllers"`
	}
	out := p.ctl(t, "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.Controllers
}

// setPortsSection replaces the ports section of the target's configuration file and reloads it.
func (p *remoteTgt) setPortsSection(t *testing.T, ports string) {
	t.Helper()
	replacePorts(t, p.cfgPath, ports)
	p.ctl(t, "reload")
}

// metricLabel is one label of a series as exposed: name="value".
var metricLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// exportedRxe is the hw_counters of the target guest's RDMA device dev (port 1) as the target
// exports them (nvmeof_tgt_rdma_port_stat_total{group="hw_counters"}), by counter name.
func exportedRxe(t *testing.T, m map[string]float64, dev string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for series, v := range m {
		name, lbl, _ := strings.Cut(series, "{")
		if name != "nvmeof_tgt_rdma_port_stat_total" {
			continue
		}
		l := map[string]string{}
		for _, kv := range metricLabel.FindAllStringSubmatch(lbl, -1) {
			l[kv[1]] = kv[2]
		}
		if l["device"] == dev && l["port"] == "1" && l["group"] == "hw_counters" {
			out[l["counter"]] = uint64(v)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the target exports no hw_counters of %s (nvmeof_tgt_rdma_port_stat_total)", dev)
	}
	return out
}

// rdmaResources counts the target's QPs and its connection (not listening) RDMA CM IDs, as the
// target guest's kernel lists them (rdma resource show), and returns those lines. They are the
// target's by command name: the kernel names a resource's thread, and the target's threads are
// many.
func (p *remoteTgt) rdmaResources(t *testing.T) (qps, cmIDs int, lines []string) {
	t.Helper()
	comm := " comm " + filepath.Base(p.bin) + " "
	for _, kind := range []string{"qp", "cm_id"} {
		out := string(p.g.mustRun(t, cmdTimeout, "rdma", "resource", "show", kind))
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line+" ", comm) {
				continue
			}
			switch {
			case kind == "qp":
				// Counted from the devices' totals below: the kernel may list a QP without
				// its creator's command.
			case strings.Contains(line, " state LISTEN "), strings.Contains(line, " dst-addr 0.0.0.0:0"):
				// Listening, or bound to find the device of the port's address: no connection.
				continue
			default:
				cmIDs++
			}
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	qps = p.qpTotal(t) - p.qpBase
	return qps, cmIDs, lines
}

// qpTotal is the number of QPs of every RDMA device of the target's guest, as the kernel
// counts them (rdma resource show: "0: rxea: pd 2 cq 4 qp 3 cm_id 2 ..."), the kernel's own
// (each port's GSI QP) included; qpBase is that number before any host connected.
func (p *remoteTgt) qpTotal(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(string(p.g.mustRun(t, cmdTimeout, "rdma", "resource", "show")), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "qp" {
				v, err := strconv.Atoi(f[i+1])
				if err != nil {
					t.Fatalf("rdma resource show: %q: %v", line, err)
				}
				n += v
			}
		}
	}
	return n
}

// tgtHolds is what the target holds for hosts: its gauges, its status and its RDMA resources.
type tgtHolds struct {
	controllers, queues, rdmaQueues, buffers, srqHeld float64
	statusCtrls, qps, cmIDs                           int
	rdma                                              []string
}

func (h tgtHolds) String() string {
	return fmt.Sprintf("nvmeof_tgt_controllers %v, nvmeof_tgt_queues %v, nvmeof_tgt_rdma_queues_live %v, "+
		"nvmeof_tgt_rdma_buffers_in_use %v, nvmeof_tgt_rdma_srq_held %v; status: %d controllers; rdma resource: %d QPs, %d connection CM IDs",
		h.controllers, h.queues, h.rdmaQueues, h.buffers, h.srqHeld, h.statusCtrls, h.qps, h.cmIDs)
}

// none reports whether the target holds nothing for any host.
func (h tgtHolds) none() bool {
	return h.controllers == 0 && h.queues == 0 && h.rdmaQueues == 0 && h.buffers == 0 && h.srqHeld == 0 &&
		h.statusCtrls == 0 && h.qps == 0 && h.cmIDs == 0
}

// holds reads what the target holds for hosts now.
func (p *remoteTgt) holds(t *testing.T) tgtHolds {
	t.Helper()
	m := p.metrics(t)
	var h tgtHolds
	for _, g := range []struct {
		name string
		v    *float64
	}{{"nvmeof_tgt_controllers", &h.controllers}, {"nvmeof_tgt_queues", &h.queues},
		{"nvmeof_tgt_rdma_queues_live", &h.rdmaQueues}, {"nvmeof_tgt_rdma_buffers_in_use", &h.buffers}} {
		v, ok := metricSum(m, g.name)
		if !ok {
			t.Fatalf("the target exports no %s", g.name)
		}
		*g.v = v
	}
	h.srqHeld, _ = metricSum(m, "nvmeof_tgt_rdma_srq_held") // absent without SRQ
	h.statusCtrls = len(p.controllers(t))
	h.qps, h.cmIDs, h.rdma = p.rdmaResources(t)
	return h
}

// remoteNvmet is the kernel's nvmet in a guest of the network lab: one subsystem that any host
// may reach, on an RDMA port (startRemoteNvmet) or on ports of other transports (addPort), each
// with 8 KiB of in-capsule data as nvmeof-tgt's. Its namespaces are block devices or files of
// that guest: memNvmetDisk makes memory-backed null_blk disks.
type remoteNvmet struct {
	g        *labGuest
	nqn      string
	teardown string
	stopped  bool
}

// stop takes the subsystem and its ports down (the disks stay until the test's end).
func (k *remoteNvmet) stop(t *testing.T) {
	t.Helper()
	if k.stopped {
		return
	}
	k.stopped = true
	if r := k.g.exec(cmdTimeout, "sh", "-c", k.teardown, "sh", k.nqn); r.err != nil {
		t.Errorf("kernel nvmet in %s: take %s down: %v", k.g, k.nqn, r)
	}
}

// startRemoteNvmet configures it in g, namespace i+1 on devs[i], on an RDMA port; the test's
// end takes it down.
func startRemoteNvmet(t *testing.T, g *labGuest, nqn, addr string, port int, devs ...string) *remoteNvmet {
	t.Helper()
	k := startRemoteNvmetSubsystem(t, g, nqn, devs...)
	k.addPort(t, "rdma", addr, port)
	return k
}

// startRemoteNvmetSubsystem configures the subsystem alone, on no port yet.
func startRemoteNvmetSubsystem(t *testing.T, g *labGuest, nqn string, devs ...string) *remoteNvmet {
	t.Helper()
	script := `set -e
nqn=$1; shift
s=/sys/kernel/config/nvmet/subsystems/$nqn
mkdir "$s"; echo 1 >"$s/attr_allow_any_host"
n=0
for d in "$@"; do
  n=$((n + 1)); mkdir "$s/namespaces/$n"; echo "$d" >"$s/namespaces/$n/device_path"; echo 1 >"$s/namespaces/$n/enable"
done`
	// Every port that serves the subsystem goes with it.
	teardown := `nqn=$1; s=/sys/kernel/config/nvmet/subsystems/$nqn
for p in /sys/kernel/config/nvmet/ports/*; do
  [ -L "$p/subsystems/$nqn" ] || continue
  rm -f "$p/subsystems/$nqn"; rmdir "$p"
done
for n in "$s"/namespaces/*; do echo 0 >"$n/enable"; rmdir "$n"; done
rmdir "$s"`
	k := &remoteNvmet{g: g, nqn: nqn, teardown: teardown}
	t.Cleanup(func() { k.stop(t) })
	g.sh(t, script, append([]string{nqn}, devs...)...)
	t.Logf("kernel nvmet in %s: %s, namespaces %v", g, nqn, devs)
	return k
}

// addPort serves the subsystem on a new port of transport ("rdma", "tcp") at addr:port.
func (k *remoteNvmet) addPort(t *testing.T, transport, addr string, port int) {
	t.Helper()
	k.g.mustRun(t, cmdTimeout, "modprobe", "nvmet-"+transport)
	script := `set -e
nqn=$1 trtype=$2 addr=$3 port=$4
id=1; while [ -e /sys/kernel/config/nvmet/ports/$id ]; do id=$((id + 1)); done
p=/sys/kernel/config/nvmet/ports/$id
mkdir "$p"
echo "$trtype" >"$p/addr_trtype"; echo ipv4 >"$p/addr_adrfam"; echo "$addr" >"$p/addr_traddr"; echo "$port" >"$p/addr_trsvcid"
echo 8192 >"$p/param_inline_data_size"
ln -s /sys/kernel/config/nvmet/subsystems/"$nqn" "$p/subsystems/$nqn"`
	k.g.sh(t, script, k.nqn, transport, addr, strconv.Itoa(port))
	t.Logf("kernel nvmet in %s: %s on %s %s:%d", k.g, k.nqn, transport, addr, port)
}

// memNvmetDisk makes a memory-backed null_blk disk of mib MiB named name in g (/dev/name),
// discard on; the test's end removes it.
func memNvmetDisk(t *testing.T, g *labGuest, name string, mib int64) string {
	t.Helper()
	g.mustRun(t, cmdTimeout, "modprobe", "null_blk", "nr_devices=0")
	script := `set -e
b=/sys/kernel/config/nullb/$1
mkdir "$b"
echo 1 >"$b/memory_backed"; echo "$2" >"$b/size"; echo 512 >"$b/blocksize"; echo 1 >"$b/discard"; echo 1 >"$b/power"
for i in $(seq 100); do [ -b "/dev/$1" ] && exit 0; sleep 0.1; done
exit 1`
	t.Cleanup(func() {
		_ = g.exec(cmdTimeout, "sh", "-c", `echo 0 >/sys/kernel/config/nullb/$1/power; rmdir /sys/kernel/config/nullb/$1`, "sh", name)
	})
	g.sh(t, script, name, strconv.FormatInt(mib, 10))
	return "/dev/" + name
}
