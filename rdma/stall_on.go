//go:build faultinject

package rdma

import (
	"os"
	"time"
)

// stallAfter is set by setupStall, in New, before any poller starts.
var stallAfter time.Duration

// setupStall reads StallEnv and returns its value when a stall is planned.
func setupStall() (string, error) {
	v := os.Getenv(StallEnv)
	d, err := parseStall(v)
	if err != nil {
		return "", err
	}
	stallAfter = d
	return v, nil
}

// planStall makes poller 0 block in a control function stallAfter from now,
// until it is closed. The control function wakes it if it sleeps, so the
// stall comes whether or not hosts are connected.
func (p *poller) planStall() {
	if stallAfter == 0 || p.idx != 0 {
		return
	}
	go func() {
		select {
		case <-time.After(stallAfter):
		case <-p.stop:
			return
		}
		p.runSoon(func() {
			p.log.Warn("test build: poller stalls on purpose until closed", "env", StallEnv)
			<-p.stop
		})
	}()
}
