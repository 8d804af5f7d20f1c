package fabric

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// staleMarker fills the data buffers before each fuzzed command, standing
// for what an earlier command left there.
const staleMarker = "\xeeSTALE\xee\x00"

// A FuzzCommand input is a sequence of records, each a selector byte and a
// 64-byte SQE, at most fuzzMaxCommands of them. The selector's bit 0 picks
// the queue; the first record's other bits set up the run.
const (
	fuzzRecord      = 1 + nvme.CommandSize
	fuzzMaxCommands = 16

	selIO = 1 << 0 // the I/O queue slot, else the admin queue
	// holdShutdown: shutdown flushes wait until the sequence has run, so
	// CC.SHN toggles all find one in flight.
	selHoldShutdown = 1 << 1
	// rawSlot: the I/O queue slot is dialed but never connected; the
	// input may Connect it itself, as an admin or an I/O queue.
	selRawSlot = 1 << 2
	// discovery: the admin queue is a discovery controller's (the I/O
	// slot is then raw).
	selDiscovery = 1 << 3
	// auth: the host has a DH-HMAC-CHAP key, so its admin queue is only
	// connected, not enabled, and must authenticate (the I/O slot is raw).
	selAuth = 1 << 4
)

// FuzzCommand sends a sequence of arbitrary capsules with arbitrary data to
// an admin queue and an I/O queue slot. Every command must complete (an
// Async Event Request by the time its queue goes) with its CID and SQID;
// never panic; and:
//   - data: Parse gives data a direction, the one the opcode's (or Fabrics
//     FCTYPE's) bits 1:0 state, and at most MDTS; a Read or Write moves
//     NLB blocks. A command that succeeds moving data to the host wrote all
//     of it (no stale marker, and the core never had to zero it).
//   - shutdown: at most one shutdown flush in flight per controller,
//     however often CC.SHN toggles.
//   - authentication (a host with a DH-HMAC-CHAP key among the setups):
//     the same, through AUTH_Send and AUTH_Receive.
//   - teardown: once the host's queues are closed no controller or queue is
//     left, and once the target is closed no goroutine it started is.
func FuzzCommand(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.in, s.data)
	}
	f.Fuzz(func(t *testing.T, in []byte, data []byte) {
		if len(in) < fuzzRecord {
			return
		}
		fuzzSequence(t, in, data)
	})
}

