package fabric

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestNamespaceCapacity(t *testing.T) {
	r := newRig(t)
	if b, bs := r.ns.Capacity(); b != 4<<20 || bs != 512 {
		t.Errorf("capacity %d bytes, block size %d; want %d, 512", b, bs, 4<<20)
	}
}

// TestControllerStates walks a controller through CC writes and checks the
// subsystem's count by state at each step.
func TestControllerStates(t *testing.T) {
	r := newRig(t)
	states := func() [NumControllerStates]int { return r.sub.ControllerStates() }
	if n := states(); n != [NumControllerStates]int{} {
		t.Fatalf("no controller yet, got %v", n)
	}
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	for _, tc := range []struct {
		name string
		cc   uint64
		want ControllerState
	}{
		{"connected", 0, CtrlDisabled},
		{"enabled", ccEnable, CtrlReady},
		{"disabled", 0, CtrlDisabled},
		{"invalid", 1 | 7<<16 | 4<<20, CtrlFatal},
	} {
		if tc.cc != 0 || tc.name != "connected" {
			h.propSet(nvme.PropCC, tc.cc)
		}
		var want [NumControllerStates]int
		want[tc.want] = 1
		if got := states(); got != want {
			t.Errorf("%s: states %v, want one %s", tc.name, got, tc.want)
		}
	}
	h.propSet(nvme.PropCC, 0)
	h.propSet(nvme.PropCC, ccEnable|1<<14) // SHN normal
	// The shutdown flush runs in the background.
	deadline := time.Now().Add(5 * time.Second)
	for states()[CtrlShutDown] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after CC.SHN: states %v, want one shut_down", states())
		}
		time.Sleep(time.Millisecond)
	}
	for s := ControllerState(0); s <= NumControllerStates; s++ {
		if s.String() == "" {
			t.Errorf("state %d has no name", s)
		}
	}
}
