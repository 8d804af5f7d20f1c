package rdma

import (
	"fmt"
	"time"
)

// StallEnv names the variable that, in a binary built with the faultinject
// tag, makes poller 0 of each device stop making progress a while after it
// starts: a control function that blocks until the poller is closed, as a
// handler stuck in a round would. It exists to test the systemd watchdog end
// to end. The value is a Go duration (e.g. "5s"). Other builds ignore it.
const StallEnv = "NVMEOF_TGT_FAULT_STALL"

// parseStall parses StallEnv's value; "" means no stall (0).
func parseStall(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration, e.g. 5s", StallEnv, s)
	}
	return d, nil
}
