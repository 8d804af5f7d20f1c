package blockdev

import (
	"errors"
	"log/slog"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// KindRBD is a Ceph RBD image (OpenRBD), which only the rbd build serves.
const KindRBD Kind = limits.BackendRBD

// RBDOptions names an RBD image for OpenRBD and says how to serve it.
type RBDOptions struct {
	// Pool and Image name the image, as rbd(8) does (pool/image).
	Pool, Image string
	// Size creates a missing image of Size bytes (rounded down to
	// BlockSize); 0 means the image must exist. An existing image is served
	// at its own size, whatever Size says.
	Size int64
	// BlockSize is 512 or 4096; 0 means 512.
	BlockSize uint32
	// CephConf is the cluster's configuration file; "" means
	// limits.RBDCephConf.
	CephConf string
	// Client is the Ceph client name, "admin" or "client.admin"; "" means
	// limits.RBDClient. Images opened with the same CephConf and Client
	// share one cluster connection.
	Client   string
	ReadOnly bool
	// Logger receives setup messages and the image's resizes; nil discards
	// them. Nothing is logged per I/O.
	Logger *slog.Logger
}

// ErrExclusiveLock reports an image with the exclusive-lock feature, which
// OpenRBD refuses for writing: each gateway writing it would take the lock
// from the others in turn (one writer at a time, and a lock hand-over per
// switch), and a gateway that fails over would wait for the dead one's lock
// to be broken. Its error says how to turn the feature off.
var ErrExclusiveLock = errors.New("the image has the exclusive-lock feature")

// RBDFeatures are the features of an image OpenRBD creates: layering and
// deep-flatten, the defaults of rbd(8) less exclusive-lock and what depends
// on it (object-map, fast-diff, journaling), so that several gateways can
// write the image at once.
const RBDFeatures = "layering,deep-flatten"

// ResizeNotifier is a Device whose size can change from outside while it
// is in use (an RBD image resized by `rbd resize` on any client): it calls
// the function it was given after its Size changed.
type ResizeNotifier interface {
	// NotifyResize makes fn run, on a goroutine of the device's, each time
	// the backing's size may have changed; Size has the new size by then.
	// A later call replaces fn; nil stops the calls.
	NotifyResize(fn func())
}

// ZeroQueuer is a Queuer that can also queue Discard and WriteZeroes on a
// Ring (RBD images); durable as for QueueWrite. Errors are as for Queuer.
type ZeroQueuer interface {
	QueueDiscard(r *Ring, off, length int64, tag uint64) error
	QueueWriteZeroes(r *Ring, off, length int64, durable bool, tag uint64) error
}
