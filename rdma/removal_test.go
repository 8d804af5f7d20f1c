package rdma

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// TestEngineAbandonPosted: the queues of a removed device whose work never
// flushes (hardware gone) are finished anyway: once the core has let go of
// its requests, each queue is destroyed once, every buffer is back, and
// completions that come late are ignored.
func TestEngineAbandonPosted(t *testing.T) {
	tests := []struct {
		name  string
		cmd   nvme.Command // nil: an idle queue
		hold  bool         // the core holds the request (backend I/O in flight)
		state reqState     // the request's state when the device goes
	}{
		{name: "idle live queue"},
		{name: "RDMA READs posted", cmd: cmd(1, nvme.OpWrite, 3*testUnit, false), state: rsReading},
		{name: "response SEND posted", cmd: cmd(2, nvme.OpRead, 2*testUnit, false), state: rsSending},
		{name: "held by the core", cmd: cmd(3, nvme.OpRead, testUnit, false), hold: true, state: rsExecuting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newBench(t, benchOpts{})
			q, c, core := h.open(benchOpts{})
			core.hold = tc.hold
			if tc.cmd != nil {
				h.capsule(q, c, tc.cmd, 0)
				var idx uint16
				if tc.hold {
					idx = uint16(core.held[0].Tag)
				} else {
					_, _, _, idx = splitWRID(c.sends[len(c.sends)-1].WRID)
				}
				if st := q.reqs[idx].state; st != tc.state {
					t.Fatalf("request %s, want %s", st, tc.state)
				}
			}
			// What was posted never completes: only abandonPosted ends it.
			h.e.abandonPosted()
			h.e.flush()
			if c.setErrors != 1 || c.disconnects != 1 || core.destroyed != 1 {
				t.Fatalf("SetError %d, Disconnect %d, core destroyed %d: want once each", c.setErrors, c.disconnects, core.destroyed)
			}
			if tc.hold {
				if q.state != qsDraining || c.destroys != 0 {
					t.Fatalf("queue %s, destroyed %d times while the core holds a request", q.state, c.destroys)
				}
				h.respond(core)
			}
			h.gone(q, c)
			h.flushAll(c) // late: ignored
			h.e.abandonPosted()
			h.gone(q, c)
		})
	}
}

func TestNextBackoff(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 6 {
		d = nextBackoff(d)
		got = append(got, d)
	}
	want := []time.Duration{relistenMin, 2 * relistenMin, 4 * relistenMin, 8 * relistenMin, relistenMax, relistenMax}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoff %v, want %v", got, want)
		}
	}
}

// fakeUverbs is a user-verbs class directory: one node per device.
type fakeUverbs struct {
	t    *testing.T
	root string
}

