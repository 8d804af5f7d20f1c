//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The guest's one-node Ceph cluster (tests/lab/ceph-up.sh: mon, mgr and a memstore OSD on
// 127.0.0.1, auth none, pool "rbd"), started by the first test that needs it (needCeph) and
// stopped when the suite ends (TestMain): one start, about a minute in the TCG guest, for every
// test. Clients find it through cephConf, the default ceph_conf of rbd namespaces.
const (
	cephConf = "/etc/ceph/ceph.conf"
	cephDir  = "/run/ceph-lab"
	cephPool = "rbd"
	// cephUpTimeout bounds ceph-up.sh (its own CEPH_TIMEOUT is 240 s).
	cephUpTimeout = 5 * time.Minute
	rbdTimeout    = 2 * time.Minute // one rbd(8) or ceph(8) command
)

var ceph struct {
	once    sync.Once
	err     error
	started bool
}

// rbdBin is nvmeof-tgt built with librbd (NVMEOF_TGT_RBD_BIN, tests/lab/e2e.sh builds it), the
// binary rbd namespaces need.
var rbdBin = envOr("NVMEOF_TGT_RBD_BIN", "bin/nvmeof-tgt-rbd")

// needCeph starts the cluster unless it runs already and returns its configuration file. A
// cluster that cannot start fails the test: never a skip.
func needCeph(t *testing.T) string {
	t.Helper()
	ceph.once.Do(func() {
		for _, c := range []string{"ceph-mon", "ceph-osd", "ceph-mgr", "ceph", "rbd"} {
			if _, err := exec.LookPath(c); err != nil {
				ceph.err = fmt.Errorf("%s: %w (make ceph-deps installs the cluster's packages)", c, err)
				return
			}
		}
		log := filepath.Join(resultsDir, "ceph-up.log")
		start := time.Now()
		cmd := exec.Command("tests/lab/ceph-up.sh")
		cmd.Env = append(os.Environ(), "CEPH_DIR="+cephDir, "CEPH_CONF="+cephConf)
		out, err := runWithTimeout(cmd, cephUpTimeout)
		os.WriteFile(log, out, 0o644)
		if err != nil {
			ceph.err = fmt.Errorf("tests/lab/ceph-up.sh: %v (its output: %s)\n%s", err, log, limit(out))
			return
		}
		ceph.started = true
		fmt.Fprintf(os.Stderr, "e2e: Ceph cluster up in %v (%s)\n", time.Since(start).Round(time.Second), log)
	})
	if ceph.err != nil {
		t.Fatalf("the Ceph cluster is not running: %v", ceph.err)
	}
	return cephConf
}

// stopCeph stops the cluster if needCeph started it (TestMain, after the tests).
func stopCeph() {
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
