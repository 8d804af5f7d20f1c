package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Changes made while hosts are connected: namespaces added, removed and
// resized, hosts, subsystems and ports removed, and the notices hosts get.

// setAEC enables asynchronous event notices (Set Features 0Bh).
func setAEC(h *host, v uint32) {
	c := newCmd(nvme.OpAdminSetFeatures, 20)
	c.SetCDW(10, nvme.FeatAsyncEventConfig)
	c.SetCDW(11, v)
	h.mustOK(c, nil)
}

// aer submits an Asynchronous Event Request; its completion arrives on the
// channel when the target sends an event.
func aer(h *host, cid uint16) <-chan nvme.Completion {
	done := make(chan nvme.Completion, 1)
	go func() {
		rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
		if err := h.lq.Submit(newCmd(nvme.OpAdminAsyncEvent, cid), nil, rsp); err == nil {
			done <- rsp
		}
	}()
	// Held once it is in the queue's list.
	for deadline := time.Now().Add(5 * time.Second); ; {
		n := len(h.lq.q.Controller().events.heldCIDs())
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

func wantEvent(t *testing.T, ch <-chan nvme.Completion, want uint32) {
	t.Helper()
	select {
	case rsp := <-ch:
		if !rsp.Status().IsSuccess() || rsp.DW0() != want {
			t.Fatalf("event %v %#x, want %#x", rsp.Status(), rsp.DW0(), want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event %#x", want)
	}
}

func wantNoEvent(t *testing.T, ch <-chan nvme.Completion) {
	t.Helper()
	select {
	case rsp := <-ch:
		t.Fatalf("unexpected event %#x", rsp.DW0())
	case <-time.After(50 * time.Millisecond):
	}
}

// changedNS reads the Changed Namespace List.
func changedNS(t *testing.T, h *host, retain bool) []nvme.NSID {
	t.Helper()
	c := newCmd(nvme.OpAdminGetLogPage, 21)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(nvme.LogChangedNSList, nvme.ChangedNSListSize/4, 0)
	if retain {
		c.SetCDW(10, c.CDW(10)|1<<15)
	}
	buf := make([]byte, nvme.ChangedNSListSize)
	h.mustOK(withData(c, len(buf)), buf)
	return nsidList(buf)
}

// nsidList reads a list of NSIDs that ends at the first zero.
func nsidList(buf []byte) []nvme.NSID {
	var out []nvme.NSID
	for i := 0; i+4 <= len(buf); i += 4 {
		id := binary.LittleEndian.Uint32(buf[i:])
		if id == 0 {
			break
		}
		out = append(out, nvme.NSID(id))
	}
	return out
}

func activeNS(t *testing.T, h *host) []nvme.NSID {
	t.Helper()
	c := newCmd(nvme.OpAdminIdentify, 22)
	c.SetIdentify(nvme.CNSActiveNSList, 0, 0)
	buf := make([]byte, nvme.IdentifyDataSize)
	h.mustOK(withData(c, len(buf)), buf)
	return nsidList(buf)
}

func nsze(t *testing.T, h *host, nsid nvme.NSID) uint64 {
	t.Helper()
	c := newCmd(nvme.OpAdminIdentify, 23)
	c.SetNSID(nsid)
	c.SetIdentify(nvme.CNSNamespace, 0, 0)
	buf := make([]byte, nvme.IdentifyDataSize)
	h.mustOK(withData(c, len(buf)), buf)
	return binary.LittleEndian.Uint64(buf)
}

func memNS(t *testing.T, nsid uint32, size int64) NamespaceConfig {
	t.Helper()
	dev, err := blockdev.NewMemory(size, 512)
	if err != nil {
		t.Fatal(err)
	}
	return NamespaceConfig{NSID: nsid, Device: dev}
}

var nsChangedEvent = nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoNSAttrChanged, nvme.LogChangedNSList)

// TestNamespaceAttach: a namespace added or removed while a host is
// connected is announced once, listed in the Changed Namespace List, and
// not announced again until the host read that list.
func TestNamespaceAttach(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	setAEC(h, nvme.AECNSAttrNotices)
	ev := aer(h, 100)
	if _, err := r.sub.AddNamespace(memNS(t, 2, 1<<20)); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ev, nsChangedEvent)
	if got := activeNS(t, h); !slices.Equal(got, []nvme.NSID{1, 2}) {
		t.Fatalf("active namespaces %v, want [1 2]", got)
	}
	// Masked until the log is read: a second change sends nothing.
	ev = aer(h, 101)
	if _, err := r.sub.AddNamespace(memNS(t, 3, 1<<20)); err != nil {
		t.Fatal(err)
	}
	wantNoEvent(t, ev)
	if got := changedNS(t, h, true); !slices.Equal(got, []nvme.NSID{2, 3}) {
		t.Fatalf("changed namespaces %v, want [2 3]", got)
	}
	// Retained: still masked. Read for real: the list empties, and the
	// next change is sent.
	if err := r.sub.RemoveNamespace(3); err != nil {
		t.Fatal(err)
	}
	wantNoEvent(t, ev)
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{3}) {
		t.Fatalf("changed namespaces %v, want [3]", got)
	}
	if got := changedNS(t, h, false); len(got) != 0 {
		t.Fatalf("changed namespaces %v after reading, want none", got)
	}
	if err := r.sub.RemoveNamespace(2); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ev, nsChangedEvent)
	if got := activeNS(t, h); !slices.Equal(got, []nvme.NSID{1}) {
		t.Fatalf("active namespaces %v, want [1]", got)
	}
	if err := r.sub.RemoveNamespace(2); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("removing it twice: %v", err)
	}
}

