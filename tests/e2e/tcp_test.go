//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// portTCP is the NVMe/TCP port of the TCP tests, apart from the RDMA one.
const portTCP = 4430

// requireNVMeTCP loads the kernel's NVMe/TCP host, which the lab guest has as a module.
func requireNVMeTCP(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("modprobe", "nvme-tcp").CombinedOutput(); err != nil {
		t.Fatalf("modprobe nvme-tcp: %v: %s", err, out)
	}
}

// TestTCPConnectFio serves a subsystem on an NVMe/TCP port and runs the kernel's NVMe/TCP host
// against it: the discovery log over TCP (TRTYPE tcp, SQ flow control disable supported), then
// fio with crc32c verification at 4 KiB QD32, 128 KiB and 1 MiB, on file and memory namespaces,
// and on a block one (a loop device) with digests on and off, connected plainly, with header and
// data digests, and with SQ flow control disabled (reads answered by their data alone,
// C2HData's SUCCESS flag).
func TestTCPConnectFio(t *testing.T) {
	requireTgt(t, "NVMe/TCP ports in the harness's target configuration")
	requireNVMeTCP(t)
	h := newHost(t)
	sub := nqn("tcp")
	spec := Spec{Port: Port{Transport: "tcp", Address: labAddr, Service: portTCP}, Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{fileNS(t, 1, 64*mib, 512, ""), memNS(2, 64*mib, 4096, ""), blockNS(t, 3, 64*mib, 4096)},
	}}}
	_, dir := startTarget(t, spec)

	var log discoveryLog
	nvmeJSON(t, &log, append(append([]string{"discover"}, fabricFlagsOver("tcp", portTCP)...), h.flags()...)...)
	found := false
	for _, r := range log.Records {
		if r.Subnqn != sub {
			continue
		}
		found = true
		if r.Trtype != "tcp" || r.Adrfam != "ipv4" || r.Traddr != labAddr || r.Trsvcid != strconv.Itoa(portTCP) {
			t.Errorf("discovery record %+v: want tcp ipv4 %s:%d", r, labAddr, portTCP)
		}
		if !strings.Contains(r.Treq, "sq flow control disable supported") {
			t.Errorf("treq %q: want SQ flow control disable supported", r.Treq)
		}
	}
	if !found {
		t.Fatalf("no discovery record for %s: %+v", sub, log.Records)
	}

	dataOnly := func() float64 {
		v, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_tcp_data_only_reads_total")
		return v
	}
	for _, tc := range []struct {
		name     string
		flags    []string
		nsids    []uint32
		dataOnly bool // reads answered by C2HData with SUCCESS, no response capsule
	}{
		{"plain", nil, []uint32{1, 2, 3}, false},
		{"digests", []string{"--hdr-digest", "--data-digest"}, []uint32{1, 2, 3}, false},
		{"sqflow-disabled", []string{"--disable-sqflow"}, []uint32{1, 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dataOnly()
			c, err := h.connectOver(t, "tcp", sub, portTCP, tc.flags...)
			if err != nil {
				t.Fatalf("nvme connect -t tcp: %v", err)
			}
			for _, nsid := range tc.nsids {
				dev := c.blockDev(t, nsid)
				for _, fc := range []fioCase{
					{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib},
					{rw: "write", bs: 128 * kib, iodepth: 4, size: 16 * mib},
					{rw: "write", bs: mib, iodepth: 2, size: 16 * mib},
				} {
					runFio(t, dev, dir, fc)
				}
			}
			c.disconnect(t)
			if n := dataOnly() - before; (n > 0) != tc.dataOnly {
				t.Errorf("%v reads answered by their data alone, want some: %v", n, tc.dataOnly)
			}
		})
	}
	m := scrapeMetrics(t)
	for _, name := range []string{"nvmeof_tgt_tcp_digest_errors_total", "nvmeof_tgt_tcp_termination_requests_total", "nvmeof_tgt_tcp_data_timeouts_total", "nvmeof_tgt_tcp_send_timeouts_total"} {
		if v, found := metricSum(m, name); !found || v != 0 {
			t.Errorf("%s = %v (found %v), want 0", name, v, found)
		}
	}
}

