//go:build linux && cgo && rbd

package rbd

/*
#cgo LDFLAGS: -lrados -lrbd
#include <errno.h>
#include <stdlib.h>
#include "rbd_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Errno is librados' and librbd's negative error codes as Go errors.
func errno(r C.int) error { return syscall.Errno(-r) }

var (
	// ErrNoPool reports a pool the cluster does not have (with
	// syscall.ENOENT).
	ErrNoPool = errors.New("no such pool")
	// ErrNoImage reports an image the pool does not have (with
	// syscall.ENOENT).
	ErrNoImage = errors.New("no such image")
)

// Conn is one librados client connected to a cluster.
type Conn struct {
	c      C.rados_t
	closed bool
}

// Connect reads the configuration file conf, sets the client's name
// (client.<id>), bounds connecting and each monitor operation by timeout
// and each OSD operation by osdTimeout, turns librbd's cache off, and
// connects.
//
// osdTimeout is rados_osd_op_timeout, librados' option: the client's
// Objecter cancels an operation that outlasts it with -ETIMEDOUT, and
// librbd sends every operation through that Objecter (its neorados handle
// wraps the client, neorados::RADOS::make_with_librados), its aio reads
// and writes included. Without it an operation to OSDs that do not answer
// waits for ever, resent at each OSD map change.
func Connect(conf, name string, timeout, osdTimeout time.Duration) (*Conn, error) {
	cconf, cname := C.CString(conf), C.CString(name)
	defer C.free(unsafe.Pointer(cconf))
	defer C.free(unsafe.Pointer(cname))
	secs, osdSecs := seconds(timeout), seconds(osdTimeout)
	csecs, cosd := C.CString(secs), C.CString(osdSecs)
	defer C.free(unsafe.Pointer(csecs))
	defer C.free(unsafe.Pointer(cosd))
	var c C.rados_t
	var step C.int
	if r := C.nvt_rados_connect(&c, cconf, cname, csecs, cosd, &step); r < 0 {
		err := errno(r)
		switch step {
		case C.NVT_STEP_CREATE:
			return nil, fmt.Errorf("create client %s: %w", name, err)
		case C.NVT_STEP_CONF:
			return nil, fmt.Errorf("read %s: %w", conf, err)
		case C.NVT_STEP_SET:
			return nil, fmt.Errorf("configure client %s: %w", name, err)
		}
		if errors.Is(err, syscall.ETIMEDOUT) {
			return nil, fmt.Errorf("connect to the cluster of %s as %s: no answer within %ss: %w", conf, name, secs, err)
		}
		return nil, fmt.Errorf("connect to the cluster of %s as %s: %w", conf, name, err)
	}
	return &Conn{c: c}, nil
}

// seconds is d in whole seconds, at least 1, as Ceph's options take it.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
}

// configValue is the value of the option key of a client configured as
// Connect configures it, before it connects: for tests, without a cluster.
func configValue(conf, name string, timeout, osdTimeout time.Duration, key string) (string, error) {
	cconf, cname, ckey := C.CString(conf), C.CString(name), C.CString(key)
	defer C.free(unsafe.Pointer(cconf))
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(ckey))
	csecs, cosd := C.CString(seconds(timeout)), C.CString(seconds(osdTimeout))
	defer C.free(unsafe.Pointer(csecs))
	defer C.free(unsafe.Pointer(cosd))
	var c C.rados_t
	var step C.int
	if r := C.nvt_rados_configure(&c, cconf, cname, csecs, cosd, &step); r < 0 {
		return "", errno(r)
	}
	defer C.rados_shutdown(c)
	var buf [64]C.char
	if r := C.rados_conf_get(c, ckey, &buf[0], C.size_t(len(buf))); r < 0 {
		return "", errno(r)
	}
	return C.GoString(&buf[0]), nil
}

// Close disconnects. Every image opened through c is closed first.
func (c *Conn) Close() {
	if !c.closed {
		c.closed = true
		C.rados_shutdown(c.c)
	}
}

// InstanceID is the client's global ID in the cluster (client.<gid>), as
// `ceph osd blocklist` and `rbd status` show it.
func (c *Conn) InstanceID() uint64 { return uint64(C.rados_get_instance_id(c.c)) }

// ioctx opens pool; the caller destroys it.
func (c *Conn) ioctx(pool string) (C.rados_ioctx_t, error) {
	cpool := C.CString(pool)
	defer C.free(unsafe.Pointer(cpool))
	var io C.rados_ioctx_t
	if r := C.rados_ioctx_create(c.c, cpool, &io); r < 0 {
		if r == -C.ENOENT {
			return nil, fmt.Errorf("pool %s: %w: %w", pool, ErrNoPool, errno(r))
		}
		return nil, fmt.Errorf("pool %s: %w", pool, errno(r))
	}
	return io, nil
}

// Features an image is created with, for CreateImage.
const (
	FeatureLayering      = uint64(C.RBD_FEATURE_LAYERING)
	FeatureExclusiveLock = uint64(C.RBD_FEATURE_EXCLUSIVE_LOCK)
	FeatureObjectMap     = uint64(C.RBD_FEATURE_OBJECT_MAP)
	FeatureFastDiff      = uint64(C.RBD_FEATURE_FAST_DIFF)
	FeatureDeepFlatten   = uint64(C.RBD_FEATURE_DEEP_FLATTEN)
	FeatureJournaling    = uint64(C.RBD_FEATURE_JOURNALING)
)

// CreateImage creates image name of size bytes in pool, with features and
// the default object size. An image that exists is syscall.EEXIST.
func (c *Conn) CreateImage(pool, name string, size, features uint64) error {
	io, err := c.ioctx(pool)
	if err != nil {
		return err
	}
	defer C.rados_ioctx_destroy(io)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var order C.int
	if r := C.rbd_create2(io, cname, C.uint64_t(size), C.uint64_t(features), &order); r < 0 {
		return fmt.Errorf("create image %s/%s: %w", pool, name, errno(r))
	}
	return nil
}

// Image is an open RBD image. Its methods are safe for concurrent use
// (librbd's are), except Close.
type Image struct {
	img  C.rbd_image_t
	io   C.rados_ioctx_t
	name string // pool/image, for errors
}

// OpenImage opens image name in pool, read-only or not. A missing pool or
// image is syscall.ENOENT.
func (c *Conn) OpenImage(pool, name string, readOnly bool) (*Image, error) {
	io, err := c.ioctx(pool)
	if err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	im := &Image{io: io, name: pool + "/" + name}
	var r C.int
	if readOnly {
		r = C.rbd_open_read_only(io, cname, &im.img, nil)
	} else {
		r = C.rbd_open(io, cname, &im.img, nil)
	}
	if r < 0 {
		C.rados_ioctx_destroy(io)
		if r == -C.ENOENT {
			return nil, fmt.Errorf("open image %s: %w: %w", im.name, ErrNoImage, errno(r))
		}
		return nil, fmt.Errorf("open image %s: %w", im.name, errno(r))
	}
	return im, nil
}

// RemoveImage deletes image name from pool, with its data.
func (c *Conn) RemoveImage(pool, name string) error {
	io, err := c.ioctx(pool)
	if err != nil {
		return err
	}
	defer C.rados_ioctx_destroy(io)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if r := C.rbd_remove(io, cname); r < 0 {
		return fmt.Errorf("remove image %s/%s: %w", pool, name, errno(r))
	}
	return nil
}

// Name is pool/image.
func (im *Image) Name() string { return im.name }

// Close closes the image; librbd waits for its operations in flight.
func (im *Image) Close() error {
	r := C.rbd_close(im.img)
	C.rados_ioctx_destroy(im.io)
	if r < 0 {
		return fmt.Errorf("close image %s: %w", im.name, errno(r))
	}
	return nil
}

// Size is the image's size in bytes now (librbd refreshes its view of the
// header first when a watch said it changed).
func (im *Image) Size() (uint64, error) {
	var n C.uint64_t
	if r := C.rbd_get_size(im.img, &n); r < 0 {
		return 0, fmt.Errorf("size of image %s: %w", im.name, errno(r))
	}
	return uint64(n), nil
}

// Features are the image's feature bits.
func (im *Image) Features() (uint64, error) {
	var f C.uint64_t
	if r := C.rbd_get_features(im.img, &f); r < 0 {
		return 0, fmt.Errorf("features of image %s: %w", im.name, errno(r))
	}
	return uint64(f), nil
}

// Resize makes the image size bytes, growing or shrinking it (a shrink
// discards the data past the new end).
func (im *Image) Resize(size uint64) error {
	if r := C.rbd_resize2(im.img, C.uint64_t(size), C.bool(true), nil, nil); r < 0 {
		return fmt.Errorf("resize image %s to %d: %w", im.name, size, errno(r))
	}
	return nil
}

// ReadAt fills p from off, blocking.
func (im *Image) ReadAt(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	r := C.rbd_read2(im.img, C.uint64_t(off), C.size_t(len(p)), (*C.char)(unsafe.Pointer(&p[0])), 0)
	runtime.KeepAlive(p)
	switch {
	case r < 0:
		return errno(C.int(r))
	case int(r) != len(p):
		return fmt.Errorf("read %d of %d bytes: %w", r, len(p), syscall.EIO)
	}
	return nil
}

// WriteAt writes p at off, blocking.
func (im *Image) WriteAt(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	r := C.rbd_write2(im.img, C.uint64_t(off), C.size_t(len(p)), (*C.char)(unsafe.Pointer(&p[0])), 0)
	runtime.KeepAlive(p)
	switch {
	case r < 0:
		return errno(C.int(r))
	case int(r) != len(p):
		return fmt.Errorf("wrote %d of %d bytes: %w", r, len(p), syscall.EIO)
	}
	return nil
}

// Flush waits for the writes completed so far to be durable.
func (im *Image) Flush() error {
	if r := C.rbd_flush(im.img); r < 0 {
		return errno(r)
	}
	return nil
}

// syncChunk bounds one blocking discard or write-zeroes: librbd's
// blocking rbd_discard returns an int and refuses more than INT_MAX bytes.
const syncChunk = 1 << 30

// Discard deallocates [off, off+length), blocking.
func (im *Image) Discard(off, length int64) error {
	for length > 0 {
		n := min(length, syncChunk)
		if r := C.rbd_discard(im.img, C.uint64_t(off), C.uint64_t(n)); r < 0 {
			return errno(r)
		}
		off, length = off+n, length-n
	}
	return nil
}

// WriteZeroes zeroes [off, off+length), blocking; librbd deallocates what
// it can.
func (im *Image) WriteZeroes(off, length int64) error {
	for length > 0 {
		n := min(length, syncChunk)
		if r := C.rbd_write_zeroes(im.img, C.uint64_t(off), C.size_t(n), 0, 0); r < 0 {
			return errno(C.int(r))
		}
		off, length = off+n, length-n
	}
	return nil
}

// Watch is a flag librbd raises, from its own thread, when the image's
// header changes (a resize, here or anywhere in the cluster), with a write
// to an eventfd. Its memory is C's: librbd holds it until Unwatch.
type Watch struct {
	w      *C.nvt_rbd_watch
	handle C.uint64_t
	im     *Image
}

// WatchUpdates raises w's flag and writes fd (an eventfd) on every change of
// the image's header.
func (im *Image) WatchUpdates(fd int) (*Watch, error) {
	w := &Watch{w: (*C.nvt_rbd_watch)(C.calloc(1, C.sizeof_nvt_rbd_watch)), im: im}
	if w.w == nil {
		return nil, fmt.Errorf("watch image %s: %w", im.name, syscall.ENOMEM)
	}
	w.w.fd = C.int32_t(fd)
	if r := C.nvt_rbd_update_watch(im.img, w.w, &w.handle); r < 0 {
		C.free(unsafe.Pointer(w.w))
		return nil, fmt.Errorf("watch image %s: %w", im.name, errno(r))
	}
	return w, nil
}

// Changed reports whether the header changed since the last call, and
// lowers the flag.
func (w *Watch) Changed() bool {
	return (*atomic.Int32)(unsafe.Pointer(&w.w.changed)).Swap(0) != 0
}

// Unwatch stops the watch; librbd waits for a callback that runs. The
// flag Changed reads stays until Free: a reader woken by the last callback
// may still be on its way to it.
func (w *Watch) Unwatch() error {
	if r := C.rbd_update_unwatch(w.im.img, w.handle); r < 0 {
		return fmt.Errorf("unwatch image %s: %w", w.im.name, errno(r))
	}
	return nil
}

// Free releases the watch's memory, after Unwatch and once nothing calls
// Changed any more.
func (w *Watch) Free() {
	C.free(unsafe.Pointer(w.w))
	w.w = nil
}

// Op is an asynchronous operation.
type Op int

// The operations of Queue.Submit.
const (
	OpRead        Op = C.NVT_RBD_READ
	OpWrite       Op = C.NVT_RBD_WRITE
	OpFlush       Op = C.NVT_RBD_FLUSH
	OpDiscard     Op = C.NVT_RBD_DISCARD
	OpWriteZeroes Op = C.NVT_RBD_WRITE_ZEROES
)

// Completion is one finished operation: the slot it was submitted with,
// and librbd's result (bytes moved or 0, or a negated errno).
type Completion struct {
	Slot uint32
	Res  int64
}

// Queue takes the completions of operations submitted through it, for one
// owner goroutine, which reaps them by polling (Reap) and sleeps on its
// eventfd after Arm. Its memory is C's, so librbd's threads may write it.
type Queue struct {
	q    *C.nvt_rbd_queue
	tail *atomic.Uint32
	arm  *atomic.Int32
	done []C.nvt_rbd_done
	head uint32
	mask uint32
}

// NewQueue makes a queue for slots 0..entries-1 (entries a power of two),
// at most one operation in flight per slot. wakeFD, an eventfd or -1, is
// written when an operation completes after Arm.
func NewQueue(entries int, wakeFD int) (*Queue, error) {
	if entries < 1 || entries&(entries-1) != 0 {
		return nil, fmt.Errorf("rbd queue of %d entries: not a power of two: %w", entries, syscall.EINVAL)
	}
	cq := C.nvt_rbd_queue_new(C.uint32_t(entries), C.int(wakeFD))
	if cq == nil {
		return nil, fmt.Errorf("rbd queue: %w", syscall.ENOMEM)
	}
	return &Queue{
		q: cq, tail: (*atomic.Uint32)(unsafe.Pointer(&cq.tail)), arm: (*atomic.Int32)(unsafe.Pointer(&cq.armed)),
		done: unsafe.Slice(cq.done, entries), mask: uint32(entries - 1),
	}, nil
}

// Submit starts op on im for slot: p (read, write) at off, or length bytes
// at off (discard, write zeroes). p's memory must stay put and alive until
// the slot's completion is reaped: the registered buffers, never a Go
// stack. An error means nothing was started.
func (q *Queue) Submit(op Op, im *Image, slot uint32, p []byte, off, length int64) error {
	var buf unsafe.Pointer
	if len(p) > 0 {
		buf = unsafe.Pointer(unsafe.SliceData(p))
		length = int64(len(p))
	}
	if r := C.nvt_rbd_submit(q.q, im.img, C.int(op), C.uint32_t(slot), buf, C.uint64_t(off), C.uint64_t(length)); r < 0 {
		return errno(r)
	}
	return nil
}

// Reap moves up to len(out) completions into out and returns how many,
// without a cgo call.
func (q *Queue) Reap(out []Completion) int {
	tail := q.tail.Load()
	n := 0
	for q.head != tail && n < len(out) {
		d := &q.done[q.head&q.mask]
		out[n] = Completion{Slot: uint32(d.slot), Res: int64(d.res)}
		q.head++
		n++
	}
	return n
}

// Arm asks for a wake-up on the eventfd at the next completion. It reports
// false when a completion is waiting already: reap it rather than sleep.
func (q *Queue) Arm() bool {
	q.arm.Store(1)
	return q.tail.Load() == q.head
}

// post delivers a completion as librbd's callback does, from the calling
// thread, for tests of the queue without a cluster.
func (q *Queue) post(slot uint32, res int64) {
	C.nvt_rbd_post(q.q, C.uint32_t(slot), C.int64_t(res))
}

// Inflight is the number of operations whose completion librbd has not
// delivered.
func (q *Queue) Inflight() int { return int(C.nvt_rbd_queue_inflight(q.q)) }

// Close frees the queue once librbd has delivered every completion, waiting
// up to wait. Past it the memory is left to the operations still in flight
// (a cluster that stopped answering), and Close says so.
func (q *Queue) Close(wait time.Duration) error {
	for start := time.Now(); q.Inflight() > 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > wait {
			return fmt.Errorf("rbd queue: %d operations still in flight after %v: its memory is left to them", q.Inflight(), wait)
		}
	}
	C.nvt_rbd_queue_free(q.q)
	q.q = nil
	return nil
}