// TestNamespaceAttachNoAEC: a host that did not enable the notice gets
// none, but the list is kept.
func TestNamespaceAttachNoAEC(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	ev := aer(h, 100)
	if _, err := r.sub.AddNamespace(memNS(t, 2, 1<<20)); err != nil {
		t.Fatal(err)
	}
	wantNoEvent(t, ev)
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{2}) {
		t.Fatalf("changed namespaces %v, want [2]", got)
	}
}

// TestChangedNSListOverflow: past 1024 changes the list says "all".
func TestChangedNSListOverflow(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	c := h.lq.q.Controller()
	for id := nvme.NSID(1); id <= nvme.MaxChangedNSEntries; id++ {
		c.nsChanged(id)
	}
	c.nsChanged(5) // already listed: still not overflowed
	c.events.mu.Lock()
	n := len(c.events.changedNS)
	c.events.mu.Unlock()
	if n != nvme.MaxChangedNSEntries {
		t.Fatalf("%d entries, want %d", n, nvme.MaxChangedNSEntries)
	}
	c.nsChanged(nvme.MaxChangedNSEntries + 1)
	c.nsChanged(7)
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{nvme.NSIDAll}) {
		t.Fatalf("overflowed list %v, want [FFFFFFFFh]", got)
	}
}

// gatedDevice holds writes until released, and records Close.
type gatedDevice struct {
	blockdev.Device
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	closed  bool
}

func (d *gatedDevice) WriteAt(p []byte, off int64) (int, error) {
	d.entered <- struct{}{}
	<-d.release
	return d.Device.WriteAt(p, off)
}

func (d *gatedDevice) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return d.Device.Close()
}