func fuzzSequence(t *testing.T, in, data []byte) {
	goroutines := runtime.NumGoroutine()
	sel := in[0]
	dev := &shutdownFlushes{gate: make(chan struct{})}
	release := sync.OnceFunc(func() { close(dev.gate) })
	if sel&selHoldShutdown == 0 {
		release()
	}
	r := newRig(t, func(sc *SubsystemConfig, nc *NamespaceConfig) {
		dev.Device = nc.Device
		nc.Device = dev
		if sel&selAuth != 0 {
			sc.AllowAnyHost, sc.Hosts = false, []string{testHostNQN}
			sc.HostAuth = map[string]HostAuth{testHostNQN: {Key: testSecret(t, dhchap.SHA256, 1)}}
		}
	})
	t.Cleanup(release)
	var admin, slot *host
	switch {
	case sel&selAuth != 0:
		admin, _ = r.connectOnly(testHostNQN)
		slot = r.dial(1, 64)
	case sel&selDiscovery != 0:
		admin, _ = r.adminConnect(nvme.DiscoveryNQN, testHostNQN, 0)
		slot = r.dial(1, 64)
	default:
		var cntlid nvme.CNTLID
		admin, cntlid = r.adminConnect(testNQN, testHostNQN, 0)
		if sel&selRawSlot != 0 {
			slot = r.dial(1, 64)
		} else {
			slot = r.ioConnect(1, cntlid)
		}
	}
	mdts := r.tgt.Ports()[0].MDTS
	for _, h := range []*host{admin, slot} {
		h.lq.parsed = func(r *Request) { checkParsed(t, r, mdts) }
	}

	controllers := 1 // ever made: each may have its shutdown flush
	var held sync.WaitGroup
	buf := make([]byte, 0, 64)
	for i := 0; i < min(len(in)/fuzzRecord, fuzzMaxCommands); i++ {
		rec := in[i*fuzzRecord : (i+1)*fuzzRecord]
		h := admin
		if rec[0]&selIO != 0 {
			h = slot
		}
		c := nvme.Command(bytes.Clone(rec[1:]))
		if c.Opcode() == nvme.OpAdminAsyncEvent {
			// Held until an event, perhaps: sent aside, and it must
			// complete by the time its queue is gone.
			held.Add(1)
			done := make(chan struct{})
			go func() {
				defer held.Done()
				defer close(done)
				rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
				if _, err := h.lq.SubmitN(c, nil, rsp); err == nil && rsp.CID() != c.CID() {
					t.Errorf("Async Event Request CID %d completed as %d", c.CID(), rsp.CID())
				}
			}()
			waitHeld(t, h.lq.q, c.CID(), done)
			continue
		}
		// Offer at most 1 MiB whatever the SGL says.
		buf = append(buf[:0], data...)
		if n := int(c.SGL1().Length()); n > len(buf) && n <= 1<<20 {
			buf = slices.Grow(buf, n-len(buf))[:n]
			clear(buf[len(data):])
		}
		toHost := dataDir(c) == nvme.DataDirCtrlToHost
		if toHost {
			// What the buffers held before: a command must not send any of it.
			for i := range buf {
				buf[i] = staleMarker[i%len(staleMarker)]
			}
		}
		rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
		moved, err := h.lq.SubmitN(c, buf, rsp)
		if err == ErrQueueClosed {
			continue // the target let the queue go (its controller was deleted)
		}
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		if rsp.CID() != c.CID() || rsp.SQID() != h.lq.q.qid {
			t.Fatalf("CID %d SQID %d for CID %d on queue %d", rsp.CID(), rsp.SQID(), c.CID(), h.lq.q.qid)
		}
		ok := rsp.Status().IsSuccess()
		if ok && toHost {
			for i := 0; i+len(staleMarker) <= moved; i += len(staleMarker) {
				if string(buf[i:i+len(staleMarker)]) == staleMarker {
					t.Fatalf("opcode %#x succeeded and sent bytes %d.. it never wrote", c.Opcode(), i)
				}
			}
		}
		if n := r.tgt.stats.unwrittenData.Load(); n != 0 {
			t.Fatalf("opcode %#x cdw10 %#x succeeded without writing its data: the core had to zero it", c.Opcode(), c.CDW(10))
		}
		if ok && c.Opcode() == nvme.OpFabrics && c.FCType() == nvme.FCTypeConnect && c.ConnectQID() == 0 {
			controllers++
		}
		if t.Failed() {
			return
		}
	}

	dev.mu.Lock()
	most := dev.most
	dev.mu.Unlock()
	if most > controllers {
		t.Fatalf("%d shutdown flushes at once for %d controllers", most, controllers)
	}
	release()

	// The host goes: every controller and queue with it, and every held
	// Async Event Request completes.
	for _, h := range []*host{slot, admin} {
		h.lq.Close()
		<-h.lq.Disconnected()
	}
	if cs := r.tgt.Controllers(); len(cs) != 0 {
		t.Fatalf("controllers left after the host's queues closed: %+v", cs)
	}
	if st := r.tgt.Stats(); st.Controllers != 0 || st.Queues != 0 {
		t.Fatalf("counted after the host's queues closed: %d controllers, %d queues", st.Controllers, st.Queues)
	}
	done := make(chan struct{})
	go func() { held.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an Async Event Request never completed after its queue closed")
	}
	for _, h := range []*host{slot, admin} {
		for i := range h.lq.reqs {
			if r := &h.lq.reqs[i].r; r.state == reqExecuting {
				t.Fatalf("opcode %#x CID %d still held by the core after its queue was destroyed", r.Cmd.Opcode(), r.Cmd.CID())
			}
		}
	}
	if err := r.tgt.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	checkGoroutines(t, goroutines)
}

// waitHeld waits until the command CID on q has completed (done) or is
// held by the core, so the sequence goes on from a known state.
func waitHeld(t *testing.T, q *Queue, cid uint16, done <-chan struct{}) {
	t.Helper()
	held := func() bool {
		c := q.Controller()
		return c != nil && slices.Contains(c.events.heldCIDs(), cid)
	}
	for deadline := time.Now().Add(5 * time.Second); !held(); runtime.Gosched() {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Async Event Request CID %d neither completed nor held", cid)
		}
	}
}

// dataDir is the data direction the command's bits 1:0 state: the
// opcode's (NVMe base §3.3.1), or for a Fabrics command its FCTYPE's
// (NVMe-oF 1.1 §2.2: Property Set 00h, Connect 01h, Property Get 04h, ...).
func dataDir(c nvme.Command) uint8 {
	if c.Opcode() == nvme.OpFabrics {
		return c.FCType() & 3
	}
	return nvme.OpcodeDataDirection(c.Opcode())
}

