package blockdev

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// fileDevice is a regular file; only its first Size() bytes are used.
type fileDevice struct {
	fdDev
	// noPunch and noZeroRange remember fallocate modes the filesystem
	// refused, so that each request does not retry them.
	noPunch     atomic.Bool
	noZeroRange atomic.Bool
}

// OpenFile opens or creates a regular file as a Device. See Options for
// how Size applies to existing files.
func OpenFile(o Options) (Device, error) {
	log := logger(o.Logger)
	if o.Path == "" {
		return nil, fmt.Errorf("open file: empty path: %w", ErrInvalidArgument)
	}
	bs, err := checkBlockSize(o.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Path, err)
	}
	mask := int64(bs) - 1
	if o.Size < 0 || (o.Size > 0 && o.Size&^mask == 0) {
		return nil, fmt.Errorf("open %s: size %d with block size %d: %w", o.Path, o.Size, bs, ErrInvalidArgument)
	}
	want := o.Size &^ mask

	// Check before creating so that a failed open leaves no empty file.
	st, statErr := os.Stat(o.Path)
	if statErr == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a regular file: %w", o.Path, ErrInvalidArgument)
	}
	created := false
	if errors.Is(statErr, fs.ErrNotExist) {
		if isSymlink(o.Path) {
			return nil, danglingLink(o.Path)
		}
		if o.ReadOnly {
			return nil, fmt.Errorf("open %s: read-only: %w", o.Path, statErr)
		}
		if want == 0 {
			return nil, fmt.Errorf("create %s: size required for a new file: %w", o.Path, ErrInvalidArgument)
		}
		if _, err := os.Stat(filepath.Dir(o.Path)); err != nil {
			return nil, fmt.Errorf("create %s: parent directory: %w", o.Path, err)
		}
		if err := createFile(o.Path); err != nil {
			return nil, err
		}
		created = true
	}

	flags := unix.O_CLOEXEC | unix.O_RDWR
	if o.ReadOnly {
		flags = unix.O_CLOEXEC | unix.O_RDONLY
	}
	if created {
		// The file just made, not a link put in its place since.
		flags |= unix.O_NOFOLLOW
	}
	fd, direct, reason, err := openMaybeDirect(o.Path, flags, !o.Buffered)
	if err != nil {
		if created {
			_ = os.Remove(o.Path)
		}
		return nil, err
	}
	f := &fileDevice{fdDev: fdDev{fd: fd, path: o.Path, bs: bs, readOnly: o.ReadOnly, direct: direct}}
	if err := f.setup(o, want, log); err != nil {
		_ = unix.Close(f.fd)
		if created {
			_ = os.Remove(o.Path) // do not leave a half-made file behind
		}
		return nil, err
	}
	if f.direct {
		if reason = f.setAlign(); reason == "" {
			reason = f.probeDirect()
		}
		if reason != "" {
			// Reopen rather than clear O_DIRECT with fcntl, which some
			// filesystems accept and then fail on I/O.
			fd, err := sysOpen(o.Path, flags, 0)
			if err != nil {
				_ = unix.Close(f.fd)
				return nil, fmt.Errorf("reopen %s buffered: %w", o.Path, err)
			}
			_ = unix.Close(f.fd)
			f.fd, f.direct = fd, false
		}
	}
	if reason != "" {
		warnBuffered(log, o.Path, reason)
	}
	if !o.ReadOnly {
		f.probePunch()
	}
	return f, nil
}

// createFile makes the missing regular file path, empty. Never through
// a symlink: a dangling one would have the file made at its target,
// anywhere on the system. O_EXCL fails on any name that exists, a link
// included, and O_NOFOLLOW refuses a link in the last component too.
func createFile(path string) error {
	fd, err := sysOpen(path, unix.O_CLOEXEC|unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
	switch {
	case err == nil:
		return unix.Close(fd)
	case (err == unix.EEXIST || err == unix.ELOOP) && isSymlink(path):
		return danglingLink(path) // made since it was looked at
	}
	return fmt.Errorf("create %s: %w", path, err)
}

func isSymlink(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode()&fs.ModeSymlink != 0
}

func danglingLink(path string) error {
	return fmt.Errorf("open %s: path is a symlink whose target does not exist; create the file or point the namespace at it: %w",
		path, ErrInvalidArgument)
}

// openMaybeDirect opens path, with O_DIRECT when direct is set and the
// filesystem accepts it. reason says why O_DIRECT was dropped.
func openMaybeDirect(path string, flags int, direct bool) (fd int, isDirect bool, reason string, err error) {
	if direct {
		fd, err = sysOpen(path, flags|unix.O_DIRECT, 0o600)
		if err == nil {
			return fd, true, "", nil
		}
		if err != unix.EINVAL {
			return -1, false, "", fmt.Errorf("open %s: %w", path, err)
		}
		reason = "open with O_DIRECT: " + err.Error()
	}
	fd, err = sysOpen(path, flags, 0o600)
	if err != nil {
		return -1, false, "", fmt.Errorf("open %s: %w", path, err)
	}
	return fd, false, reason, nil
}

// setup checks the file type and settles the device size: grow a smaller
// file, use a prefix of a larger one, or adopt the file's own size.
func (f *fileDevice) setup(o Options, want int64, log *slog.Logger) error {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("open %s: not a regular file: %w", f.path, ErrInvalidArgument)
	}
	mask := int64(f.bs) - 1
	cur := st.Size
	switch {
	case want == 0:
		f.size.Store(cur &^ mask)
		if f.size.Load() == 0 {
			return fmt.Errorf("open %s: file is %d bytes, smaller than one %d-byte block, and no size given: %w",
				f.path, cur, f.bs, ErrInvalidArgument)
		}
	case cur < want:
		if o.ReadOnly {
			return fmt.Errorf("open %s: read-only file is %d bytes, smaller than size %d: %w", f.path, cur, want, ErrInvalidArgument)
		}
		if err := unix.Ftruncate(f.fd, want); err != nil {
			return fmt.Errorf("grow %s to %d: %w", f.path, want, err)
		}
		f.size.Store(want)
	default:
		f.size.Store(want)
		if cur > want {
			// Shrinking would destroy data the operator may want back.
			log.Info("file larger than size, using its first bytes",
				"path", f.path, "file_size", cur, "size", want)
		}
	}
	return nil
}

