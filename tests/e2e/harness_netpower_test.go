//go:build e2e && netlab

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// Helpers of the power tests (net_power_test.go): a power cut ordered by a command other than
// the harness (fio's trigger runs `labnet order`), a guest left off as the lab started it, the
// kernel initiator of another guest, and the statistics of this guest's path to a namespace.

// labnetBin is the launcher's binary, built beside the test binary (tests/lab/e2e-net.sh): in
// the driver, `labnet order GUEST kill` cuts a guest's power from a script.
func labnetBin(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(filepath.Dir(exe), "labnet")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("labnet beside the test binary: %v", err)
	}
	return p
}

// lostPower records that g's power was cut by an order the harness did not send (fio's trigger
// running labnet): as after powerKill, the test's end boots it again if the test has not.
func (g *labGuest) lostPower(t *testing.T) {
	t.Helper()
	g.remote(t)
	g.mu.Lock()
	g.off = true
	g.mu.Unlock()
	t.Logf("power cut: %s (by fio's trigger)", g.name)
	t.Cleanup(func() {
		if g.isOff() {
			g.boot(t)
			g.waitUp(t)
		}
	})
}

// powerOff cuts g's power and leaves it off: for a guest the lab starts off (target2), as the
// tests after this one expect it.
func (g *labGuest) powerOff(t *testing.T) {
	t.Helper()
	g.remote(t)
	ctx, cancel := context.WithTimeout(context.Background(), powerTimeout)
	defer cancel()
	if _, err := netlab.RequestPower(ctx, g.lab.power, g.name, netlab.PowerKill); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.off = true
	g.mu.Unlock()
	t.Logf("power cut: %s (left off)", g.name)
}

// remoteCtrl is a controller that the kernel initiator of another guest made by connecting.
type remoteCtrl struct {
	g      *labGuest
	h      host
	subnqn string
	name   string // nvmeN, in g
	boot   string // g's boot it was made in
	gone   bool   // disconnected: its name may be another controller's now
}

// connectFrom connects g's kernel initiator, as host h, to subnqn at addr; the test's end
// disconnects it unless g has lost power since.
func connectFrom(t *testing.T, g *labGuest, h host, addr, subnqn string, port int, extra ...string) *remoteCtrl {
	t.Helper()
	args := append([]string{"nvme", "connect"}, fabricFlagsAt(addr, port)...)
	args = append(args, "-n", subnqn)
	args = append(args, h.flags()...)
	args = append(args, extra...)
	args = append(args, fmt.Sprintf("--ctrl-loss-tmo=%d", int(h.ctrlLossTmo().Seconds())),
		fmt.Sprintf("--reconnect-delay=%d", int(reconnectDelay.Seconds())))
	g.mustRun(t, connectTimeout, args...)
	out := g.sh(t, `for c in /sys/class/nvme/nvme*; do
  [ "$(cat "$c/subsysnqn")" = "$1" ] && [ "$(cat "$c/hostnqn")" = "$2" ] && echo "${c##*/}"
done; true`, subnqn, h.NQN)
	names := strings.Fields(string(out))
	if len(names) != 1 {
		t.Fatalf("%s: after connect to %s as %s, controllers %v: want one", g, subnqn, h.NQN, names)
	}
	c := &remoteCtrl{g: g, h: h, subnqn: subnqn, name: names[0], boot: g.currentBoot()}
	t.Cleanup(func() {
		if c.gone || g.isOff() || g.currentBoot() != c.boot {
			return
		}
		_ = g.exec(cmdTimeout, "nvme", "disconnect", "-d", c.name)
	})
	t.Logf("%s: connected %s to %s at %s as %s", g, h.NQN, subnqn, addr, c.name)
	return c
}

// disconnect disconnects the controller.
func (c *remoteCtrl) disconnect(t *testing.T) {
	t.Helper()
	c.g.mustRun(t, cmdTimeout, "nvme", "disconnect", "-d", c.name)
	c.gone = true
}