func (d *gatedDevice) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// TestNamespaceRemoveDrains: removing a namespace with a write in flight
// lets the write complete, refuses new commands with Invalid Namespace, and
// closes the backend only after the write.
func TestNamespaceRemoveDrains(t *testing.T) {
	mem, err := blockdev.NewMemory(1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	dev := &gatedDevice{Device: mem, entered: make(chan struct{}), release: make(chan struct{})}
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Device, nc.Workers = dev, 1 })
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	io2 := r.ioConnect(2, cntlid)

	wrote := make(chan nvme.Status, 1)
	go func() { wrote <- io.submit(ioCmd(nvme.OpWrite, 1, 0, 8), make([]byte, 4096)).Status() }()
	<-dev.entered
	removed := make(chan error, 1)
	go func() { removed <- r.sub.RemoveNamespace(1) }()
	// New commands are refused at once, from any queue.
	for deadline := time.Now().Add(5 * time.Second); r.sub.lookup(1) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("namespace still looked up after RemoveNamespace started")
		}
		time.Sleep(time.Millisecond)
	}
	if st := io2.submit(ioCmd(nvme.OpRead, 2, 0, 8), make([]byte, 4096)).Status(); st != nvme.StatusInvalidNamespace.WithDNR() {
		t.Fatalf("read of a removed namespace: %v, want Invalid Namespace", st)
	}
	select {
	case err := <-removed:
		t.Fatalf("RemoveNamespace returned (%v) with a write in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	if dev.isClosed() {
		t.Fatal("backend closed under a write in flight")
	}
	close(dev.release)
	if st := <-wrote; !st.IsSuccess() {
		t.Fatalf("the write in flight: %v, want success", st)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if !dev.isClosed() {
		t.Fatal("backend not closed after the namespace drained")
	}
}

// TestNamespaceRemovedAfterParse: a command parsed before the removal and
// executed after it gets Invalid Namespace and never reaches the backend.
func TestNamespaceRemovedAfterParse(t *testing.T) {
	r := newRig(t)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	req := &Request{Cmd: ioCmd(nvme.OpRead, 9, 0, 8), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	q := io.lq.q
	if st := q.Parse(req); !st.IsSuccess() {
		t.Fatal(st)
	}
	if err := r.sub.RemoveNamespace(1); err != nil {
		t.Fatal(err)
	}
	req.Data = [][]byte{make([]byte, 4096)}
	// The loop queue takes the response; read it from the request.
	q.Execute(req)
	if st := req.Rsp.Status(); st != nvme.StatusInvalidNamespace.WithDNR() {
		t.Fatalf("status %v, want Invalid Namespace", st)
	}
	if n := r.ns.executing(); n != 0 {
		t.Fatalf("%d commands counted as executing", n)
	}
}

// TestNamespaceResize: a file namespace grows while connected; the host is
// told, Identify reports the new size, and I/O reaches the new blocks.
func TestNamespaceResize(t *testing.T) {
	dev, err := blockdev.OpenFile(blockdev.Options{Path: filepath.Join(t.TempDir(), "ns.img"), Size: 1 << 20, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Device = dev })
	h, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	setAEC(h, nvme.AECNSAttrNotices)
	ev := aer(h, 100)
	last := uint64(2<<20/512 - 8)
	if st := io.submit(ioCmd(nvme.OpWrite, 1, last, 8), make([]byte, 4096)).Status(); st != nvme.StatusLBAOutOfRange.WithDNR() {
		t.Fatalf("write past the end before: %v", st)
	}
	if err := r.sub.ResizeNamespace(1, 2<<20); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ev, nsChangedEvent)
	if got := nsze(t, h, 1); got != 2<<20/512 {
		t.Fatalf("NSZE %d, want %d", got, 2<<20/512)
	}
	io.mustOK(ioCmd(nvme.OpWrite, 2, last, 8), make([]byte, 4096))
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{1}) {
		t.Fatalf("changed namespaces %v, want [1]", got)
	}
	// The same size again is no change.
	ev = aer(h, 101)
	if err := r.sub.ResizeNamespace(1, 2<<20); err != nil {
		t.Fatal(err)
	}
	wantNoEvent(t, ev)
	if err := r.sub.ResizeNamespace(7, 2<<20); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("resize of a missing namespace: %v", err)
	}
}

// resizingDev is a backend that changes size on its own, as an RBD image
// resized by another client does (blockdev.ResizeNotifier).
type resizingDev struct {
	blockdev.Device
	size   atomic.Int64
	notify atomic.Pointer[func()]
}

func (d *resizingDev) Size() int64 { return d.size.Load() }
func (d *resizingDev) NotifyResize(fn func()) {
	if fn == nil {
		d.notify.Store(nil)
	} else {
		d.notify.Store(&fn)
	}
}

// resize changes the size, then tells whoever listens, as the backend's own
// goroutine would.
func (d *resizingDev) resize(n int64) {
	d.size.Store(n)
	if fn := d.notify.Load(); fn != nil {
		(*fn)()
	}
}

