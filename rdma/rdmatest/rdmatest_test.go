package rdmatest

import (
	"errors"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestValidPrivateData(t *testing.T) {
	r := nvme.RDMACMRequest(ValidPrivateData(3, 128))
	if len(r) != nvme.RDMACMRequestSize || r.RECFMT() != 0 || r.QID() != 3 || r.HRQSIZE() != 128 || r.HSQSIZE() != 127 {
		t.Fatalf("private data %x: want RECFMT 0, QID 3, HRQSIZE 128, HSQSIZE 127", []byte(r))
	}
}

func TestNewCommand(t *testing.T) {
	c := NewCommand(nvme.OpRead, 7)
	if c.Opcode() != nvme.OpRead || c.CID() != 7 || c.PSDT() != nvme.PSDTSGLContig || c.FUSE() != 0 ||
		c.SGL1().Type() != nvme.SGLTypeKeyedDataBlock || c.SGL1().Length() != 0 {
		t.Fatalf("command %x", []byte(c))
	}
}

// TestDialFails: Dial to an address no RDMA device serves (rdma_cm cannot
// use lo), or without cgo, fails with an error; so does a bad address. The
// lab guest's e2e tests use Dial for real.
func TestDialFails(t *testing.T) {
	if c, err := Dial(Options{Addr: "127.0.0.1", Port: 4420, Timeout: time.Second}); err == nil {
		c.Close()
		t.Fatal("Dial to 127.0.0.1 succeeded")
	} else if !errors.Is(err, ErrNotSupported) && !errors.Is(err, ErrNoDevice) {
		t.Logf("Dial: %v", err)
	}
	if _, err := Dial(Options{Addr: "not an address"}); err == nil {
		t.Fatal("Dial of a bad address succeeded")
	}
}
