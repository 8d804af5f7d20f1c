//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The guest's one-node Ceph cluster (tests/lab/ceph-up.sh: mon, mgr and a memstore OSD on
// 127.0.0.1, auth none, pool "rbd"), started once for every test that needs it and stopped when
// the suite ends (TestMain). Its start takes about a minute of the TCG guest, mostly waiting for
// the mgr and the PGs: when the tests to run include one that needs it (cephTests), TestMain
// starts it in the background, niced, so that the start overlaps the tests before them, and
// needCeph waits for it; otherwise the first needCeph starts it. Clients find it through
// cephConf, the default ceph_conf of rbd namespaces.
const (
	cephConf = "/etc/ceph/ceph.conf"
	cephDir  = "/run/ceph-lab"
	cephPool = "rbd"
	// cephUpTimeout bounds ceph-up.sh, and cephUpSeconds is its own CEPH_TIMEOUT (HEALTH_OK):
	// a start in the background shares the guest's two vCPUs with the tests.
	cephUpTimeout = 8 * time.Minute
	cephUpSeconds = "420"
	// cephNice is the niceness of the background start: the tests it overlaps come first. The
	// daemons get 0 back once a test needs them (renice).
	cephNice   = 5
	rbdTimeout = 2 * time.Minute // one rbd(8) or ceph(8) command
)

// cephTests are the tests that call needCeph, whose selection makes TestMain start the cluster
// early (bench_test.go's rbd jobs start it themselves: nothing runs beside a benchmark).
var cephTests = []string{"TestGatewayGroup", "TestRBD", "TestRBDUnit"}

var ceph struct {
	once     sync.Once
	done     chan struct{} // closed when the start has ended, err and started set
	err      error
	started  bool
	niced    bool
	reniceMu sync.Once
}

// rbdBin is nvmeof-tgt built with librbd (NVMEOF_TGT_RBD_BIN, tests/lab/e2e.sh builds it), the
// binary rbd namespaces need.
var rbdBin = envOr("NVMEOF_TGT_RBD_BIN", "bin/nvmeof-tgt-rbd")

// cephWanted reports whether the tests selected by run (the -test.run pattern, "" for all)
// include one of cephTests. An invalid pattern selects nothing (the test binary says so).
func cephWanted(run string) bool {
	if run == "" {
		return true
	}
	// -test.run matches a top-level test by its first slash-separated element.
	re, err := regexp.Compile(strings.SplitN(run, "/", 2)[0])
	if err != nil {
		return false
	}
	return slices.ContainsFunc(cephTests, re.MatchString)
}

// startCephBackground starts the cluster in the background (TestMain).
func startCephBackground() {
	ceph.once.Do(func() { startCeph(true) })
}

// startCeph runs tests/lab/ceph-up.sh, in a goroutine if background (niced), and closes
// ceph.done when it has ended.
func startCeph(background bool) {
	ceph.done = make(chan struct{})
	up := func() {
		defer close(ceph.done)
		for _, c := range []string{"ceph-mon", "ceph-osd", "ceph-mgr", "ceph", "rbd"} {
			if _, err := exec.LookPath(c); err != nil {
				ceph.err = fmt.Errorf("%s: %w (make ceph-deps installs the cluster's packages)", c, err)
				return
			}
		}
		log := filepath.Join(resultsDir, "ceph-up.log")
		start := time.Now()
		cmd := exec.Command("tests/lab/ceph-up.sh")
		if background {
			cmd = exec.Command("nice", "-n", strconv.Itoa(cephNice), "tests/lab/ceph-up.sh")
			ceph.niced = true
		}
		cmd.Env = append(os.Environ(), "CEPH_DIR="+cephDir, "CEPH_CONF="+cephConf, "CEPH_TIMEOUT="+cephUpSeconds)
		out, err := runWithTimeout(cmd, cephUpTimeout)
		os.WriteFile(log, out, 0o644)
		if err != nil {
			ceph.err = fmt.Errorf("tests/lab/ceph-up.sh: %v (its output: %s)\n%s", err, log, limit(out))
			return
		}
		ceph.started = true
		how := ""
		if background {
			how = ", in the background"
		}
		fmt.Fprintf(os.Stderr, "e2e: Ceph cluster up in %v%s (%s)\n", time.Since(start).Round(time.Second), how, log)
	}
	if background {
		go up()
	} else {
		up()
	}
}