// TestNamespaceFollowsBackend: a backend that grows or shrinks on its own
// changes the namespace's size for hosts, with the Namespace Attribute
// Changed notice, as ResizeNamespace does; a removed namespace does not.
func TestNamespaceFollowsBackend(t *testing.T) {
	mem, err := blockdev.NewMemory(8<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	dev := &resizingDev{Device: mem}
	dev.size.Store(1 << 20)
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Device = dev })
	h, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	setAEC(h, nvme.AECNSAttrNotices)
	last := uint64(4<<20/512 - 8)
	if st := io.submit(ioCmd(nvme.OpWrite, 1, last, 8), make([]byte, 4096)).Status(); st != nvme.StatusLBAOutOfRange.WithDNR() {
		t.Fatalf("write past the end before: %v", st)
	}
	ev := aer(h, 100)
	dev.resize(4 << 20)
	wantEvent(t, ev, nsChangedEvent)
	if got := nsze(t, h, 1); got != 4<<20/512 {
		t.Fatalf("NSZE %d after the backend grew, want %d", got, 4<<20/512)
	}
	io.mustOK(ioCmd(nvme.OpWrite, 2, last, 8), make([]byte, 4096))
	if got := changedNS(t, h, false); !slices.Equal(got, []nvme.NSID{1}) {
		t.Fatalf("changed namespaces %v, want [1]", got)
	}
	// No change, no notice; a shrink is followed.
	ev = aer(h, 101)
	dev.resize(4 << 20)
	wantNoEvent(t, ev)
	dev.resize(2 << 20)
	wantEvent(t, ev, nsChangedEvent)
	if got := nsze(t, h, 1); got != 2<<20/512 {
		t.Fatalf("NSZE %d after the backend shrank, want %d", got, 2<<20/512)
	}
	changedNS(t, h, false)
	// Removed: its backend's changes reach nobody.
	ev = aer(h, 102)
	if err := r.sub.RemoveNamespace(1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, ev, nsChangedEvent)
	changedNS(t, h, false)
	ev = aer(h, 103)
	dev.resize(6 << 20)
	wantNoEvent(t, ev)
}

// TestNamespaceResizeMemory: memory cannot change size, and says so.
func TestNamespaceResizeMemory(t *testing.T) {
	r := newRig(t)
	if err := r.sub.ResizeNamespace(1, 8<<20); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("resize of memory: %v, want ErrNotSupported", err)
	}
}

// TestRemoveHost: a host taken off the list is disconnected and cannot
// connect again; other hosts are untouched.
func TestRemoveHost(t *testing.T) {
	const other = "nqn.2026-11.io.example:host2"
	r := newRig(t, func(sc *SubsystemConfig, _ *NamespaceConfig) {
		sc.AllowAnyHost, sc.Hosts = false, []string{testHostNQN, other}
	})
	h1, _ := r.adminConnect(testNQN, testHostNQN, 0)
	h2, _ := r.adminConnect(testNQN, other, 0)
	if n := r.sub.RemoveHost(testHostNQN); n != 1 {
		t.Fatalf("RemoveHost deleted %d controllers, want 1", n)
	}
	select {
	case <-h1.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("removed host still connected")
	}
	select {
	case <-h2.lq.Disconnected():
		t.Fatal("the other host was disconnected")
	default:
	}
	h := r.dial(0, 32)
	if st := h.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff)).Status(); st != nvme.StatusConnectInvalidHost.WithDNR() {
		t.Fatalf("connect of a removed host: %v", st)
	}
	if got := r.sub.Hosts(); !slices.Equal(got, []string{other}) {
		t.Fatalf("hosts %v", got)
	}
	// Closing the subsystem to hosts off its list disconnects nobody here.
	if n := r.sub.SetAllowAnyHost(false); n != 0 {
		t.Fatalf("SetAllowAnyHost(false) deleted %d", n)
	}
}

// TestRemoveSubsystem: its hosts are disconnected, it is gone from
// discovery, and Connect to it fails.
func TestRemoveSubsystem(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	gen := r.tgt.discoveryGeneration()
	if err := r.tgt.RemoveSubsystem(testNQN); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("host of a removed subsystem still connected")
	}
	if r.tgt.discoveryGeneration() == gen {
		t.Fatal("discovery generation did not move")
	}
	if n := r.tgt.Stats().Controllers; n != 0 {
		t.Fatalf("%d controllers left", n)
	}
	h2 := r.dial(0, 32)
	if st := h2.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff)).Status(); st.IsSuccess() {
		t.Fatal("connect to a removed subsystem succeeded")
	}
	if err := r.tgt.RemoveSubsystem(testNQN); !errors.Is(err, ErrNoSubsystem) {
		t.Fatalf("removing it twice: %v", err)
	}
	if _, err := r.sub.AddNamespace(memNS(t, 9, 1<<20)); err == nil {
		t.Fatal("a namespace was added to a removed subsystem")
	}
}

