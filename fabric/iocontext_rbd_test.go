//go:build linux && cgo && rbd

package fabric

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// rbdDevice is a new RBD image on the cluster NVMEOF_TGT_TEST_CEPH_CONF
// names (pool rbd), or a skip saying there is none (the e2e suite runs
// this test in the guest against its cluster: TestRBDUnit).
func rbdDevice(t *testing.T, size int64) blockdev.Device {
	t.Helper()
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (tests/lab/ceph-up.sh)")
	}
	dev, err := blockdev.OpenRBD(blockdev.RBDOptions{Pool: "rbd", Image: fmt.Sprintf("fabric-%d-%d", os.Getpid(), time.Now().UnixNano()),
		Size: size, CephConf: conf})
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// TestIOContextRBD: every I/O command an RBD namespace takes goes on the
// context's ring (rbd_aio_*), its completion reaped by Poll; a
// deallocation with a range past the end fails whole, before any range is
// discarded.
func TestIOContextRBD(t *testing.T) {
	r, h := ioRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
		nc.Device, nc.Workers = rbdDevice(t, 4<<20), 2
	})
	c, err := NewIOContext(16, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h.lq.q.UseIOContext(c)
	run := func(what string, cmd nvme.Command, data []byte, segs int) {
		t.Helper()
		rsp, onRing := ctxRun(t, h.lq, c, cmd, data, segs)
		if st := rsp.Status(); !st.IsSuccess() || !onRing {
			t.Fatalf("%s: %v, on the ring %v", what, st, onRing)
		}
	}
	const nlb = 256 // 128 KiB
	data := alignedBuf(t, nlb*512)
	copy(data, pattern(len(data), 3))
	run("write", ioCmd(nvme.OpWrite, 1, 0, nlb), data, 4)
	got := alignedBuf(t, len(data))
	run("read", ioCmd(nvme.OpRead, 2, 0, nlb), got, 2)
	if !bytes.Equal(got, data) {
		t.Fatal("read back differs from what was written")
	}
	fl := newCmd(nvme.OpFlush, 3)
	fl.SetNSID(1)
	run("flush", fl, nil, 1)

	run("write zeroes", ioCmd(nvme.OpWriteZeroes, 4, 8, 16), nil, 1)
	ranges := alignedBuf(t, 2*nvme.DSMRangeSize)
	r0, r1 := nvme.DSMRange(ranges[:16]), nvme.DSMRange(ranges[16:])
	r0.SetSLBA(64)
	r0.SetNumBlocks(8)
	r1.SetSLBA(128)
	r1.SetNumBlocks(16)
	dsm := newCmd(nvme.OpDSM, 5)
	dsm.SetNSID(1)
	dsm.SetDSM(2, true)
	run("deallocate", withData(dsm, len(ranges)), ranges, 1)
	run("read", ioCmd(nvme.OpRead, 6, 0, nlb), got, 1)
	want := append([]byte(nil), data...)
	for _, z := range [][2]int{{8, 16}, {64, 8}, {128, 16}} {
		clear(want[z[0]*512 : (z[0]+z[1])*512])
	}
	if !bytes.Equal(got, want) {
		t.Fatal("after write zeroes and deallocate: not zeroes where they were, or zeroes elsewhere")
	}

	// The second range is past the end: nothing is discarded.
	r0.SetSLBA(0)
	r1.SetSLBA(4<<20/512 - 8)
	rsp, onRing := ctxRun(t, h.lq, c, withData(dsm, len(ranges)), ranges, 1)
	if st := rsp.Status(); st != nvme.StatusLBAOutOfRange.WithDNR() || onRing {
		t.Fatalf("deallocate past the end: %v, on the ring %v", st, onRing)
	}
	run("read", ioCmd(nvme.OpRead, 7, 0, 8), got[:8*512], 1)
	if !bytes.Equal(got[:8*512], data[:8*512]) {
		t.Fatal("a refused deallocation discarded its first range")
	}
	s := r.ns.Stats()
	if s.ZeroOps != 1 || s.DiscardOps != 1 || s.WriteOps != 1 || s.ReadOps != 3 || s.FlushOps != 1 {
		t.Fatalf("stats %+v", s)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d requests pending on the context", c.Pending())
	}
}
