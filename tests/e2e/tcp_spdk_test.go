//go:build e2e && spdk

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTCPSPDKHost: SPDK's NVMe/TCP host (spdk_nvme_identify and spdk_nvme_perf of SPDK_DIR, a
// tree tests/bench/spdk-build.sh built) against the TCP port: identify reads the controller and
// its namespace; perf runs 4 KiB random reads and writes with header and data digests, then
// 128 KiB writes, with no command failed. It is built with the tag spdk only, since SPDK is no
// part of the CI machine (building it takes longer than the suite):
//
//	E2E_TAGS="e2e spdk" SPDK_DIR=DIR tests/lab/e2e.sh -test.run TestTCPSPDKHost
//
// and fails without SPDK_DIR.
func TestTCPSPDKHost(t *testing.T) {
	requireTgt(t, "SPDK's host against nvmeof-tgt's TCP port")
	spdk := os.Getenv("SPDK_DIR")
	if spdk == "" {
		t.Fatal("SPDK_DIR is not set: build SPDK with tests/bench/spdk-build.sh; tests/lab/e2e.sh passes SPDK_DIR to the guest")
	}
	identify, perf := filepath.Join(spdk, "build/bin/spdk_nvme_identify"), filepath.Join(spdk, "build/bin/spdk_nvme_perf")
	for _, b := range []string{identify, perf} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("SPDK_DIR=%s: %v (build it with tests/bench/spdk-build.sh)", spdk, err)
		}
	}
	sub := nqn("tcp-spdk")
	_, dir := startTgt(t, Spec{Port: Port{Transport: "tcp", Address: labAddr, Service: portTCP}, Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 0, "")},
	}}})
	reserveHugepages(t, 256)
	trid := fmt.Sprintf("trtype:TCP adrfam:IPv4 traddr:%s trsvcid:%d subnqn:%s", labAddr, portTCP, sub)
	save := func(name string, r cmdResult) {
		_ = os.WriteFile(filepath.Join(dir, name), []byte(r.String()), 0o644)
	}

	r := run(t, 2*time.Minute, identify, "-r", trid, "-d", "256")
	save("spdk_nvme_identify.txt", r)
	if r.err != nil {
		t.Fatalf("spdk_nvme_identify: %v", r.err)
	}
	for _, want := range []string{"Subsystem NQN: *" + regexp.QuoteMeta(sub), "Model Number: *nvmeof-tgt", "Namespace ID:1\n"} {
		if !regexp.MustCompile(want).Match(r.stdout) {
			t.Errorf("spdk_nvme_identify shows no %q (spdk_nvme_identify.txt)", want)
		}
	}

	for _, c := range []struct {
		name string
		args []string
	}{
		{"randrw-4k-digests", []string{"-q", "16", "-o", "4096", "-w", "randrw", "-M", "50", "-t", "5", "-H", "-I"}},
		{"write-128k", []string{"-q", "4", "-o", "131072", "-w", "write", "-t", "3"}},
	} {
		r := run(t, 2*time.Minute, perf, append([]string{"-r", trid, "-s", "256", "-c", "0x1"}, c.args...)...)
		save("spdk_nvme_perf-"+c.name+".txt", r)
		m := spdkPerfTotal.FindSubmatch(r.stdout)
		switch {
		case r.err != nil:
			t.Errorf("spdk_nvme_perf %s: %v", c.name, r.err)
		case strings.Contains(string(r.stdout)+string(r.stderr), "with error"):
			t.Errorf("spdk_nvme_perf %s: commands failed (spdk_nvme_perf-%s.txt)", c.name, c.name)
		case m == nil || string(m[1]) == "0.00":
			t.Errorf("spdk_nvme_perf %s: no I/O done (spdk_nvme_perf-%s.txt)", c.name, c.name)
		default:
			t.Logf("spdk_nvme_perf %s: %s IOPS, %s MiB/s", c.name, m[1], m[2])
		}
	}
}
