package fabric

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// volatileDev is a device with a volatile cache of its own, as a file is in the page cache: what
// WriteAt, WriteZeroes and Discard change would be lost on a power cut until a Flush.
type volatileDev struct {
	blockdev.Device
	mu    sync.Mutex
	dirty bool // changed since the last flush
}

func (d *volatileDev) set(dirty bool) {
	d.mu.Lock()
	d.dirty = dirty
	d.mu.Unlock()
}

func (d *volatileDev) isDirty() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dirty
}

func (d *volatileDev) WriteAt(p []byte, off int64) (int, error) {
	n, err := d.Device.WriteAt(p, off)
	d.set(true)
	return n, err
}

func (d *volatileDev) WriteZeroes(off, n int64) error {
	err := d.Device.WriteZeroes(off, n)
	d.set(true)
	return err
}

func (d *volatileDev) Discard(off, n int64) error {
	err := d.Device.Discard(off, n)
	d.set(true)
	return err
}

func (d *volatileDev) Flush() error {
	d.set(false)
	return d.Device.Flush()
}

// TestDurableWrites: a write is durable at its completion (the device flushed after it) when it
// has Force Unit Access or the host turned the volatile write cache off (Set Features 06h), and
// Write Zeroes too: both are writes (both have FUA in the NVM command set). With the
// cache on and no FUA nothing is flushed: that is what the cache is for. Before, Write Zeroes
// with the cache off completed unflushed.
func TestDurableWrites(t *testing.T) {
	tests := []struct {
		name     string
		op       uint8
		fua      bool
		cacheOff bool
		durable  bool
	}{
		{"write, cache on", nvme.OpWrite, false, false, false},
		{"write FUA, cache on", nvme.OpWrite, true, false, true},
		{"write, cache off", nvme.OpWrite, false, true, true},
		{"write FUA, cache off", nvme.OpWrite, true, true, true},
		{"write zeroes, cache on", nvme.OpWriteZeroes, false, false, false},
		{"write zeroes FUA, cache on", nvme.OpWriteZeroes, true, false, true},
		{"write zeroes, cache off", nvme.OpWriteZeroes, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dev *volatileDev
			r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
				dev = &volatileDev{Device: nc.Device}
				nc.Device = dev
			})
			admin, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
			h := r.ioConnect(1, cntlid)
			if tc.cacheOff {
				c := newCmd(nvme.OpAdminSetFeatures, 2)
				c.SetCDW(10, nvme.FeatVolatileWriteCache)
				c.SetCDW(11, 0)
				admin.mustOK(c, nil)
			}
			const nlb = 8
			c := ioCmd(tc.op, 3, 16, nlb)
			if tc.fua {
				c.SetCDW(12, c.CDW(12)|1<<30)
			}
			var data []byte
			if tc.op == nvme.OpWrite {
				data = pattern(nlb*512, 5)
			}
			h.mustOK(c, data)
			if got := !dev.isDirty(); got != tc.durable {
				t.Fatalf("flushed at completion: %v, want %v", got, tc.durable)
			}
		})
	}
}

// dsyncQueuer is a file device that records whether each write queued on a ring asked to be
// durable at completion (RWF_DSYNC).
type dsyncQueuer struct {
	blockdev.Device
	q       blockdev.Queuer
	mu      sync.Mutex
	durable []bool
}

func (d *dsyncQueuer) QueueRead(r *blockdev.Ring, p []byte, off int64, tag uint64) error {
	return d.q.QueueRead(r, p, off, tag)
}

func (d *dsyncQueuer) QueueWrite(r *blockdev.Ring, p []byte, off int64, durable bool, tag uint64) error {
	d.mu.Lock()
	d.durable = append(d.durable, durable)
	d.mu.Unlock()
	return d.q.QueueWrite(r, p, off, durable, tag)
}

func (d *dsyncQueuer) QueueFlush(r *blockdev.Ring, tag uint64) error { return d.q.QueueFlush(r, tag) }

// TestDurableWritesOnRing: a write a poller queues on its ring (io_uring) asks for RWF_DSYNC,
// every segment of it, exactly when it must be durable at completion (TestDurableWrites).
func TestDurableWritesOnRing(t *testing.T) {
	tests := []struct {
		name          string
		fua, cacheOff bool
		durable       bool
	}{
		{"cache on", false, false, false},
		{"FUA", true, false, true},
		{"cache off", false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dev *dsyncQueuer
			r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
				f, err := blockdev.OpenFile(blockdev.Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 4 << 20, BlockSize: 512})
				if err != nil {
					t.Fatal(err)
				}
				dev = &dsyncQueuer{Device: f, q: f.(blockdev.Queuer)}
				nc.Device, nc.Workers = dev, 2
			})
			admin, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
			h := r.ioConnect(1, cntlid)
			if tc.cacheOff {
				c := newCmd(nvme.OpAdminSetFeatures, 2)
				c.SetCDW(10, nvme.FeatVolatileWriteCache)
				admin.mustOK(c, nil)
			}
			c, err := NewIOContext(8, -1)
			if err != nil {
				t.Fatalf("NewIOContext: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			h.lq.q.UseIOContext(c)
			const nlb, segs = 16, 2
			data := alignedBuf(t, nlb*512)
			w := ioCmd(nvme.OpWrite, 3, 100, nlb)
			if tc.fua {
				w.SetCDW(12, w.CDW(12)|1<<30)
			}
			rsp, onRing := ctxRun(t, h.lq, c, w, data, segs)
			if !rsp.Status().IsSuccess() || !onRing {
				t.Fatalf("write: %v, on the ring %v", rsp.Status(), onRing)
			}
			dev.mu.Lock()
			defer dev.mu.Unlock()
			if len(dev.durable) != segs {
				t.Fatalf("%d writes queued, want %d", len(dev.durable), segs)
			}
			for i, d := range dev.durable {
				if d != tc.durable {
					t.Errorf("segment %d queued with durable %v, want %v", i, d, tc.durable)
				}
			}
		})
	}
}