// TestDiscoveryChange: a persistent discovery controller is told when the
// discovery log changes, once until it reads the log, and the log's
// generation counter moves.
func TestDiscoveryChange(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 5000), connectData(nvme.DiscoveryNQN, testHostNQN, testHostID, 0xffff))
	h.propSet(nvme.PropCC, ccEnable)
	setAEC(h, nvme.AECDiscoveryChanged)
	discEvent := nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoDiscoveryChanged, nvme.LogDiscovery)
	readLog := func() (gen, n uint64) {
		c := newCmd(nvme.OpAdminGetLogPage, 30)
		c.SetGetLogPage(nvme.LogDiscovery, 1024/4, 0)
		buf := make([]byte, 1024)
		h.mustOK(withData(c, len(buf)), buf)
		return binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[8:])
	}
	gen0, n0 := readLog()
	for i, change := range []struct {
		name string
		do   func() error
		dn   int64 // change in the number of records
	}{
		{"subsystem added", func() error {
			_, err := r.tgt.AddSubsystem(SubsystemConfig{NQN: "nqn.2026-11.io.example:new", AllowAnyHost: true})
			return err
		}, 1},
		{"subsystem removed", func() error { return r.tgt.RemoveSubsystem("nqn.2026-11.io.example:new") }, -1},
		{"port added", func() error { return r.tgt.AddPort(r.lt, &Port{Address: "loop1", Service: "1"}) }, 1},
		{"host removed from an open subsystem", func() error { r.sub.RemoveHost("x"); return nil }, 0},
	} {
		t.Run(change.name, func(t *testing.T) {
			ev := aer(h, uint16(100+i))
			if err := change.do(); err != nil {
				t.Fatal(err)
			}
			wantEvent(t, ev, discEvent)
			gen, n := readLog()
			if gen <= gen0 || int64(n)-int64(n0) != change.dn {
				t.Fatalf("generation %d -> %d, records %d -> %d (want %+d)", gen0, gen, n0, n, change.dn)
			}
			gen0, n0 = gen, n
		})
	}
}

