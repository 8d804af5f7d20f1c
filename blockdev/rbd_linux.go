//go:build linux && cgo && rbd

package blockdev

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev/internal/rbd"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// RBDSupported reports whether this build serves RBD images: only one
// built with the tag rbd (bin/nvmeof-tgt-rbd) links librbd.
const RBDSupported = true

// rbdConn is one cluster connection, shared by every image opened with the
// same configuration file and client: librados' threads, sockets and
// sessions with the monitors and OSDs are per connection, and a gateway
// with many namespaces needs one set of them (issue 22: one rados
// connection per target). It is closed with its last image.
type rbdConn struct {
	key   rbdConnKey
	refs  int           // guarded by rbdConns.mu
	ready chan struct{} // closed once conn or err is set
	conn  *rbd.Conn
	err   error
}

type rbdConnKey struct{ conf, client string }

var rbdConns = struct {
	mu sync.Mutex
	m  map[rbdConnKey]*rbdConn
}{m: map[rbdConnKey]*rbdConn{}}

// rbdConnectTimeout bounds a connection attempt; a variable for tests.
var rbdConnectTimeout = limits.RBDConnectTimeout

// acquireRBDConn returns the connection for conf and client, connecting
// first if there is none. Callers for one key wait for one attempt; one that
// failed is forgotten, so the next call tries again.
func acquireRBDConn(conf, client string) (*rbdConn, error) {
	k := rbdConnKey{conf, client}
	rbdConns.mu.Lock()
	c := rbdConns.m[k]
	first := c == nil
	if first {
		c = &rbdConn{key: k, ready: make(chan struct{})}
		rbdConns.m[k] = c
	}
	c.refs++
	rbdConns.mu.Unlock()
	if first {
		c.conn, c.err = rbd.Connect(conf, client, rbdConnectTimeout, limits.RBDOSDOpTimeout)
		if c.err != nil {
			rbdConns.mu.Lock()
			delete(rbdConns.m, k)
			rbdConns.mu.Unlock()
		}
		close(c.ready)
	}
	<-c.ready
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// release lets go of a reference; the last closes the connection.
func (c *rbdConn) release() {
	rbdConns.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last && rbdConns.m[c.key] == c {
		delete(rbdConns.m, c.key)
	}
	rbdConns.mu.Unlock()
	if last {
		c.conn.Close()
	}
}

// rbdConnCount is how many cluster connections are open, for tests.
func rbdConnCount() int {
	rbdConns.mu.Lock()
	defer rbdConns.mu.Unlock()
	return len(rbdConns.m)
}

// rbdOpenTimeout bounds opening (and creating) an image; a variable for
// tests.
var rbdOpenTimeout = limits.RBDOpenTimeout

// OpenRBD opens the image o names, creating it when it is missing and
// o.Size is set, on the target's one connection to its cluster. An image
// with the exclusive-lock feature is refused for writing
// (ErrExclusiveLock). Connecting is bounded by limits.RBDConnectTimeout and
// opening by limits.RBDOpenTimeout: an unreachable cluster is an error, and
// an open that outlasts its bound is finished and closed in the background.
func OpenRBD(o RBDOptions) (Device, error) {
	name := o.Pool + "/" + o.Image
	bs, err := checkBlockSize(o.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("rbd image %s: %w", name, err)
	}
	conf, client := o.CephConf, o.Client
	if conf == "" {
		conf = limits.RBDCephConf
	}
	if client == "" {
		client = limits.RBDClient
	}
	if !strings.HasPrefix(client, "client.") {
		client = "client." + client
	}
	c, err := acquireRBDConn(conf, client)
	if err != nil {
		return nil, fmt.Errorf("rbd image %s: %w", name, err)
	}
	type opened struct {
		im      *rbd.Image
		created bool
		err     error
	}
	done := make(chan opened, 1)
	go func() {
		im, created, err := openRBDImage(c.conn, o, bs)
		done <- opened{im, created, err}
	}()
	var res opened
	select {
	case res = <-done:
	case <-time.After(rbdOpenTimeout):
		go func() {
			if res := <-done; res.im != nil {
				res.im.Close()
			}
			c.release()
		}()
		return nil, fmt.Errorf("rbd image %s: not opened within %v (are the cluster's OSDs up?): %w", name, rbdOpenTimeout, syscall.ETIMEDOUT)
	}
	if res.err != nil {
		c.release()
		return nil, fmt.Errorf("rbd image %s: %w", name, res.err)
	}
	d, err := newRBDDev(c, res.im, name, bs, o)
	if err != nil {
		res.im.Close()
		c.release()
		return nil, fmt.Errorf("rbd image %s: %w", name, err)
	}
	if res.created {
		d.log.Info("rbd image created", "image", name, "bytes", d.Size(), "features", RBDFeatures)
	}
	return d, nil
}

// openRBDImage opens o's image, creating a missing one when o.Size says
// so, and checks that it can be served as o asks.
func openRBDImage(c *rbd.Conn, o RBDOptions, bs uint32) (im *rbd.Image, created bool, err error) {
	im, err = c.OpenImage(o.Pool, o.Image, o.ReadOnly)
	switch {
	case errors.Is(err, rbd.ErrNoPool):
		return nil, false, fmt.Errorf("pool %s does not exist in the cluster (ceph osd pool create %s; rbd pool init %s): %w", o.Pool, o.Pool, o.Pool, ErrInvalidArgument)
	case errors.Is(err, rbd.ErrNoImage) && (o.Size <= 0 || o.ReadOnly):
		return nil, false, fmt.Errorf("image %s does not exist in pool %s, and no size is given to create it with: %w", o.Image, o.Pool, ErrInvalidArgument)
	case errors.Is(err, rbd.ErrNoImage):
		size := o.Size &^ (int64(bs) - 1)
		if size < int64(bs) {
			return nil, false, fmt.Errorf("size %d is smaller than one %d-byte block: %w", o.Size, bs, ErrInvalidArgument)
		}
		err = c.CreateImage(o.Pool, o.Image, uint64(size), rbd.FeatureLayering|rbd.FeatureDeepFlatten)
		// Another gateway may have created it meanwhile: open that one.
		created = err == nil
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, false, err
		}
		if im, err = c.OpenImage(o.Pool, o.Image, o.ReadOnly); err != nil {
			return nil, false, err
		}
	case err != nil:
		return nil, false, err
	}
	if !o.ReadOnly {
		f, err := im.Features()
		if err == nil && f&rbd.FeatureExclusiveLock != 0 {
			err = fmt.Errorf("%w: several gateways cannot write it at once; turn it off with `rbd feature disable %s/%s %s` (or serve it read_only)",
				ErrExclusiveLock, o.Pool, o.Image, lockFeatures(f))
		}
		if err != nil {
			im.Close()
			return nil, false, err
		}
	}
	return im, created, nil
}

