package sockab

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func startTest(t *testing.T, v string, sndbuf int) Server {
	t.Helper()
	srv, err := start(v, sndbuf)
	if errors.Is(err, ErrNotSupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("Start(%q): %v", v, err)
	}
	return srv
}

// Each variant answers every command, in order, with the right data, at
// every depth and over several connections at once: the benchmark
// measures servers that do the whole exchange.
func TestServers(t *testing.T) {
	cases := []struct {
		name      string
		op        uint8
		qd, conns int
	}{
		{"read/qd1", nvme.OpRead, 1, 1},
		{"write/qd1", nvme.OpWrite, 1, 1},
		{"read/qd32/conns4", nvme.OpRead, 32, 4},
		{"write/qd32/conns4", nvme.OpWrite, 32, 4},
		{"read/qd7/conns2", nvme.OpRead, 7, 2},
	}
	for _, v := range Variants {
		t.Run(v, func(t *testing.T) {
			srv := startTest(t, v, 0)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var wg sync.WaitGroup
					errs := make([]error, tc.conns)
					for i := range tc.conns {
						c, err := dial(srv.Addr(), tc.op, tc.qd)
						if err != nil {
							t.Fatal(err)
						}
						defer c.Close()
						c.verify = true
						wg.Go(func() { errs[i] = c.run(500) })
					}
					wg.Wait()
					for i, err := range errs {
						if err != nil {
							t.Errorf("connection %d: %v", i, err)
						}
					}
				})
			}
			if err := srv.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// With a send buffer smaller than a batch of responses, sends come back
// short: the rest still goes out, in order.
func TestServersShortSends(t *testing.T) {
	for _, v := range Variants {
		t.Run(v, func(t *testing.T) {
			srv := startTest(t, v, 4096)
			defer srv.Close()
			c, err := dial(srv.Addr(), nvme.OpRead, MaxDepth)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.verify = true
			if err := c.run(2000); err != nil {
				t.Fatal(err)
			}
			if ss, ok := srv.(interface{ shortSendCount() uint64 }); ok && ss.shortSendCount() == 0 {
				t.Error("no send came back short: the test tests nothing")
			}
		})
	}
}

// A server closes a connection that sends what the exchange does not
// have, and Close ends connections still open.
func TestServersClose(t *testing.T) {
	for _, v := range Variants {
		t.Run(v, func(t *testing.T) {
			srv := startTest(t, v, 0)
			bad, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			var pdu [CmdSize]byte
			PutCmd(pdu[:], nvme.OpRead, 1, 0)
			pdu[0] = nvme.TCPH2CData
			if _, err := bad.Write(pdu[:]); err != nil {
				t.Fatal(err)
			}
			bad.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := bad.Read(pdu[:]); err != io.EOF {
				t.Errorf("after a bad PDU: read %d bytes, %v; want EOF", n, err)
			}

			open, err := dial(srv.Addr(), nvme.OpRead, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()
			if err := open.run(10); err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			go func() { closed <- srv.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close with a connection open: still waiting after 10s")
			}
			open.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := open.nc.Read(pdu[:]); err != io.EOF {
				t.Errorf("after Close: read %d bytes, %v; want EOF", n, err)
			}
		})
	}
}