// probePunch finds out whether the filesystem punches holes, which decides
// DiscardZeroes. It punches past the end of the file, where nothing is lost.
func (f *fileDevice) probePunch() {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return
	}
	mask := int64(f.bs) - 1
	off := (max(st.Size, f.size.Load()) + mask) &^ mask
	err := fallocate(f.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(f.bs))
	if isNotSupported(err) {
		f.noPunch.Store(true)
	}
}

// DiscardZeroes is true while the filesystem punches holes, which read back
// as zeroes.
func (f *fileDevice) DiscardZeroes() bool { return !f.noPunch.Load() }

// Discard punches a hole. Without hole punching it fails with
// ErrNotSupported rather than silently leaving data behind.
func (f *fileDevice) Discard(off, length int64) error {
	l, err := f.beginModify("discard", off, length)
	if l == nil {
		return err
	}
	defer l.RUnlock()
	if f.noPunch.Load() {
		return fmt.Errorf("discard %s at %d: %w: %w", f.path, off, ErrNotSupported, unix.EOPNOTSUPP)
	}
	err = fallocate(f.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
	if isNotSupported(err) {
		f.noPunch.Store(true)
		return fmt.Errorf("discard %s at %d: %w: %w", f.path, off, ErrNotSupported, err)
	}
	if err != nil {
		return fmt.Errorf("discard %s at %d: %w", f.path, off, err)
	}
	return nil
}

// WriteZeroes tries, in order, zero-range, punch-hole and writing zeroes.
func (f *fileDevice) WriteZeroes(off, length int64) error {
	l, err := f.beginModify("write zeroes", off, length)
	if l == nil {
		return err
	}
	defer l.RUnlock()
	if !f.noZeroRange.Load() {
		err := fallocate(f.fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		switch {
		case err == nil:
			return nil
		case isNotSupported(err):
			f.noZeroRange.Store(true)
		case errors.Is(err, unix.ENOSPC):
			// Zero-range allocates; a hole frees space instead.
		default:
			return fmt.Errorf("write zeroes %s at %d: %w", f.path, off, err)
		}
	}
	if !f.noPunch.Load() {
		err := fallocate(f.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		switch {
		case err == nil:
			return nil
		case isNotSupported(err):
			f.noPunch.Store(true)
		default:
			return fmt.Errorf("write zeroes %s at %d: %w", f.path, off, err)
		}
	}
	if err := f.writeZeroesSlow(off, length); err != nil {
		return fmt.Errorf("write zeroes %s at %d: %w", f.path, off, err)
	}
	return nil
}

// Resize implements Resizer.
func (f *fileDevice) Resize(size int64) error {
	defer f.mu.rlock(0).RUnlock()
	if f.fd < 0 {
		return fmt.Errorf("resize %s: %w", f.path, ErrClosed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.path, err)
	}
	want := size
	if size == 0 {
		size = st.Size // the file as it is now, grown or cut by others
	}
	size &^= int64(f.bs) - 1
	if size <= 0 {
		return fmt.Errorf("resize %s to %d (file is %d bytes): %w", f.path, want, st.Size, ErrInvalidArgument)
	}
	if st.Size < size {
		if f.readOnly {
			return fmt.Errorf("grow read-only %s: %w", f.path, ErrReadOnly)
		}
		if err := unix.Ftruncate(f.fd, size); err != nil {
			return fmt.Errorf("grow %s to %d: %w", f.path, size, err)
		}
	}
	f.size.Store(size)
	return nil
}

// BackingSize implements Resizer: the file's length.
func (f *fileDevice) BackingSize() (int64, error) {
	defer f.mu.rlock(0).RUnlock()
	if f.fd < 0 {
		return 0, fmt.Errorf("stat %s: %w", f.path, ErrClosed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", f.path, err)
	}
	return st.Size &^ (int64(f.bs) - 1), nil
}
