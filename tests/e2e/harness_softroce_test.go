//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A second Soft-RoCE device in the guest, for tests of several paths and of device removal: a
// dummy netdev with its own address and rxe device, made with nvmeof-tgt's softroce command.
const (
	rmNetdev = "lab1"
	rmDev    = "rxe1"
	rmAddr   = "10.255.1.1"
	// rmDeleteTimeout bounds `rdma link delete`: it returns within a couple
	// of seconds once the target lets go of the device, and never before.
	rmDeleteTimeout = 30 * time.Second
)

// addSoftRoCE creates rxe1 on the dummy netdev lab1 with rmAddr. Call it
// before the target starts: its cleanup (deleting the device and the
// netdev) then runs after the target's, as cleanups run last-in first-out,
// and never deletes a device under a target that may still hold it.
func addSoftRoCE(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := os.Stat("/sys/class/infiniband/" + rmDev); err == nil {
			if out, err := runBounded(rmDeleteTimeout, "rdma", "link", "delete", rmDev); err != nil {
				t.Errorf("cleanup: rdma link delete %s: %v\n%s", rmDev, err, out)
			}
		}
		if err := runQuiet(cmdTimeout, "ip", "link", "del", rmNetdev); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	reAddSoftRoCE(t)
}

// reAddSoftRoCE creates rxe1 (again); lab1 and its address stay.
func reAddSoftRoCE(t *testing.T) {
	t.Helper()
	mustRun(t, cmdTimeout, tgtBin, "softroce", "add", "--netdev", rmNetdev, "--dummy",
		"--address", rmAddr+"/32", "--name", rmDev)
	if err := waitFor(deviceTimeout, func() bool {
		_, err := os.Stat("/sys/class/infiniband/" + rmDev)
		return err == nil
	}); err != nil {
		t.Fatalf("%s did not appear", rmDev)
	}
}

// runBounded runs a command that may block in the kernel where no signal
// reaches it (a task in D state): past timeout it is killed and left
// behind, never waited for, and the error says where it was blocked.
func runBounded(timeout time.Duration, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(timeout):
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", cmd.Process.Pid))
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", cmd.Process.Pid))
		_ = cmd.Process.Kill()
		return "", fmt.Errorf("%s %s still running after %v (left behind); waiting in %q, kernel stack:\n%s",
			name, strings.Join(args, " "), timeout, wchan, stack)
	}
}
