//go:build e2e && bench

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spdkTarget is SPDK's nvmf_tgt, the benchmark's optional third target (make bench
// PEERS="kernel spdk" SPDK_DIR=...; tests/bench/spdk-build.sh builds it): one reactor on CPU 0
// (-m 0x1), no PCI devices (-u), 2 MiB hugepages, and through scripts/rpc.py an RDMA transport,
// a malloc bdev, one subsystem that allows any host, and a listener.
//
// Its reactor busy-polls a whole vCPU whether there is work or not, which in the emulated guest
// would slow down the other targets' runs. So it runs only for its own turns: between them the
// host is disconnected from it and the process is stopped (SIGSTOP); resume and pause bracket
// each of its runs.
type spdkTarget struct {
	dir string // SPDK_DIR: build/bin/nvmf_tgt, scripts/rpc.py
	out string // nvmf_tgt.log goes here

	nqn     string
	sock    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	waitErr error
	paused  bool
	undo    undoList // run last to first by Stop
	// Version is what spdk_get_version reports, e.g. "SPDK v24.05".
	Version string
}

const (
	spdkHugepages     = 1024 // of 2 MiB: the malloc bdev, the transport's buffers, DPDK's own
	spdkHugepagesFile = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	spdkHugeDir       = "/dev/hugepages"
	// DPDK maps and touches its memory slowly under TCG.
	spdkReadyTimeout = 2 * time.Minute
	spdkStopTimeout  = 30 * time.Second
)

// Start runs nvmf_tgt and configures subnqn with ns (BackendMemory: a malloc bdev of the same
// size and block size) on port, with the same transport settings as the other two targets: 8 KiB
// in-capsule data and I/O unit, 128 KiB maximum I/O. The target is left running.
func (s *spdkTarget) Start(t *testing.T, subnqn string, port int, ns Namespace) {
	t.Helper()
	if ns.Backend != BackendMemory {
		t.Fatalf("SPDK: only memory namespaces (malloc bdevs), not %q", ns.Backend)
	}
	bin, rpc := filepath.Join(s.dir, "build/bin/nvmf_tgt"), filepath.Join(s.dir, "scripts/rpc.py")
	for _, f := range []string{bin, rpc} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("SPDK_DIR=%s: %v (build SPDK with tests/bench/spdk-build.sh)", s.dir, err)
		}
	}
	s.nqn = subnqn
	t.Cleanup(func() { s.Stop(t) })
	s.setupHugepages(t)

	// A unix socket path must fit in 108 bytes: keep it out of the (long) results path.
	sockDir, err := os.MkdirTemp("", "e2e-spdk-")
	if err != nil {
		t.Fatalf("socket dir: %v", err)
	}
	s.undo.push("remove "+sockDir, func() error { return os.RemoveAll(sockDir) })
	s.sock = filepath.Join(sockDir, "spdk.sock")

	s.logPath = filepath.Join(s.out, "nvmf_tgt.log")
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("SPDK log: %v", err)
	}
	defer logf.Close() // the child holds its own descriptor
	s.cmd = exec.Command(bin, "-m", "0x1", "-u", "-r", s.sock)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		t.Fatalf("start %s: %v", bin, err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		s.waitErr = cmd.Wait()
		close(exited)
	}(s.cmd, s.exited)

	start := time.Now()
	var version []byte
	err = waitFor(spdkReadyTimeout, func() bool {
		select {
		case <-s.exited:
			return true
		default:
		}
		version, err = s.rpcErr("spdk_get_version")
		return err == nil
	})
	select {
	case <-s.exited:
		s.logTail(t)
		t.Fatalf("nvmf_tgt exited during startup: %v", s.waitErr)
	default:
	}
	if err != nil {
		s.logTail(t)
		t.Fatalf("nvmf_tgt did not answer spdk_get_version within %v", spdkReadyTimeout)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(version, &v); err != nil || v.Version == "" {
		t.Fatalf("spdk_get_version: %q (%v)", version, err)
	}
	s.Version = v.Version
	t.Logf("%s pid %d answering after %v", s.Version, s.cmd.Process.Pid, time.Since(start).Round(time.Millisecond))

	for _, args := range [][]string{
		{"nvmf_create_transport", "-t", "RDMA", "-u", "8192", "-i", "131072", "-c", "8192"},
		{"bdev_malloc_create", "-b", "Malloc0", strconv.FormatInt(ns.Size/mib, 10), strconv.Itoa(ns.LBASize())},
		{"nvmf_create_subsystem", subnqn, "-a", "-s", "SPDK00000000000001", "-d", "SPDK bench"},
		{"nvmf_subsystem_add_ns", subnqn, "Malloc0"},
		{"nvmf_subsystem_add_listener", subnqn, "-t", "rdma", "-f", "ipv4", "-a", labAddr, "-s", strconv.Itoa(port)},
	} {
		s.rpc(t, args...)
	}
	t.Logf("SPDK: %s, malloc bdev %d MiB of %d-byte blocks, on %s:%d", subnqn, ns.Size/mib, ns.LBASize(), labAddr, port)
}

