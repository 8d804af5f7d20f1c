package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// ioRig connects a controller with one I/O queue.
func ioRig(t *testing.T, opts ...rigOpt) (*rig, *host) {
	r := newRig(t, opts...)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	return r, r.ioConnect(1, cntlid)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestReadWrite(t *testing.T) {
	for _, backend := range []string{"memory", "file"} {
		t.Run(backend, func(t *testing.T) {
			var opts []rigOpt
			if backend == "file" {
				opts = append(opts, func(_ *SubsystemConfig, nc *NamespaceConfig) {
					dev, err := blockdev.OpenFile(blockdev.Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 4 << 20, BlockSize: 512})
					if err != nil {
						t.Fatal(err)
					}
					nc.Device, nc.Workers = dev, 4
				})
			}
			_, h := ioRig(t, opts...)
			for _, tc := range []struct {
				slba uint64
				nlb  uint32
			}{{0, 1}, {1, 8}, {100, 256}, {8191, 1}, {4096, 256}} {
				data := pattern(int(tc.nlb)*512, byte(tc.slba))
				h.mustOK(ioCmd(nvme.OpWrite, 20, tc.slba, tc.nlb), data)
				got := make([]byte, len(data))
				h.mustOK(ioCmd(nvme.OpRead, 21, tc.slba, tc.nlb), got)
				if !bytes.Equal(got, data) {
					t.Fatalf("slba %d nlb %d: read back differs", tc.slba, tc.nlb)
				}
			}
			h.mustOK(func() nvme.Command { c := newCmd(nvme.OpFlush, 22); c.SetNSID(1); return c }(), nil)
		})
	}
}

