package control

import (
	"io"
	"log/slog"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// TestOpenNamespaceIDs: the namespace's configured or derived identifiers
// are what fabric reports to hosts.
func TestOpenNamespaceIDs(t *testing.T) {
	const nqn = "nqn.2026-11.io.example:ids"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name string
		nc   config.Namespace
	}{
		{"derived", config.Namespace{NSID: 1}},
		{"configured", config.Namespace{NSID: 1, UUID: "4f0e2c1a-0000-4000-8000-000000000001",
			NGUID: "6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", EUI64: "0011223344556677"}},
		{"no nguid", config.Namespace{NSID: 1, NGUID: config.NGUIDNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := tt.nc
			nc.Backend, nc.Size, nc.BlockSize = config.BackendMemory, config.MiB, 512
			fc, err := openNamespace(nqn, nc, log)
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Device.Close()
			if want := nc.ResolvedUUID(nqn); fc.UUID != want {
				t.Errorf("UUID %x, want %x", fc.UUID, want)
			}
			if want := nc.ResolvedNGUID(nqn); fc.NGUID != want {
				t.Errorf("NGUID %x, want %x", fc.NGUID, want)
			}
			if want := nc.ResolvedEUI64(); fc.EUI64 != want {
				t.Errorf("EUI64 %x, want %x", fc.EUI64, want)
			}
		})
	}
}
