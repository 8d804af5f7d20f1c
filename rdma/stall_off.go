//go:build !faultinject

package rdma

// setupStall does nothing: this build injects no stall. Both functions are
// empty so that their calls inline to nothing (TestStallCompiledOut).
func setupStall() (string, error) { return "", nil }

func (p *poller) planStall() {}
