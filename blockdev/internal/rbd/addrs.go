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

// WaitForLatestOSDMap waits until the client has the cluster's newest OSD
// map (rados_wait_for_latest_osdmap): its later operations carry that epoch,
// and an OSD applies what the map says (a blocklist) before them.
func (c *Conn) WaitForLatestOSDMap() error {
	r := C.rados_wait_for_latest_osdmap(c.c)
	runtime.KeepAlive(c)
	if r < 0 {
		return errno(r)
	}
	return nil
}
