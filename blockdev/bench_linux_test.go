package blockdev

import (
	"path/filepath"
	"testing"
)

// BenchmarkIO measures 4 KiB ReadAt and WriteAt with mmap'd buffers, as the
// transports pass them; allocs/op must stay 0.
func BenchmarkIO(b *testing.B) {
	const (
		size = 64 << 20
		io   = 4096
	)
	backends := []struct {
		name string
		open func(b *testing.B) Device
	}{
		{"memory", func(b *testing.B) Device {
			d, err := NewMemory(size, 4096)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
		{"file", func(b *testing.B) Device {
			d, err := OpenFile(Options{Path: filepath.Join(b.TempDir(), "ns.img"), Size: size, BlockSize: 4096})
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
		{"file-buffered", func(b *testing.B) Device {
			d, err := OpenFile(Options{Path: filepath.Join(b.TempDir(), "ns.img"), Size: size, BlockSize: 4096, Buffered: true})
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
	}
	ops := []struct {
		name string
		do   func(Device, []byte, int64) (int, error)
	}{
		{"ReadAt", Device.ReadAt},
		{"WriteAt", Device.WriteAt},
	}
	for _, be := range backends {
		for _, op := range ops {
			b.Run(be.name+"/"+op.name, func(b *testing.B) {
				d := be.open(b)
				defer d.Close()
				buf := mmapBuf(b, io)
				b.SetBytes(io)
				b.ReportAllocs()
				off := int64(0)
				for b.Loop() {
					if _, err := op.do(d, buf, off); err != nil {
						b.Fatal(err)
					}
					// Stride through the device so reads are not all one block.
					off = (off + 1<<20 + io) % size
				}
			})
		}
	}
}
