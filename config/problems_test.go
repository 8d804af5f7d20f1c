package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadReportsEveryProblem checks that decoding problems (unknown keys,
// wrong types) and Validate's come back together, one *FieldError per
// key, without Validate repeating a value that could not be decoded.
func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := loadYAML([]byte(`
ports: [{transport: rdma, address: 10.0.0.1, port: abc, adress: x}]
subsystems:
  - nqn: nqn.2026-11.io.example:x
    allow_any_host: true
    serial: [1, 2]
    namespaces:
      - {nsid: x, size: 1MiB}
      - {nsid: 2, size: 1G}
      - {nsid: 3, size: 1MiB, bogus: 1}
rdma: {max_io_queues: many, poll_idle: 5, mdts: 3MiB}
controller: 7
`))
	want := []string{
		`ports[0].port: "abc": want an integer`,
		`ports[0].adress: unknown key`,
		`subsystems[0].serial: got a list, want a string`,
		`subsystems[0].namespaces[0].nsid: "x": want a non-negative integer`,
		`subsystems[0].namespaces[1].size: "1G": unknown unit`,
		`subsystems[0].namespaces[2].bogus: unknown key`,
		`rdma.max_io_queues: "many": want an integer`,
		`rdma.poll_idle: 5: a duration needs a unit`,
		`controller: `,
		`rdma.mdts: 3MiB: want a power of two`,
	}
	got := Problems(err)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("problem %d = %q, want it to start %q", i, got[i], w)
		}
		var fe *FieldError
		if !errors.As(got[i], &fe) {
			t.Errorf("problem %q is not a *FieldError", got[i])
		}
	}
}

// TestEnvProblems checks that a bad NVMEOF_TGT_ variable is named as the
// variable, not as the file's key.
func TestEnvProblems(t *testing.T) {
	tests := []struct {
		name, env, val string
		yaml           string
		want           string // the one problem
	}{
		{"not a number", "NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH", "abc", exampleYAML,
			`NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=abc: environment variable: rdma.max_queue_depth: "abc": want an integer`},
		{"out of range, key also in the file", "NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH", "8", exampleYAML + "rdma: {max_queue_depth: 64}\n",
			`NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=8: environment variable: rdma.max_queue_depth: 8 is out of range 16..1024`},
		{"duration", "NVMEOF_TGT_CONTROLLER_KATO_MAX", "soon", exampleYAML,
			`NVMEOF_TGT_CONTROLLER_KATO_MAX=soon: environment variable: controller.kato_max: time: invalid duration "soon"`},
		{"size", "NVMEOF_TGT_RDMA_MDTS", "1G", exampleYAML,
			`NVMEOF_TGT_RDMA_MDTS=1G: environment variable: rdma.mdts: "1G": unknown unit`},
		{"log level", "NVMEOF_TGT_LOG_LEVEL", "loud", exampleYAML,
			`NVMEOF_TGT_LOG_LEVEL=loud: environment variable: log.level: "loud": want debug`},
		{"file's problem stays the file's", "NVMEOF_TGT_RDMA_POLLERS", "2", exampleYAML + "rdma: {max_queue_depth: 8}\n",
			`rdma.max_queue_depth: 8 is out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.env, tt.val)
			_, err := LoadFile(writeFile(t, tt.yaml))
			got := Problems(err)
			if len(got) != 1 || !strings.HasPrefix(got[0].Error(), tt.want) {
				t.Errorf("problems %q, want one starting %q", got, tt.want)
			}
		})
	}
}

// TestCheckFile checks that `config validate` gets Load's problems and
// CheckPaths' together, and the NQN warnings.
func TestCheckFile(t *testing.T) {
	t.Setenv("NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH", "abc")
	dir := t.TempDir()
	path := writeFile(t, `
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems:
  - nqn: testnqn
    allow_any_host: true
    namespaces:
      - {nsid: 1, path: `+filepath.Join(dir, "nodir", "a.img")+`, size: 1MiB}
      - {nsid: 2, backend: file, path: `+dir+`}
      - {nsid: 3, size: 1MiB, blocksize: 4096}
      - {nsid: 3, size: 1MiB}
`)
	warnings, err := CheckFile(path)
	want := []string{
		"subsystems[0].namespaces[2].blocksize: unknown key",
		"subsystems[0].namespaces[3].nsid: 3 is also the NSID of namespaces[2]",
		"NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH=abc: environment variable: rdma.max_queue_depth: ",
		"subsystems[0].namespaces[0].path: directory " + filepath.Join(dir, "nodir") + " cannot be used",
		"subsystems[0].namespaces[1].path: \"" + dir + "\" is a directory",
	}
	got := Problems(err)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("problems do not include %q:\n%v", w, err)
		}
	}
	if len(warnings) != 1 || warnings[0].Key != "subsystems[0].nqn" {
		t.Errorf("warnings = %v, want one for subsystems[0].nqn", warnings)
	}
	// LoadFile, for unit tests and serve before CheckPaths, does not look
	// at the machine.
	if _, err := LoadFile(path); len(Problems(err)) != 3 {
		t.Errorf("LoadFile: %v, want the 3 problems CheckPaths does not find", err)
	}
}
