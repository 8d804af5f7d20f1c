// Package blockdev provides random-access block stores that back namespaces:
// regular files, block devices and anonymous memory.
//
// The package knows nothing of the protocol layered above it; offsets and
// lengths are bytes, always multiples of the device's block size.
package blockdev

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// Device is a random-access block store. Offsets and lengths passed by callers
// are multiples of BlockSize(). All methods are safe for concurrent use by
// multiple goroutines; methods called after Close return ErrClosed.
type Device interface {
	// ReadAt fills p from off. It returns len(p), nil or an error; reading
	// past Size() is ErrOutOfRange.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes all of p at off or returns an error.
	WriteAt(p []byte, off int64) (int, error)
	// Flush makes completed writes durable (fdatasync; a no-op for memory).
	Flush() error
	// Discard deallocates a range. What a later read returns is defined only
	// when DiscardZeroes() is true.
	Discard(off, length int64) error
	// WriteZeroes sets a range to zeroes, deallocating it where cheap.
	WriteZeroes(off, length int64) error
	// Size is the usable size in bytes, a multiple of BlockSize().
	Size() int64
	// BlockSize is the logical block size in bytes.
	BlockSize() uint32
	// DiscardZeroes reports whether a read after Discard is guaranteed to
	// return zeroes.
	DiscardZeroes() bool
	// Close releases the device. It waits for in-flight calls to return.
	Close() error
}

// Queuer is a Device whose reads, writes and flushes can also be queued on
// a Ring, to complete later without blocking the caller (files and block
// devices; memory never blocks). A method that returns ErrNotQueued did
// nothing: the caller uses the blocking method instead. Any other error is
// the operation's result.
type Queuer interface {
	QueueRead(r *Ring, p []byte, off int64, tag uint64) error
	QueueWrite(r *Ring, p []byte, off int64, durable bool, tag uint64) error
	QueueFlush(r *Ring, tag uint64) error
}

// Options selects and configures a backend for Open.
type Options struct {
	// Path is a regular file or a block device; empty selects memory.
	Path string
	// Size in bytes, rounded down to BlockSize. For memory it is required.
	// For a file, a missing or smaller file is created or grown to Size, a
	// larger one is used only up to Size, and 0 means the current file size.
	// For a block device 0 means the whole device, else it must not exceed it.
	Size int64
	// BlockSize is 512 or 4096 (0 means 512) for files and memory. A block
	// device always uses its own logical block size, and a different nonzero
	// BlockSize is an error.
	BlockSize uint32
	// ReadOnly refuses writes, discards and write-zeroes with ErrReadOnly.
	ReadOnly bool
	// Buffered forces buffered I/O instead of O_DIRECT.
	Buffered bool
	// Logger receives setup messages; nil discards them. Nothing is logged
	// per I/O.
	Logger *slog.Logger
}

var (
	// ErrOutOfRange reports an access that extends beyond Size().
	ErrOutOfRange = errors.New("out of range")
	// ErrInvalidArgument reports a negative or unaligned offset or length, a
	// bad block size or size, or a path of the wrong kind.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrReadOnly reports a modification of a read-only device.
	ErrReadOnly = errors.New("read-only device")
	// ErrNotSupported reports an operation the backend cannot perform, such
	// as Discard on a filesystem without hole punching, or any backend on a
	// platform other than Linux. OS errors such as EOPNOTSUPP stay matchable
	// alongside it.
	ErrNotSupported = errors.New("not supported")
	// ErrClosed reports a call on a closed device.
	ErrClosed = errors.New("device closed")
	// ErrNotQueued reports that an operation could not be queued on a Ring
	// (full, or a buffer O_DIRECT would refuse); nothing was done.
	ErrNotQueued = errors.New("not queued")
	// ErrFenced reports an operation the storage refused because this
	// client was fenced off it (an RBD client blocklisted by the cluster,
	// librbd's -EBLOCKLISTED, which is ESHUTDOWN on Linux): every later
	// one fails the same way, while other clients (gateways) still reach
	// the data. The OS error stays matchable alongside it.
	ErrFenced = errors.New("fenced off the storage")
	// ErrTimeout reports an operation the backend gave up on after its
	// time limit (an RBD OSD operation past limits.RBDOSDOpTimeout,
	// ETIMEDOUT): the storage was unreachable from here for that long,
	// and whether a write took effect is unknown. The OS error stays
	// matchable alongside it.
	ErrTimeout = errors.New("storage operation timed out")
)

// DefaultBlockSize is used when Options.BlockSize is 0.
const DefaultBlockSize = limits.BlockSize

// Kind names a backend.
type Kind string

// Backends, as KindOf infers them from a path.
const (
	KindMemory Kind = limits.BackendMemory
	KindFile   Kind = limits.BackendFile
	KindBlock  Kind = limits.BackendBlock
)

// KindOf infers the backend for path: memory for an empty path, block for a
// block special file, file for anything else, including a path that does
// not exist yet (OpenFile creates it). A stat failure other than
// fs.ErrNotExist is returned along with KindFile.
func KindOf(path string) (Kind, error) {
	k, err := limits.BackendOf(path)
	return Kind(k), err
}

// Open dispatches on Options.Path as KindOf infers it: empty selects
// memory, a block special file a block device, and anything else a regular
// file (created if missing).
func Open(o Options) (Device, error) {
	k, err := KindOf(o.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Path, err)
	}
	switch k {
	case KindMemory:
		return newMemory(o.Size, o.BlockSize, o.ReadOnly)
	case KindBlock:
		return OpenBlockDevice(o)
	}
	return OpenFile(o)
}

// ValidBlockSize reports whether files and memory support the logical
// block size bs.
func ValidBlockSize(bs uint32) bool { return limits.ValidBlockSize(bs) }

// checkBlockSize validates a block size for files and memory.
func checkBlockSize(bs uint32) (uint32, error) {
	switch {
	case bs == 0:
		return DefaultBlockSize, nil
	case ValidBlockSize(bs):
		return bs, nil
	}
	return 0, fmt.Errorf("block size %d: must be 512 or 4096: %w", bs, ErrInvalidArgument)
}

// checkRange validates an access of length bytes at off on a device of size
// bytes named name. It only allocates when it fails.
func checkRange(op, name string, off, length, size int64, bs uint32) error {
	mask := int64(bs) - 1
	if off < 0 || length < 0 || off&mask != 0 || length&mask != 0 {
		return fmt.Errorf("%s %s at %d length %d: block size %d: %w", op, name, off, length, bs, ErrInvalidArgument)
	}
	// Written as a subtraction so that off+length cannot overflow.
	if off > size || length > size-off {
		return fmt.Errorf("%s %s at %d length %d: device size %d: %w", op, name, off, length, size, ErrOutOfRange)
	}
	return nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Resizer is a Device whose size can change while it is in use.
type Resizer interface {
	// Resize makes the usable size size bytes, rounded down to the block
	// size. A file grows to it (a smaller size only stops using the end of
	// the file); a block device takes its size again from the kernel, and
	// a size past the device is refused. 0 means the backing's own size
	// now, as BackingSize reads it: a file's length, the whole device.
	Resize(size int64) error
	// BackingSize reads the size of what backs the device now, rounded
	// down to the block size: the file's length (which others may have
	// changed), the block device's size (after lvextend, say). Size does
	// not follow it until Resize.
	BackingSize() (int64, error)
}
