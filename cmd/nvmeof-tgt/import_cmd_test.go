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
	for _, w := range []string{"ports[0].param.inline_data_size: 16384: not carried: tcp.in_capsule_data_size", "enable 0: skipped"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not name %q:\n%s", w, stderr)
		}
	}
	// The NGUID, the port IDs and transports, the port links and the
	// referral are carried, so they draw no note (but that the referral
	// is listed on every port).
	for _, w := range []string{`nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"`, "{id: 1, transport: tcp", "{id: 2, transport: rdma", "ports: [1, 2]", "ports: [1]\n", `address: "10.255.0.2", port: 4420, port_id: 3`} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout does not say %q:\n%s", w, stdout)
		}
	}
	for _, w := range []string{"nguid", "ports[1].subsystems", "blktests-subsystem-1: skipped"} {
		if strings.Contains(stderr, w) {
			t.Errorf("stderr names %q, which is carried:\n%s", w, stderr)
		}
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

// TestImportNvmetcliKeysCmd: a host nvmet makes authenticate keeps its
// keys (in files of their own, or inline when asked) or is left out when
// asked; it is never let in without them, and no secret reaches standard
// output or error except in the YAML when inline was asked.
func TestImportNvmetcliKeysCmd(t *testing.T) {
	const (
		host    = "nqn.2026-11.io.example:h1"
		key     = "DHHC-1:00:ERERERERERERERERERERERERERERERERERERERERERHYIEm8:"
		ctrlKey = "DHHC-1:01:IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIGuf2I:"
	)
	dir := t.TempDir()
	in := filepath.Join(dir, "config.json")
	json := `{"hosts": [{"nqn": "` + host + `", "dhchap": {"key": "` + key + `", "ctrl_key": "` + ctrlKey + `", "hash": "hmac(sha256)", "dhgroup": "null"}}],
 "ports": [{"portid": 1, "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.1", "trsvcid": "4420"}, "subsystems": ["nqn.2026-11.io.example:s"]}],
 "subsystems": [{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "0"}, "allowed_hosts": ["` + host + `"], "namespaces": []}]}`
	if err := os.WriteFile(in, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	noSecret := func(t *testing.T, what, s string) {
		t.Helper()
		if strings.Contains(s, "DHHC-1") || strings.Contains(s, "ERERERER") || strings.Contains(s, "IiIiIiIi") {
			t.Errorf("%s holds a secret:\n%s", what, s)
		}
	}

	t.Run("no flag refuses", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "config", "import-nvmetcli", in)
		if err == nil || stdout != "" {
			t.Fatalf("err %v, stdout:\n%s\nwant an error and no configuration: the host would be let in without its key", err, stdout)
		}
		for _, w := range []string{host, "--key-dir", "--inline-keys", "--drop-keys"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not name %s: %v", w, err)
			}
		}
		noSecret(t, "the error", err.Error())
		noSecret(t, "stderr", stderr)
	})

	keyDir := filepath.Join(dir, "keys")
	t.Run("key-dir", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "config", "import-nvmetcli", "--key-dir", keyDir, in)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		noSecret(t, "stdout", stdout)
		noSecret(t, "stderr", stderr)
		for name, want := range map[string]string{host + ".key": key, host + ".ctrl.key": ctrlKey} {
			path := filepath.Join(keyDir, name)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", path, st.Mode().Perm())
			}
			if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != want {
				t.Errorf("%s does not hold its key", path)
			}
			if !strings.Contains(stdout, path) {
				t.Errorf("the configuration does not name %s:\n%s", path, stdout)
			}
		}
		// The configuration, with its key files, is what serve checks.
		cfg := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfg, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runCLI(t, "config", "validate", cfg); err != nil {
			t.Errorf("config validate: %v\n%s", err, stdout)
		}
		c, err := config.LoadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if h := c.Subsystems[0].Hosts; len(h) != 1 || h[0].NQN != host || h[0].DHCHAPKeyFile == "" || h[0].DHCHAPCtrlKeyFile == "" {
			t.Errorf("hosts %+v, want %s with its two key files", h, host)
		}
	})

	t.Run("key-dir refuses to overwrite", func(t *testing.T) {
		path := filepath.Join(keyDir, host+".key")
		if err := os.WriteFile(path, []byte("other\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(keyDir, host+".ctrl.key")); err != nil {
			t.Fatal(err)
		}
		stdout, _, err := runCLI(t, "config", "import-nvmetcli", "--key-dir", keyDir, in)
		if err == nil || stdout != "" || !strings.Contains(err.Error(), path) {
			t.Fatalf("err %v, stdout %q; want an error naming %s and no configuration", err, stdout, path)
		}
		if b, _ := os.ReadFile(path); string(b) != "other\n" {
			t.Errorf("%s was overwritten", path)
		}
		if _, err := os.Stat(filepath.Join(keyDir, host+".ctrl.key")); !os.IsNotExist(err) {
			t.Errorf("a key file was written although the import failed: %v", err)
		}
	})

	t.Run("inline-keys", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "config", "import-nvmetcli", "--inline-keys", in)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if !strings.Contains(stdout, key) || !strings.Contains(stdout, ctrlKey) {
			t.Errorf("the configuration does not hold the keys:\n%s", stdout)
		}
		if !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "0600") {
			t.Errorf("no warning that the configuration holds secrets:\n%s", stderr)
		}
		noSecret(t, "stderr", stderr)
	})

	t.Run("drop-keys", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "config", "import-nvmetcli", "--drop-keys", in)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if strings.Contains(stdout, host) || !strings.Contains(stderr, host+": left out") {
			t.Errorf("the host is not left out with a note:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		noSecret(t, "stdout", stdout)
		noSecret(t, "stderr", stderr)
	})
}
