//go:build linux && cgo && faultinject

package verbs

import "os"

// postFaults is set by SetupFaults, before any poller posts.
var postFaults *faultPlan

// SetupFaults reads FaultEnv and returns its value when faults are planned.
// Call it before anything posts.
func SetupFaults() (string, error) {
	v := os.Getenv(FaultEnv)
	f, err := parseFaultPlan(v)
	if err != nil {
		return "", err
	}
	postFaults = f
	return v, nil
}

func postFault(b *Batch) faultCut { return postFaults.cut(b.groups[:len(b.qps)], &b.faultPosts) }