// pathIOs is the reads and writes the host completed through its path to namespace nsid by
// controller ctrl (/sys/block/nvmeXcYnZ/stat), 0 while it has no such path.
func pathIOs(ctrl string, nsid uint32) uint64 {
	d := pathBlock(ctrl, nsid)
	if d == "" {
		return 0
	}
	f := strings.Fields(readSys(filepath.Join("/sys/block", d, "stat")))
	if len(f) < 5 {
		return 0
	}
	r, _ := strconv.ParseUint(f[0], 10, 64)
	w, _ := strconv.ParseUint(f[4], 10, 64)
	return r + w
}

// TestTCPANAFailover: one subsystem on an RDMA port and a TCP port, listed by discovery over
// either transport with both; the Linux host's native multipath has a path over each, ANA
// optimized through RDMA and non-optimized through TCP. Under fio verify at 4 KiB and 128 KiB,
// the states are swapped through the API (I/O moves to TCP), swapped back (to RDMA), the RDMA
// port is removed (to TCP, the one path left) and added back (to RDMA): no I/O fails, and each
// time the host's I/O goes through the optimized path or the only live one.
func TestTCPANAFailover(t *testing.T) {
	requireTgt(t, "ANA states set through nvmeof-tgt's API, an RDMA and a TCP port")
	requireNVMeTCP(t)
	h := newHost(t)
	sub := nqn("tcp-ana")
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 0, ""), fileNS(t, 2, 64*mib, 0, "")},
	}}})
	p.setPorts(t, fmt.Sprintf("ports:\n"+
		"  - {id: 1, transport: rdma, address: %q, port: %d}\n"+
		"  - {id: 2, transport: tcp, address: %q, port: %d, ana_groups: {1: non-optimized}}\n",
		labAddr, portRDMA, labAddr, portTCP))

	for _, tr := range []struct {
		transport string
		port      int
	}{{"rdma", portRDMA}, {"tcp", portTCP}} {
		var log discoveryLog
		nvmeJSON(t, &log, append(append([]string{"discover"}, fabricFlagsOver(tr.transport, tr.port)...), h.flags()...)...)
		got := map[string]bool{}
		for _, r := range log.Records {
			if r.Subnqn == sub {
				got[r.Trtype+":"+r.Trsvcid] = true
			}
		}
		if want := []string{fmt.Sprintf("rdma:%d", portRDMA), fmt.Sprintf("tcp:%d", portTCP)}; !got[want[0]] || !got[want[1]] || len(got) != 2 {
			t.Errorf("discovery over %s lists %s through %v, want %v", tr.transport, sub, got, want)
		}
	}

	ctrls := []string{mpConnectOver(t, h, "rdma", sub, labAddr, portRDMA), mpConnectOver(t, h, "tcp", sub, labAddr, portTCP)}
	onRDMA := [3]map[uint32]string{{1: "optimized", 2: "optimized"}, {1: "non-optimized", 2: "non-optimized"}}
	onTCP := [3]map[uint32]string{{1: "non-optimized", 2: "non-optimized"}, {1: "optimized", 2: "optimized"}}
	waitPathStates(t, "at connect", ctrls, onRDMA, 10*time.Second)
	dev1, dev2 := headDev(t, sub, 1), headDev(t, sub, 2)

	const runtime = 50 * time.Second
	start := time.Now()
	fios := []<-chan error{mpFio(t, dev1, dir, 4096, runtime), mpFio(t, dev2, dir, 128<<10, runtime)}
	ios := func() (n [2]uint64) {
		for i, c := range ctrls {
			n[i] = pathIOs(c, 1) + pathIOs(c, 2)
		}
		return n
	}
	// expect checks that the host's I/O goes through path want (0 RDMA, 1 TCP) for a few
	// seconds, once what the other path had in flight has completed.
	names := [2]string{"RDMA", "TCP"}
	expect := func(phase string, want int) {
		t.Helper()
		time.Sleep(time.Second)
		a := ios()
		time.Sleep(4 * time.Second)
		b := ios()
		var d [2]uint64
		for i := range d {
			if b[i] > a[i] {
				d[i] = b[i] - a[i]
			}
		}
		t.Logf("%s: %d I/Os through RDMA, %d through TCP in 4 s", phase, d[0], d[1])
		if d[want] == 0 || 20*d[1-want] > d[want] {
			t.Errorf("%s: %d I/Os through RDMA and %d through TCP, want them through %s (fio runs %v from %v ago)",
				phase, d[0], d[1], names[want], runtime, time.Since(start).Round(time.Second))
		}
	}
	ana := func(port, state string) { p.ctl(t, "port", "ana", "set", port, "1", state) }

	time.Sleep(2 * time.Second)
	expect("RDMA optimized", 0)
	ana("2", "optimized")
	ana("1", "non-optimized")
	waitPathStates(t, "TCP optimized", ctrls, onTCP, anaFollows)
	expect("TCP optimized", 1)
	ana("1", "optimized")
	ana("2", "non-optimized")
	waitPathStates(t, "RDMA optimized again", ctrls, onRDMA, anaFollows)
	expect("RDMA optimized again", 0)
	rdmaFlags := []string{"--transport", "rdma", "--address", labAddr, "--port", strconv.Itoa(portRDMA)}
	p.ctl(t, append([]string{"port", "remove"}, rdmaFlags...)...)
	expect("RDMA port removed", 1)
	p.ctl(t, append([]string{"port", "add", "--id", "1"}, rdmaFlags...)...)
	if err := waitFor(30*time.Second, func() bool { return ctrlState(ctrls[0]) == "live" }); err != nil {
		t.Fatalf("the RDMA path did not come back: %s is %s", ctrls[0], ctrlState(ctrls[0]))
	}
	waitPathStates(t, "RDMA port back", ctrls, onRDMA, 10*time.Second)
	expect("RDMA port back", 0)
	for _, ch := range fios {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
}