// lockFeatures names the features to disable to turn exclusive-lock off:
// those set of it and the ones that depend on it, dependants first.
func lockFeatures(f uint64) string {
	var names []string
	for _, x := range []struct {
		bit  uint64
		name string
	}{{rbd.FeatureJournaling, "journaling"}, {rbd.FeatureFastDiff, "fast-diff"}, {rbd.FeatureObjectMap, "object-map"}, {rbd.FeatureExclusiveLock, "exclusive-lock"}} {
		if f&x.bit != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, " ")
}

// rbdDev is an RBD image as a Device. Its blocking calls go to librbd's
// synchronous API (the namespace workers), its queued ones to its
// asynchronous API with completions on the caller's Ring.
type rbdDev struct {
	// mu is held shared by every call and exclusively by Close.
	mu       closeLock
	closed   bool
	closing  atomic.Bool // set by the first Close
	conn     *rbdConn
	im       *rbd.Image
	name     string // pool/image
	size     atomic.Int64
	bs       uint32
	readOnly bool
	log      *slog.Logger
	// inflight counts operations queued on a Ring and not yet reaped.
	inflight atomic.Int64

	// The update watch: librbd writes wake (an eventfd) when the image's
	// header changes; watchLoop reads it.
	watch     *rbd.Watch
	wake      *os.File
	watchDone chan struct{}
	notify    atomic.Pointer[func()]
}

func newRBDDev(c *rbdConn, im *rbd.Image, name string, bs uint32, o RBDOptions) (*rbdDev, error) {
	d := &rbdDev{conn: c, im: im, name: name, bs: bs, readOnly: o.ReadOnly, log: logger(o.Logger)}
	n, err := d.BackingSize()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("the image is smaller than one %d-byte block: %w", bs, ErrInvalidArgument)
	}
	d.size.Store(n)
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// Non-blocking: the runtime's poller waits for it, not a thread.
	d.wake = os.NewFile(uintptr(fd), "rbd-watch-"+name)
	if d.watch, err = im.WatchUpdates(fd); err != nil {
		d.wake.Close()
		return nil, err
	}
	d.watchDone = make(chan struct{})
	go d.watchLoop()
	return d, nil
}

