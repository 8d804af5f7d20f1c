//go:build linux && cgo && rbd

package rbd

/*
#cgo LDFLAGS: -lrados
#include <stdlib.h>
#include <rados/librados.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Addrs are the client's addresses as librados gives them
// (rados_getaddrs): what `ceph osd blocklist add` takes to fence it.
func (c *Conn) Addrs() (string, error) {
	var p *C.char
	r := C.rados_getaddrs(c.c, &p)
	runtime.KeepAlive(c)
	if r < 0 {
		return "", errno(r)
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p), nil
}
