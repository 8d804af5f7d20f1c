package blockdev

// The package's system-call helpers; those that need unsafe are in
// internal/sys and internal/uring.

import (
	"errors"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/sys"
)

const (
	// pageSize is the alignment assumed for O_DIRECT buffers when the kernel
	// does not report one; it satisfies every filesystem and device.
	pageSize = 4096
	// bounceSize bounds each bounce-buffered chunk and each zero-fill write.
	bounceSize = 256 << 10
)

// mmapAnon returns length bytes of zeroed, page-aligned memory outside the Go
// heap. MAP_NORESERVE lets large sparse memory devices exist without commit.
func mmapAnon(length int) ([]byte, error) {
	return unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
}

// bounce is a pooled, page-aligned buffer for O_DIRECT I/O on unaligned
// caller buffers. Go heap memory is not aligned, hence mmap.
type bounce struct{ b []byte }

var bouncePool = sync.Pool{New: func() any {
	b, err := mmapAnon(bounceSize)
	if err != nil {
		return nil
	}
	h := &bounce{b: b}
	// sync.Pool drops idle items at GC; return their memory to the kernel.
	runtime.AddCleanup(h, func(b []byte) { _ = unix.Munmap(b) }, b)
	return h
}}

func getBounce() (*bounce, error) {
	h, _ := bouncePool.Get().(*bounce)
	if h == nil {
		return nil, unix.ENOMEM
	}
	return h, nil
}

// zeroes is a shared read-only-by-convention zeroed buffer used to write
// zeroes when no cheaper way exists. It is mmap'd so O_DIRECT accepts it.
var zeroes = sync.OnceValues(func() ([]byte, error) { return mmapAnon(bounceSize) })

// aligned reports whether p starts at a multiple of align (a power of two).
func aligned(p []byte, align uintptr) bool {
	return sys.Addr(p)&(align-1) == 0
}

// preadFull reads len(p) bytes at off, retrying short reads and EINTR.
func preadFull(fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pread(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			// The file shrank under us.
			return done, io.ErrUnexpectedEOF
		}
		done += n
	}
	return done, nil
}

// pwriteFull writes all of p at off, retrying short writes and EINTR.
func pwriteFull(fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pwrite(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, io.ErrShortWrite
		}
		done += n
	}
	return done, nil
}

// fallocate calls fallocate(2), retrying EINTR.
func fallocate(fd int, mode uint32, off, length int64) error {
	for {
		err := unix.Fallocate(fd, mode, off, length)
		if err != unix.EINTR {
			return err
		}
	}
}

// dioAlign queries the O_DIRECT alignment of fd with statx STATX_DIOALIGN.
// known is false when the kernel or filesystem does not report it; a
// reported offset alignment of 0 means O_DIRECT is unsupported.
func dioAlign(fd int) (memAlign, offAlign uint32, known bool) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx); err != nil {
		return 0, 0, false
	}
	if stx.Mask&unix.STATX_DIOALIGN == 0 {
		return 0, 0, false
	}
	return stx.Dio_mem_align, stx.Dio_offset_align, true
}

// isNotSupported matches the errnos filesystems and drivers use for an
// unimplemented fallocate mode or ioctl.
func isNotSupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS)
}
