//go:build !linux

package blockdev

import "fmt"

// The backends rely on Linux interfaces (O_DIRECT, fallocate modes, block
// device ioctls, statx); elsewhere every constructor reports ErrNotSupported.

// OpenFile is not supported on this platform.
func OpenFile(o Options) (Device, error) {
	return nil, fmt.Errorf("open %s: %w", o.Path, ErrNotSupported)
}

// OpenBlockDevice is not supported on this platform.
func OpenBlockDevice(o Options) (Device, error) {
	return nil, fmt.Errorf("open %s: %w", o.Path, ErrNotSupported)
}

// NewMemory is not supported on this platform.
func NewMemory(size int64, blockSize uint32) (Device, error) {
	return newMemory(size, blockSize, false)
}

func newMemory(int64, uint32, bool) (Device, error) {
	return nil, fmt.Errorf("new memory device: %w", ErrNotSupported)
}
