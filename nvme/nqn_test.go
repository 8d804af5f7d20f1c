package nvme

import (
	"errors"
	"strings"
	"testing"
)

func TestNQNRule(t *testing.T) {
	tests := []struct {
		name      string
		nqn       string
		err       error // CheckNQN
		subsysErr error // CheckSubsystemNQN
		spec      bool
	}{
		{"date form", "nqn.2026-11.io.example:disk1", nil, nil, true},
		{"spdk", "nqn.2016-06.io.spdk:cnode1", nil, nil, true},
		{"uuid form", UUIDNQNPrefix + "2110ba8b-b7eb-465e-b011-9b16af900e7f", nil, nil, true},
		{"nvmetcli generated", "nqn.2014-08.org.nvmexpress:NVMf:uuid:2110ba8b-b7eb-465e-b011-9b16af900e7f", nil, nil, true},
		{"blktests subsystem", "blktests-subsystem-1", nil, nil, false},
		{"blktests host", "nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349", nil, nil, true},
		{"tutorial", "testnqn", nil, nil, false},
		{"nvmetcli example", "nvmet-always", nil, nil, false},
		{"uuid form with a bad uuid", UUIDNQNPrefix + "not-a-uuid", nil, nil, false},
		{"uuid form without dashes", UUIDNQNPrefix + "2110ba8bb7eb465eb0119b16af900e7f", nil, nil, false},
		{"month 13", "nqn.2026-13.io.example:x", nil, nil, false},
		{"no name", "nqn.2026-11.io.example", nil, nil, false},
		{"control character", "nqn.2026-11.io.example:a\tb", nil, nil, true},
		{"223 bytes", "nqn.2026-11.io.example:" + strings.Repeat("x", 200), nil, nil, true},
		{"224 bytes", "nqn.2026-11.io.example:" + strings.Repeat("x", 201), ErrInvalidNQN, ErrInvalidNQN, true},
		{"224 bytes, not spec", strings.Repeat("x", 224), ErrInvalidNQN, ErrInvalidNQN, false},
		{"empty", "", ErrInvalidNQN, ErrInvalidNQN, false},
		{"NUL", "nqn.2026-11.io.example:a\x00b", ErrInvalidNQN, ErrInvalidNQN, true},
		{"trailing NUL", "testnqn\x00", ErrInvalidNQN, ErrInvalidNQN, false},
		{"discovery", DiscoveryNQN, nil, ErrReservedNQN, true},
		{"dot", ".", ErrInvalidNQN, ErrInvalidNQN, false},
		{"dot dot", "..", ErrInvalidNQN, ErrInvalidNQN, false},
		{"three dots", "...", nil, nil, false},
		{"slash", "nqn.2026-11.io.example:pool/vol", ErrInvalidNQN, ErrInvalidNQN, true},
		{"only a slash", "/", ErrInvalidNQN, ErrInvalidNQN, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckNQN(tt.nqn); !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Errorf("CheckNQN(%q) = %v, want %v", tt.nqn, err, tt.err)
			}
			if err := CheckSubsystemNQN(tt.nqn); !errors.Is(err, tt.subsysErr) || (err == nil) != (tt.subsysErr == nil) {
				t.Errorf("CheckSubsystemNQN(%q) = %v, want %v", tt.nqn, err, tt.subsysErr)
			}
			if got := IsSpecNQN(tt.nqn); got != tt.spec {
				t.Errorf("IsSpecNQN(%q) = %v, want %v", tt.nqn, got, tt.spec)
			}
		})
	}
}

// TestNQNRuleFitsConnectData checks that every NQN CheckNQN accepts
// survives the NUL-padded Connect data field unchanged.
func TestNQNRuleFitsConnectData(t *testing.T) {
	for _, s := range []string{"testnqn", strings.Repeat("x", MaxNQNLength)} {
		if err := CheckNQN(s); err != nil {
			t.Fatal(err)
		}
		d := make(ConnectData, ConnectDataSize)
		d.SetSubNQN(s)
		if got := d.SubNQN(); got != s {
			t.Errorf("SubNQN() = %q, want %q", got, s)
		}
	}
}
