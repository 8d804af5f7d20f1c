//go:build !linux

package blockdev

import "fmt"

// Ring is io_uring, which only Linux has.
type Ring struct{}

// Completion is one finished queued operation.
type Completion struct {
	Tag uint64
	Err error
}

// NewRing is not supported on this platform.
func NewRing(int) (*Ring, error) { return nil, fmt.Errorf("io_uring: %w", ErrNotSupported) }

// RegisterEventFD is not supported on this platform.
func (r *Ring) RegisterEventFD(int) error { return ErrNotSupported }

// Space is always 0.
func (r *Ring) Space() int { return 0 }

// Pending is always 0.
func (r *Ring) Pending() int { return 0 }

// Submit does nothing.
func (r *Ring) Submit() error { return nil }

// Reap finds nothing.
func (r *Ring) Reap([]Completion) int { return 0 }

// Close does nothing.
func (r *Ring) Close() error { return nil }

// Arm is always ready.
func (r *Ring) Arm() bool { return true }