func newFakeUverbs(t *testing.T, devs ...string) *fakeUverbs {
	f := &fakeUverbs{t: t, root: t.TempDir()}
	// A class attribute, not a device.
	if err := os.WriteFile(filepath.Join(f.root, "abi_version"), []byte("6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, d := range devs {
		f.add("uverbs"+string(rune('0'+i)), d)
	}
	return f
}

func (f *fakeUverbs) add(node, dev string) {
	dir := filepath.Join(f.root, node)
	if err := os.Mkdir(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ibdev"), []byte(dev+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeUverbs) remove(node string) {
	if err := os.RemoveAll(filepath.Join(f.root, node)); err != nil {
		f.t.Fatal(err)
	}
}

// readd replaces node by a new one for dev: another registration (made
// before the old one goes, so it has another inode).
func (f *fakeUverbs) readd(node, dev string) {
	f.add(node+".new", dev)
	f.remove(node)
	if err := os.Rename(filepath.Join(f.root, node+".new"), filepath.Join(f.root, node)); err != nil {
		f.t.Fatal(err)
	}
}

// testDevice is a device with no verbs resources: blocks queue blocks,
// held of them taken by queues. With blocks, it has a poller whose
// control functions are only queued; a device is closed only once that is
// taken away again (releaseable).
func testDevice(tr *Transport, key uintptr, name string, blocks, held int) *device {
	d := &device{t: tr, key: key, attr: verbs.DeviceAttr{Name: name}, log: tr.log.With("device", name),
		idle: make(chan struct{}), blocks: blocks}
	for b := blocks - 1; b >= held; b-- {
		d.freeBlocks = append(d.freeBlocks, b)
	}
	if blocks > 0 {
		p := &poller{d: d, ctl: make(chan func(), 16), cqSize: 1 << 10, nqueues: held}
		p.cqs.Store(&[]*pollerCQ{{room: 1 << 10}})
		d.pollers = []*poller{p}
	}
	return d
}

// releasable takes d's fake poller away, so that closing d touches nothing
// of verbs; it returns the poller.
func releasable(d *device) *poller {
	p := d.pollers[0]
	d.pollers = nil
	return p
}

func testTransport(root string) (*Transport, *int) {
	syncs := 0
	tr := &Transport{log: slog.New(slog.NewTextHandler(io.Discard, nil)), devices: map[uintptr]*device{},
		listeners: map[*listener]struct{}{}, uverbsRoot: root,
		syncDevices: func() (int, error) { syncs++; return 1, nil }}
	return tr, &syncs
}

// TestDeviceWatch: a device of ours whose user-verbs node leaves sysfs is
// removed (when the kernel removes ib_uverbs' client first, no rdma_cm
// event comes before the process lets go), a device added again under the
// same name counts as removed, and librdmacm is synced whenever any node
// went, ours or not, while any device is left.
func TestDeviceWatch(t *testing.T) {
	tests := []struct {
		name        string
		change      func(f *fakeUverbs)
		wantRemoved []string // of rxe0, rxe1 (ours)
		wantSyncs   int
	}{
		{name: "nothing changes", change: func(*fakeUverbs) {}},
		{name: "a device is added", change: func(f *fakeUverbs) { f.add("uverbs3", "mlx5_0") }},
		{name: "ours goes", change: func(f *fakeUverbs) { f.remove("uverbs1") }, wantRemoved: []string{"rxe1"}, wantSyncs: 1},
		{name: "ours goes and comes back", change: func(f *fakeUverbs) { f.readd("uverbs1", "rxe1") }, wantRemoved: []string{"rxe1"}, wantSyncs: 1},
		{name: "another goes", change: func(f *fakeUverbs) { f.remove("uverbs2") }, wantSyncs: 1},
		{name: "all go", change: func(f *fakeUverbs) { f.remove("uverbs0"); f.remove("uverbs1"); f.remove("uverbs2") },
			wantRemoved: []string{"rxe0", "rxe1"}}, // librdmacm does not look at an empty list: no sync
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeUverbs(t, "rxe0", "rxe1", "siw0")
			tr, syncs := testTransport(f.root)
			devs := map[string]*device{}
			for i, name := range []string{"rxe0", "rxe1"} {
				d := testDevice(tr, uintptr(i+1), name, 0, 0)
				var err error
				if d.node, err = tr.nodeOf(name); err != nil || d.node.dir == "" {
					t.Fatalf("node of %s: %+v, %v", name, d.node, err)
				}
				tr.devices[d.key], devs[name] = d, d
			}
			tr.nodes = scanUverbs(f.root)
			tr.checkDevices()
			if *syncs != 0 || tr.stats.DeviceRemovals.Load() != 0 {
				t.Fatalf("a look with nothing changed: %d syncs, %d removals", *syncs, tr.stats.DeviceRemovals.Load())
			}
			tc.change(f)
			tr.checkDevices()
			tr.releases.Wait()
			var removed []string
			for _, name := range []string{"rxe0", "rxe1"} {
				if devs[name].isRemoved() {
					removed = append(removed, name)
					if tr.devices[devs[name].key] != nil {
						t.Errorf("%s removed but not released", name)
					}
				}
			}
			if strings.Join(removed, ",") != strings.Join(tc.wantRemoved, ",") {
				t.Errorf("removed %v, want %v", removed, tc.wantRemoved)
			}
			if *syncs != tc.wantSyncs {
				t.Errorf("%d librdmacm syncs, want %d", *syncs, tc.wantSyncs)
			}
			if n := tr.stats.DeviceRemovals.Load(); n != uint64(len(tc.wantRemoved)) {
				t.Errorf("DeviceRemovals %d, want %d", n, len(tc.wantRemoved))
			}
			// A later look finds nothing new.
			tr.checkDevices()
			if *syncs != tc.wantSyncs {
				t.Errorf("%d syncs after a look with nothing changed, want %d", *syncs, tc.wantSyncs)
			}
		})
	}
}