// TestRemovePort: the queues connected through it are disconnected.
func TestRemovePort(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	ports := r.tgt.Ports()
	if err := r.tgt.RemovePort(ports[0].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("queue of a removed port still connected")
	}
	if len(r.tgt.Ports()) != 0 {
		t.Fatal("port still listed")
	}
	if err := r.tgt.RemovePort(ports[0].ID); !errors.Is(err, ErrNoPort) {
		t.Fatalf("removing it twice: %v", err)
	}
	// A port added now gets a new ID.
	if err := r.tgt.AddPort(r.lt, &Port{Address: "loop2", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	if id := r.tgt.Ports()[0].ID; id == ports[0].ID {
		t.Fatalf("port ID %d reused", id)
	}
}

// TestControllerInfo: what status shows of a connected host.
func TestControllerInfo(t *testing.T) {
	r := newRig(t)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 15000)
	r.ioConnect(1, cntlid)
	r.ioConnect(2, cntlid)
	got := r.tgt.Controllers()
	if len(got) != 1 {
		t.Fatalf("%d controllers, want 1", len(got))
	}
	ci := got[0]
	if ci.SubNQN != testNQN || ci.HostNQN != testHostNQN || ci.CNTLID != cntlid || ci.IOQueues != 2 ||
		ci.KATO != 15*time.Second || !ci.Enabled || ci.Connected.IsZero() || ci.Discovery {
		t.Fatalf("controller info %+v", ci)
	}
}

// TestUnwrittenDataZeroed: a command that succeeds without writing the data
// it moves to the host sends zeroes, not what the buffer held (possibly an
// earlier command's, another host's, data).
func TestUnwrittenDataZeroed(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	c := newCmd(nvme.OpAdminGetLogPage, 40)
	c.SetGetLogPage(nvme.LogSMART, 128, 0)
	req := &Request{Cmd: withData(c, 512), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	q := h.lq.q
	if st := q.Parse(req); !st.IsSuccess() || req.Dir != DirCtrlToHost {
		t.Fatalf("parse: %v, dir %v", st, req.Dir)
	}
	stale := bytes.Repeat([]byte{0xee}, int(req.DataLen))
	req.Data = [][]byte{stale}
	req.handle = func(*Request) nvme.Status { return nvme.StatusSuccess } // a handler that forgets
	q.Execute(req)
	if !bytes.Equal(stale, make([]byte, len(stale))) {
		t.Fatal("the stale buffer went to the host")
	}
	if n := r.tgt.stats.unwrittenData.Load(); n != 1 {
		t.Fatalf("%d unwritten completions counted, want 1", n)
	}
}

// TestPipelinedConnects: two Connects on one admin queue, both parsed
// before either runs (as keyed data makes them), make one controller; the
// second is refused. Repeated, the old behaviour used up every CNTLID.
func TestPipelinedConnects(t *testing.T) {
	for _, qid := range []nvme.QID{0, 1} {
		t.Run(fmt.Sprintf("qid %d", qid), func(t *testing.T) {
			r := newRig(t)
			cntlid := nvme.CNTLIDDynamic
			if qid != 0 {
				_, cntlid = r.adminConnect(testNQN, testHostNQN, 0)
			}
			h := r.dial(int(qid), 32)
			q := h.lq.q
			reqs := make([]*Request, 2)
			for i := range reqs {
				c := connectCmd(qid, 31, 0)
				c.SetCID(uint16(10 + i))
				// Tag picks the loop queue slot whose channel the response signals.
				reqs[i] = &Request{Cmd: c, Rsp: make(nvme.Completion, nvme.CompletionSize), Tag: uint32(i)}
				if st := q.Parse(reqs[i]); !st.IsSuccess() {
					t.Fatalf("parse %d: %v", i, st)
				}
				reqs[i].Data = [][]byte{connectData(testNQN, testHostNQN, testHostID, cntlid)}
			}
			before := r.tgt.Stats().Controllers
			for _, req := range reqs {
				q.Execute(req)
			}
			if st := reqs[0].Rsp.Status(); !st.IsSuccess() {
				t.Fatalf("first Connect: %v", st)
			}
			if st := reqs[1].Rsp.Status(); st != nvme.StatusCommandSequenceError.WithDNR() {
				t.Fatalf("second Connect: %v, want Command Sequence Error", st)
			}
			if n := r.tgt.Stats().Controllers - before; qid == 0 && n != 1 || qid != 0 && n != 0 {
				t.Fatalf("%d controllers made", n)
			}
		})
	}
}

// flushCounter is a device whose Flush blocks until released and counts
// how many run at once.
type flushCounter struct {
	blockdev.Device
	release       chan struct{}
	mu            sync.Mutex
	running, most int
	total         int
}

func (d *flushCounter) Flush() error {
	d.mu.Lock()
	d.running++
	d.total++
	d.most = max(d.most, d.running)
	d.mu.Unlock()
	<-d.release
	d.mu.Lock()
	d.running--
	d.mu.Unlock()
	return d.Device.Flush()
}

// TestShutdownToggles: a host toggling CC.SHN while a shutdown flush runs
// starts no more flushes; the one asked for meanwhile runs after it, and
// the shutdown then completes. Before, 2,000 toggles left 2,000 flushes.
func TestShutdownToggles(t *testing.T) {
	mem, err := blockdev.NewMemory(1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	dev := &flushCounter{Device: mem, release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(dev.release) }) }
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Device = dev })
	t.Cleanup(release) // before the rig's: a failure must not leave flushes blocked

	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	const shnNormal = 1 << 14
	for i := 0; i < 2000; i++ {
		h.propSet(nvme.PropCC, ccEnable|shnNormal)
		h.propSet(nvme.PropCC, ccEnable)
	}
	h.propSet(nvme.PropCC, ccEnable|shnNormal)
	dev.mu.Lock()
	most := dev.most
	dev.mu.Unlock()
	if most != 1 {
		t.Fatalf("%d shutdown flushes at once, want 1", most)
	}
	release()
	if err := waitShutdown(h); err != nil {
		t.Fatal(err)
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.total != 2 {
		t.Fatalf("%d flushes in all, want 2 (the first, and one for the toggles during it)", dev.total)
	}
}

// waitShutdown waits for CSTS.SHST to say complete.
func waitShutdown(h *host) error {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if h.propGet(nvme.PropCSTS, false)&(3<<2) == 2<<2 {
			return nil
		}
	}
	return errors.New("shutdown never completed")
}

