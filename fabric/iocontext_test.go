package fabric

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// ctxRun executes one command on lq's queue the way an RDMA poller does: on
// this goroutine, which owns c, polling c until the completion arrives. data
// is split into segs equal segments, as transport buffers are. onRing
// reports whether the request went on the context's ring.
func ctxRun(t *testing.T, lq *LoopQueue, c *IOContext, cmd nvme.Command, data []byte, segs int) (rsp nvme.Completion, onRing bool) {
	t.Helper()
	lr := &lq.reqs[0]
	r := &lr.r
	copy(r.Cmd, cmd)
	r.state = reqIdle
	if st := lq.q.Parse(r); !st.IsSuccess() {
		t.Fatalf("parse opcode %#x: %v", cmd.Opcode(), st)
	}
	r.Data = nil
	if r.DataLen > 0 {
		n := int(r.DataLen) / segs
		for i := 0; i < segs; i++ {
			r.Data = append(r.Data, data[i*n:(i+1)*n])
		}
	}
	lq.q.Execute(r)
	onRing = c.Pending() > 0
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-lr.done:
			return append(nvme.Completion(nil), r.Rsp...), onRing
		default:
		}
		c.Poll()
		if time.Now().After(deadline) {
			t.Fatalf("opcode %#x: no completion (%d pending on the context)", cmd.Opcode(), c.Pending())
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// alignedBuf is page-aligned memory, as registered transport buffers are.
func alignedBuf(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n+4096)
	off := (4096 - int(reflect.ValueOf(b).Pointer()%4096)) % 4096
	return b[off : off+n]
}

func TestIOContext(t *testing.T) {
	tests := []struct {
		name  string
		depth int // context entries; too few for a request sends it to the workers
		segs  int
		fua   bool
	}{
		{"one segment", 8, 1, false},
		{"four segments", 8, 4, false},
		{"force unit access", 8, 2, true},
		{"ring too small: workers", 2, 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dev blockdev.Device
			r, h := ioRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
				var err error
				dev, err = blockdev.OpenFile(blockdev.Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 4 << 20, BlockSize: 512})
				if err != nil {
					t.Fatal(err)
				}
				nc.Device, nc.Workers = dev, 2
			})
			c, err := NewIOContext(tc.depth, -1)
			if err != nil {
				t.Fatalf("NewIOContext: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			h.lq.q.UseIOContext(c)

			const nlb = 64
			data := alignedBuf(t, nlb*512)
			copy(data, pattern(len(data), 9))
			w := ioCmd(nvme.OpWrite, 30, 100, nlb)
			if tc.fua {
				w.SetCDW(12, w.CDW(12)|1<<30)
			}
			wantRing := tc.depth >= tc.segs
			rsp, onRing := ctxRun(t, h.lq, c, w, data, tc.segs)
			if st := rsp.Status(); !st.IsSuccess() || onRing != wantRing {
				t.Fatalf("write: %v, on the ring %v (want %v)", st, onRing, wantRing)
			}
			got := alignedBuf(t, len(data))
			rsp, onRing = ctxRun(t, h.lq, c, ioCmd(nvme.OpRead, 31, 100, nlb), got, tc.segs)
			if st := rsp.Status(); !st.IsSuccess() || onRing != wantRing {
				t.Fatalf("read: %v, on the ring %v (want %v)", st, onRing, wantRing)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("read back differs from what was written")
			}
			fl := newCmd(nvme.OpFlush, 32)
			fl.SetNSID(1)
			if rsp, onRing := ctxRun(t, h.lq, c, fl, nil, 1); !rsp.Status().IsSuccess() || !onRing {
				t.Fatalf("flush: %v, on the ring %v", rsp.Status(), onRing)
			}
			if c.Pending() != 0 {
				t.Fatalf("%d requests still pending on the context", c.Pending())
			}
			s := r.ns.Stats()
			if s.ReadOps != 1 || s.WriteOps != 1 || s.FlushOps != 1 || s.ReadBytes != nlb*512 {
				t.Fatalf("stats %+v: want one read, one write, one flush", s)
			}
			// A backend that fails maps to a status, through the one mapping.
			dev.Close()
			rsp, _ = ctxRun(t, h.lq, c, ioCmd(nvme.OpRead, 33, 100, nlb), got, tc.segs)
			if want := backendStatus(nvme.OpRead, blockdev.ErrClosed); rsp.Status() != want {
				t.Fatalf("read of a closed backend: %v, want %v", rsp.Status(), want)
			}
		})
	}
}