// needCeph starts the cluster unless it runs already (or waits for its start in the
// background) and returns its configuration file. A cluster that cannot start fails the test:
// never a skip.
func needCeph(t *testing.T) string {
	t.Helper()
	ceph.once.Do(func() { startCeph(false) })
	select {
	case <-ceph.done:
	default:
		start := time.Now()
		<-ceph.done
		t.Logf("waited %v for the Ceph cluster's start", time.Since(start).Round(time.Millisecond))
	}
	if ceph.err != nil {
		t.Fatalf("the Ceph cluster is not running: %v", ceph.err)
	}
	ceph.reniceMu.Do(func() {
		if ceph.niced {
			if err := reniceCeph(); err != nil {
				t.Logf("renice of the Ceph daemons: %v", err)
			}
		}
	})
	return cephConf
}

// reniceCeph gives every thread of the cluster's daemons niceness 0 (Linux nices threads,
// not processes), after a start in the background.
func reniceCeph() error {
	pids, _ := filepath.Glob(filepath.Join(cephDir, "run", "*.pid"))
	var errs []error
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks, _ := os.ReadDir(filepath.Join("/proc", strings.TrimSpace(string(b)), "task"))
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 0); err != nil && err != unix.ESRCH {
				errs = append(errs, fmt.Errorf("%s thread %d: %w", filepath.Base(f), tid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// stopCeph stops the cluster if it was started (TestMain, after the tests), once a start in
// the background has ended.
func stopCeph() {
	if ceph.done == nil {
		return
	}
	<-ceph.done
	if !ceph.started {
		return
	}
	cmd := exec.Command("tests/lab/ceph-down.sh", "--purge")
	cmd.Env = append(os.Environ(), "CEPH_DIR="+cephDir, "CEPH_CONF="+cephConf)
	if out, err := runWithTimeout(cmd, time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: ceph-down.sh: %v\n%s\n", err, out)
	}
}

// runWithTimeout runs cmd, killing it after timeout, and returns its combined output.
func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) ([]byte, error) {
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return []byte(buf.String()), err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return []byte(buf.String()), fmt.Errorf("no exit within %v", timeout)
	}
}

// needRBDBin fails the test unless the rbd build of nvmeof-tgt is there.
func needRBDBin(t *testing.T) string {
	t.Helper()
	st, err := os.Stat(rbdBin)
	if err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("the rbd build of nvmeof-tgt (NVMEOF_TGT_RBD_BIN=%s): %v; tests/lab/e2e.sh builds it where librbd-dev is installed (make ceph-deps)", rbdBin, err)
	}
	return rbdBin
}

var rbdImageSeq atomic.Int64

// rbdNS is an rbd namespace on a new image of the test cluster, which the target creates with
// size; the image is removed when the test ends (after its target stopped).
func rbdNS(t *testing.T, nsid uint32, size int64) Namespace {
	t.Helper()
	image := fmt.Sprintf("e2e-%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(filepath.Base(testDir(t))), rbdImageSeq.Add(1))
	t.Cleanup(func() { removeImage(t, image) })
	return Namespace{NSID: nsid, Backend: BackendRBD, Pool: cephPool, Image: image, Size: size}
}

// removeImage removes image from the test pool, if it exists.
func removeImage(t *testing.T, image string) {
	t.Helper()
	if r := execCmd(rbdTimeout, "rbd", "-c", cephConf, "rm", "--no-progress", cephPool+"/"+image); r.err != nil &&
		!strings.Contains(string(r.stderr), "No such file") {
		t.Errorf("rbd rm %s: %v %s", image, r.err, limit(r.stderr))
	}
}

// rbdCmd runs rbd(8) on the test cluster and returns its output.
func rbdCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	return mustRun(t, rbdTimeout, "rbd", append([]string{"-c", cephConf}, args...)...)
}

// rbdInfo is `rbd info --format json`, the part read.
type rbdInfo struct {
	Size     int64    `json:"size"`
	Features []string `json:"features"`
}

func imageInfo(t *testing.T, image string) rbdInfo {
	t.Helper()
	var info rbdInfo
	out := rbdCmd(t, "info", "--format", "json", cephPool+"/"+image)
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("rbd info %s: %v: %s", image, err, out)
	}
	return info
}

// rbdResize resizes image with rbd(8), as an operator would from any client.
func rbdResize(t *testing.T, image string, size int64) {
	t.Helper()
	rbdCmd(t, "resize", "--no-progress", "--allow-shrink", "--size", strconv.FormatInt(size>>20, 10)+"M", cephPool+"/"+image)
}
