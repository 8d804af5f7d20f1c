//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRBD: an RBD image of the guest's Ceph cluster served by nvmeof-tgt-rbd. The target
// creates the image (without exclusive-lock, so that several gateways may write it); the
// kernel host writes and verifies it with fio, its I/O on the pollers' rings (rbd_aio_*,
// no namespace worker); `rbd resize` from another client and `ns resize` through the API
// reach the host's block device by the Namespace Attribute Changed notice; a discard and a
// zero-out read back as zeroes; and bad input (a missing pool, a missing image with no size,
// an unreachable cluster, an image with exclusive-lock) is refused with what is wrong, by
// config validate, serve and the API, while the target keeps serving what it served.
func TestRBD(t *testing.T) {
	requireTgt(t, "the rbd backend is nvmeof-tgt's")
	bin := needRBDBin(t)
	needCeph(t)
	h := newHost(t)
	sub := nqn("rbd")
	ns := rbdNS(t, 1, 64*mib)
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{ns}}}},
		withBinary(bin))
	info := imageInfo(t, ns.Image)
	if info.Size != 64*mib || slices.Contains(info.Features, "exclusive-lock") {
		t.Fatalf("the image the target created: %+v; want 64 MiB without exclusive-lock", info)
	}
	c := h.mustConnect(t, sub, 1)
	dev := c.blockDev(t, 1)
	sectors := func() int64 {
		n, _ := readSysUint(filepath.Join("/sys/block", filepath.Base(dev), "size"))
		return int64(n) * 512
	}
	serving := func(what string) {
		t.Helper()
		want := pattern(ddBlock, 77)
		ddWrite(t, dev, 0, want)
		checkSame(t, what+": the namespace still served", 0, ddRead(t, dev, 0, ddBlock), want)
	}

	t.Run("fio verify", func(t *testing.T) {
		count := func() (ring, rw float64) {
			m := scrapeMetrics(t)
			ring, _ = metricSum(m, "nvmeof_tgt_rdma_io_uring_requests_total")
			r, _ := metricSum(m, "nvmeof_tgt_namespace_ops_total", `op="read"`)
			w, _ := metricSum(m, "nvmeof_tgt_namespace_ops_total", `op="write"`)
			return ring, r + w
		}
		ring0, rw0 := count()
		runFio(t, dev, dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib})
		runFio(t, dev, dir, fioCase{rw: "write", bs: 128 * kib, iodepth: 8, size: 32 * mib})
		// Every read and write went on a poller's ring (rbd_aio_*), none to the
		// namespace's workers.
		ring1, rw1 := count()
		if rw1-rw0 < 2*32*mib/(128*kib) || ring1-ring0 < rw1-rw0 {
			t.Errorf("%.0f reads and writes, %.0f requests on the pollers' rings: want every one there", rw1-rw0, ring1-ring0)
		}
	})

	t.Run("resize", func(t *testing.T) {
		follows := func(what string, size int64) {
			t.Helper()
			start := time.Now()
			if err := waitFor(10*time.Second, func() bool { return sectors() == size }); err != nil {
				t.Fatalf("%s: the host's %s is %d bytes, want %d", what, dev, sectors(), size)
			}
			t.Logf("%s: the host sees %d MiB after %v", what, size/mib, time.Since(start).Round(time.Millisecond))
		}
		// From another client, as an operator or another gateway would: no API call.
		rbdResize(t, ns.Image, 96*mib)
		follows("rbd resize", 96*mib)
		want := pattern(ddBlock, 5)
		ddWrite(t, dev, 96*mib-ddBlock, want)
		checkSame(t, "the new end", 96*mib-ddBlock, ddRead(t, dev, 96*mib-ddBlock, ddBlock), want)
		// Through the API: the image grows.
		p.ctl(t, "ns", "resize", sub, "1", "128MiB")
		follows("ns resize", 128*mib)
		if got := imageInfo(t, ns.Image).Size; got != 128*mib {
			t.Fatalf("after ns resize the image is %d bytes, want 128 MiB", got)
		}
	})

	t.Run("discard and write zeroes", func(t *testing.T) {
		m0 := scrapeMetrics(t)
		data := pattern(16*ddBlock, 9)
		ddWrite(t, dev, 4*mib, data)
		// blkdiscard is Dataset Management (deallocate), -z Write Zeroes; both within an
		// object (4 MiB), whose partial discard librbd would skip by default.
		mustRun(t, cmdTimeout, "blkdiscard", "-o", strconv.Itoa(4*mib+ddBlock), "-l", strconv.Itoa(2*ddBlock), dev)
		mustRun(t, cmdTimeout, "blkdiscard", "-z", "-o", strconv.Itoa(4*mib+8*ddBlock), "-l", strconv.Itoa(3*ddBlock), dev)
		want := append([]byte(nil), data...)
		clear(want[ddBlock : 3*ddBlock])
		clear(want[8*ddBlock : 11*ddBlock])
		checkSame(t, "after blkdiscard and blkdiscard -z", 4*mib, ddRead(t, dev, 4*mib, len(data)), want)
		m1 := scrapeMetrics(t)
		for _, op := range []string{"deallocate", "write_zeroes"} {
			a, _ := metricSum(m0, "nvmeof_tgt_namespace_ops_total", `op="`+op+`"`)
			b, _ := metricSum(m1, "nvmeof_tgt_namespace_ops_total", `op="`+op+`"`)
			if b <= a {
				t.Errorf("no %s command reached the namespace (%v to %v)", op, a, b)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		badConf := filepath.Join(dir, "unreachable.conf")
		// A wrong monitor address: nothing answers there.
		if err := os.WriteFile(badConf, []byte("[global]\nmon host = "+labAddr+":1\nauth client required = none\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		locked := rbdNS(t, 2, mib).Image
		rbdCmd(t, "create", "--size", "1M", "--image-feature", "layering,exclusive-lock", cephPool+"/"+locked)
		for _, tc := range []struct {
			name string
			args []string
			says string
		}{
			{"missing pool", []string{"--pool", "no-such-pool", "--image", "x", "--size", "8MiB"}, "pool no-such-pool does not exist"},
			{"missing image, no size", []string{"--pool", cephPool, "--image", "e2e-no-such-image"}, "no size is given to create it with"},
			{"unreachable cluster", []string{"--pool", cephPool, "--image", "x", "--size", "8MiB", "--ceph-conf", badConf}, "no answer within"},
			{"exclusive-lock", []string{"--pool", cephPool, "--image", locked}, "rbd feature disable " + cephPool + "/" + locked + " exclusive-lock"},
		} {
			start := time.Now()
			out, err := p.ctlErr(append([]string{"ns", "add", sub, "--nsid", "2"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: ns add: %v %s; want an error saying %q", tc.name, err, out, tc.says)
			}
			t.Logf("%s: refused after %v: %v", tc.name, time.Since(start).Round(time.Millisecond), err)
			if st := p.status(t); len(st.Subsystems) != 1 || len(st.Subsystems[0].Namespaces) != 1 {
				t.Fatalf("%s: after a refused add, status lists %+v", tc.name, st.Subsystems)
			}
			serving(tc.name)
		}

		// serve: a configuration whose namespace cannot be opened does not start. Its own
		// state_dir: the target serving beside it holds the default one.
		cfg := filepath.Join(dir, "missing-pool.yaml")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`ports: [{transport: rdma, address: %q, port: 4499}]
subsystems: [{nqn: %q, allow_any_host: true, namespaces: [{nsid: 1, pool: no-such-pool, image: x, size: 8MiB}]}]
api: {socket: ""}
metrics: {listen: ""}
state_dir: %q
`, labAddr, nqn("rbd-serve"), filepath.Join(dir, "serve-state"))), 0o600)
		r := execCmd(2*time.Minute, bin, "serve", "--config", cfg)
		if r.err == nil || !strings.Contains(string(r.stderr), "pool no-such-pool does not exist") {
			t.Errorf("serve with a missing pool: %v; want it refused naming the pool:\n%s", r.err, limit(r.stderr))
		}
		// config validate: the default build names the one that serves rbd; the rbd build
		// names a missing key.
		os.WriteFile(cfg, []byte(fmt.Sprintf(`subsystems: [{nqn: %q, allow_any_host: true, namespaces: [{nsid: 1, pool: rbd, image: x}]}]`+"\n", nqn("rbd-serve"))), 0o600)
		if r := execCmd(cmdTimeout, tgtBin, "config", "validate", cfg); r.err == nil || !strings.Contains(string(r.stderr), "nvmeof-tgt-rbd serves RBD images") {
			t.Errorf("config validate of the default build: %v %s", r.err, r.stderr)
		}
		os.WriteFile(cfg, []byte(fmt.Sprintf(`subsystems: [{nqn: %q, allow_any_host: true, namespaces: [{nsid: 1, backend: rbd, pool: rbd}]}]`+"\n", nqn("rbd-serve"))), 0o600)
		if r := execCmd(cmdTimeout, bin, "config", "validate", cfg); r.err == nil || !strings.Contains(string(r.stderr), "image: required for the rbd backend") {
			t.Errorf("config validate of the rbd build: %v %s", r.err, r.stderr)
		}
		serving("after serve and config validate")
	})
}

// rbdUnit is a test binary of a package with rbd code, built with the tag rbd by
// tests/lab/e2e.sh, and the tests of it that need the cluster.
type rbdUnit struct {
	pkg, run, skip string
}

var rbdUnits = []rbdUnit{
	{pkg: "rbd", run: "."},
	// The backend's own tests, and the rbd kind of the Device tests but the slowest in the
	// guest, TestDiscardAndWriteZeroes (TestRBDRing and TestImage zero and discard).
	{pkg: "blockdev", run: "RBD|RoundTrip|RangeErrors|DiscardZeroes|TestClose$|Concurrent|NoAllocs|RingReadWrite",
		skip: "/^(memory|file|file-buffered|file-tmpfs|blockdev-loop)$"},
	{pkg: "fabric", run: "RBD"},
	{pkg: "control", run: "RBD"},
}

// TestRBDUnit runs the unit tests of the rbd build that need a cluster against the guest's
// (NVMEOF_TGT_TEST_CEPH_CONF), so that `make test` runs them. None may skip: with the cluster
// given, a skip is a test that did not run. The packages' binaries run side by side, as go test
// runs packages: each names its own images and groups, and fences only its own clients.
func TestRBDUnit(t *testing.T) {
	requireTgt(t, "unit tests of nvmeof-tgt's rbd build")
	conf := needCeph(t)
	unitDir := envOr("NVMEOF_TGT_RBD_UNIT_DIR", "bin/rbd-unit")
	for _, u := range rbdUnits {
		t.Run(u.pkg, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(unitDir, u.pkg+".test")
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("%v: tests/lab/e2e.sh builds it where librbd-dev is installed (make ceph-deps)", err)
			}
			args := []string{"-test.v", "-test.count=1", "-test.timeout=5m", "-test.run", u.run}
			if u.skip != "" {
				args = append(args, "-test.skip", u.skip)
			}
			r := execCmdEnv(6*time.Minute, []string{"NVMEOF_TGT_TEST_CEPH_CONF=" + conf}, bin, args...)
			os.WriteFile(filepath.Join(testDir(t), "test.log"), r.stdout, 0o644)
			passed, skipped := 0, []string{}
			sc := bufio.NewScanner(strings.NewReader(string(r.stdout)))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				switch {
				case strings.HasPrefix(line, "--- PASS"):
					passed++
				case strings.HasPrefix(line, "--- SKIP"):
					skipped = append(skipped, line)
				}
			}
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", u.pkg, r.err, limit(r.stdout))
			}
			if len(skipped) > 0 || passed == 0 {
				t.Fatalf("%s: %d passed; skipped with a cluster given: %v", u.pkg, passed, skipped)
			}
			t.Logf("%s: %d tests and subtests passed", u.pkg, passed)
		})
	}
}
