package rdma

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// Device removal (a NIC unplugged, reset or its driver unloaded; `rdma
// link delete` of a Soft-RoCE device), as nvmet's ib_client remove_one and
// SPDK's DEVICE_REMOVAL handling do it: every queue on the device is torn
// down (hosts fail over to their other paths), the ports bound to it go
// down, and the device is released whole, so that the kernel's
// unregistration completes. The other devices and ports serve on; a port
// that went down listens again once its address is usable (listener.go).
//
// The kernel tells in three ways, whichever comes first:
//   - rdma_cm DEVICE_REMOVAL on every ID on the device (listener.go);
//   - IBV_EVENT_DEVICE_FATAL on its asynchronous events, from drivers that
//     disassociate their user contexts (mlx5; device.go);
//   - its user-verbs node leaving sysfs (checkDevices): the kernel removes
//     ib_uverbs' client before rdma_cm's when ib_uverbs was loaded after
//     rdma_cm, and then waits for this process's files before any
//     DEVICE_REMOVAL is sent.
//
// Without disassociate_ucontext (rxe, siw) the unregistration waits until
// every file of the device is closed: the context librdmacm opened too. It
// closes that context only once the device has left the device list (seen
// by a sync, verbs.SyncDevices) and the last rdma_cm ID on it is destroyed.
// The device's anchor ID (device.anchor) is destroyed last, so the
// context outlives what the transport made on it.

// uverbsClass is where the kernel lists user-verbs devices.
const uverbsClass = "/sys/class/infiniband_verbs"

// deviceWatchInterval is how often the user-verbs nodes are looked at: a
// removal waits for the process at most about this long after its
// resources are released.
const deviceWatchInterval = time.Second

// removalDrainTimeout is how long the queues of a removed device may take
// to flush before their posted work is let go (queue.abandonPosted): a
// device whose hardware is gone never completes it.
const removalDrainTimeout = 10 * time.Second

// uverbsNode is one registration of a device's user-verbs node: its sysfs
// directory and inode. A device removed and added again under the same
// name is another registration (kernfs numbers every node anew).
type uverbsNode struct {
	dir string
	ino uint64
}

// scanUverbs maps device names to their user-verbs nodes under root; nil
// when root cannot be read (no RDMA in the kernel).
func scanUverbs(root string) map[string]uverbsNode {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	out := make(map[string]uverbsNode, len(ents))
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		name, err := os.ReadFile(filepath.Join(dir, "ibdev"))
		if err != nil {
			continue // abi_version, or a node going
		}
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			continue
		}
		out[strings.TrimSpace(string(name))] = uverbsNode{dir: dir, ino: st.Ino}
	}
	return out
}

// vanished reports whether a node of prev is not in cur.
func vanished(prev, cur map[string]uverbsNode) bool {
	for name, n := range prev {
		if cur[name] != n {
			return true
		}
	}
	return false
}

// nodeOf is the user-verbs node of device name when it is opened. A device
// that has none while the class lists others is being removed; a machine
// without the class in sysfs is not watched.
func (t *Transport) nodeOf(name string) (uverbsNode, error) {
	nodes := scanUverbs(t.uverbsRoot)
	if nodes == nil {
		return uverbsNode{}, nil
	}
	n, ok := nodes[name]
	if !ok {
		return uverbsNode{}, ErrDeviceRemoved
	}
	return n, nil
}

// startWatch starts the device watch with the first device. t.mu is held.
func (t *Transport) startWatch() {
	if t.watchStop != nil || t.closed {
		return
	}
	t.nodes = scanUverbs(t.uverbsRoot)
	t.watchStop, t.watchDone = make(chan struct{}), make(chan struct{})
	go t.watchDevices(t.watchStop, t.watchDone)
}

func (t *Transport) stopWatch() {
	t.mu.Lock()
	stop, done := t.watchStop, t.watchDone
	t.watchStop = nil
	t.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (t *Transport) watchDevices(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(deviceWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.checkDevices()
		}
	}
}

// checkDevices compares the user-verbs nodes with the last look. A device
// of ours whose node went is removed; and when any node went, librdmacm is
// made to notice (it may hold a context on any device it has listed), so
// that it closes the contexts of devices gone once their IDs are.
func (t *Transport) checkDevices() {
	cur := scanUverbs(t.uverbsRoot)
	t.mu.Lock()
	prev := t.nodes
	t.nodes = cur
	var gone []*device
	for _, d := range t.devices {
		if d.node.dir != "" && cur[d.attr.Name] != d.node {
			gone = append(gone, d)
		}
	}
	t.mu.Unlock()
	for _, d := range gone {
		t.deviceRemoved(d, "its user-verbs node left sysfs")
	}
	if !vanished(prev, cur) {
		return
	}
	if len(cur) == 0 {
		// librdmacm does not look at an empty device list.
		t.log.Error("the machine's last RDMA device was removed: librdmacm keeps it open while the target runs, so the kernel finishes removing it only when the target stops")
		return
	}
	n, err := t.syncDevices()
	switch {
	case err != nil:
		t.log.Warn("librdmacm device sync", "err", err)
	case n != len(cur):
		t.log.Warn("librdmacm device sync: it lists another number of devices than sysfs", "librdmacm", n, "sysfs", len(cur))
	default:
		t.log.Debug("librdmacm device sync", "devices", n)
	}
}

// deviceOf is the open device of ctx, or nil.
func (t *Transport) deviceOf(ctx *verbs.Context) *device {
	if ctx == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.devices[ctx.Handle()]
}

// deviceRemoved starts d's removal, once: nothing new is set up on it, every
// listener tears down its queues on it and takes down its port bound to
// it, and release lets go of the device once they are gone.
func (t *Transport) deviceRemoved(d *device, why string) {
	t.mu.Lock()
	if t.closed || t.devices[d.key] != d || !d.markRemoved() {
		t.mu.Unlock()
		return
	}
	ls := make([]*listener, 0, len(t.listeners))
	for l := range t.listeners {
		ls = append(ls, l)
	}
	t.releases.Add(1)
	t.mu.Unlock()
	t.stats.DeviceRemovals.Add(1)
	d.log.Error("RDMA device removed: its queues are torn down and its ports are down until it is back",
		"reason", why, "queues", d.queues())
	for _, l := range ls {
		l.post(func() { l.deviceGone(d, why) })
	}
	go t.release(d)
}

// release closes a removed device once its last queue is gone. Queues that
// do not drain in removalDrainTimeout have their posted work let go: a
// device that is gone may never flush it.
func (t *Transport) release(d *device) {
	defer t.releases.Done()
	select {
	case <-d.idle:
	case <-time.After(removalDrainTimeout):
		d.log.Warn("queues of the removed device did not drain: letting go of their posted work",
			"queues", d.queues(), "after", removalDrainTimeout)
		for _, p := range d.pollers {
			p.runSoon(p.e.abandonPosted)
		}
		<-d.idle
	}
	t.mu.Lock()
	if t.devices[d.key] == d {
		delete(t.devices, d.key)
	}
	t.mu.Unlock()
	if err := d.close(); err != nil {
		d.log.Warn("release RDMA device", "err", err)
	}
	d.log.Info("RDMA device released")
}
