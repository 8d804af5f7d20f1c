package fabric

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestAddSubsystemNQNRule(t *testing.T) {
	const host = "nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349"
	tests := []struct {
		name  string
		nqn   string
		hosts []string
		err   error
		warn  string // in the log, or nothing logged
	}{
		{name: "spec form", nqn: "nqn.2026-11.io.example:x", hosts: []string{host}},
		{name: "blktests", nqn: "blktests-subsystem-1", hosts: []string{host}, warn: "subnqn=blktests-subsystem-1"},
		{name: "tutorial host", nqn: "testnqn", hosts: []string{"hostnqn"}, warn: "hostnqn=hostnqn"},
		{name: "223 bytes", nqn: strings.Repeat("x", nvme.MaxNQNLength), warn: "not of the form"},
		{name: "224 bytes", nqn: strings.Repeat("x", nvme.MaxNQNLength+1), err: nvme.ErrInvalidNQN},
		{name: "NUL", nqn: "a\x00b", err: nvme.ErrInvalidNQN},
		{name: "discovery", nqn: nvme.DiscoveryNQN, err: nvme.ErrReservedNQN},
		{name: "bad host", nqn: "nqn.2026-11.io.example:x", hosts: []string{host, ""}, err: nvme.ErrInvalidNQN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			tgt := NewTarget(Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
			defer tgt.Close()
			_, err := tgt.AddSubsystem(SubsystemConfig{NQN: tt.nqn, Hosts: tt.hosts, AllowAnyHost: tt.hosts == nil})
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("AddSubsystem(%q) = %v, want %v", tt.nqn, err, tt.err)
			}
			if tt.err != nil {
				if tgt.Subsystem(tt.nqn) != nil && tt.nqn != nvme.DiscoveryNQN {
					t.Error("refused subsystem was added")
				}
				return
			}
			if tt.warn == "" && log.Len() != 0 || !strings.Contains(log.String(), tt.warn) {
				t.Errorf("log %q, want a warning with %q", log.String(), tt.warn)
			}
		})
	}
}
