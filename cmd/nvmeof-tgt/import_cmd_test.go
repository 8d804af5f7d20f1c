package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

func TestImportNvmetcliCmd(t *testing.T) {
	fixture := filepath.Join("..", "..", "config", "testdata", "nvmetcli", "save.json")
	stdout, stderr, err := runCLI(t, "config", "import-nvmetcli", fixture)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	for _, w := range []string{"ports[0]: portid 1, tcp", "ports[1].referrals[0]: peer", "enable 0: skipped"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not name %q:\n%s", w, stderr)
		}
	}
	// The NGUID is carried, so it draws no note.
	if strings.Contains(stderr, "nguid") || !strings.Contains(stdout, `nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"`) {
		t.Errorf("the NGUID is not carried quietly:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// stdout is the configuration alone: serve --config takes it.
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadFile(path); err != nil {
		t.Errorf("converted configuration does not load: %v\n%s", err, stdout)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{\"ports\": ["), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{bad}, {filepath.Join(t.TempDir(), "missing.json")}} {
		if stdout, _, err := runCLI(t, append([]string{"config", "import-nvmetcli"}, args...)...); err == nil || stdout != "" {
			t.Errorf("import %s: err %v, stdout %q; want an error and no output", args[0], err, stdout)
		}
	}
}
