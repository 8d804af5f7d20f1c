package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
)

// runCLI runs the command line args and returns what it printed.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := rootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func writeConfig(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		env   string // NAME=value, or none
		yaml  string // DIR is replaced by a temporary directory
		lines []string
		err   string // the final line, or none for ok
	}{
		{name: "ok", yaml: `
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:x", allow_any_host: true, namespaces: [{nsid: 1, path: DIR/a.img, size: 1MiB}]}]
`},
		{name: "warning only", yaml: `
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems: [{nqn: blktests-subsystem-1, allow_any_host: true}]
`, lines: []string{`warning: subsystems[0].nqn: "blktests-subsystem-1" is not of the form`}},
		{name: "every kind of problem", env: "NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=abc", yaml: `
ports: [{transport: rdma, address: 10.0.0.1, port: x}]
subsystems:
  - nqn: "nqn.2026-11.io.example:x"
    allow_any_host: true
    namespaces:
      - {nsid: 1, path: DIR/missing/a.img, size: 1MiB}
      - {nsid: 2, backend: block, path: DIR}
      - {nsid: 0, size: 1MiB, blocksize: 512}
`, lines: []string{
			`ports[0].port: "x": want an integer`,
			`subsystems[0].namespaces[2].blocksize: unknown key`,
			`NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=abc: environment variable: rdma.max_queue_depth: "abc": want an integer`,
			`subsystems[0].namespaces[2].nsid: 0 is not a valid NSID`,
			`subsystems[0].namespaces[0].path: directory DIR/missing cannot be used: no such file or directory`,
			`subsystems[0].namespaces[1].path: "DIR" is not a block device (a directory)`,
		}, err: "config.yaml: 6 problems"},
		{name: "one problem", yaml: `
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems: [{nqn: "nqn.2014-08.org.nvmexpress.discovery", allow_any_host: true}]
`, lines: []string{`subsystems[0].nqn: reserved NQN`}, err: "config.yaml: 1 problem"},
		{name: "not yaml", yaml: "ports: [\n", lines: []string{"read config DIR/config.yaml: "}, err: "config.yaml: 1 problem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if name, val, ok := strings.Cut(tt.env, "="); ok {
				t.Setenv(name, val)
			}
			dir := t.TempDir()
			path := writeConfig(t, dir, strings.ReplaceAll(tt.yaml, "DIR", dir))
			stdout, stderr, err := runCLI(t, "config", "validate", path)
			if tt.err == "" {
				if err != nil || stdout != path+": ok\n" {
					t.Fatalf("err %v, stdout %q, stderr %q; want ok", err, stdout, stderr)
				}
			} else if err == nil || !strings.HasSuffix(err.Error(), tt.err) {
				t.Fatalf("err %v, want one ending %q; stderr:\n%s", err, tt.err, stderr)
			}
			got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if stderr == "" {
				got = nil
			}
			if len(got) != len(tt.lines) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(got), len(tt.lines), stderr)
			}
			for i, w := range tt.lines {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.HasPrefix(got[i], w) {
					t.Errorf("line %d = %q, want it to start %q", i, got[i], w)
				}
			}
		})
	}
}

// TestServeChecksPaths checks that serve refuses a namespace path that
// cannot work before it starts anything, naming the key as
// `config validate` does.
func TestServeChecksPaths(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, `
ports: [{transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:x", allow_any_host: true, namespaces: [{nsid: 1, path: `+dir+`}]}]
metrics: {listen: ""}
`)
	_, _, err := runCLI(t, "serve", "--config", path)
	want := `subsystems[0].namespaces[0].path: "` + dir + `" is a directory`
	if err == nil || err.Error() != want {
		t.Fatalf("serve: %v, want %q", err, want)
	}
}

// TestRBDNeedsItsBuild: an rbd namespace is a problem for `config validate`
// and serve of a binary built without librbd, named as such; the rbd build
// (go test -tags rbd) takes the file.
func TestRBDNeedsItsBuild(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "ceph.conf")
	if err := os.WriteFile(conf, []byte("[global]\nmon host = 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, dir, `
ports: [{transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:x", allow_any_host: true, namespaces: [{nsid: 1, pool: rbd, image: disk1, ceph_conf: `+conf+`}]}]
metrics: {listen: ""}
`)
	const want = "subsystems[0].namespaces[0].backend: rbd: this nvmeof-tgt is built without librbd; nvmeof-tgt-rbd serves RBD images"
	stdout, stderr, err := runCLI(t, "config", "validate", path)
	if blockdev.RBDSupported {
		if err != nil || stdout != path+": ok\n" {
			t.Fatalf("validate in the rbd build: %v %q %q", err, stdout, stderr)
		}
		return
	}
	if err == nil || strings.TrimSpace(stderr) != want {
		t.Fatalf("validate: %v, stderr %q; want %q", err, stderr, want)
	}
	if _, _, err := runCLI(t, "serve", "--config", path); err == nil || err.Error() != want {
		t.Fatalf("serve: %v, want %q", err, want)
	}
	// Listed beside the file's other problems.
	path = writeConfig(t, dir, `
subsystems: [{nqn: "nqn.2026-11.io.example:x", allow_any_host: true, namespaces: [{nsid: 1, pool: rbd, image: disk1, ceph_conf: `+conf+`}]}]
`)
	_, stderr, err = runCLI(t, "config", "validate", path)
	if err == nil || !strings.Contains(stderr, "ports: ") || !strings.Contains(stderr, want) {
		t.Fatalf("validate with another problem: %v, stderr %q", err, stderr)
	}
}
