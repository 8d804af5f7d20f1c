//go:build e2e

package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
// connected plainly, with header and data digests, and with SQ flow control disabled (reads
// answered by their data alone, C2HData's SUCCESS flag).
func TestTCPConnectFio(t *testing.T) {
	requireTgt(t, "NVMe/TCP ports in the harness's target configuration")
	requireNVMeTCP(t)
	h := newHost(t)
	sub := nqn("tcp")
	spec := Spec{Port: Port{Transport: "tcp", Address: labAddr, Service: portTCP}, Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{fileNS(t, 1, 64*mib, 512, ""), memNS(2, 64*mib, 4096, "")},
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
		dataOnly bool // reads answered by C2HData with SUCCESS, no response capsule
	}{
		{"plain", nil, false},
		{"digests", []string{"--hdr-digest", "--data-digest"}, false},
		{"sqflow-disabled", []string{"--disable-sqflow"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dataOnly()
			c, err := h.connectOver(t, "tcp", sub, portTCP, tc.flags...)
			if err != nil {
				t.Fatalf("nvme connect -t tcp: %v", err)
			}
			for _, nsid := range []uint32{1, 2} {
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
