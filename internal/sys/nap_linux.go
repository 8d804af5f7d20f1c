package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Nap pauses the calling thread for ts with a raw nanosleep, without the
// Go scheduler's syscall path: for a goroutine locked to its thread that
// has nothing to hand over, entering and leaving a syscall costs a wake-up
// of another runtime thread. A signal (preemption, GC) ends it early.
func Nap(ts *unix.Timespec) {
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(ts)), 0, 0)
}