// watchLoop follows the image's size: each header change (a resize here,
// by `rbd resize`, by another gateway) reads it again, and a change is
// stored and announced. It returns when Close closes wake.
func (d *rbdDev) watchLoop() {
	defer close(d.watchDone)
	var b [8]byte
	for {
		if _, err := d.wake.Read(b[:]); err != nil {
			return
		}
		if d.watch.Changed() {
			d.follow()
		}
	}
}

// follow reads the image's size and, when it changed, stores it and calls
// the NotifyResize function.
func (d *rbdDev) follow() {
	n, err := d.BackingSize()
	if err != nil {
		d.log.Warn("rbd image changed; its size cannot be read", "image", d.name, "err", err)
		return
	}
	old := d.size.Swap(n)
	if old == n {
		return
	}
	d.log.Info("rbd image resized", "image", d.name, "from", old, "bytes", n)
	if fn := d.notify.Load(); fn != nil {
		(*fn)()
	}
}

// NotifyResize implements ResizeNotifier.
func (d *rbdDev) NotifyResize(fn func()) {
	if fn == nil {
		d.notify.Store(nil)
		return
	}
	d.notify.Store(&fn)
}

func (d *rbdDev) Size() int64         { return d.size.Load() }
func (d *rbdDev) BlockSize() uint32   { return d.bs }
func (d *rbdDev) DiscardZeroes() bool { return true } // rbd_skip_partial_discard is off

// BackingSize is the image's size now, rounded down to the block size.
func (d *rbdDev) BackingSize() (int64, error) {
	n, err := d.im.Size()
	if err != nil {
		return 0, err
	}
	return int64(n) &^ (int64(d.bs) - 1), nil
}

// Resize makes the image size bytes (rounded down to the block size),
// growing or shrinking it; 0 takes the image's size now, as another client
// may have left it.
func (d *rbdDev) Resize(size int64) error {
	defer d.mu.rlock(0).RUnlock()
	if d.closed {
		return fmt.Errorf("resize %s: %w", d.name, ErrClosed)
	}
	if size == 0 {
		n, err := d.BackingSize()
		if err != nil {
			return err
		}
		d.size.Store(n)
		return nil
	}
	if d.readOnly {
		return fmt.Errorf("resize %s: %w", d.name, ErrReadOnly)
	}
	size &^= int64(d.bs) - 1
	if size <= 0 {
		return fmt.Errorf("resize %s: smaller than one %d-byte block: %w", d.name, d.bs, ErrInvalidArgument)
	}
	if err := d.im.Resize(uint64(size)); err != nil {
		return err
	}
	d.size.Store(size)
	return nil
}

// begin is the preamble of every call: the range checked (for a change,
// on a writable image) and the image held open. It returns the lock to
// release, or nil with the error.
func (d *rbdDev) begin(op string, off, length int64, modify bool) (*sync.RWMutex, error) {
	if modify && d.readOnly {
		return nil, fmt.Errorf("%s %s at %d: %w", op, d.name, off, ErrReadOnly)
	}
	if err := checkRange(op, d.name, off, length, d.size.Load(), d.bs); err != nil {
		return nil, err
	}
	l := d.mu.rlock(uintptr(off))
	if d.closed {
		l.RUnlock()
		return nil, fmt.Errorf("%s %s: %w", op, d.name, ErrClosed)
	}
	return l, nil
}

func (d *rbdDev) ReadAt(p []byte, off int64) (int, error) {
	l, err := d.begin("read", off, int64(len(p)), false)
	if err != nil {
		return 0, err
	}
	defer l.RUnlock()
	if err := d.im.ReadAt(p, off); err != nil {
		return 0, fmt.Errorf("read %s at %d: %w", d.name, off, ioError(err))
	}
	return len(p), nil
}

func (d *rbdDev) WriteAt(p []byte, off int64) (int, error) {
	l, err := d.begin("write", off, int64(len(p)), true)
	if err != nil {
		return 0, err
	}
	defer l.RUnlock()
	if err := d.im.WriteAt(p, off); err != nil {
		return 0, fmt.Errorf("write %s at %d: %w", d.name, off, writeError(err))
	}
	return len(p), nil
}

