package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// BlkRange issues BLKDISCARD or BLKZEROOUT (req), which take a {start,
// length} pair by pointer; unix.IoctlSetPointerInt cannot express that. It
// retries EINTR.
func BlkRange(fd int, req uint, off, length int64) error {
	rng := [2]uint64{uint64(off), uint64(length)}
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&rng)))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// BlkGetSize64 returns the size in bytes of a block device (BLKGETSIZE64).
func BlkGetSize64(fd int) (int64, error) {
	var size uint64
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.BLKGETSIZE64), uintptr(unsafe.Pointer(&size)))
	if e != 0 {
		return 0, e
	}
	return int64(size), nil
}
