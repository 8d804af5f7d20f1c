package blockdev

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestBlockDeviceOptions needs a loop device and skips without one.
func TestBlockDeviceOptions(t *testing.T) {
	const devSize = 4 << 20
	tests := []struct {
		name      string
		sector    uint32
		opts      Options
		wantSize  int64
		wantBS    uint32
		wantErr   error
		wantWarns int
	}{
		{name: "whole device", sector: 512, wantSize: devSize, wantBS: 512},
		{name: "whole 4k device", sector: 4096, wantSize: devSize, wantBS: 4096},
		{name: "prefix", sector: 512, opts: Options{Size: 1 << 20}, wantSize: 1 << 20, wantBS: 512},
		{name: "prefix rounded down", sector: 4096, opts: Options{Size: 1<<20 + 512}, wantSize: 1 << 20, wantBS: 4096},
		{name: "matching block size", sector: 4096, opts: Options{BlockSize: 4096}, wantSize: devSize, wantBS: 4096},
		{name: "buffered", sector: 512, opts: Options{Buffered: true}, wantSize: devSize, wantBS: 512},
		{name: "block size mismatch", sector: 4096, opts: Options{BlockSize: 512}, wantErr: ErrInvalidArgument},
		{name: "size beyond device", sector: 512, opts: Options{Size: devSize + 4096}, wantErr: ErrInvalidArgument},
		{name: "size below one block", sector: 4096, opts: Options{Size: 512}, wantErr: ErrInvalidArgument},
		{name: "negative size", sector: 512, opts: Options{Size: -1}, wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Path = needLoop(t, devSize, tc.sector)
			rec := &logRecorder{}
			o.Logger = slog.New(rec)
			d, err := Open(o)
			if tc.wantErr != nil {
				wantErr(t, "Open", err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer d.Close()
			b, ok := d.(*blockDevice)
			if !ok {
				t.Fatalf("Open returned %T, want block device", d)
			}
			if d.Size() != tc.wantSize || d.BlockSize() != tc.wantBS {
				t.Fatalf("geometry %d/%d, want %d/%d", d.Size(), d.BlockSize(), tc.wantSize, tc.wantBS)
			}
			if b.direct == o.Buffered {
				t.Errorf("direct = %v with Buffered %v", b.direct, o.Buffered)
			}
			if n := len(rec.at(slog.LevelWarn)); n != tc.wantWarns {
				t.Errorf("%d warnings, want %d", n, tc.wantWarns)
			}
			buf := mmapBuf(t, int(tc.wantBS))
			_, err = d.ReadAt(buf, tc.wantSize)
			wantErr(t, "ReadAt past Size", err, ErrOutOfRange)
		})
	}
}

func TestBlockDeviceKinds(t *testing.T) {
	dev := needLoop(t, 1<<20, 512)
	if _, err := OpenFile(Options{Path: dev}); err == nil {
		t.Error("OpenFile accepted a block device")
	} else {
		wantErr(t, "OpenFile(block device)", err, ErrInvalidArgument)
	}
	d, err := OpenBlockDevice(Options{Path: dev, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf := mmapBuf(t, 512)
	if _, err := d.ReadAt(buf, 0); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	_, err = d.WriteAt(buf, 0)
	wantErr(t, "WriteAt read-only", err, ErrReadOnly)
	wantErr(t, "Discard read-only", d.Discard(0, 512), ErrReadOnly)
	wantErr(t, "WriteZeroes read-only", d.WriteZeroes(0, 512), ErrReadOnly)
}

func TestOpenBlockDeviceErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ns.img")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want error
	}{
		{"regular file", file, ErrInvalidArgument},
		{"char device", "/dev/null", ErrInvalidArgument},
		{"missing", filepath.Join(t.TempDir(), "missing"), fs.ErrNotExist},
		{"empty path", "", ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenBlockDevice(Options{Path: tc.path})
			if err == nil {
				d.Close()
				t.Fatal("OpenBlockDevice succeeded")
			}
			wantErr(t, "OpenBlockDevice", err, tc.want)
		})
	}
}
