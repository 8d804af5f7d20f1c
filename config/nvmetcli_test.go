package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestImportNvmetcli converts fixtures in the format `nvmetcli save`
// writes (nvmetcli's nvmet/nvme.py dump: attributes as strings, IDs as
// numbers) and compares the YAML and the notes with golden files. The YAML
// must load and pass Validate, except where a note says why not.
func TestImportNvmetcli(t *testing.T) {
	tests := []struct {
		fixture string
		golden  string // the golden files' name, the fixture's when empty
		opts    ImportOptions
		loadErr string // Validate's complaint, explained by a note
	}{
		// A tcp and an rdma port, a referral, a subsystem with allowed
		// hosts and one open to any host, a namespace with a UUID and an
		// NGUID, a disabled one.
		{fixture: "save"},
		// No RDMA port, an unused DH-HMAC-CHAP key, passthru,
		// allow_any_host with hosts, a subsystem no host may reach.
		{fixture: "tcp-only", loadErr: "ports: at least one port is required"},
		// DH-HMAC-CHAP: hosts with keys in nvmetcli's "dhchap" group and
		// flat, a controller key, preferred hashes and groups that differ
		// between a subsystem's hosts, an invalid key (dropped), a
		// controller key without a key, keys no subsystem asks for.
		{fixture: "auth", golden: "auth-keydir", opts: ImportOptions{KeyDir: "/etc/nvmeof-tgt/keys", DropKeys: true}},
		{fixture: "auth", golden: "auth-inline", opts: ImportOptions{InlineKeys: true, DropKeys: true}},
		{fixture: "auth", golden: "auth-drop", opts: ImportOptions{DropKeys: true}},
	}
	for _, tt := range tests {
		if tt.golden == "" {
			tt.golden = tt.fixture
		}
		t.Run(tt.golden, func(t *testing.T) {
			dir := filepath.Join("testdata", "nvmetcli")
			data, err := os.ReadFile(filepath.Join(dir, tt.fixture+".json"))
			if err != nil {
				t.Fatal(err)
			}
			im, err := ImportNvmetcli(data, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			yaml, notes := im.YAML, im.Notes
			base := filepath.Join(dir, tt.golden)
			golden(t, base+".yaml", string(yaml))
			golden(t, base+".notes", strings.Join(notes, "\n")+"\n")
			for _, n := range notes {
				if strings.Contains(n, "DHHC-1") {
					t.Errorf("note holds a secret: %s", n)
				}
			}
			if strings.Contains(string(yaml), "DHHC-1") != tt.opts.InlineKeys || im.InlineSecrets != tt.opts.InlineKeys {
				t.Errorf("secrets in the YAML: %v (InlineSecrets %v), want them only with InlineKeys", strings.Contains(string(yaml), "DHHC-1"), im.InlineSecrets)
			}
			for _, f := range im.KeyFiles {
				if !strings.HasPrefix(f.Path, tt.opts.KeyDir+"/") || tt.opts.KeyDir == "" {
					t.Errorf("key file %s outside the key directory %q", f.Path, tt.opts.KeyDir)
				}
				if !strings.Contains(string(yaml), strconv.Quote(f.Path)) {
					t.Errorf("the YAML does not name key file %s", f.Path)
				}
			}

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
		if _, err := ImportNvmetcli([]byte(in), ImportOptions{}); err == nil {
			t.Errorf("ImportNvmetcli(%q) = nil error", in)
		}
	}
	if _, err := ImportNvmetcli([]byte("{}"), ImportOptions{KeyDir: "keys"}); err == nil {
		t.Error("ImportNvmetcli with a relative key directory = nil error")
	}
}

// TestImportNvmetcliKeys: a host nvmet makes authenticate is never carried
// without its keys. With nowhere to put them, or with a key that is
// invalid, the import fails naming each such host (and never its key),
// unless the hosts are to be dropped.
func TestImportNvmetcliKeys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "nvmetcli", "auth.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      ImportOptions
		named     []string // hosts the error names
		notNamed  []string
		keyFiles  []string // with KeyDir, the files
		wantError bool
	}{
		{name: "nowhere", wantError: true,
			named:    []string{"hosts[0] (nqn.2014-08.org.nvmexpress:uuid:0f01fb42", "hosts[1] (nqn.2026-11.io.example:h2)", "hosts[3]", "hosts[4] (nqn.2026-11.io.example:bad): dhchap key"},
			notNamed: []string{"hosts[2]", "ctrl-only", "unused"}},
		{name: "invalid key", opts: ImportOptions{KeyDir: "/k"}, wantError: true,
			named: []string{"hosts[4] (nqn.2026-11.io.example:bad): dhchap key: invalid DH-HMAC-CHAP secret"}, notNamed: []string{"hosts[0]", "hosts[1]", "hosts[3]"}},
		{name: "dropped", opts: ImportOptions{KeyDir: "/k", DropKeys: true},
			keyFiles: []string{
				"/k/nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349.key",
				"/k/nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349.ctrl.key",
				"/k/nqn.2026-11.io.example:h2.key",
				"/k/nqn.2026-11.io.example:flat-form.key",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, err := ImportNvmetcli(data, tt.opts)
			if !tt.wantError {
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, f := range im.KeyFiles {
					got = append(got, f.Path)
					if _, err := dhchap.ParseSecret(f.Secret); err != nil {
						t.Errorf("%s: %v", f.Path, err)
					}
					if s := fmt.Sprint(f) + fmt.Sprintf("%+v %#v", f, f); strings.Contains(s, "DHHC-1") {
						t.Errorf("a KeyFile prints its secret: %s", s)
					}
				}
				if !slices.Equal(got, tt.keyFiles) {
					t.Errorf("key files %q, want %q", got, tt.keyFiles)
				}
				return
			}
			if !errors.Is(err, ErrKeysNotCarried) || im != nil {
				t.Fatalf("ImportNvmetcli = %v, %v; want ErrKeysNotCarried and nothing", im, err)
			}
			assertErrContains(t, err, tt.named...)
			for _, n := range tt.notNamed {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error names %s: %v", n, err)
				}
			}
			if strings.Contains(err.Error(), "DHHC-1") || strings.Contains(err.Error(), "ERERER") {
				t.Errorf("error holds a secret: %v", err)
			}
		})
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
			im, err := ImportNvmetcli([]byte(data), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			yaml, allNotes := im.YAML, im.Notes
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
