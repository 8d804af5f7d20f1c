package blockdev

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
)

const testSize = 4 << 20

func TestRoundTrip(t *testing.T) {
	for _, k := range kinds(t) {
		for _, bs := range []uint32{512, 4096} {
			t.Run(fmt.Sprintf("%s/bs%d", k.name, bs), func(t *testing.T) {
				d := k.open(t, testSize, bs)
				if d.BlockSize() != bs || d.Size() != testSize {
					t.Fatalf("geometry: size %d block %d, want %d %d", d.Size(), d.BlockSize(), testSize, bs)
				}
				b := int64(bs)
				tests := []struct {
					name      string
					off, n    int64
					unaligned bool // caller buffer not page-aligned: bounce path
				}{
					{"first block", 0, b, false},
					{"second block", b, b, false},
					{"odd blocks", 3 * b, 5 * b, false},
					{"last block", testSize - b, b, false},
					{"128KiB mid", 1 << 20, 128 << 10, false},
					{"larger than bounce buffer", 2 << 20, bounceSize + 2*b, false},
					{"whole device", 0, testSize, false},
					{"unaligned buffer", 5 * b, 3 * b, true},
					{"unaligned large buffer", 1 << 20, bounceSize + b, true},
				}
				for i, tc := range tests {
					var w, r []byte
					if tc.unaligned {
						w, r = unalignedBuf(int(tc.n)), unalignedBuf(int(tc.n))
					} else {
						w, r = mmapBuf(t, int(tc.n)), mmapBuf(t, int(tc.n))
					}
					seed := byte(i + 1)
					pattern(w, tc.off, seed)
					if n, err := d.WriteAt(w, tc.off); err != nil || n != len(w) {
						t.Fatalf("%s: WriteAt = %d, %v", tc.name, n, err)
					}
					if n, err := d.ReadAt(r, tc.off); err != nil || n != len(r) {
						t.Fatalf("%s: ReadAt = %d, %v", tc.name, n, err)
					}
					wantPattern(t, r, tc.off, seed)
				}
				if err := d.Flush(); err != nil {
					t.Fatalf("Flush: %v", err)
				}
			})
		}
	}
}

func TestRangeErrors(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			const bs = 4096
			d := k.open(t, testSize, bs)
			tests := []struct {
				name   string
				off, n int64
				want   error
			}{
				{"zero length", 0, 0, nil},
				{"negative offset", -bs, bs, ErrInvalidArgument},
				{"negative length", 0, -bs, ErrInvalidArgument},
				{"unaligned offset", 512, bs, ErrInvalidArgument},
				{"unaligned length", 0, bs + 512, ErrInvalidArgument},
				{"ends past size", testSize - bs, 2 * bs, ErrOutOfRange},
				{"starts at size", testSize, bs, ErrOutOfRange},
				{"starts past size", testSize + bs, bs, ErrOutOfRange},
				{"offset overflows", math.MaxInt64 &^ (bs - 1), 2 * bs, ErrOutOfRange},
			}
			for _, tc := range tests {
				wantErr(t, tc.name+": Discard", d.Discard(tc.off, tc.n), tc.want)
				wantErr(t, tc.name+": WriteZeroes", d.WriteZeroes(tc.off, tc.n), tc.want)
				if tc.n < 0 || tc.n > 1<<20 {
					continue // no buffer of that length
				}
				buf := mmapBuf(t, int(max(tc.n, 1)))[:tc.n]
				_, err := d.ReadAt(buf, tc.off)
				wantErr(t, tc.name+": ReadAt", err, tc.want)
				_, err = d.WriteAt(buf, tc.off)
				wantErr(t, tc.name+": WriteAt", err, tc.want)
			}
		})
	}
}

func TestDiscardAndWriteZeroes(t *testing.T) {
	type op struct {
		name string
		do   func(Device, int64, int64) error
	}
	ops := []op{
		{"Discard", Device.Discard},
		{"WriteZeroes", Device.WriteZeroes},
	}
	for _, k := range kinds(t) {
		for _, o := range ops {
			t.Run(k.name+"/"+o.name, func(t *testing.T) {
				const bs = 512
				d := k.open(t, testSize, bs)
				tests := []struct {
					name   string
					off, n int64
				}{
					{"one block", bs, bs},
					{"within a page", 4096 + bs, 2 * bs},
					{"across pages", 4096 - bs, 4096 + 2*bs},
					{"many pages unaligned", 64<<10 + bs, 300<<10 + bs},
					{"larger than bounce buffer", 1 << 20, 3 * bounceSize},
					{"last block", testSize - bs, bs},
				}
				buf := mmapBuf(t, testSize)
				for _, tc := range tests {
					pattern(buf, 0, 0x5a)
					if _, err := d.WriteAt(buf, 0); err != nil {
						t.Fatalf("%s: WriteAt: %v", tc.name, err)
					}
					if err := o.do(d, tc.off, tc.n); err != nil {
						t.Fatalf("%s: %s(%d, %d): %v", tc.name, o.name, tc.off, tc.n, err)
					}
					if _, err := d.ReadAt(buf, 0); err != nil {
						t.Fatalf("%s: ReadAt: %v", tc.name, err)
					}
					if o.name == "WriteZeroes" || d.DiscardZeroes() {
						wantZeroes(t, buf[tc.off:tc.off+tc.n], tc.off)
					}
					// Neighbours are untouched whatever the backend.
					wantPattern(t, buf[:tc.off], 0, 0x5a)
					wantPattern(t, buf[tc.off+tc.n:], tc.off+tc.n, 0x5a)
				}
			})
		}
	}
}

