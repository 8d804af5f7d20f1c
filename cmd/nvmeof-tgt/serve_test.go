package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
)

// TestBuild checks that build either returns a target that shuts down
// cleanly or fails having released everything it made: the file
// namespace's workers and the metrics listener must not outlive it.
func TestBuild(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "") // no systemd
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		name    string
		ports   string
		ns2     string // a second namespace, after a file one
		metrics string
		wantErr string
	}{
		{name: "ok", ports: "[{transport: loop, address: 127.0.0.1}]", metrics: "127.0.0.1:0"},
		{name: "ok without metrics", ports: "[{transport: loop, address: 127.0.0.1}]"},
		{name: "second namespace fails", ports: "[{transport: loop, address: 127.0.0.1}]",
			ns2: "{nsid: 2, path: DIR/missing/ns.img, size: 1MiB}", wantErr: "nqn.2026-11.io.example:t namespace 2"},
		{name: "second port fails", ports: "[{transport: loop, address: 127.0.0.1, port: 1}, {transport: loop, address: 127.0.0.1, port: 2}]",
			wantErr: "port loop 127.0.0.1:2"},
		{name: "metrics address in use", ports: "[{transport: loop, address: 127.0.0.1}]", metrics: busy.Addr().String(),
			wantErr: "metrics.listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ns := fmt.Sprintf("{nsid: 1, path: %s, size: 1MiB}", filepath.Join(dir, "ns.img"))
			if tt.ns2 != "" {
				ns += ", " + strings.ReplaceAll(tt.ns2, "DIR", dir)
			}
			yaml := fmt.Sprintf(`ports: %s
subsystems: [{nqn: "nqn.2026-11.io.example:t", allow_any_host: true, namespaces: [%s]}]
metrics: {listen: ""}
api: {socket: %q}
state_dir: %q
`, tt.ports, ns, filepath.Join(dir, "api.sock"), filepath.Join(dir, "state"))
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, loaded, err := config.LoadFileContent(path)
			if err != nil {
				t.Fatal(err)
			}
			// After Load: Validate refuses port 0, which picks a free one.
			cfg.Metrics.Listen = tt.metrics

			before := runtime.NumGoroutine()
			srv, err := build(cfg, configFile{path, loaded}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("build: %v", err)
				}
				if _, err := os.Stat(filepath.Join(dir, "api.sock")); err != nil {
					t.Fatalf("API socket: %v", err)
				}
				if err := srv.shutdown(); err != nil {
					t.Fatalf("shutdown: %v", err)
				}
				if _, err := os.Stat(filepath.Join(dir, "api.sock")); !os.IsNotExist(err) {
					t.Fatalf("API socket left behind after shutdown: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("build: %v, want an error naming %s", err, tt.wantErr)
			}
			// Workers and the metrics server exit asynchronously.
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines after, %d before: something was not released", n, before)
			}
		})
	}
}

