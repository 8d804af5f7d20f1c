package blockdev

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFileResize: a file namespace grows in place, and what it held stays.
func TestFileResize(t *testing.T) {
	tests := []struct {
		name     string
		readOnly bool
		from     int64 // file and device size at open
		grownTo  int64 // the file's length set from outside after open, if not 0
		to       int64
		wantSize int64 // Size() afterwards
		wantFile int64 // file length afterwards
		wantErr  error
	}{
		{name: "grow", from: 1 << 20, to: 4 << 20, wantSize: 4 << 20, wantFile: 4 << 20},
		{name: "grow rounds down", from: 1 << 20, to: 2<<20 + 100, wantSize: 2 << 20, wantFile: 2 << 20},
		{name: "smaller uses a prefix", from: 2 << 20, to: 1 << 20, wantSize: 1 << 20, wantFile: 2 << 20},
		{name: "below one block", from: 1 << 20, to: 100, wantSize: 1 << 20, wantFile: 1 << 20, wantErr: ErrInvalidArgument},
		{name: "0 takes the file's length", from: 1 << 20, grownTo: 3<<20 + 100, to: 0, wantSize: 3 << 20, wantFile: 3<<20 + 100},
		{name: "0 on an unchanged file", from: 1 << 20, to: 0, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "0 on a file cut shorter", from: 2 << 20, grownTo: 1 << 20, to: 0, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "0 read-only", readOnly: true, from: 1 << 20, grownTo: 2 << 20, to: 0, wantSize: 2 << 20, wantFile: 2 << 20},
		{name: "read-only cannot grow", readOnly: true, from: 1 << 20, to: 2 << 20, wantSize: 1 << 20, wantFile: 1 << 20, wantErr: ErrReadOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "disk.img")
			if err := os.WriteFile(path, make([]byte, tc.from), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := OpenFile(Options{Path: path, ReadOnly: tc.readOnly, Buffered: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !tc.readOnly {
				p := make([]byte, 4096)
				pattern(p, 0, 7)
				if _, err := d.WriteAt(p, 0); err != nil {
					t.Fatal(err)
				}
			}
			if tc.grownTo != 0 {
				if err := os.Truncate(path, tc.grownTo); err != nil {
					t.Fatal(err)
				}
			}
			want := tc.from
			if tc.grownTo != 0 {
				want = tc.grownTo &^ 511
			}
			if got, err := d.(Resizer).BackingSize(); err != nil || got != want {
				t.Fatalf("BackingSize() = %d, %v; want %d", got, err, want)
			}
			err = d.(Resizer).Resize(tc.to)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resize(%d) = %v, want %v", tc.to, err, tc.wantErr)
			}
			if got := d.Size(); got != tc.wantSize {
				t.Fatalf("Size() = %d, want %d", got, tc.wantSize)
			}
			if st, _ := os.Stat(path); st.Size() != tc.wantFile {
				t.Fatalf("file is %d bytes, want %d", st.Size(), tc.wantFile)
			}
			// The new end is readable, past it is not, and the data stayed.
			p := make([]byte, 4096)
			if _, err := d.ReadAt(p, d.Size()-4096); err != nil {
				t.Fatalf("read the last block: %v", err)
			}
			if _, err := d.ReadAt(p, d.Size()); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("read past the end: %v, want ErrOutOfRange", err)
			}
			if !tc.readOnly {
				if _, err := d.ReadAt(p, 0); err != nil {
					t.Fatal(err)
				}
				wantPattern(t, p, 0, 7)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		d, err := OpenFile(Options{Path: filepath.Join(t.TempDir(), "d"), Size: 1 << 20, Buffered: true})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if err := d.(Resizer).Resize(2 << 20); !errors.Is(err, ErrClosed) {
			t.Fatalf("Resize after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("memory cannot", func(t *testing.T) {
		d, err := NewMemory(1<<20, 512)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, ok := d.(Resizer); ok {
			t.Fatal("memory devices do not resize: they are mapped once")
		}
	})
}

// TestBlockDeviceResize: a block device takes its size again from the
// kernel after the device grew (a loop device over a file that grew).
func TestBlockDeviceResize(t *testing.T) {
	if _, reason := loopAvailable(); reason != "" {
		t.Skipf("needs a loop device: %s", reason)
	}
	backing := filepath.Join(t.TempDir(), "backing.img")
	dev, err := attachLoop(backing, 1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { detachLoop(dev) })
	d, err := OpenBlockDevice(Options{Path: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := d.(Resizer)
	if err := r.Resize(4 << 20); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Resize past the device = %v, want ErrInvalidArgument", err)
	}
	if err := r.Resize(0); err != nil || d.Size() != 1<<20 {
		t.Fatalf("Resize(0) = %v, size %d; want the whole device, 1 MiB", err, d.Size())
	}
	if err := r.Resize(512 << 10); err != nil || d.Size() != 512<<10 {
		t.Fatalf("Resize(512 KiB) = %v, size %d", err, d.Size())
	}
	if got, err := r.BackingSize(); err != nil || got != 1<<20 {
		t.Fatalf("BackingSize() = %d, %v; want the device's 1 MiB", got, err)
	}
	// The volume grows underneath (lvextend; here the loop device's file
	// and losetup -c).
	if err := os.Truncate(backing, 4<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "-c", dev).CombinedOutput(); err != nil {
		t.Fatalf("losetup -c: %v: %s", err, out)
	}
	if got, err := r.BackingSize(); err != nil || got != 4<<20 {
		t.Fatalf("BackingSize() after growing = %d, %v; want 4 MiB", got, err)
	}
	if d.Size() != 512<<10 {
		t.Fatalf("the size changed before Resize: %d", d.Size())
	}
	if err := r.Resize(0); err != nil || d.Size() != 4<<20 {
		t.Fatalf("Resize(0) after growing = %v, size %d; want 4 MiB", err, d.Size())
	}
}
