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

// TestImportNvmetcliIDs: a namespace keeps the NGUID nvmet reported,
// none included, and an EUI64 if the JSON has one; only what cannot be
// carried is noted.
func TestImportNvmetcliIDs(t *testing.T) {
	tests := []struct {
		name   string
		device string // JSON members of the namespace's device, besides its path
		nguid  HexID
		eui64  HexID
		note   string // the one note expected, if any
	}{
		{name: "configfs form", device: `"nguid": "6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"`, nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"},
		{name: "hex digits", device: `"nguid": "6E3F1A2B4C5D4E6F8A9B0C1D2E3F4A5B"`, nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"},
		// nvmet's default: it reports no NGUID, and so does the import.
		{name: "zero", device: `"nguid": "00000000-0000-0000-0000-000000000000"`, nguid: NGUIDNone},
		{name: "absent", device: `"uuid": "8c6a3f0e-1b2d-4e5f-9a7b-3c4d5e6f7a8b"`, nguid: NGUIDNone},
		{name: "not an nguid", device: `"nguid": "6e3f"`, note: `device.nguid: "6e3f": not carried`},
		{name: "eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "0011223344556677"`,
			nguid: NGUIDNone, eui64: "0011223344556677"},
		{name: "zero eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "0000000000000000"`, nguid: NGUIDNone},
		{name: "not an eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "00:11"`,
			nguid: NGUIDNone, note: `device.eui64: "00:11": not carried`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `{"ports": [{"portid": 1, "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.1", "trsvcid": "4420"}, "subsystems": ["nqn.2026-11.io.example:s"]}],
"subsystems": [{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"},
  "namespaces": [{"nsid": 1, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture", ` + tt.device + `}}]}]}`
			yaml, allNotes, err := ImportNvmetcli([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			var notes []string
			for _, n := range allNotes {
				if !strings.Contains(n, "does not exist on this machine") {
					notes = append(notes, n)
				}
			}
			switch {
			case tt.note == "" && len(notes) > 0:
				t.Errorf("notes %q, want none", notes)
			case tt.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tt.note)):
				t.Errorf("notes %q, want one with %q", notes, tt.note)
			}
			c, err := loadYAML(yaml)
			if err != nil {
				t.Fatalf("%v\n%s", err, yaml)
			}
			n := c.Subsystems[0].Namespaces[0]
			if n.NGUID != tt.nguid || n.EUI64 != tt.eui64 {
				t.Errorf("nguid %q eui64 %q, want %q %q\n%s", n.NGUID, n.EUI64, tt.nguid, tt.eui64, yaml)
			}
		})
	}
}
