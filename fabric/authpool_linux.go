package fabric

import (
	"runtime"
	"syscall"
)

// authThreadNice is the nice value of the threads that run the pool's DH
// computations: the lowest priority, so that where CPUs are short the
// pollers and the hosts' I/O go first and a flood of authentications takes
// only what is left (authentications then take longer, not I/O).
const authThreadNice = 19

// lowerPriority pins the calling goroutine to its thread, for good (the
// thread ends with the goroutine), and gives the thread the lowest
// priority. A failure leaves the priority as it was.
func lowerPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), authThreadNice)
}
