package blockdev

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFileSize(t *testing.T) {
	tests := []struct {
		name     string
		existing int64 // -1: no file
		opts     Options
		wantSize int64
		wantFile int64 // file size afterwards
		wantErr  error
		wantInfo bool // "larger than size" logged
	}{
		{name: "create", existing: -1, opts: Options{Size: 1 << 20}, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "create rounds size down", existing: -1, opts: Options{Size: 1<<20 + 100}, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "create 4k rounds down", existing: -1, opts: Options{Size: 10000, BlockSize: 4096}, wantSize: 8192, wantFile: 8192},
		{name: "create without size", existing: -1, opts: Options{}, wantErr: ErrInvalidArgument},
		{name: "create read-only", existing: -1, opts: Options{Size: 1 << 20, ReadOnly: true}, wantErr: fs.ErrNotExist},
		{name: "grow smaller file", existing: 4096, opts: Options{Size: 1 << 20}, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "larger file uses prefix", existing: 2 << 20, opts: Options{Size: 1 << 20}, wantSize: 1 << 20, wantFile: 2 << 20, wantInfo: true},
		{name: "same size", existing: 1 << 20, opts: Options{Size: 1 << 20}, wantSize: 1 << 20, wantFile: 1 << 20},
		{name: "size 0 adopts file size", existing: 5000, opts: Options{}, wantSize: 4608, wantFile: 5000},
		{name: "size 0 adopts file size 4k", existing: 10000, opts: Options{BlockSize: 4096}, wantSize: 8192, wantFile: 10000},
		{name: "size 0 file below one block", existing: 100, opts: Options{}, wantErr: ErrInvalidArgument},
		{name: "size 0 empty file", existing: 0, opts: Options{}, wantErr: ErrInvalidArgument},
		{name: "size below one block", existing: -1, opts: Options{Size: 100}, wantErr: ErrInvalidArgument},
		{name: "negative size", existing: -1, opts: Options{Size: -4096}, wantErr: ErrInvalidArgument},
		{name: "bad block size", existing: -1, opts: Options{Size: 1 << 20, BlockSize: 1024}, wantErr: ErrInvalidArgument},
		{name: "read-only smaller file", existing: 4096, opts: Options{Size: 1 << 20, ReadOnly: true}, wantErr: ErrInvalidArgument},
		{name: "read-only larger file", existing: 2 << 20, opts: Options{Size: 1 << 20, ReadOnly: true}, wantSize: 1 << 20, wantFile: 2 << 20, wantInfo: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ns.img")
			if tc.existing >= 0 {
				if err := os.WriteFile(path, make([]byte, tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rec := &logRecorder{}
			o := tc.opts
			o.Path, o.Logger = path, slog.New(rec)
			d, err := Open(o)
			if tc.wantErr != nil {
				wantErr(t, "Open", err, tc.wantErr)
				if _, serr := os.Stat(path); tc.existing < 0 && serr == nil {
					t.Fatal("failed Open left a file behind")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer d.Close()
			if d.Size() != tc.wantSize {
				t.Errorf("Size() = %d, want %d", d.Size(), tc.wantSize)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != tc.wantFile {
				t.Errorf("file size %d, want %d", st.Size(), tc.wantFile)
			}
			if tc.existing < 0 && st.Mode().Perm() != 0o600 {
				t.Errorf("new file mode %v, want 0600", st.Mode().Perm())
			}
			if got := len(rec.at(slog.LevelInfo)) > 0; got != tc.wantInfo {
				t.Errorf("Info logged = %v, want %v", got, tc.wantInfo)
			}
		})
	}
}

func TestFilePersists(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "buffered"}[buffered], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ns.img")
			o := Options{Path: path, Size: 1 << 20, BlockSize: 4096, Buffered: buffered}
			d, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			buf := mmapBuf(t, 8192)
			pattern(buf, 4096, 7)
			if _, err := d.WriteAt(buf, 4096); err != nil {
				t.Fatal(err)
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			o.Size = 0 // adopt the existing size
			d, err = Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Size() != 1<<20 {
				t.Fatalf("reopened Size() = %d", d.Size())
			}
			clear(buf)
			if _, err := d.ReadAt(buf, 4096); err != nil {
				t.Fatal(err)
			}
			wantPattern(t, buf, 4096, 7)
		})
	}
}

func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns.img")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []struct {
		name string
		o    Options
	}{
		{"memory", Options{Size: 1 << 20, ReadOnly: true}},
		{"file", Options{Path: path, ReadOnly: true}},
		{"file-buffered", Options{Path: path, ReadOnly: true, Buffered: true}},
	}
	for _, tc := range opts {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			buf := mmapBuf(t, 4096)
			if _, err := d.ReadAt(buf, 0); err != nil {
				t.Fatalf("ReadAt: %v", err)
			}
			_, err = d.WriteAt(buf, 0)
			wantErr(t, "WriteAt", err, ErrReadOnly)
			wantErr(t, "Discard", d.Discard(0, 4096), ErrReadOnly)
			wantErr(t, "WriteZeroes", d.WriteZeroes(0, 4096), ErrReadOnly)
			wantErr(t, "Flush", d.Flush(), nil)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		o       Options
		want    error
		wantMsg string
	}{
		{"missing parent dir", Options{Path: filepath.Join(dir, "nope", "ns.img"), Size: 1 << 20}, fs.ErrNotExist, "parent directory"},
		{"directory", Options{Path: dir, Size: 1 << 20}, ErrInvalidArgument, "not a regular file"},
		{"char device", Options{Path: "/dev/null", Size: 1 << 20}, ErrInvalidArgument, "not a regular file"},
		{"memory without size", Options{}, ErrInvalidArgument, "size"},
		{"memory bad block size", Options{Size: 1 << 20, BlockSize: 520}, ErrInvalidArgument, "block size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(tc.o)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			wantErr(t, "Open", err, tc.want)
			if !strings.Contains(err.Error(), tc.wantMsg) || (tc.o.Path != "" && !strings.Contains(err.Error(), tc.o.Path)) {
				t.Fatalf("error %q does not name the path and %q", err, tc.wantMsg)
			}
		})
	}
}