// TestNodeOf: a device is opened only while its user-verbs node is there;
// a machine that shows no user-verbs class is not watched.
func TestNodeOf(t *testing.T) {
	f := newFakeUverbs(t, "rxe0")
	tr, _ := testTransport(f.root)
	if n, err := tr.nodeOf("rxe0"); err != nil || n.dir != filepath.Join(f.root, "uverbs0") {
		t.Errorf("nodeOf(rxe0) = %+v, %v", n, err)
	}
	if _, err := tr.nodeOf("rxe1"); err != ErrDeviceRemoved {
		t.Errorf("nodeOf(rxe1), not in sysfs: %v, want ErrDeviceRemoved", err)
	}
	tr.uverbsRoot = filepath.Join(f.root, "missing")
	if n, err := tr.nodeOf("rxe1"); err != nil || n.dir != "" {
		t.Errorf("nodeOf without the class = %+v, %v; want nothing, no error", n, err)
	}
}

// TestDeviceRemoved: the removal of a device tears down the listeners'
// queues on it and only those, takes down the port bound to it (with a
// reason, and a bind armed again), refuses new queues on it, and releases
// it once its last queue is gone; another device and its port are left
// alone, and a second removal of the same device does nothing.
func TestDeviceRemoved(t *testing.T) {
	tr, _ := testTransport(t.TempDir())
	gone := testDevice(tr, 1, "rxe1", 2, 1) // one queue on it
	other := testDevice(tr, 2, "rxe0", 2, 1)
	tr.devices[1], tr.devices[2] = gone, other
	newListener := func(dev *device, conns ...*cmConn) *listener {
		l := &listener{t: tr, log: tr.log, dev: dev, ctl: make(chan func(), 8), done: make(chan struct{}), conns: map[uintptr]*cmConn{}}
		for i, c := range conns {
			c.l = l
			l.conns[uintptr(i+1)] = c
		}
		tr.listeners[l] = struct{}{}
		t.Cleanup(func() {
			if l.retry != nil {
				l.retry.Stop()
			}
		})
		return l
	}
	onGone := &cmConn{d: gone, p: gone.pollers[0], q: &queue{}}
	onOther := &cmConn{d: other, p: other.pollers[0], q: &queue{}}
	lGone := newListener(gone, onGone)
	lOther := newListener(other, onOther)
	lAll := newListener(nil) // a wildcard address: bound to no device
	run := func(l *listener) {
		for len(l.ctl) > 0 {
			(<-l.ctl)()
		}
	}

	tr.deviceRemoved(gone, "test")
	for l := range tr.listeners {
		run(l)
	}
	if n := len(gone.pollers[0].ctl); n != 1 {
		t.Errorf("%d teardowns queued for the queue on the removed device, want 1", n)
	}
	if n := len(other.pollers[0].ctl); n != 0 {
		t.Errorf("%d teardowns queued for the queue on the other device, want none", n)
	}
	st := lGone.State()
	if !st.Down || !strings.Contains(st.Reason, "rxe1") || st.Since.IsZero() || lGone.retryC == nil || lGone.dev != nil {
		t.Errorf("port on the removed device: %+v, retry armed %v, device %v; want down with a reason, a bind armed, no device",
			st, lGone.retryC != nil, lGone.dev)
	}
	for _, l := range []*listener{lOther, lAll} {
		if st := l.State(); st.Down || l.retryC != nil {
			t.Errorf("a port not on the removed device: %+v, retry armed %v", st, l.retryC != nil)
		}
	}
	if _, _, _, err := gone.allocBlock(1); !errors.Is(err, errRemoved) {
		t.Error("a queue was set up on the removed device")
	}

	// Released once its last queue is gone, not before.
	time.Sleep(10 * time.Millisecond)
	tr.mu.Lock()
	still := tr.devices[1] == gone
	tr.mu.Unlock()
	if !still {
		t.Fatal("the removed device was released while a queue still held it")
	}
	rp := releasable(gone)
	gone.freeBlock(0, rp, (*rp.cqs.Load())[0], 0)
	tr.releases.Wait()
	if tr.devices[1] != nil || tr.devices[2] != other {
		t.Errorf("devices after the release: %v", tr.devices)
	}

	tr.devices[1] = gone // as if still there: the removal is not started again
	tr.deviceRemoved(gone, "again")
	tr.releases.Wait()
	if n := tr.stats.DeviceRemovals.Load(); n != 1 {
		t.Errorf("DeviceRemovals %d, want 1", n)
	}
	if len(lGone.ctl) != 0 {
		t.Error("a second removal of the same device reached the listeners")
	}
}
