package config

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

const (
	testKey  = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
	testKey2 = "DHHC-1:01:PIVi36Jcgn4y4GWThDQ/qR3Qj83hvQ6c+XqVwxDfio29jjVo:"
)

const authYAML = `
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    hosts:
      - nqn.2026-11.io.example:plain
      - {nqn: "nqn.2026-11.io.example:uni", dhchap_key: "` + testKey + `"}
      - nqn: nqn.2026-11.io.example:bidi
        dhchap_key: "` + testKey + `"
        dhchap_ctrl_key: "` + testKey2 + `"
    dhchap_hashes: [sha512, sha256]
    dhchap_dhgroups: [ffdhe4096, null]
discovery:
  hosts:
    - {nqn: "nqn.2026-11.io.example:uni", dhchap_key: "` + testKey + `"}
`

func TestHostEntries(t *testing.T) {
	c, err := loadYAML([]byte(authYAML))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Subsystems[0]
	if got := strings.Join(HostNQNs(s.Hosts), " "); got != "nqn.2026-11.io.example:plain nqn.2026-11.io.example:uni nqn.2026-11.io.example:bidi" {
		t.Fatalf("hosts %s", got)
	}
	uniKey, uniCtrl, err := s.Hosts[1].Secrets()
	if err != nil || uniKey.IsZero() || !uniCtrl.IsZero() {
		t.Fatalf("uni: %v %v %v", uniKey, uniCtrl, err)
	}
	if _, bidiCtrl, err := s.Hosts[2].Secrets(); err != nil || bidiCtrl.Hash != dhchap.SHA256 {
		t.Fatalf("bidi: %v %v", bidiCtrl, err)
	}
	if key, ctrl, err := s.Hosts[0].Secrets(); err != nil || !key.IsZero() || !ctrl.IsZero() {
		t.Fatalf("plain: %v %v %v", key, ctrl, err)
	}
	hs, gs, err := s.AuthNames()
	if err != nil || len(hs) != 2 || hs[0] != dhchap.SHA512 || len(gs) != 2 || gs[0] != dhchap.FFDHE4096 || gs[1] != dhchap.Null {
		t.Fatalf("policy %v %v %v", hs, gs, err)
	}
	if len(c.Discovery.Hosts) != 1 || !c.HasInlineSecrets() {
		t.Fatal("discovery hosts")
	}
	// Written back: plain NQNs stay plain, secrets are kept (config save),
	// and it reads back the same.
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "- nqn.2026-11.io.example:plain\n") || !strings.Contains(string(out), testKey2) {
		t.Fatalf("marshal:\n%s", out)
	}
	back, err := loadYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Subsystems[0].Hosts[2] != s.Hosts[2] || len(back.Discovery.Hosts) != 1 {
		t.Fatalf("round trip: %+v", back.Subsystems[0].Hosts)
	}
	// Shown through the API: no secret.
	red, _ := Marshal(c.Redacted())
	if strings.Contains(string(red), "DHHC") || c.Subsystems[0].Hosts[1].DHCHAPKey != testKey {
		t.Fatalf("redacted:\n%s", red)
	}
}

func TestHostSecretsValidated(t *testing.T) {
	bad := "DHHC-1:01:AAAAsecretAAAA:"
	cases := []struct {
		name, entry, err string
	}{
		{"bad secret", `{nqn: "nqn.2026-11.io.example:h", dhchap_key: "` + bad + `"}`, "dhchap_key: invalid DH-HMAC-CHAP secret"},
		{"inline and file", `{nqn: "nqn.2026-11.io.example:h", dhchap_key: "` + testKey + `", dhchap_key_file: /etc/k}`, "given inline and as dhchap_key_file"},
		{"relative file", `{nqn: "nqn.2026-11.io.example:h", dhchap_key_file: k}`, "want an absolute path"},
		{"controller key alone", `{nqn: "nqn.2026-11.io.example:h", dhchap_ctrl_key: "` + testKey + `"}`, "a controller key needs a host key"},
		{"unknown key", `{nqn: "nqn.2026-11.io.example:h", dhchap_secret: "` + testKey + `"}`, "dhchap_secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := "ports: [{transport: rdma, address: 10.0.0.1}]\nsubsystems:\n  - nqn: nqn.2026-11.io.example:a\n    hosts:\n      - " + c.entry + "\n"
			_, err := loadYAML([]byte(y))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
			if strings.Contains(err.Error(), "secretAAAA") {
				t.Fatalf("the secret is in the error: %v", err)
			}
		})
	}
	for _, pol := range []string{"dhchap_hashes: [md5]", "dhchap_dhgroups: [ffdhe1024]"} {
		y := "ports: [{transport: rdma, address: 10.0.0.1}]\nsubsystems:\n  - nqn: nqn.2026-11.io.example:a\n    allow_any_host: true\n    " + pol + "\n"
		if _, err := loadYAML([]byte(y)); err == nil || !strings.Contains(err.Error(), "dhchap") {
			t.Errorf("%s: %v", pol, err)
		}
	}
}