// Flush is rbd_flush. With librbd's cache off (rbd.Connect) every write it
// acknowledged is on the OSDs already, so it has little to wait for.
func (d *rbdDev) Flush() error {
	defer d.mu.rlock(0).RUnlock()
	if d.closed {
		return fmt.Errorf("flush %s: %w", d.name, ErrClosed)
	}
	if err := d.im.Flush(); err != nil {
		return fmt.Errorf("flush %s: %w", d.name, ioError(err))
	}
	return nil
}

func (d *rbdDev) Discard(off, length int64) error {
	l, err := d.begin("discard", off, length, true)
	if err != nil {
		return err
	}
	defer l.RUnlock()
	if err := d.im.Discard(off, length); err != nil {
		return fmt.Errorf("discard %s at %d: %w", d.name, off, writeError(err))
	}
	return nil
}

func (d *rbdDev) WriteZeroes(off, length int64) error {
	l, err := d.begin("write zeroes", off, length, true)
	if err != nil {
		return err
	}
	defer l.RUnlock()
	if err := d.im.WriteZeroes(off, length); err != nil {
		return fmt.Errorf("write zeroes %s at %d: %w", d.name, off, writeError(err))
	}
	return nil
}

// QueueRead queues rbd_aio_read of p at off on r. p must stay where it is
// until the completion is reaped (the registered buffers do).
func (d *rbdDev) QueueRead(r *Ring, p []byte, off int64, tag uint64) error {
	return d.queue(r, rbd.OpRead, "read", p, off, int64(len(p)), false, tag)
}

// QueueWrite queues rbd_aio_write of p at off on r. durable needs nothing
// more: with librbd's cache off a write completes once on the OSDs.
func (d *rbdDev) QueueWrite(r *Ring, p []byte, off int64, durable bool, tag uint64) error {
	return d.queue(r, rbd.OpWrite, "write", p, off, int64(len(p)), true, tag)
}

// QueueFlush queues rbd_aio_flush on r.
func (d *rbdDev) QueueFlush(r *Ring, tag uint64) error {
	return d.queue(r, rbd.OpFlush, "flush", nil, 0, 0, false, tag)
}

// QueueDiscard queues rbd_aio_discard of [off, off+length) on r.
func (d *rbdDev) QueueDiscard(r *Ring, off, length int64, tag uint64) error {
	return d.queue(r, rbd.OpDiscard, "discard", nil, off, length, true, tag)
}

// QueueWriteZeroes queues rbd_aio_write_zeroes of [off, off+length) on r;
// durable as for QueueWrite.
func (d *rbdDev) QueueWriteZeroes(r *Ring, off, length int64, durable bool, tag uint64) error {
	return d.queue(r, rbd.OpWriteZeroes, "write zeroes", nil, off, length, true, tag)
}

// queue starts op on r's librbd queue. It allocates nothing unless it
// fails; ErrNotQueued (a full ring) did nothing.
func (d *rbdDev) queue(r *Ring, op rbd.Op, what string, p []byte, off, length int64, modify bool, tag uint64) error {
	l, err := d.begin(what, off, length, modify)
	if err != nil {
		return err
	}
	defer l.RUnlock()
	q, err := r.rbd.queue(r)
	if err != nil {
		return ErrNotQueued
	}
	slot, ok := r.take(ringOp{held: &d.inflight, p: p, off: off, tag: tag})
	if !ok {
		return ErrNotQueued
	}
	d.inflight.Add(1)
	r.rbd.devs[slot], r.rbd.kinds[slot] = d, op
	if err := q.Submit(op, d.im, slot, p, off, length); err != nil {
		r.rbd.devs[slot] = nil
		r.finish(slot)
		return fmt.Errorf("%s %s at %d: %w", what, d.name, off, ioError(err))
	}
	return nil
}