// reserveHugepages reserves n 2 MiB hugepages and mounts hugetlbfs where none is, as SPDK's
// DPDK needs, until the test ends.
func reserveHugepages(t *testing.T, n int) {
	t.Helper()
	const nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	before := strings.TrimSpace(readSys(nr))
	if before == "" {
		before = "0"
	}
	if err := writeAttr(nr, strconv.Itoa(n)); err != nil {
		t.Fatalf("hugepages: %v", err)
	}
	t.Cleanup(func() { _ = writeAttr(nr, before) })
	if got, _ := strconv.Atoi(strings.TrimSpace(readSys(nr))); got < n {
		t.Fatalf("hugepages: %d of %d reserved", got, n)
	}
	if strings.Contains(readSys("/proc/mounts"), " hugetlbfs ") {
		return
	}
	if err := os.MkdirAll("/dev/hugepages", 0o755); err != nil {
		t.Fatalf("hugetlbfs: %v", err)
	}
	mustRun(t, cmdTimeout, "mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages")
	t.Cleanup(func() { _ = runQuiet(cmdTimeout, "umount", "/dev/hugepages") })
}

var spdkPerfTotal = regexp.MustCompile(`(?m)^Total\s*:\s*([0-9.]+)\s+([0-9.]+)`)

// withTCPPort adds a TCP port (portTCP on the lab's address) to the harness's configuration y,
// after its RDMA one: a second host of the guest connects through it, since nvme-cli refuses a
// second controller of a subsystem through the same address and port, whatever the host NQN.
func withTCPPort(y string) string {
	return strings.Replace(y, "subsystems:\n", fmt.Sprintf("  - {transport: \"tcp\", address: %q, port: %d}\nsubsystems:\n", labAddr, portTCP), 1)
}
