package blockdev

import (
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/sys"
)

// closeShards is how many read locks a closeLock spreads its readers over.
const closeShards = 16

// closeLock keeps Close from releasing a device (munmap, close) under a call
// in flight. Every call takes it shared, so one sync.RWMutex would be a cache
// line that every I/O on every core writes: with several queues on a memory
// namespace it cost more than the copy. Readers take one of closeShards read
// locks, picked by a hint (the buffer and offset, which differ between
// concurrent calls); Close takes all of them.
//
// Use: defer d.mu.rlock(hint).RUnlock() — the lock is taken when the defer
// statement runs and released at return.
type closeLock struct {
	shards [closeShards]struct {
		sync.RWMutex
		// 128 bytes between shards: neighbours never share a cache line (nor
		// the pair of lines some CPUs fetch together), aligned or not.
		_ [128]byte
	}
}

// rlock takes a read lock and returns it, for RUnlock.
func (l *closeLock) rlock(hint uintptr) *sync.RWMutex {
	// Mix the bits that vary: page and cache-line numbers.
	m := &l.shards[(hint>>12^hint>>6)%closeShards].RWMutex
	m.RLock()
	return m
}

// Lock excludes every reader.
func (l *closeLock) Lock() {
	for i := range l.shards {
		l.shards[i].Lock()
	}
}

// Unlock lets readers in again.
func (l *closeLock) Unlock() {
	for i := range l.shards {
		l.shards[i].Unlock()
	}
}

// ioHint is a closeLock hint for a transfer of p at off.
func ioHint(p []byte, off int64) uintptr {
	return sys.Addr(p) ^ uintptr(off)
}
