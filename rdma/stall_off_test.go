//go:build !faultinject

package rdma

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestStallCompiledOut checks that the stall hooks cost a production
// build nothing: the compiler inlines both empty calls away.
func TestStallCompiledOut(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "build", "-gcflags=-m", "-o", "/dev/null", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, want := range []string{
		`poller\.go:\d+:\d+: inlining call to \(\*poller\)\.planStall`,
		`transport\.go:\d+:\d+: inlining call to setupStall`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the compiler does not report %q:\n%s", want, out)
		}
	}
}
