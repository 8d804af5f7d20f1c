//go:build e2e

package e2e

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Environment read once by TestMain.
var (
	targetKind string // "nvmeof-tgt" or "kernel"
	tgtBin     string // nvmeof-tgt binary
	labAddr    string // the target's RDMA address
	scratchDir string // a filesystem that takes O_DIRECT, for file-backed namespaces
	localNVMe  string // the guest's own NVMe namespace (PCIe), for block-device namespaces
	resultsDir string // per-test logs and reports
)

const (
	kindNvmeofTgt = "nvmeof-tgt"
	kindKernel    = "kernel"
	portRDMA      = 4420
)

func TestMain(m *testing.M) {
	if err := setupEnv(); err != nil {
		// Not a skip: an e2e run that cannot test anything must not pass.
		fmt.Fprintf(os.Stderr, "e2e: not a usable lab guest: %v\n"+
			"e2e: run it through tests/lab/e2e.sh (or tests/lab/labvm)\nFAIL\n", err)
		os.Exit(1)
	}
	flag.Parse()
	if netLab != nil {
		// Only the TestNet tests know the network lab; the others want the one-guest lab.
		if run := flag.Lookup("test.run").Value.String(); !strings.HasPrefix(run, "^TestNet") {
			fmt.Fprintf(os.Stderr, "e2e: in the network lab, -test.run must begin with ^TestNet (got %q)\nFAIL\n", run)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: network lab: %s; scratch %s, results %s\n", netLab, scratchDir, resultsDir)
		os.Exit(m.Run())
	}
	fmt.Fprintf(os.Stderr, "e2e: target %s, address %s, scratch %s, local NVMe %s, results %s\n",
		targetKind, labAddr, scratchDir, localNVMe, resultsDir)
	if targetKind == kindNvmeofTgt && cephWanted(flag.Lookup("test.run").Value.String()) {
		startCephBackground()
	}
	code := m.Run()
	stopCeph()
	os.Exit(code)
}

func setupEnv() error {
	targetKind = envOr("E2E_TARGET", kindNvmeofTgt)
	if targetKind != kindNvmeofTgt && targetKind != kindKernel {
		return fmt.Errorf("E2E_TARGET=%q: want %q or %q", targetKind, kindNvmeofTgt, kindKernel)
	}
	if runtime.GOOS != "linux" {
		return errors.New("not Linux")
	}
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if lab := os.Getenv("LAB_NET"); lab != "" {
		// The network lab (tests/lab/e2e-net.sh): this guest is the host; the targets run in
		// the others. Neither LAB_ADDR nor a local NVMe drive.
		if targetKind != kindNvmeofTgt {
			return errors.New("the network lab runs nvmeof-tgt only (E2E_TARGET)")
		}
		for _, step := range []func() error{setupInitiator, setupScratch, setupTarget, setupResults} {
			if err := step(); err != nil {
				return err
			}
		}
		return setupNetLab(lab)
	}

	labAddr = os.Getenv("LAB_ADDR")
	if labAddr == "" {
		return errors.New("LAB_ADDR is not set")
	}
	dev := os.Getenv("LAB_RDMA_DEV")
	if dev == "" {
		return errors.New("LAB_RDMA_DEV is not set")
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", dev)); err != nil {
		return fmt.Errorf("RDMA device %s: %w", dev, err)
	}
	if err := setupInitiator(); err != nil {
		return err
	}
	if err := setupScratch(); err != nil {
		return err
	}

	localNVMe = os.Getenv("LAB_NVME_DEV")
	if localNVMe == "" {
		return errors.New("LAB_NVME_DEV is not set (the guest's local NVMe namespace)")
	}
	if err := checkLocalNVMe(localNVMe); err != nil {
		return fmt.Errorf("LAB_NVME_DEV=%s: %w", localNVMe, err)
	}
	if err := setupTarget(); err != nil {
		return err
	}
	return setupResults()
}

// setupInitiator checks the kernel initiator, nvme-rdma and the fabrics control device, and the
// tools the suite runs.
func setupInitiator() error {
	_ = exec.Command("modprobe", "nvme-rdma").Run()
	if _, err := os.Stat("/sys/module/nvme_rdma"); err != nil {
		return fmt.Errorf("kernel module nvme_rdma is not loaded: %w", err)
	}
	if _, err := os.Stat("/dev/nvme-fabrics"); err != nil {
		return fmt.Errorf("initiator: %w", err)
	}
	for _, tool := range []string{"nvme", "fio", "dd", "losetup", "modprobe", "dmesg"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("tool %s: %w", tool, err)
		}
	}
	return nil
}