// checkParsed is what Parse promises of a command it accepts; it runs on
// the submitting goroutine, so it reports with Errorf.
func checkParsed(t *testing.T, r *Request, mdts uint32) {
	want := DirNone
	switch dataDir(r.Cmd) {
	case nvme.DataDirHostToCtrl:
		want = DirHostToCtrl
	case nvme.DataDirCtrlToHost:
		want = DirCtrlToHost
	}
	switch {
	case (r.DataLen > 0) != (r.Dir != DirNone):
		t.Errorf("opcode %#x: %d bytes of data, direction %v", r.Cmd.Opcode(), r.DataLen, r.Dir)
	case r.DataLen > 0 && r.Dir != want:
		t.Errorf("opcode %#x fctype %#x: data %v, its bits 1:0 say %v", r.Cmd.Opcode(), r.Cmd.FCType(), r.Dir, want)
	case r.DataLen > mdts:
		t.Errorf("opcode %#x: %d bytes of data, MDTS %d", r.Cmd.Opcode(), r.DataLen, mdts)
	case r.ns != nil && (r.Cmd.Opcode() == nvme.OpRead || r.Cmd.Opcode() == nvme.OpWrite) &&
		uint64(r.DataLen) != uint64(r.Cmd.NumBlocks())<<r.ns.blockShift:
		t.Errorf("opcode %#x of %d blocks of %d bytes: %d bytes of data", r.Cmd.Opcode(), r.Cmd.NumBlocks(), 1<<r.ns.blockShift, r.DataLen)
	}
}

// checkGoroutines waits for the goroutines to fall back to n, the number
// before the target was made.
func checkGoroutines(t *testing.T, n int) {
	t.Helper()
	// Most are just ending: yield before sleeping.
	for i := 0; i < 100 && runtime.NumGoroutine() > n; i++ {
		runtime.Gosched()
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			var b strings.Builder
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("%d goroutines after the target closed, %d before:\n%s", runtime.NumGoroutine(), n, b.String())
		}
	}
}

// shutdownFlushes is a device that counts the shutdown flushes in flight
// (the calls from Controller.flushForShutdown), and holds them until gate
// closes; other flushes pass.
type shutdownFlushes struct {
	blockdev.Device
	gate          chan struct{}
	mu            sync.Mutex
	running, most int
}

func (d *shutdownFlushes) Flush() error {
	if !calledFrom(".(*Controller).flushForShutdown") {
		return d.Device.Flush()
	}
	d.mu.Lock()
	d.running++
	d.most = max(d.most, d.running)
	d.mu.Unlock()
	<-d.gate
	d.mu.Lock()
	d.running--
	d.mu.Unlock()
	return d.Device.Flush()
}

