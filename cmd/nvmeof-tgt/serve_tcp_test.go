package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// freePort is a TCP port of 127.0.0.1 nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeTCP: serve takes a configuration with a tcp port and serves it
// beside any other: a host connects over 127.0.0.1, writes and reads; the
// discovery log lists the port with TRTYPE 3; the management API adds a
// second tcp port (transport: tcp, as the CLI sends it); /metrics counts
// the connections; shutdown closes them.
func TestServeTCP(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	dir := t.TempDir()
	port := freePort(t)
	const nqn = "nqn.2026-11.io.example:t"
	yaml := fmt.Sprintf(`ports: [{transport: tcp, address: 127.0.0.1, port: %d}, {transport: loop, address: 127.0.0.1}]
subsystems: [{nqn: %q, allow_any_host: true, namespaces: [{nsid: 1, backend: memory, size: 1MiB}]}]
tcp: {max_connections_per_address: 8}
metrics: {listen: ""}
api: {socket: %q}
state_dir: ""
`, port, nqn, filepath.Join(dir, "api.sock"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := config.LoadFileContent(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := build(cfg, configFile{path, loaded}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	shut := false
	defer func() {
		if !shut {
			srv.shutdown()
		}
	}()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hostID := [16]byte{9}
	admin, err := tcptest.Dial(addr, tcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rsp, err := admin.Connect(0, 31, 0, 0, nqn, "nqn.2026-11.io.example:h", hostID, nvme.CNTLIDDynamic)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Enable(); err != nil {
		t.Fatal(err)
	}
	io1, err := tcptest.Dial(addr, tcptest.Options{DataDigest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer io1.Close()
	if _, err := io1.Connect(1, 31, 0, 0, nqn, "nqn.2026-11.io.example:h", hostID, nvme.CNTLID(rsp.DW0())); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tcp!"), 4096)
	if rsp, err := io1.Do(tcptest.IO(nvme.OpWrite, 1, 1, 0, 32), data, true, false); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("write: %v %v", err, rsp.Status())
	}
	got := make([]byte, len(data))
	if rsp, err := io1.Do(tcptest.IO(nvme.OpRead, 2, 1, 0, 32), got, false, false); err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, data) {
		t.Fatalf("read: %v %v, data equal %v", err, rsp.Status(), bytes.Equal(got, data))
	}

	disc, err := tcptest.Dial(addr, tcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer disc.Close()
	if _, err := disc.Connect(0, 31, 0, 0, nvme.DiscoveryNQN, "nqn.2026-11.io.example:h", hostID, nvme.CNTLIDDynamic); err != nil {
		t.Fatal(err)
	}
	if err := disc.Enable(); err != nil {
		t.Fatal(err)
	}
	logPage, err := disc.GetLogPage(nvme.LogDiscovery, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := nvme.ParseDiscoveryLogHeader(logPage)
	trtypes := map[uint8]string{}
	for i := range int(n) {
		e := nvme.UnmarshalDiscoveryLogEntry(logPage[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:])
		trtypes[e.TRTYPE] = e.TRSVCID
	}
	if trtypes[nvme.TRTypeTCP] != strconv.Itoa(port) || len(trtypes) != 2 {
		t.Errorf("discovery log: %v, want the tcp port (TRTYPE 3) on %d beside the loop port", trtypes, port)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	port2 := freePort(t)
	client := control.NewClient(filepath.Join(dir, "api.sock"))
	if _, err := client.AddPort(ctx, control.PortRequest{Transport: "tcp", Address: "127.0.0.1", Port: port2}); err != nil {
		t.Fatalf("API add tcp port: %v", err)
	}
	c2, err := tcptest.Dial(net.JoinHostPort("127.0.0.1", strconv.Itoa(port2)), tcptest.Options{})
	if err != nil {
		t.Fatalf("the port the API added: %v", err)
	}
	c2.Close()

	reg := newRegistry(srv.tgt, srv.rdma, srv.tcp, sysInfiniband)
	m := gather(t, reg)
	if v := m[`nvmeof_tgt_tcp_connections_total{event="accepted"}`]; v < 4 {
		t.Errorf("tcp connections accepted: %v, want at least 4", v)
	}

	if err := srv.shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	shut = true
	io1.NetConn().SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io1.NetConn().Read(make([]byte, 1)); err == nil {
		t.Error("a host connection is still open after shutdown")
	}
	if srv.tcp().Stats().Live.Load() != 0 {
		t.Errorf("%d tcp connections live after shutdown", srv.tcp().Stats().Live.Load())
	}
}