func TestDiscardZeroes(t *testing.T) {
	want := map[string]bool{
		"memory": true, "file": true, "file-buffered": true, "file-tmpfs": true,
		"blockdev-loop": false, "rbd": true,
	}
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			if got := k.open(t, testSize, 512).DiscardZeroes(); got != want[k.name] {
				t.Fatalf("DiscardZeroes() = %v, want %v", got, want[k.name])
			}
		})
	}
}

func TestClose(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			d := k.open(t, testSize, 512)
			if err := d.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			buf := mmapBuf(t, 512)
			calls := []struct {
				name string
				err  error
			}{
				{"Close", d.Close()},
				{"Flush", d.Flush()},
				{"Discard", d.Discard(0, 512)},
				{"WriteZeroes", d.WriteZeroes(0, 512)},
			}
			_, err := d.ReadAt(buf, 0)
			calls = append(calls, struct {
				name string
				err  error
			}{"ReadAt", err})
			_, err = d.WriteAt(buf, 0)
			calls = append(calls, struct {
				name string
				err  error
			}{"WriteAt", err})
			for _, c := range calls {
				wantErr(t, c.name+" after Close", c.err, ErrClosed)
			}
		})
	}
}

// TestConcurrent runs writers on private regions and readers on a shared,
// stable region at the same time; run it with -race.
func TestConcurrent(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			const (
				bs      = 4096
				workers = 8
				region  = 256 << 10
				rounds  = 20
			)
			d := k.open(t, testSize, bs)
			shared := int64(workers * region)
			init := mmapBuf(t, region)
			pattern(init, shared, 0xee)
			if _, err := d.WriteAt(init, shared); err != nil {
				t.Fatalf("WriteAt: %v", err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*workers)
			for w := range workers {
				wbuf, rbuf, sbuf := mmapBuf(t, region), mmapBuf(t, region), unalignedBuf(region)
				wg.Go(func() {
					off := int64(w * region)
					for r := range rounds {
						seed := byte(w*rounds + r)
						pattern(wbuf, off, seed)
						if _, err := d.WriteAt(wbuf, off); err != nil {
							errs <- err
							return
						}
						if _, err := d.ReadAt(rbuf, off); err != nil {
							errs <- err
							return
						}
						want := make([]byte, region)
						pattern(want, off, seed)
						if i := firstDiff(rbuf, want); i >= 0 {
							errs <- fmt.Errorf("worker %d round %d: mismatch at %d", w, r, off+int64(i))
							return
						}
						if r%4 == 0 {
							if err := d.Flush(); err != nil {
								errs <- err
								return
							}
						}
					}
				})
				wg.Go(func() {
					for range rounds {
						if _, err := d.ReadAt(sbuf, shared); err != nil {
							errs <- err
							return
						}
						want := make([]byte, region)
						pattern(want, shared, 0xee)
						if i := firstDiff(sbuf, want); i >= 0 {
							errs <- fmt.Errorf("shared reader %d: mismatch at %d", w, shared+int64(i))
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func TestNoAllocs(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			d := k.open(t, testSize, 4096)
			buf := mmapBuf(t, 4096)
			if n := testing.AllocsPerRun(100, func() {
				if _, err := d.WriteAt(buf, 8192); err != nil {
					t.Fatal(err)
				}
				if _, err := d.ReadAt(buf, 8192); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("ReadAt+WriteAt allocate %v times per call", n)
			}
		})
	}
}

func TestSentinelsDistinct(t *testing.T) {
	all := []error{ErrOutOfRange, ErrInvalidArgument, ErrReadOnly, ErrNotSupported, ErrClosed}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
}

func TestMemorySize(t *testing.T) {
	tests := []struct {
		name     string
		size     int64
		bs       uint32
		wantSize int64
		wantBS   uint32
		wantErr  error
	}{
		{"exact", 1 << 20, 512, 1 << 20, 512, nil},
		{"default block size", 1 << 20, 0, 1 << 20, 512, nil},
		{"rounded down to 512", 1<<20 + 100, 512, 1 << 20, 512, nil},
		{"rounded down to 4096", 10000, 4096, 8192, 4096, nil},
		{"not a page multiple", 4096 + 512, 512, 4096 + 512, 512, nil},
		{"below one block", 100, 512, 0, 0, ErrInvalidArgument},
		{"zero", 0, 512, 0, 0, ErrInvalidArgument},
		{"negative", -4096, 512, 0, 0, ErrInvalidArgument},
		{"bad block size", 1 << 20, 2048, 0, 0, ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewMemory(tc.size, tc.bs)
			if tc.wantErr != nil {
				wantErr(t, "NewMemory", err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Size() != tc.wantSize || d.BlockSize() != tc.wantBS {
				t.Fatalf("geometry %d/%d, want %d/%d", d.Size(), d.BlockSize(), tc.wantSize, tc.wantBS)
			}
			// The last block is usable and zeroed.
			buf := mmapBuf(t, int(tc.wantBS))
			pattern(buf, 0, 1)
			if _, err := d.ReadAt(buf, tc.wantSize-int64(tc.wantBS)); err != nil {
				t.Fatal(err)
			}
			wantZeroes(t, buf, tc.wantSize-int64(tc.wantBS))
		})
	}
}