// ioError is err, an errno of librbd's, with ErrFenced or ErrTimeout beside
// it when it says this client, not the data, failed, for fabric to turn into
// a status the host retries on another path: -EBLOCKLISTED (ESHUTDOWN on
// Linux) once the cluster has blocklisted the client, and -ETIMEDOUT when
// an OSD operation outlasted rados_osd_op_timeout (rbd.Connect sets it).
func ioError(err error) error {
	switch {
	case errors.Is(err, syscall.ESHUTDOWN):
		return fmt.Errorf("%w (the client is blocklisted): %w", ErrFenced, err)
	case errors.Is(err, syscall.ETIMEDOUT):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// rbdUnsettled counts the writes (write, discard, write zeroes) given up on
// after rados_osd_op_timeout: librados no longer waits for them, but what
// it sent may still sit in a socket toward an OSD and land whenever the
// network heals, after any other client's later writes unless this client
// is blocklisted first. Counted for the process's life: a connection closed
// since may have left such bytes behind too.
var rbdUnsettled atomic.Uint64

// writeError is ioError of a write, counting one that timed out
// (rbdUnsettled).
func writeError(err error) error {
	err = ioError(err)
	if errors.Is(err, ErrTimeout) {
		rbdUnsettled.Add(1)
	}
	return err
}

// RBDUnsettled reports whether a write of this process's RBD clients was
// given up on after its timeout and may still land (rbdUnsettled): a
// gateway group fences such a gateway rather than serve its group beside
// it.
func RBDUnsettled() bool { return rbdUnsettled.Load() > 0 }

// opError is the error of a queued operation that finished with res.
func (d *rbdDev) opError(op rbd.Op, off int64, n int, res int64) error {
	what := [...]string{rbd.OpRead: "read", rbd.OpWrite: "write", rbd.OpFlush: "flush", rbd.OpDiscard: "discard", rbd.OpWriteZeroes: "write zeroes"}[op]
	switch {
	case res < 0 && (op == rbd.OpWrite || op == rbd.OpDiscard || op == rbd.OpWriteZeroes):
		return fmt.Errorf("%s %s at %d: %w", what, d.name, off, writeError(syscall.Errno(-res)))
	case res < 0:
		return fmt.Errorf("%s %s at %d: %w", what, d.name, off, ioError(syscall.Errno(-res)))
	case op == rbd.OpRead && res != int64(n):
		return fmt.Errorf("read %s at %d: %d of %d bytes: %w", d.name, off, res, n, syscall.EIO)
	}
	return nil
}

func (d *rbdDev) Close() error {
	if !d.closing.CompareAndSwap(false, true) {
		return fmt.Errorf("close %s: %w", d.name, ErrClosed)
	}
	// The watch first: no callback, no follow, once it is gone.
	werr := d.watch.Unwatch()
	d.wake.Close()
	<-d.watchDone
	if werr == nil {
		// watchLoop is gone: nothing reads the watch's flag now. (After a
		// failed unwatch librbd may still call back: the memory stays.)
		d.watch.Free()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for start := time.Now(); d.inflight.Load() > 0 && time.Since(start) < closeWait; {
		time.Sleep(time.Millisecond)
	}
	err := d.im.Close()
	d.conn.release()
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	return nil
}

// ringRBD is the part of a Ring that takes librbd's completions: a queue
// made at the first operation queued, and what each slot's operation is.
type ringRBD struct {
	q     *rbd.Queue
	devs  []*rbdDev // by slot
	kinds []rbd.Op  // by slot
	comps [64]rbd.Completion
}

// queue is r's librbd queue, made if it has none yet.
func (x *ringRBD) queue(r *Ring) (*rbd.Queue, error) {
	if x.q != nil {
		return x.q, nil
	}
	q, err := rbd.NewQueue(len(r.ops), r.evfd)
	if err != nil {
		return nil, err
	}
	x.q, x.devs, x.kinds = q, make([]*rbdDev, len(r.ops)), make([]rbd.Op, len(r.ops))
	return q, nil
}

func (x *ringRBD) arm() bool { return x.q == nil || x.q.Arm() }

// reap moves librbd's completions into out, without a cgo call.
func (x *ringRBD) reap(r *Ring, out []Completion) int {
	if x.q == nil {
		return 0
	}
	n := 0
	for n < len(out) {
		k := x.q.Reap(x.comps[:min(len(out)-n, len(x.comps))])
		for _, c := range x.comps[:k] {
			op, d := &r.ops[c.Slot], x.devs[c.Slot]
			var err error
			if c.Res < 0 || x.kinds[c.Slot] == rbd.OpRead && c.Res != int64(len(op.p)) {
				err = d.opError(x.kinds[c.Slot], op.off, len(op.p), c.Res)
			}
			out[n] = Completion{Tag: op.tag, Err: err}
			n++
			x.devs[c.Slot] = nil
			r.finish(c.Slot)
		}
		if k == 0 {
			break
		}
	}
	return n
}

func (x *ringRBD) close() error {
	if x.q == nil {
		return nil
	}
	return x.q.Close(closeWait)
}