func TestIOErrors(t *testing.T) {
	_, h := ioRig(t)
	big := make([]byte, 256<<10)
	tests := []struct {
		name string
		cmd  func() nvme.Command
		data []byte
		want nvme.Status
	}{
		{"read past the end", func() nvme.Command { return ioCmd(nvme.OpRead, 30, 8191, 2) }, big, nvme.StatusLBAOutOfRange.WithDNR()},
		{"SLBA far past the end", func() nvme.Command { return ioCmd(nvme.OpWrite, 31, 1<<60, 1) }, big, nvme.StatusLBAOutOfRange.WithDNR()},
		{"write zeroes past the end", func() nvme.Command { return ioCmd(nvme.OpWriteZeroes, 32, 8000, 500) }, nil, nvme.StatusLBAOutOfRange.WithDNR()},
		{"over MDTS", func() nvme.Command { return ioCmd(nvme.OpRead, 33, 0, 257) }, big, nvme.StatusInvalidField.WithDNR()},
		{"unknown namespace", func() nvme.Command { c := ioCmd(nvme.OpRead, 34, 0, 1); c.SetNSID(2); return c }, big, nvme.StatusInvalidNamespace.WithDNR()},
		{"broadcast namespace", func() nvme.Command { c := ioCmd(nvme.OpRead, 35, 0, 1); c.SetNSID(0xffffffff); return c }, big, nvme.StatusInvalidNamespace.WithDNR()},
		{"unknown opcode", func() nvme.Command { return ioCmd(0x7e, 36, 0, 1) }, big, nvme.StatusInvalidOpcode.WithDNR()},
		{"compare unsupported", func() nvme.Command { return ioCmd(nvme.OpCompare, 37, 0, 1) }, big, nvme.StatusInvalidOpcode.WithDNR()},
		{"PRP data pointer", func() nvme.Command { c := ioCmd(nvme.OpRead, 38, 0, 1); c.SetFlags(0); return c }, big, nvme.StatusInvalidField.WithDNR()},
		{"fused", func() nvme.Command {
			c := ioCmd(nvme.OpRead, 39, 0, 1)
			c.SetFlags(nvme.PSDTSGLContig<<6 | 1)
			return c
		}, big, nvme.StatusInvalidField.WithDNR()},
		{"SGL shorter than the data", func() nvme.Command { return withData(ioCmd(nvme.OpWrite, 40, 0, 8), 512) }, big, nvme.StatusDataSGLLengthInvalid.WithDNR()},
		{"property get on an I/O queue", func() nvme.Command {
			c := newCmd(nvme.OpFabrics, 41)
			c.SetFCType(nvme.FCTypePropertyGet)
			return c
		}, nil, nvme.StatusInvalidField.WithDNR()},
		{"unknown fabrics command", func() nvme.Command { c := newCmd(nvme.OpFabrics, 42); c.SetFCType(0x33); return c }, nil, nvme.StatusInvalidOpcode.WithDNR()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.submit(tc.cmd(), tc.data).Status(); got != tc.want {
				t.Fatalf("status %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriteZeroesAndDeallocate(t *testing.T) {
	_, h := ioRig(t)
	fill := func() {
		h.mustOK(ioCmd(nvme.OpWrite, 50, 0, 64), pattern(64*512, 9))
	}
	readBack := func(slba uint64, nlb uint32) []byte {
		b := make([]byte, int(nlb)*512)
		h.mustOK(ioCmd(nvme.OpRead, 51, slba, nlb), b)
		return b
	}
	fill()
	wz := ioCmd(nvme.OpWriteZeroes, 52, 8, 16)
	h.mustOK(wz, nil)
	got := readBack(0, 64)
	if !bytes.Equal(got[8*512:24*512], make([]byte, 16*512)) {
		t.Fatal("write zeroes left data")
	}
	if !bytes.Equal(got[:8*512], pattern(64*512, 9)[:8*512]) || !bytes.Equal(got[24*512:], pattern(64*512, 9)[24*512:]) {
		t.Fatal("write zeroes touched neighbouring blocks")
	}

	fill()
	ranges := make([]byte, 2*nvme.DSMRangeSize)
	r0 := nvme.DSMRange(ranges[:16])
	r0.SetSLBA(0)
	r0.SetNumBlocks(8)
	r1 := nvme.DSMRange(ranges[16:])
	r1.SetSLBA(32)
	r1.SetNumBlocks(8)
	dsm := newCmd(nvme.OpDSM, 53)
	dsm.SetNSID(1)
	dsm.SetDSM(2, true)
	h.mustOK(withData(dsm, len(ranges)), ranges)
	got = readBack(0, 64)
	if !bytes.Equal(got[:8*512], make([]byte, 8*512)) || !bytes.Equal(got[32*512:40*512], make([]byte, 8*512)) {
		t.Fatal("deallocated blocks do not read as zeroes")
	}
	if !bytes.Equal(got[8*512:32*512], pattern(64*512, 9)[8*512:32*512]) {
		t.Fatal("deallocate touched other blocks")
	}
	r1.SetSLBA(8190)
	r1.SetNumBlocks(8)
	if st := h.submit(withData(dsm, len(ranges)), ranges).Status(); st != nvme.StatusLBAOutOfRange.WithDNR() {
		t.Fatalf("range past the end: %v", st)
	}
}

func TestReadOnlyNamespace(t *testing.T) {
	_, h := ioRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.ReadOnly = true })
	if st := h.submit(ioCmd(nvme.OpWrite, 60, 0, 1), make([]byte, 512)).Status(); st != nvme.StatusNamespaceWriteProtected.WithDNR() {
		t.Fatalf("write: %v", st)
	}
	h.mustOK(ioCmd(nvme.OpRead, 61, 0, 1), make([]byte, 512))
}

// failingDev fails every I/O with a fixed error.
type failingDev struct {
	blockdev.Device
	err error
}

func (f failingDev) ReadAt(p []byte, off int64) (int, error)  { return 0, f.err }
func (f failingDev) WriteAt(p []byte, off int64) (int, error) { return 0, f.err }
func (f failingDev) Flush() error                             { return f.err }
func (f failingDev) Discard(off, n int64) error               { return f.err }

func TestBackendStatus(t *testing.T) {
	tests := []struct {
		name string
		op   uint8
		err  error
		want nvme.Status
	}{
		{"EIO on read", nvme.OpRead, syscall.EIO, nvme.StatusUnrecoveredReadError},
		{"EIO on write", nvme.OpWrite, syscall.EIO, nvme.StatusWriteFault},
		{"ENOSPC", nvme.OpWrite, syscall.ENOSPC, nvme.StatusCapacityExceeded.WithDNR()},
		{"read only", nvme.OpWrite, blockdev.ErrReadOnly, nvme.StatusNamespaceWriteProtected.WithDNR()},
		{"out of range", nvme.OpRead, blockdev.ErrOutOfRange, nvme.StatusLBAOutOfRange.WithDNR()},
		{"discard unsupported is success", nvme.OpDSM, blockdev.ErrNotSupported, nvme.StatusSuccess},
		{"wrapped", nvme.OpRead, errors.Join(errors.New("ctx"), os.ErrDeadlineExceeded), nvme.StatusInternalError},
		// A fenced or timed-out backend is this path's failure, not the
		// data's: an ANA status without DNR, which the Linux host retries
		// on another path (status.go).
		{"fenced read", nvme.OpRead, fmt.Errorf("read p/i at 0: %w: %w", blockdev.ErrFenced, syscall.ESHUTDOWN), nvme.StatusANAInaccessible},
		{"fenced write", nvme.OpWrite, fmt.Errorf("write p/i at 0: %w: %w", blockdev.ErrFenced, syscall.ESHUTDOWN), nvme.StatusANAInaccessible},
		{"fenced flush", nvme.OpFlush, blockdev.ErrFenced, nvme.StatusANAInaccessible},
		{"fenced write zeroes", nvme.OpWriteZeroes, blockdev.ErrFenced, nvme.StatusANAInaccessible},
		{"fenced deallocate", nvme.OpDSM, blockdev.ErrFenced, nvme.StatusANAInaccessible},
		{"timed-out read", nvme.OpRead, fmt.Errorf("read p/i at 0: %w: %w", blockdev.ErrTimeout, syscall.ETIMEDOUT), nvme.StatusANAInaccessible},
		{"timed-out write", nvme.OpWrite, fmt.Errorf("write p/i at 0: %w: %w", blockdev.ErrTimeout, syscall.ETIMEDOUT), nvme.StatusANAInaccessible},
		{"timed-out flush", nvme.OpFlush, blockdev.ErrTimeout, nvme.StatusANAInaccessible},
		// An errno alone says nothing of paths: the backend decides.
		{"ETIMEDOUT of a file", nvme.OpRead, syscall.ETIMEDOUT, nvme.StatusInternalError},
		{"ESHUTDOWN of a file", nvme.OpWrite, syscall.ESHUTDOWN, nvme.StatusInternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := backendStatus(tc.op, tc.err); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("through the queue", func(t *testing.T) {
		_, h := ioRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
			nc.Device = failingDev{Device: nc.Device, err: syscall.EIO}
			nc.Workers = 2
		})
		if st := h.submit(ioCmd(nvme.OpRead, 70, 0, 1), make([]byte, 512)).Status(); st != nvme.StatusUnrecoveredReadError {
			t.Fatalf("read: %v", st)
		}
		if st := h.submit(ioCmd(nvme.OpWrite, 71, 0, 1), make([]byte, 512)).Status(); st != nvme.StatusWriteFault {
			t.Fatalf("write: %v", st)
		}
	})
	t.Run("fenced, through the queue", func(t *testing.T) {
		_, h := ioRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) {
			nc.Device = failingDev{Device: nc.Device, err: fmt.Errorf("write p/i at 0: %w: %w", blockdev.ErrFenced, syscall.ESHUTDOWN)}
			nc.Workers = 2
		})
		st := h.submit(ioCmd(nvme.OpWrite, 72, 0, 1), make([]byte, 512)).Status()
		if st != nvme.StatusANAInaccessible || st.DNR() {
			t.Fatalf("write: %v, want %v without DNR", st, nvme.StatusANAInaccessible)
		}
	})
}