// TestWorkersFull: when a file namespace's workers have too many commands
// waiting, one more is refused with a status the host retries (Command
// Interrupted, no DNR) instead of blocking the transport's poller; the
// others complete.
func TestWorkersFull(t *testing.T) {
	defer func(d int) { workQueueDepth = d }(workQueueDepth)
	workQueueDepth = 2
	mem, err := blockdev.NewMemory(1<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	dev := &gatedDevice{Device: mem, entered: make(chan struct{}, 8), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(dev.release) }) }
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Device, nc.Workers = dev, 1 })
	t.Cleanup(release)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	// One queue per command: a loop queue submits one at a time.
	qs := make([]*host, 4)
	for i := range qs {
		qs[i] = r.ioConnect(nvme.QID(i+1), cntlid)
	}
	done := make(chan nvme.Status, 3)
	for i := 0; i < 3; i++ {
		go func(h *host, cid uint16) {
			done <- h.submit(ioCmd(nvme.OpWrite, cid, 0, 8), make([]byte, 4096)).Status()
		}(qs[i], uint16(i+1))
		if i == 0 {
			<-dev.entered // the worker holds the first
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.ns.work.queued() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands waiting, want 2", r.ns.work.queued())
		}
	}
	if st := qs[3].submit(ioCmd(nvme.OpWrite, 9, 0, 8), make([]byte, 4096)).Status(); st != nvme.StatusCommandInterrupted {
		t.Fatalf("a command past the workers' queue: %v, want Command Interrupted (retried by the host)", st)
	}
	if n := r.ns.Stats().WorkersFull; n != 1 {
		t.Fatalf("%d refusals counted, want 1", n)
	}
	release()
	for i := 0; i < 3; i++ {
		if st := <-done; !st.IsSuccess() {
			t.Fatalf("a queued write: %v", st)
		}
	}
}

// TestIOConnectPath: an I/O queue joins a controller only over its admin
// queue's port and from its host's address.
func TestIOConnectPath(t *testing.T) {
	for _, tc := range []struct {
		name          string
		port, remote  string
		wantConnected bool
	}{
		{"same port, same host", "loop0", "10.0.0.2:5001", true},
		{"same host, another port", "loop1", "10.0.0.2:5001", false},
		{"same port, another host", "loop0", "10.0.0.3:5000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			if err := r.tgt.AddPort(r.lt, &Port{Address: "loop1", Service: "1"}); err != nil {
				t.Fatal(err)
			}
			lq, err := r.lt.DialFrom("loop0", "10.0.0.2:5000", 0, 32)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(lq.Close)
			admin := &host{t: t, lq: lq}
			rsp := admin.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			admin.propSet(nvme.PropCC, ccEnable)
			iq, err := r.lt.DialFrom(tc.port, tc.remote, 1, 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(iq.Close)
			io := &host{t: t, lq: iq}
			st := io.submit(connectCmd(1, 63, 0), connectData(testNQN, testHostNQN, testHostID, nvme.CNTLID(rsp.DW0()))).Status()
			if st.IsSuccess() != tc.wantConnected {
				t.Fatalf("I/O Connect: %v, want success %v", st, tc.wantConnected)
			}
		})
	}
}

// TestConnectTimeout: a queue that sends no Fabrics Connect is
// disconnected after ConnectTimeout; one that connected is not.
func TestConnectTimeout(t *testing.T) {
	tgt := NewTarget(Options{ConnectTimeout: 50 * time.Millisecond})
	lt := NewLoopTransport(TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	if _, err := tgt.AddSubsystem(SubsystemConfig{NQN: testNQN, AllowAnyHost: true}); err != nil {
		t.Fatal(err)
	}
	if err := tgt.AddPort(lt, &Port{Address: "loop0", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	silent, err := lt.Dial("loop0", 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(silent.Close)
	talks, err := lt.Dial("loop0", 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(talks.Close)
	(&host{t: t, lq: talks}).mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	select {
	case <-silent.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("a queue with no Connect is still there")
	}
	select {
	case <-talks.Disconnected():
		t.Fatal("a connected queue was disconnected")
	case <-time.After(100 * time.Millisecond):
	}
	if n := tgt.stats.connectTimeouts.Load(); n != 1 {
		t.Fatalf("%d timeouts counted, want 1", n)
	}
}
