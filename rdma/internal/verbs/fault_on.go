//go:build linux && cgo && faultinject

package verbs

import (
	"fmt"
	"os"
)

// postFaults is read once at start; a bad value stops the binary at once,
// since a fault test that injects nothing would pass for the wrong reason.
var postFaults = func() *faultPlan {
	f, err := parseFaultPlan(os.Getenv(FaultEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "verbs:", err)
		os.Exit(2)
	}
	return f
}()

// FaultInjection reports whether this binary was built to inject faults.
const FaultInjection = true

func postFault(g []postGroup) faultCut { return postFaults.cut(g) }
