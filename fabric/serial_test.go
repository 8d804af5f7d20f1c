package fabric

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestSerialNumbers pins the SN hosts see in Identify Controller: a change
// would show them a different controller (udev links, nvme list).
func TestSerialNumbers(t *testing.T) {
	tests := []struct {
		name   string
		subnqn string
		serial string // configured; empty for the default
		want   string
	}{
		{"default: sha256 of the NQN", testNQN, "", DefaultSerial(testNQN)},
		{"configured", testNQN, "SN-1", "SN-1"},
		{"discovery", nvme.DiscoveryNQN, "", "eecef49c0e3d1e6d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, func(sc *SubsystemConfig, _ *NamespaceConfig) { sc.Serial = tt.serial })
			h, _ := r.adminConnect(tt.subnqn, testHostNQN, 0)
			b, st := identify(h, nvme.CNSController, 0)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			if got := nvme.IdentifyController(b).SerialNumber(); got != tt.want {
				t.Errorf("SN = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultSerial(t *testing.T) {
	tests := []struct{ nqn, want string }{
		// Pinned: the value the configuration has always filled in.
		{"nqn.2026-11.io.example:disk1", "837528a365996de78ec7"},
		{"nqn.2026-11.io.nvmeof-tgt:mem0", "c9fa6d9040a32e653f32"},
	}
	for _, tt := range tests {
		got := DefaultSerial(tt.nqn)
		if got != tt.want || len(got) != 20 {
			t.Errorf("DefaultSerial(%q) = %q, want %q (20 characters)", tt.nqn, got, tt.want)
		}
	}
	if DefaultSerial("a") == DefaultSerial("b") {
		t.Error("serials of different NQNs collide")
	}
}
