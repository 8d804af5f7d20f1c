package blockdev

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// memDevice keeps its data in one anonymous mapping outside the Go heap, so
// large devices cost the garbage collector nothing and buffers can be
// registered for DMA like any other mmap'd memory.
type memDevice struct {
	// mu is held shared by every call and exclusively by Close, so that no
	// call touches the mapping after munmap.
	mu       closeLock
	mem      []byte // the whole mapping, page-rounded; nil once closed
	size     int64
	bs       uint32
	readOnly bool
}

// NewMemory returns a zero-filled memory Device of size bytes, rounded down
// to blockSize (512 or 4096; 0 means 512).
func NewMemory(size int64, blockSize uint32) (Device, error) {
	return newMemory(size, blockSize, false)
}

func newMemory(size int64, blockSize uint32, readOnly bool) (Device, error) {
	bs, err := checkBlockSize(blockSize)
	if err != nil {
		return nil, fmt.Errorf("new memory device: %w", err)
	}
	rounded := size &^ (int64(bs) - 1)
	if size < 0 || rounded == 0 || rounded > int64(^uint(0)>>1)-pageSize {
		return nil, fmt.Errorf("new memory device: size %d with block size %d: %w", size, bs, ErrInvalidArgument)
	}
	mem, err := mmapAnon(int((rounded + pageSize - 1) &^ (pageSize - 1)))
	if err != nil {
		return nil, fmt.Errorf("new memory device: mmap %d bytes: %w", rounded, err)
	}
	return &memDevice{mem: mem, size: rounded, bs: bs, readOnly: readOnly}, nil
}

func (m *memDevice) Size() int64         { return m.size }
func (m *memDevice) BlockSize() uint32   { return m.bs }
func (m *memDevice) DiscardZeroes() bool { return true }

func (m *memDevice) ReadAt(p []byte, off int64) (int, error) {
	if err := checkRange("read", "memory", off, int64(len(p)), m.size, m.bs); err != nil {
		return 0, err
	}
	defer m.mu.rlock(ioHint(p, off)).RUnlock()
	if m.mem == nil {
		return 0, fmt.Errorf("read memory: %w", ErrClosed)
	}
	return copy(p, m.mem[off:]), nil
}

func (m *memDevice) WriteAt(p []byte, off int64) (int, error) {
	if err := m.checkModify("write", off, int64(len(p))); err != nil {
		return 0, err
	}
	defer m.mu.rlock(ioHint(p, off)).RUnlock()
	if m.mem == nil {
		return 0, fmt.Errorf("write memory: %w", ErrClosed)
	}
	return copy(m.mem[off:], p), nil
}

func (m *memDevice) Flush() error {
	defer m.mu.rlock(0).RUnlock()
	if m.mem == nil {
		return fmt.Errorf("flush memory: %w", ErrClosed)
	}
	return nil
}

func (m *memDevice) Discard(off, length int64) error {
	return m.zero("discard", off, length)
}

func (m *memDevice) WriteZeroes(off, length int64) error {
	return m.zero("write zeroes", off, length)
}

// zero clears a range. Whole pages are given back with MADV_DONTNEED, after
// which a private anonymous mapping reads zeroes, so discards free memory.
func (m *memDevice) zero(op string, off, length int64) error {
	if err := m.checkModify(op, off, length); err != nil {
		return err
	}
	defer m.mu.rlock(uintptr(off)).RUnlock()
	if m.mem == nil {
		return fmt.Errorf("%s memory: %w", op, ErrClosed)
	}
	end := off + length
	pgStart := (off + pageSize - 1) &^ (pageSize - 1)
	pgEnd := end &^ (pageSize - 1)
	if pgEnd > pgStart && unix.Madvise(m.mem[pgStart:pgEnd], unix.MADV_DONTNEED) == nil {
		clear(m.mem[off:pgStart])
		clear(m.mem[pgEnd:end])
		return nil
	}
	clear(m.mem[off:end])
	return nil
}

func (m *memDevice) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil {
		return fmt.Errorf("close memory: %w", ErrClosed)
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	if err != nil {
		return fmt.Errorf("close memory: munmap: %w", err)
	}
	return nil
}

func (m *memDevice) checkModify(op string, off, length int64) error {
	if m.readOnly {
		return fmt.Errorf("%s memory at %d: %w", op, off, ErrReadOnly)
	}
	return checkRange(op, "memory", off, length, m.size, m.bs)
}