func setupScratch() error {
	scratchDir = os.Getenv("LAB_SCRATCH")
	if scratchDir == "" {
		return errors.New("LAB_SCRATCH is not set")
	}
	if err := checkODirect(scratchDir); err != nil {
		return fmt.Errorf("LAB_SCRATCH=%s must take O_DIRECT: %w", scratchDir, err)
	}
	return nil
}

// setupTarget checks the target under test: nvmeof-tgt's binary, or the kernel's nvmet.
func setupTarget() error {
	switch targetKind {
	case kindNvmeofTgt:
		tgtBin = envOr("NVMEOF_TGT_BIN", "/work/main/bin/nvmeof-tgt")
		st, err := os.Stat(tgtBin)
		if err != nil {
			return fmt.Errorf("target binary (NVMEOF_TGT_BIN): %w", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("target binary %s is not executable", tgtBin)
		}
	case kindKernel:
		for _, m := range []string{"nvmet", "nvmet-rdma", "null_blk", "loop"} {
			_ = exec.Command("modprobe", m).Run()
		}
		if _, err := os.Stat(nvmetRoot); err != nil {
			return fmt.Errorf("kernel target configfs: %w", err)
		}
		if _, err := os.Stat("/sys/module/nvmet_rdma"); err != nil {
			return fmt.Errorf("kernel module nvmet_rdma is not loaded: %w", err)
		}
	}
	return nil
}

func setupResults() error {
	resultsDir = os.Getenv("E2E_RESULTS")
	if resultsDir == "" {
		d, err := os.MkdirTemp("", "e2e-results-")
		if err != nil {
			return err
		}
		resultsDir = d
	}
	return os.MkdirAll(resultsDir, 0o755)
}

// checkLocalNVMe checks that dev is a block device on a PCIe NVMe controller, not one the
// initiator made by connecting to a target.
func checkLocalNVMe(dev string) error {
	st, err := os.Stat(dev)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return errors.New("not a block device")
	}
	ctrl := filepath.Join("/sys/block", filepath.Base(dev), "device")
	if tr := readSys(filepath.Join(ctrl, "transport")); tr != "pcie" {
		return fmt.Errorf("controller transport %q, want pcie", tr)
	}
	return nil
}

// checkODirect writes one aligned block with O_DIRECT in dir.
func checkODirect(dir string) error {
	f, err := os.CreateTemp(dir, ".odirect-")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return fmt.Errorf("open O_DIRECT: %w", err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pwrite(fd, buf, 0); err != nil {
		return fmt.Errorf("O_DIRECT write: %w", err)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// testDir is this test's directory under the results directory. On failure, the guest's kernel
// log goes there and its tail into the test log.
func testDir(t *testing.T) string {
	t.Helper()
	name := strings.NewReplacer("/", "__", " ", "_", ":", "_").Replace(t.Name())
	dir := filepath.Join(resultsDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("results dir: %v", err)
	}
	return dir
}

// dmesgDumps holds the tests whose kernel log dumpDmesgOnFailure saves.
var dmesgDumps sync.Map // *testing.T → struct{}

// dumpDmesgOnFailure registers a cleanup that saves the kernel log in dir if t failed, once per
// test: a later call (startTgt's, after the test's own) changes nothing.
func dumpDmesgOnFailure(t *testing.T, dir string) {
	if _, dup := dmesgDumps.LoadOrStore(t, struct{}{}); dup {
		return
	}
	t.Cleanup(func() {
		defer dmesgDumps.Delete(t)
		if !t.Failed() {
			return
		}
		out, err := exec.Command("dmesg").CombinedOutput()
		if err != nil {
			t.Logf("dmesg: %v", err)
			return
		}
		p := filepath.Join(dir, "dmesg.txt")
		_ = os.WriteFile(p, out, 0o644)
		t.Logf("kernel log tail (full log in %s):\n%s", p, tail(out, 40))
	})
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
