package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestImportNvmetcli converts fixtures in the format `nvmetcli save`
// writes (nvmetcli's nvmet/nvme.py dump: attributes as strings, IDs as
// numbers) and compares the YAML and the notes with golden files. The YAML
// must load and pass Validate, except where a note says why not.
func TestImportNvmetcli(t *testing.T) {
	tests := []struct {
		fixture string
		loadErr string // Validate's complaint, explained by a note
	}{
		// A tcp and an rdma port, a referral, a subsystem with allowed
		// hosts and one open to any host, a namespace with a UUID and an
		// NGUID, a disabled one.
		{fixture: "save"},
		// No RDMA port, DH-HMAC-CHAP, passthru, allow_any_host with
		// hosts, a subsystem no host may reach.
		{fixture: "tcp-only", loadErr: "ports: at least one port is required"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			base := filepath.Join("testdata", "nvmetcli", tt.fixture)
			data, err := os.ReadFile(base + ".json")
			if err != nil {
				t.Fatal(err)
			}
			yaml, notes, err := ImportNvmetcli(data)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, base+".yaml", string(yaml))
			golden(t, base+".notes", strings.Join(notes, "\n")+"\n")

			c, err := loadYAML(yaml)
			if tt.loadErr != "" {
				assertErrContains(t, err, tt.loadErr)
				return
			}
			if err != nil {
				t.Fatalf("converted YAML does not load: %v\n%s", err, yaml)
			}
			if len(c.Ports) == 0 || len(c.Subsystems) == 0 {
				t.Errorf("converted config is empty: %+v", c)
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./config -run TestImportNvmetcli -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs; got:\n%s", path, got)
	}
}

func TestImportNvmetcliRefuses(t *testing.T) {
	for _, in := range []string{"", "{", "[]", "null", `{"ports": 1`} {
		if _, _, err := ImportNvmetcli([]byte(in)); err == nil {
			t.Errorf("ImportNvmetcli(%q) = nil error", in)
		}
	}
}
