package main

import (
	"os/exec"
	"testing"
)

// TestMakeInstall runs tests/install_test.sh: `make install` into scratch
// DESTDIRs, checking the files, the unit's ExecStart for the PREFIX, and
// that an existing config.yaml survives.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command("bash", "../../tests/install_test.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("tests/install_test.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