func TestOpenDispatch(t *testing.T) {
	d, err := Open(Options{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, ok := d.(*memDevice); !ok {
		t.Errorf("empty path opened %T, want memory", d)
	}
	f, err := Open(Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(*fileDevice); !ok {
		t.Errorf("file path opened %T, want file", f)
	}
}

// TestDirectFallback simulates a filesystem refusing O_DIRECT, at open and
// at the first aligned read, and expects one Warn line and buffered I/O.
func TestDirectFallback(t *testing.T) {
	tests := []struct {
		name       string
		open       func(string, int, uint32) (int, error)
		probe      func(int, []byte, int64) (int, error)
		buffered   bool
		wantWarn   string // reason substring; "" means no warning
		wantDirect bool
	}{
		{name: "open EINVAL", open: func(p string, flags int, mode uint32) (int, error) {
			if flags&unix.O_DIRECT != 0 {
				return -1, unix.EINVAL
			}
			return unix.Open(p, flags, mode)
		}, wantWarn: "open with O_DIRECT"},
		{name: "probe read EINVAL", probe: func(int, []byte, int64) (int, error) {
			return 0, unix.EINVAL
		}, wantWarn: "aligned O_DIRECT read failed"},
		{name: "probe read EIO keeps O_DIRECT", probe: func(int, []byte, int64) (int, error) {
			return 0, unix.EIO
		}, wantDirect: true},
		{name: "Buffered option", buffered: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.open != nil {
				old := sysOpen
				sysOpen = tc.open
				t.Cleanup(func() { sysOpen = old })
			}
			if tc.probe != nil {
				old := probeRead
				probeRead = tc.probe
				t.Cleanup(func() { probeRead = old })
			}
			path := filepath.Join(t.TempDir(), "ns.img")
			rec := &logRecorder{}
			d, err := OpenFile(Options{Path: path, Size: 1 << 20, Buffered: tc.buffered, Logger: slog.New(rec)})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			f := d.(*fileDevice)
			if tc.wantDirect && !f.direct {
				t.Skip("the temp dir filesystem does not take O_DIRECT")
			}
			if f.direct != tc.wantDirect {
				t.Errorf("direct = %v, want %v", f.direct, tc.wantDirect)
			}
			warns := rec.at(slog.LevelWarn)
			switch {
			case tc.wantWarn == "" && len(warns) != 0:
				t.Fatalf("unexpected warnings: %v", warns)
			case tc.wantWarn != "":
				if len(warns) != 1 {
					t.Fatalf("got %d warnings, want 1", len(warns))
				}
				a := attrs(warns[0])
				if warns[0].Message != "O_DIRECT not supported, using buffered I/O" ||
					a["path"] != path || !strings.Contains(a["reason"], tc.wantWarn) {
					t.Fatalf("warning %q %v, want path %s and reason containing %q", warns[0].Message, a, path, tc.wantWarn)
				}
			}
			flags, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := flags&unix.O_DIRECT != 0; got != f.direct {
				t.Errorf("fd O_DIRECT = %v, device says %v", got, f.direct)
			}
			buf := unalignedBuf(4096)
			pattern(buf, 8192, 3)
			if _, err := d.WriteAt(buf, 8192); err != nil {
				t.Fatal(err)
			}
			clear(buf)
			if _, err := d.ReadAt(buf, 8192); err != nil {
				t.Fatal(err)
			}
			wantPattern(t, buf, 8192, 3)
		})
	}
}

// TestFallocateFallbacks forces the paths taken on filesystems without
// zero-range or hole punching.
func TestFallocateFallbacks(t *testing.T) {
	tests := []struct {
		name              string
		noZeroRange       bool
		noPunch           bool
		wantDiscardZeroes bool
	}{
		{"punch only", true, false, true},
		{"neither", true, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenFile(Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 4 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			f := d.(*fileDevice)
			f.noZeroRange.Store(tc.noZeroRange)
			f.noPunch.Store(tc.noPunch)
			if got := d.DiscardZeroes(); got != tc.wantDiscardZeroes {
				t.Errorf("DiscardZeroes() = %v, want %v", got, tc.wantDiscardZeroes)
			}
			err = d.Discard(0, 4096)
			if tc.noPunch {
				wantErr(t, "Discard", err, ErrNotSupported)
				wantErr(t, "Discard", err, unix.EOPNOTSUPP)
			} else {
				wantErr(t, "Discard", err, nil)
			}
			buf := mmapBuf(t, 4<<20)
			pattern(buf, 0, 9)
			if _, err := d.WriteAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			// More than one zero buffer, so the chunk loop runs.
			off, n := int64(512), int64(2*bounceSize+1024)
			if err := d.WriteZeroes(off, n); err != nil {
				t.Fatalf("WriteZeroes: %v", err)
			}
			if _, err := d.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			wantPattern(t, buf[:off], 0, 9)
			wantZeroes(t, buf[off:off+n], off)
			wantPattern(t, buf[off+n:], off+n, 9)
		})
	}
}

// TestOSErrorsMatchable checks that errno values survive wrapping.
func TestOSErrorsMatchable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns.img")
	d, err := OpenFile(Options{Path: path, Size: 1 << 20, ReadOnly: false})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f := d.(*fileDevice)
	// Swap in a read-only descriptor so the kernel rejects writes with EBADF.
	ro, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(f.fd)
	f.fd, f.direct = ro, false
	_, err = d.WriteAt(mmapBuf(t, 4096), 4096)
	wantErr(t, "WriteAt", err, unix.EBADF)
	if !strings.Contains(err.Error(), "write "+path+" at 4096") {
		t.Errorf("error %q lacks context", err)
	}
	wantErr(t, "WriteZeroes", d.WriteZeroes(0, 4096), unix.EBADF)
	wantErr(t, "Discard", d.Discard(0, 4096), unix.EBADF)
}

// TestOpenSymlinks: a missing file is created only as itself, never
// through a symlink, whose target could be anywhere; an existing target
// behind a link is used (/dev/vg0/lv is one).
func TestOpenSymlinks(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	existing := filepath.Join(elsewhere, "existing.img")
	if err := os.WriteFile(existing, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dangling := link("dangling", filepath.Join(elsewhere, "made-by-the-link.img"))
	danglingRel := link("dangling-rel", "made-by-the-rel-link.img")
	toExisting := link("to-existing", existing)
	chain := link("chain", toExisting)

	for _, tc := range []struct {
		name, path, created string
	}{
		{"dangling absolute", dangling, filepath.Join(elsewhere, "made-by-the-link.img")},
		{"dangling relative", danglingRel, filepath.Join(dir, "made-by-the-rel-link.img")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, open := range []func(Options) (Device, error){OpenFile, Open} {
				d, err := open(Options{Path: tc.path, Size: 1 << 20})
				if err == nil {
					d.Close()
					t.Fatal("a dangling symlink was opened")
				}
				wantErr(t, "open", err, ErrInvalidArgument)
				if !strings.Contains(err.Error(), "symlink whose target does not exist") || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("error %q does not say the path is a dangling symlink", err)
				}
				if _, err := os.Lstat(tc.created); err == nil {
					t.Fatalf("%s was created through the link", tc.created)
				}
				if st, err := os.Lstat(tc.path); err != nil || st.Mode()&fs.ModeSymlink == 0 {
					t.Fatalf("the link itself changed: %v", err)
				}
			}
		})
	}
	for _, p := range []string{toExisting, chain} {
		t.Run("link to an existing file "+filepath.Base(p), func(t *testing.T) {
			d, err := OpenFile(Options{Path: p, Buffered: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Size() != 1<<20 {
				t.Fatalf("size %d", d.Size())
			}
		})
	}
	t.Run("created as a regular file", func(t *testing.T) {
		p := filepath.Join(dir, "new.img")
		d, err := OpenFile(Options{Path: p, Size: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() || st.Size() != 1<<20 {
			t.Fatalf("%s: %v %v", p, st, err)
		}
	})
}
