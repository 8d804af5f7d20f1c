// Package sys holds the few raw system calls and pointer conversions that
// need unsafe outside the cgo bindings: blockdev's block-device ioctls that
// take a struct by pointer and the address of a buffer (O_DIRECT alignment,
// lock sharding), and the RDMA poller's scheduler-free nap.
package sys

import "unsafe"

// Addr is the address of p's first byte (or of its backing array, when p is
// empty), for alignment checks and hashing; never to be turned back into a
// pointer.
func Addr(p []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))
}
