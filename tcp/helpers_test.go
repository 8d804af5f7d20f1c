package tcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

const (
	testNQN     = "nqn.2026-11.io.example:tcp"
	testHostNQN = "nqn.2026-11.io.example:host1"
	nsSize      = 16 << 20
)

var testHostID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// rig is a target with one subsystem (a memory namespace) on a tcp port of
// 127.0.0.1.
type rig struct {
	t    *testing.T
	tgt  *fabric.Target
	tr   *Transport
	port *fabric.Port
	addr string
	sub  *fabric.Subsystem
}

func newRig(t testing.TB, cfg Config, o fabric.Options) *rig {
	t.Helper()
	tgt := fabric.NewTarget(o)
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tgt.AddSubsystem(fabric.SubsystemConfig{NQN: testNQN, AllowAnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := blockdev.NewMemory(nsSize, 512)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.AddNamespace(fabric.NamespaceConfig{NSID: 1, Device: dev}); err != nil {
		t.Fatal(err)
	}
	p := &fabric.Port{Address: "127.0.0.1", Service: "0"}
	if err := tgt.AddPort(tr, p); err != nil {
		t.Fatal(err)
	}
	r := &rig{tgt: tgt, tr: tr, port: p, addr: net.JoinHostPort("127.0.0.1", p.Service), sub: sub}
	if tt, ok := t.(*testing.T); ok {
		r.t = tt
	}
	t.Cleanup(func() {
		if err := tgt.Close(); err != nil {
			t.Errorf("target close: %v", err)
		}
		tr.Close()
		if n := tr.pool.out(); n != 0 {
			t.Errorf("%d pool bytes still out after every connection closed", n)
		}
		if total, _ := tr.Connections(""); total != 0 {
			t.Errorf("%d connections counted after close", total)
		}
	})
	return r
}

// dial opens an initialized connection.
func (r *rig) dial(t testing.TB, o tcptest.Options) *tcptest.Conn {
	t.Helper()
	c, err := tcptest.Dial(r.addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// admin connects and enables a controller on a new connection, and
// returns it with its CNTLID.
func (r *rig) admin(t testing.TB, o tcptest.Options, subnqn string, kato uint32) (*tcptest.Conn, nvme.CNTLID) {
	t.Helper()
	c := r.dial(t, o)
	rsp, err := c.Connect(0, 31, 0, kato, subnqn, testHostNQN, testHostID, nvme.CNTLIDDynamic)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Enable(); err != nil {
		t.Fatal(err)
	}
	return c, nvme.CNTLID(rsp.DW0())
}

// io connects I/O queue qid of controller cntlid on a new connection.
func (r *rig) io(t testing.TB, o tcptest.Options, qid nvme.QID, cntlid nvme.CNTLID, cattr uint8) *tcptest.Conn {
	t.Helper()
	c := r.dial(t, o)
	if _, err := c.Connect(qid, 63, cattr, 0, testNQN, testHostNQN, testHostID, cntlid); err != nil {
		t.Fatal(err)
	}
	return c
}

// controller is an admin and one I/O connection of one controller.
func (r *rig) controller(t testing.TB, o tcptest.Options, cattr uint8) (admin, io *tcptest.Conn) {
	t.Helper()
	a, cntlid := r.admin(t, o, testNQN, 0)
	return a, r.io(t, o, 1, cntlid, cattr)
}

// waitClosed waits for the target to close c: a read ends in EOF or a
// reset.
func waitClosed(t testing.TB, c *tcptest.Conn, within time.Duration) {
	t.Helper()
	nc := c.NetConn()
	nc.SetReadDeadline(time.Now().Add(within))
	var b [4096]byte
	for {
		_, err := nc.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v", within)
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("read: %v", err)
		}
		return
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && bytes.Contains([]byte(oe.Err.Error()), []byte("reset"))
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pattern fills b with bytes derived from seed.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*31) ^ seed ^ byte(i>>9)
	}
}
