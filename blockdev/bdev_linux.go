package blockdev

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/sys"
)

// blockDevice is a block special file; only its first Size() bytes are used.
type blockDevice struct {
	fdDev
}

// OpenBlockDevice opens a block device. It is opened without O_EXCL so that
// a mounted or otherwise claimed device is not refused; the operator decides.
func OpenBlockDevice(o Options) (Device, error) {
	log := logger(o.Logger)
	if o.Path == "" {
		return nil, fmt.Errorf("open block device: empty path: %w", ErrInvalidArgument)
	}
	if o.Size < 0 {
		return nil, fmt.Errorf("open %s: size %d: %w", o.Path, o.Size, ErrInvalidArgument)
	}
	flags := unix.O_CLOEXEC | unix.O_RDWR
	if o.ReadOnly {
		flags = unix.O_CLOEXEC | unix.O_RDONLY
	}
	fd, direct, reason, err := openMaybeDirect(o.Path, flags, !o.Buffered)
	if err != nil {
		return nil, err
	}
	d := &blockDevice{fdDev: fdDev{fd: fd, path: o.Path, readOnly: o.ReadOnly, direct: direct}}
	if err := d.setup(o); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	if d.direct {
		if r := d.setAlign(); r != "" {
			// Cannot happen for a block device's own logical block size, but
			// a wrong guess must not turn into failed I/O.
			nfd, err := sysOpen(o.Path, flags, 0)
			if err != nil {
				_ = unix.Close(d.fd)
				return nil, fmt.Errorf("reopen %s buffered: %w", o.Path, err)
			}
			_ = unix.Close(d.fd)
			d.fd, d.direct, reason = nfd, false, r
		}
	}
	if reason != "" {
		warnBuffered(log, o.Path, reason)
	}
	return d, nil
}

func (d *blockDevice) setup(o Options) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", d.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("open %s: not a block device: %w", d.path, ErrInvalidArgument)
	}
	devSize, err := sys.BlkGetSize64(d.fd)
	if err != nil {
		return fmt.Errorf("get size of %s: %w", d.path, err)
	}
	lbs, err := unix.IoctlGetInt(d.fd, unix.BLKSSZGET)
	if err != nil {
		return fmt.Errorf("get block size of %s: %w", d.path, err)
	}
	if lbs <= 0 || lbs&(lbs-1) != 0 {
		return fmt.Errorf("open %s: logical block size %d: %w", d.path, lbs, ErrInvalidArgument)
	}
	d.bs = uint32(lbs)
	if o.BlockSize != 0 && o.BlockSize != d.bs {
		return fmt.Errorf("open %s: block size %d, device uses %d: %w", d.path, o.BlockSize, d.bs, ErrInvalidArgument)
	}
	mask := int64(d.bs) - 1
	switch {
	case o.Size == 0:
		d.size.Store(devSize &^ mask)
	case o.Size > devSize:
		return fmt.Errorf("open %s: size %d exceeds device size %d: %w", d.path, o.Size, devSize, ErrInvalidArgument)
	default:
		d.size.Store(o.Size &^ mask)
	}
	if d.size.Load() == 0 {
		return fmt.Errorf("open %s: size %d is less than one %d-byte block: %w", d.path, o.Size, d.bs, ErrInvalidArgument)
	}
	return nil
}

// DiscardZeroes is false: whether a discarded range reads back as zeroes is
// up to the device, and BLKDISCARD does not say.
func (d *blockDevice) DiscardZeroes() bool { return false }

func (d *blockDevice) Discard(off, length int64) error {
	l, err := d.beginModify("discard", off, length)
	if l == nil {
		return err
	}
	defer l.RUnlock()
	err = sys.BlkRange(d.fd, unix.BLKDISCARD, off, length)
	if isNotSupported(err) {
		return fmt.Errorf("discard %s at %d: %w: %w", d.path, off, ErrNotSupported, err)
	}
	if err != nil {
		return fmt.Errorf("discard %s at %d: %w", d.path, off, err)
	}
	return nil
}

// WriteZeroes uses BLKZEROOUT, which lets the kernel pick the device's
// cheapest zeroing method, and writes zeroes itself only if that is refused.
func (d *blockDevice) WriteZeroes(off, length int64) error {
	l, err := d.beginModify("write zeroes", off, length)
	if l == nil {
		return err
	}
	defer l.RUnlock()
	err = sys.BlkRange(d.fd, unix.BLKZEROOUT, off, length)
	if isNotSupported(err) {
		err = d.writeZeroesSlow(off, length)
	}
	if err != nil {
		return fmt.Errorf("write zeroes %s at %d: %w", d.path, off, err)
	}
	return nil
}

// Resize implements Resizer: the device's size is read again, for a
// device that grew underneath (a resized volume).
func (d *blockDevice) Resize(size int64) error {
	defer d.mu.rlock(0).RUnlock()
	if d.fd < 0 {
		return fmt.Errorf("resize %s: %w", d.path, ErrClosed)
	}
	devSize, err := sys.BlkGetSize64(d.fd)
	if err != nil {
		return fmt.Errorf("get size of %s: %w", d.path, err)
	}
	mask := int64(d.bs) - 1
	switch {
	case size == 0:
		size = devSize
	case size > devSize:
		return fmt.Errorf("resize %s to %d: device is %d bytes: %w", d.path, size, devSize, ErrInvalidArgument)
	}
	if size&^mask <= 0 {
		return fmt.Errorf("resize %s to %d: %w", d.path, size, ErrInvalidArgument)
	}
	d.size.Store(size &^ mask)
	return nil
}

// BackingSize implements Resizer: the device's size, as the kernel has it.
func (d *blockDevice) BackingSize() (int64, error) {
	defer d.mu.rlock(0).RUnlock()
	if d.fd < 0 {
		return 0, fmt.Errorf("get size of %s: %w", d.path, ErrClosed)
	}
	devSize, err := sys.BlkGetSize64(d.fd)
	if err != nil {
		return 0, fmt.Errorf("get size of %s: %w", d.path, err)
	}
	return devSize &^ (int64(d.bs) - 1), nil
}
