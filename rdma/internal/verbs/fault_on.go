//go:build linux && cgo && faultinject

package verbs

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
)

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
	if q := os.Getenv(FaultSRQDepthEnv); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 16 {
			return "", fmt.Errorf("%s=%q: want an integer >= 16", FaultSRQDepthEnv, q)
		}
		srqDepth = n
		v += " " + FaultSRQDepthEnv + "=" + q
	}
	if q := os.Getenv(FaultSRQStartEnv); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			return "", fmt.Errorf("%s=%q: want an integer >= 1", FaultSRQStartEnv, q)
		}
		srqStart = n
		v += " " + FaultSRQStartEnv + "=" + q
	}
	if q := os.Getenv(FaultCreateQPEnv); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			return "", fmt.Errorf("%s=%q: want an integer >= 1", FaultCreateQPEnv, q)
		}
		createQPFailAt = int64(n)
		v += " " + FaultCreateQPEnv + "=" + q
	}
	return v, nil
}

// srqDepth is FaultSRQDepthEnv's value, 0 when unset.
var srqDepth int

// SRQDepthFault is the receive buffers a faultinject build gives each
// shared receive queue (FaultSRQDepthEnv), 0 for the default.
func SRQDepthFault() int { return srqDepth }

// srqStart is FaultSRQStartEnv's value, 0 when unset.
var srqStart int

// SRQStartFault is the receive buffers a faultinject build posts to each
// shared receive queue at start (FaultSRQStartEnv), 0 for all of them.
func SRQStartFault() int { return srqStart }

// createQPFailAt is the CreateQP call that fails (0: none); createQPCalls
// counts them.
var (
	createQPFailAt int64
	createQPCalls  atomic.Int64
)

func createQPFault() bool { return createQPFailAt > 0 && createQPCalls.Add(1) == createQPFailAt }

func postFault(b *Batch) faultCut {
	return postFaults.cut(b.groups[:len(b.qps)], &b.sp, &b.faultPosts)
}