// Secret files: read, checked, and refused when group or others can read.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "h.key")
	os.WriteFile(good, []byte(testKey+"\n"), 0o600)
	open := filepath.Join(dir, "open.key")
	os.WriteFile(open, []byte(testKey+"\n"), 0o640)
	garbage := filepath.Join(dir, "bad.key")
	os.WriteFile(garbage, []byte("DHHC-1:01:nope:\n"), 0o600)
	// Another user's file, private to them: they could rewrite the
	// secrets the target trusts.
	theirs := filepath.Join(dir, "theirs.key")
	os.WriteFile(theirs, []byte(testKey+"\n"), 0o600)
	if err := os.Chown(theirs, otherUID, otherUID); err != nil {
		t.Fatalf("chown to %d (the tests run as root): %v", otherUID, err)
	}
	cases := []struct {
		file, err string
	}{
		{good, ""},
		{open, "mode 0640: allow the owner only"},
		{garbage, "invalid DH-HMAC-CHAP secret"},
		{theirs, "owned by uid 65534"},
		{filepath.Join(dir, "missing"), "no such file"},
	}
	for _, c := range cases {
		key, _, err := Host{NQN: "nqn.2026-11.io.example:h", DHCHAPKeyFile: c.file}.Secrets()
		switch {
		case c.err == "" && (err != nil || key.IsZero()):
			t.Errorf("%s: %v", c.file, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.file, err, c.err)
		}
	}
	cfg := &Config{Subsystems: []Subsystem{{Hosts: []Host{{NQN: "h", DHCHAPKeyFile: open}}}}}
	if err := cfg.CheckPaths(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("CheckPaths: %v", err)
	}
	if err := CheckPrivate(good); err != nil {
		t.Error(err)
	}
	if err := CheckPrivate(theirs); err == nil || !strings.Contains(err.Error(), "chown") {
		t.Errorf("CheckPrivate of another user's file: %v", err)
	}
	cfg = &Config{Subsystems: []Subsystem{{Hosts: []Host{{NQN: "h", DHCHAPKey: testKey, DHCHAPCtrlKeyFile: theirs}}}}}
	if err := cfg.CheckPaths(); err == nil || !strings.Contains(err.Error(), "dhchap_ctrl_key") || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("CheckPaths of another user's controller key file: %v", err)
	}
}

// bigEnviron is the path of a procfs file that says it has 0 bytes and
// has more than limits.SecretFileMax: the environment of a process started
// with a large one, mode 0400 and ours.
func bigEnviron(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"BIG=" + strings.Repeat("x", 2*limits.SecretFileMax)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)
}

// otherUID owns files the target must not trust: nobody.
const otherUID = 65534

// TestSecretFileKinds: a key file is read only when it is a regular file
// (behind symlinks, as Kubernetes projects a Secret's keys) of at most
// limits.SecretFileMax bytes. Its path may come from a gateway group's
// state, which whoever writes the pool controls: a FIFO must not block the
// read (the manager holds its lock through it), a device node must not be
// opened, and a file without end must not be read to its end. Each case
// runs under a deadline, so that a read that hangs fails the test.
func TestSecretFileKinds(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, b []byte) string {
		if err := os.WriteFile(at(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return at(name)
	}
	link := func(name, target string) string {
		if err := os.Symlink(target, at(name)); err != nil {
			t.Fatal(err)
		}
		return at(name)
	}
	good := write("h.key", []byte(testKey+"\n"))
	atMax := write("max.key", append([]byte(testKey+"\n"), bytes.Repeat([]byte{'#'}, limits.SecretFileMax-len(testKey)-1)...))
	// A valid first line, then a megabyte: read whole before.
	large := write("large.key", append([]byte(testKey+"\n"), bytes.Repeat([]byte("x\n"), 1<<19)...))
	fifo := at("fifo.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// /dev/zero made private here, so that only its kind refuses it.
	zero := at("zero.key")
	if err := syscall.Mknod(zero, syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
		t.Fatalf("mknod (the tests run as root): %v", err)
	}
	cases := []struct {
		name, file, err string
	}{
		{"regular", good, ""},
		{"at the cap", atMax, ""},
		{"symlink to a regular file", link("link.key", good), ""},
		{"symlink to a symlink to a regular file", link("link2.key", at("link.key")), ""},
		{"larger than the cap", large, "larger than"},
		{"fifo", fifo, "not a regular file"},
		{"symlink to a fifo", link("fifo-link.key", fifo), "not a regular file"},
		{"device node", zero, "not a regular file"},
		{"/dev/null", "/dev/null", "not a regular file"},
		{"/dev/zero", "/dev/zero", "not a regular file"},
		{"directory", dir, "not a regular file"},
		// Regular, private and size 0, but 8 KiB long.
		{"procfs file longer than it says", bigEnviron(t), "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, _, err := Host{NQN: "nqn.2026-11.io.example:h", DHCHAPKeyFile: c.file}.Secrets()
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: reading the key did not return", c.file)
			}
			switch {
			case c.err == "" && err != nil:
				t.Errorf("%s: %v", c.file, err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.file)):
				t.Errorf("%s: err %v, want %q and the path", c.file, err, c.err)
			}
		})
	}
}