// setupHugepages reserves spdkHugepages and mounts hugetlbfs if nothing has; Stop undoes both.
func (s *spdkTarget) setupHugepages(t *testing.T) {
	t.Helper()
	before := strings.TrimSpace(readSys(spdkHugepagesFile))
	if err := writeAttr(spdkHugepagesFile, strconv.Itoa(spdkHugepages)); err != nil {
		t.Fatalf("hugepages: %v", err)
	}
	s.undo.push("release hugepages", func() error { return writeAttr(spdkHugepagesFile, orZero(before)) })
	if got, _ := strconv.Atoi(strings.TrimSpace(readSys(spdkHugepagesFile))); got < spdkHugepages {
		t.Fatalf("hugepages: %d of %d reserved (guest memory too small or fragmented)", got, spdkHugepages)
	}
	if strings.Contains(readSys("/proc/mounts"), " hugetlbfs ") {
		return
	}
	if err := os.MkdirAll(spdkHugeDir, 0o755); err != nil {
		t.Fatalf("hugetlbfs: %v", err)
	}
	mustRun(t, cmdTimeout, "mount", "-t", "hugetlbfs", "nodev", spdkHugeDir)
	s.undo.push("umount "+spdkHugeDir, func() error { return runQuiet(cmdTimeout, "umount", spdkHugeDir) })
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// rpc runs scripts/rpc.py against the target and returns its output; a failure ends the test.
func (s *spdkTarget) rpc(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := s.rpcErr(args...)
	if err != nil {
		s.logTail(t)
		t.Fatalf("SPDK rpc %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (s *spdkTarget) rpcErr(args ...string) ([]byte, error) {
	if s.paused {
		return nil, errors.New("nvmf_tgt is stopped (SIGSTOP)")
	}
	out, err := runOut(cmdTimeout, "python3", append([]string{filepath.Join(s.dir, "scripts/rpc.py"), "-s", s.sock}, args...)...)
	return []byte(out), err
}

// pause stops the process once the host's queues are gone (nvmf_subsystem_get_qpairs is empty),
// so that it does not spin a vCPU through the other targets' runs.
func (s *spdkTarget) pause(t *testing.T) {
	t.Helper()
	err := waitFor(20*time.Second, func() bool {
		out, err := s.rpcErr("nvmf_subsystem_get_qpairs", s.nqn)
		var qp []json.RawMessage
		return err == nil && json.Unmarshal(out, &qp) == nil && len(qp) == 0
	})
	if err != nil {
		t.Fatalf("SPDK still has queue pairs of %s 20 s after the host disconnected", s.nqn)
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP nvmf_tgt: %v", err)
	}
	s.paused = true
	// State T in /proc/PID/stat: stopped by a signal.
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	if err := waitFor(10*time.Second, func() bool {
		st := readSys(stat)
		i := strings.LastIndexByte(st, ')')
		return i > 0 && len(st) > i+2 && st[i+2] == 'T'
	}); err != nil {
		t.Fatalf("nvmf_tgt did not stop: %q", readSys(stat))
	}
}

// resume continues the stopped process.
func (s *spdkTarget) resume(t *testing.T) {
	t.Helper()
	if !s.paused {
		return
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT nvmf_tgt: %v", err)
	}
	s.paused = false
}

// Stop ends nvmf_tgt (SIGTERM, then SIGKILL) and undoes the guest setup.
func (s *spdkTarget) Stop(t *testing.T) {
	t.Helper()
	if s.cmd != nil {
		if s.paused {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
			s.paused = false
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(spdkStopTimeout):
			t.Errorf("nvmf_tgt did not exit within %v of SIGTERM; killing it", spdkStopTimeout)
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			s.logTail(t)
		}
		s.cmd = nil
	}
	s.undo.run(t, "SPDK")
}

func (s *spdkTarget) logTail(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(s.logPath); err == nil {
		t.Logf("nvmf_tgt log (%s), last lines:\n%s", s.logPath, tail(b, 30))
	}
}