// blockDev waits for the disk of nsid in the controller's subsystem and returns its /dev path.
func (c *remoteCtrl) blockDev(t *testing.T, nsid uint32) string {
	t.Helper()
	var dev string
	err := waitFor(deviceTimeout, func() bool {
		r := c.g.exec(cmdTimeout, "sh", "-c", `for d in /sys/block/nvme*; do
  n=${d##*/}
  case $n in *c*) continue;; esac
  [ "$(cat "$d/device/subsysnqn" 2>/dev/null)" = "$1" ] && [ "$(cat "$d/nsid" 2>/dev/null)" = "$2" ] &&
    [ "$(cat "$d/size")" != 0 ] && [ -b "/dev/$n" ] && echo "/dev/$n"
done; true`, "sh", c.subnqn, strconv.FormatUint(uint64(nsid), 10))
		f := strings.Fields(string(r.stdout))
		if r.err == nil && len(f) == 1 {
			dev = f[0]
			return true
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s: no disk for %s nsid %d after %v", c.g, c.subnqn, nsid, deviceTimeout)
	}
	return dev
}

// nvme runs an nvme-cli command on the controller for namespace 1: args[0] is the command.
func (c *remoteCtrl) nvme(t *testing.T, args ...string) cmdResult {
	t.Helper()
	return c.g.run(t, cmdTimeout, append([]string{"nvme", args[0], "/dev/" + c.name, "-n", "1"}, args[1:]...)...)
}

// ok runs an nvme-cli command that must succeed.
func (c *remoteCtrl) ok(t *testing.T, args ...string) {
	t.Helper()
	if r := c.nvme(t, args...); r.err != nil {
		t.Fatalf("%s: nvme %s as %s: %v", c.g, strings.Join(args, " "), c.h.NQN, r)
	}
}

// pathDir is the sysfs directory of the disk through which this guest's controller ctrl
// reaches namespace nsid: the per-path disk (nvmeXcYnZ) under native multipath, else the
// namespace's disk. Its statistics count what went to that controller.
func pathDir(t *testing.T, ctrl string, nsid uint32) string {
	t.Helper()
	ents, _ := filepath.Glob(filepath.Join("/sys/class/nvme", ctrl, "nvme*n*"))
	for _, d := range ents {
		if n, err := readSysUint(filepath.Join(d, "nsid")); err == nil && uint32(n) == nsid {
			if _, err := os.Stat(filepath.Join(d, "stat")); err == nil {
				return d
			}
		}
	}
	t.Fatalf("no disk of nsid %d under /sys/class/nvme/%s (found %v)", nsid, ctrl, ents)
	return ""
}

// diskStat is what a disk's stat file counts (Documentation/block/stat.rst).
type diskStat struct {
	writes, inflight, flushes uint64
}

func readDiskStat(t *testing.T, dir string) diskStat {
	t.Helper()
	f := strings.Fields(readSys(filepath.Join(dir, "stat")))
	if len(f) < 17 {
		t.Fatalf("%s/stat: %d fields, want 17 (a kernel with flush counts)", dir, len(f))
	}
	n := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("%s/stat field %d: %q", dir, i+1, f[i])
		}
		return v
	}
	// Fields 5 (write I/Os), 9 (in flight) and 16 (flush I/Os).
	return diskStat{writes: n(4), inflight: n(8), flushes: n(15)}
}

// fioJobReport is what a fio JSON report says of one job.
type fioJobReport struct {
	Error int `json:"error"`
	Read  struct {
		TotalIOs uint64 `json:"total_ios"`
	} `json:"read"`
	Write struct {
		TotalIOs uint64 `json:"total_ios"`
	} `json:"write"`
}

// readFioReport reads a fio JSON report: each job by name.
func readFioReport(t *testing.T, path string) map[string]fioJobReport {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("fio report: %v", err)
	}
	var rep struct {
		Jobs []struct {
			Name string `json:"jobname"`
			fioJobReport
		} `json:"jobs"`
	}
	if err := json.Unmarshal(fioJSON(raw), &rep); err != nil {
		t.Fatalf("fio report %s: %v\n%s", path, err, limit(raw))
	}
	out := map[string]fioJobReport{}
	for _, j := range rep.Jobs {
		out[j.Name] = j.fioJobReport
	}
	return out
}

// waitHolds waits up to bound for cond (waitFor) and returns how long it took to hold, and
// whether it did.
func waitHolds(bound time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	err := waitFor(bound, cond)
	return time.Since(start), err == nil
}
