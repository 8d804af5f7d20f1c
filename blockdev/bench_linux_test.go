package blockdev

import (
	"fmt"
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

// BenchmarkRing measures 4 KiB reads queued on a Ring, depth at a time, as
// an I/O context drives them: queue, submit, reap until every one is back.
// ns/op is per read; allocs/op must stay 0.
func BenchmarkRing(b *testing.B) {
	const (
		size = 64 << 20
		io   = 4096
	)
	for _, be := range []struct {
		name     string
		buffered bool
	}{{"file", false}, {"file-buffered", true}} {
		for _, depth := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/depth-%d", be.name, depth), func(b *testing.B) {
				d, err := OpenFile(Options{Path: filepath.Join(b.TempDir(), "ns.img"), Size: size, BlockSize: 4096, Buffered: be.buffered})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				r, err := NewRing(depth)
				if err != nil {
					b.Fatalf("NewRing: %v", err)
				}
				defer r.Close()
				q := d.(Queuer)
				bufs := make([][]byte, depth)
				for i := range bufs {
					bufs[i] = mmapBuf(b, io)
				}
				out := make([]Completion, depth)
				b.SetBytes(io)
				b.ReportAllocs()
				off := int64(0)
				for i := 0; i < b.N; i += depth {
					for j := range depth {
						if err := q.QueueRead(r, bufs[j], off, uint64(j)); err != nil {
							b.Fatal(err)
						}
						off = (off + 1<<20 + io) % size
					}
					for done := 0; done < depth; {
						if err := r.Submit(); err != nil {
							b.Fatal(err)
						}
						n := r.Reap(out)
						for _, c := range out[:n] {
							if c.Err != nil {
								b.Fatal(c.Err)
							}
						}
						done += n
					}
				}
			})
		}
	}
}