// calledFrom reports whether a function whose name ends in fn is on the
// caller's stack.
func calledFrom(fn string) bool {
	var pc [32]uintptr
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

type fuzzSeed struct{ in, data []byte }

// fuzzSeeds are the inputs FuzzCommand starts from, besides those in
// testdata/fuzz/FuzzCommand.
func fuzzSeeds() []fuzzSeed {
	rec := func(sel byte, c nvme.Command) []byte { return append([]byte{sel}, c...) }
	seq := func(recs ...[]byte) []byte { return bytes.Join(recs, nil) }
	var out []fuzzSeed
	add := func(in []byte, n int) { out = append(out, fuzzSeed{in, make([]byte, n)}) }

	add(rec(selIO, ioCmd(nvme.OpRead, 1, 0, 1)), 64)
	add(rec(selIO, ioCmd(nvme.OpWrite, 2, 8, 8)), 64)
	add(rec(selIO, ioCmd(nvme.OpDSM, 3, 0, 1)), 64)
	id := newCmd(nvme.OpAdminIdentify, 4)
	id.SetIdentify(nvme.CNSController, 0, 0)
	add(rec(0, withData(id, 4096)), 64)
	gl := newCmd(nvme.OpAdminGetLogPage, 5)
	gl.SetGetLogPage(nvme.LogSMART, 128, 0)
	add(rec(0, withData(gl, 512)), 64)
	add(rec(selIO, connectCmd(1, 31, 0)), 64)
	// Get Features Host Identifier, supported capabilities: once sent 16
	// bytes it never wrote.
	hid := newCmd(nvme.OpAdminGetFeatures, 6)
	hid.SetCDW(10, uint32(nvme.FeatHostIdentifier)|uint32(nvme.FeatSelectSupported)<<8)
	add(rec(0, withData(hid, 16)), 64)
	hid = newCmd(nvme.OpAdminGetFeatures, 7)
	hid.SetCDW(10, uint32(nvme.FeatHostIdentifier))
	hid.SetCDW(11, 1) // EXHID: the 128-bit identifier
	add(rec(0, withData(hid, 16)), 64)

	// CC.SHN toggled while the first shutdown's flush is held, with I/O
	// flushes between: one shutdown flush at a time.
	const shnNormal, shnAbrupt = 1 << 14, 2 << 14
	cc := func(v uint32) nvme.Command {
		c := newCmd(nvme.OpFabrics, 9)
		c.SetFCType(nvme.FCTypePropertySet)
		c.SetProperty(0, nvme.PropCC, uint64(v))
		return c
	}
	csts := newCmd(nvme.OpFabrics, 10)
	csts.SetFCType(nvme.FCTypePropertyGet)
	csts.SetProperty(0, nvme.PropCSTS, 0)
	flush := newCmd(nvme.OpFlush, 11)
	flush.SetNSID(1)
	toggles := [][]byte{rec(selHoldShutdown, cc(ccEnable|shnNormal))}
	for i := 0; i < 5; i++ {
		toggles = append(toggles, rec(0, cc(ccEnable)), rec(0, cc(ccEnable|shnAbrupt)), rec(selIO, flush))
	}
	add(seq(append(toggles, rec(0, csts))...), 0)
	// The same without holding, disabling the controller between.
	add(seq(rec(0, cc(ccEnable|shnNormal)), rec(0, cc(0)), rec(0, cc(ccEnable)), rec(0, cc(ccEnable|shnNormal)), rec(0, csts)), 0)

	// Async Event Requests up to the limit and one past, then an I/O
	// command: the held ones complete when the queue goes.
	aer := func(cid uint16) []byte { return rec(0, newCmd(nvme.OpAdminAsyncEvent, cid)) }
	add(seq(aer(20), aer(21), aer(22), aer(23), aer(24), rec(selIO, ioCmd(nvme.OpRead, 25, 0, 8))), 4096)

	// A second controller: the raw slot Connects as an admin queue and
	// shuts down, while the first does too.
	cd := connectData(testNQN, testHostNQN, testHostID, 0xffff)
	add(seq(rec(selRawSlot|selHoldShutdown|selIO, connectCmd(0, 31, 0)), rec(selIO, cc(ccEnable)),
		rec(selIO, cc(ccEnable|shnNormal)), rec(0, cc(ccEnable|shnNormal)), rec(selIO, cc(ccEnable)), rec(selIO, cc(ccEnable|shnNormal))), 0)
	out[len(out)-1].data = cd
	// The raw slot used before Connect, then connected to a controller
	// that does not exist.
	bad := connectData(testNQN, testHostNQN, testHostID, 0x1234)
	add(seq(rec(selRawSlot|selIO, ioCmd(nvme.OpRead, 30, 0, 1)), rec(selIO, connectCmd(1, 63, 0))), 0)
	out[len(out)-1].data = bad

	// A discovery controller: its log page, then a Connect of an I/O queue
	// to it, which must fail.
	dl := newCmd(nvme.OpAdminGetLogPage, 40)
	dl.SetGetLogPage(nvme.LogDiscovery, 1024, 0)
	add(seq(rec(selDiscovery, withData(dl, 4096)), rec(selIO, connectCmd(1, 63, 0))), 4096)

	// A host that must authenticate: commands before it, a Negotiate
	// (SHA-256, the null group) and the Challenge read back, a Reply that
	// cannot verify and what the controller then says; then an I/O queue
	// Connect to the controller (CNTLID 1, the first) before it
	// authenticated, and a Negotiate on that queue.
	neg := make([]byte, 4096)
	nn := nvme.PutAuthNegotiate(neg, 1, []byte{1}, []byte{0})
	add(seq(rec(selAuth, cc(ccEnable)), rec(0, authCmd(nvme.FCTypeAuthSend, 50, nn)), rec(0, authCmd(nvme.FCTypeAuthRecv, 51, 4096)),
		rec(0, authCmd(nvme.FCTypeAuthSend, 52, 64)), rec(0, authCmd(nvme.FCTypeAuthRecv, 53, 4096)), rec(0, cc(ccEnable))), 0)
	out[len(out)-1].data = neg[:4096]
	add(seq(rec(selAuth, authCmd(nvme.FCTypeAuthRecv, 54, 4096)), rec(selIO, connectCmd(1, 63, 0)), rec(selIO, authCmd(nvme.FCTypeAuthSend, 55, nn))), 0)
	out[len(out)-1].data = connectData(testNQN, testHostNQN, testHostID, 1)
	return out
}