// TestShutdownRightAfterBuild: a target stopped as soon as it is built
// (SIGTERM during start-up) has removed its API socket when shutdown
// returns, although the API's Serve goroutine may not have started: an
// http.Server's Shutdown closes only the listeners Serve has taken.
func TestShutdownRightAfterBuild(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "") // no systemd
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	yaml := fmt.Sprintf(`ports: [{transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:t", allow_any_host: true}]
metrics: {listen: ""}
api: {socket: %q}
state_dir: %q
`, sock, filepath.Join(dir, "state"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// The race is lost in a few percent of tries.
	for i := range 100 {
		cfg, loaded, err := config.LoadFileContent(path)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := build(cfg, configFile{path, loaded}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		if err := srv.shutdown(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Fatalf("try %d: API socket left behind after shutdown: %v", i, err)
		}
	}
}

// TestReloadSignal: SIGHUP's reload is logged as the signal's.
func TestReloadSignal(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "") // no systemd
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := `ports: [{transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:t", allow_any_host: true, namespaces: [{nsid: 1, backend: memory, size: 1MiB}]}]
metrics: {listen: ""}
api: {socket: ""}
state_dir: ""
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := config.LoadFileContent(path)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	srv, err := build(cfg, configFile{path, loaded}, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.shutdown()
	srv.reload()
	if !strings.Contains(log.String(), `msg="configuration reloaded" source=signal`) {
		t.Fatalf("no reload by signal in the log:\n%s", log.String())
	}
}

// TestBuildNoRDMADevice: when no RDMA device serves a port, the error says
// what to do: set a device up when the machine has none, or else which
// port of which file to edit.
func TestBuildNoRDMADevice(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`ports: [{transport: loop, address: 127.0.0.1}, {transport: rdma, address: 192.0.2.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:t", allow_any_host: true, namespaces: [{nsid: 1, backend: memory, size: 1MiB}]}]
metrics: {listen: ""}
api: {socket: %q}
state_dir: %q
`, filepath.Join(dir, "api.sock"), filepath.Join(dir, "state"))
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := config.LoadFileContent(path)
	if err != nil {
		t.Fatal(err)
	}
	// 192.0.2.0/24 (TEST-NET-1) is on no device here or in the lab guest.
	_, err = build(cfg, configFile{path, loaded}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if errors.Is(err, rdma.ErrNotSupported) {
		t.Skip("built without RDMA support:", err)
	}
	if !errors.Is(err, rdma.ErrNoDevice) {
		t.Fatalf("build = %v, want rdma.ErrNoDevice", err)
	}
	want := "ports[1].address in " + path
	if !hasRDMADevice(sysInfiniband) {
		want = "softroce add"
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("build: %v\nwant it to say %q", err, want)
	}

	// Both cases, whatever this machine has.
	noDev := fmt.Errorf("add port rdma 192.0.2.1:4420: listen: %w", rdma.ErrNoDevice)
	withDevice := t.TempDir()
	if err := os.Mkdir(filepath.Join(withDevice, "rxe0"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ibRoot, path string
		want               []string
	}{
		{"no device", t.TempDir(), path, []string{"no RDMA device", "softroce add"}},
		{"no sysfs", filepath.Join(dir, "missing"), path, []string{"softroce add"}},
		{"address on no device", withDevice, path, []string{"192.0.2.1", "edit ports[1].address in " + path, "0.0.0.0"}},
		{"embedded default", withDevice, "", []string{"--config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := noDeviceHelp(noDev, cfg, tt.path, tt.ibRoot)
			if !errors.Is(got, rdma.ErrNoDevice) {
				t.Errorf("%v does not wrap rdma.ErrNoDevice", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("%v\ndoes not say %q", got, w)
				}
			}
		})
	}
}

// TestServeStateDirLock: a second process with the state directory of a
// running one is refused, naming the first (its PID and configuration
// file): both would write, and restore, the same reservation files. Once
// the first stopped, the directory is free again.
func TestServeStateDirLock(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "") // no systemd
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	load := func(name string) (*config.Config, configFile) {
		path := filepath.Join(dir, name+".yaml")
		yaml := fmt.Sprintf(`ports: [{transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:t", allow_any_host: true, namespaces: [{nsid: 1, backend: memory, size: 1MiB}]}]
metrics: {listen: ""}
api: {socket: ""}
state_dir: %q
`, state)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, loaded, err := config.LoadFileContent(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, configFile{path, loaded}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfgA, fileA := load("a")
	a, err := build(cfgA, fileA, quiet)
	if err != nil {
		t.Fatal(err)
	}
	cfgB, fileB := load("b")
	if b, err := build(cfgB, fileB, quiet); err == nil {
		b.shutdown()
		t.Fatal("a second target with the same state_dir was built")
	} else if want := fmt.Sprintf("pid %d, config %s", os.Getpid(), fileA.path); !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), state) {
		t.Fatalf("second target: %v\nwant it to name %s and the holder (%s)", err, state, want)
	}
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	b, err := build(cfgB, fileB, quiet)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	b.shutdown()
}
