package main

import (
	"os/exec"
	"testing"
)

// TestBlktestsTarget runs tests/blktests_target_test.sh: blktests' target
// control script (tests/lab/blktests-target, which `make blktests` hands to
// blktests) against a live target on the loop transport. CI cannot fetch
// blktests, so this is what checks the script there.
func TestBlktestsTarget(t *testing.T) {
	for _, p := range []string{"bash", "curl", "numfmt", "findmnt"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s", p)
		}
	}
	// go test puts its own go first on PATH: the script builds with it.
	out, err := exec.Command("bash", "../../tests/blktests_target_test.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("tests/blktests_target_test.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
