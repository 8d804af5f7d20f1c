package fabric

import (
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// fakeQoS is a namespace QoS on a clock the test moves, whose released
// commands are counted by host instead of run.
type fakeQoS struct {
	q     *nsQoS
	clock float64
	mu    sync.Mutex
	got   map[string]int
	bytes map[string]uint64
	order []string
	fq    *Queue
}

func newFakeQoS(t *testing.T, c QoSConfig) *fakeQoS {
	t.Helper()
	f := &fakeQoS{q: newNSQoS(), clock: 1e12, got: map[string]int{}, bytes: map[string]uint64{}, fq: &Queue{}}
	f.q.now = func() float64 { return f.clock }
	// The test runs it as the clock moves: the real timer does nothing.
	f.q.timer.Stop()
	f.q.timer = time.AfterFunc(time.Hour, func() {})
	f.q.release = func(r *Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.got[r.qosHost.nqn]++
		f.bytes[r.qosHost.nqn] += uint64(r.DataLen)
		f.order = append(f.order, r.qosHost.nqn)
	}
	f.q.set(c)
	t.Cleanup(func() { f.q.timer.Stop() })
	return f
}

// submit has host send n commands of the cost op and size take at the
// clock's time; it returns how many went at once.
func (f *fakeQoS) submit(host string, n int, op uint8, size uint32) int {
	now := 0
	for range n {
		r := &Request{q: f.fq, DataLen: size}
		c := readCost
		if op == nvme.OpWrite {
			c = writeCost
		}
		c.n = size
		if f.q.admit(r, host, c) {
			f.mu.Lock()
			f.got[host]++
			f.bytes[host] += uint64(size)
			f.mu.Unlock()
			now++
		}
	}
	return now
}

// advance moves the clock by d in steps of a tick, letting the held
// commands go as the timer would.
func (f *fakeQoS) advance(d time.Duration) {
	for end := f.clock + float64(d); f.clock < end; {
		f.clock += float64(limits.QoSTick)
		f.q.run()
	}
}

// within reports whether got is want, less or more by frac.
func within(got, want, frac float64) bool { return got >= want*(1-frac) && got <= want*(1+frac) }

// TestQoSRates: a limit lets through its rate, plus its burst, over a
// second, whatever the commands' size; each host gets its share of a
// namespace's limit, and its own limit on top.
func TestQoSRates(t *testing.T) {
	burst := limits.QoSBurst.Seconds()
	for _, tc := range []struct {
		name string
		cfg  QoSConfig
		// each host sends backlog commands of op and size at once.
		hosts   []string
		op      uint8
		size    uint32
		backlog int
		// want is what each host gets through in a second, in commands.
		want []float64
	}{
		{"iops", QoSConfig{Limits: QoSLimits{IOPS: 1000}}, []string{maskHostA}, nvme.OpRead, 4096, 5000, []float64{1000 * (1 + burst)}},
		{"read iops, reads", QoSConfig{Limits: QoSLimits{ReadIOPS: 500}}, []string{maskHostA}, nvme.OpRead, 4096, 5000, []float64{500 * (1 + burst)}},
		{"read iops, writes", QoSConfig{Limits: QoSLimits{ReadIOPS: 500}}, []string{maskHostA}, nvme.OpWrite, 4096, 5000, []float64{5000}},
		{"write iops", QoSConfig{Limits: QoSLimits{WriteIOPS: 300}}, []string{maskHostA}, nvme.OpWrite, 4096, 5000, []float64{300 * (1 + burst)}},
		{"bw 4k", QoSConfig{Limits: QoSLimits{BW: 4 << 20}}, []string{maskHostA}, nvme.OpWrite, 4096, 5000, []float64{1024 * (1 + burst)}},
		{"bw 128k", QoSConfig{Limits: QoSLimits{BW: 16 << 20}}, []string{maskHostA}, nvme.OpRead, 128 << 10, 5000, []float64{128 * (1 + burst)}},
		{"write bw, reads", QoSConfig{Limits: QoSLimits{WriteBW: 1 << 20}}, []string{maskHostA}, nvme.OpRead, 4096, 3000, []float64{3000}},
		{"iops and bw", QoSConfig{Limits: QoSLimits{IOPS: 2000, BW: 4 << 20}}, []string{maskHostA}, nvme.OpRead, 128 << 10, 5000, []float64{32 * (1 + burst)}},
		{"shared", QoSConfig{Limits: QoSLimits{IOPS: 1000}}, []string{maskHostA, maskHostB}, nvme.OpRead, 4096, 5000,
			// A, first, had the burst alone.
			[]float64{1000*burst + 500, 500}},
		{"per host", QoSConfig{PerHost: QoSLimits{IOPS: 200}}, []string{maskHostA, maskHostB}, nvme.OpRead, 4096, 5000,
			[]float64{200 * (1 + burst), 200 * (1 + burst)}},
		{"per host override", QoSConfig{PerHost: QoSLimits{IOPS: 200}, Hosts: map[string]QoSLimits{maskHostB: {IOPS: 600}}},
			[]string{maskHostA, maskHostB}, nvme.OpRead, 4096, 5000, []float64{200 * (1 + burst), 600 * (1 + burst)}},
		{"override unlimited", QoSConfig{PerHost: QoSLimits{IOPS: 200}, Hosts: map[string]QoSLimits{maskHostB: {}}},
			[]string{maskHostA, maskHostB}, nvme.OpRead, 4096, 3000, []float64{200 * (1 + burst), 3000}},
		{"per host under shared", QoSConfig{Limits: QoSLimits{IOPS: 1000}, PerHost: QoSLimits{IOPS: 300}},
			[]string{maskHostA, maskHostB, maskHostC}, nvme.OpRead, 4096, 5000,
			[]float64{300 * (1 + burst), 300 * (1 + burst), 300 * (1 + burst)}},
		{"shared over per host", QoSConfig{Limits: QoSLimits{IOPS: 600}, PerHost: QoSLimits{IOPS: 500}},
			[]string{maskHostA, maskHostB}, nvme.OpRead, 4096, 5000, []float64{500*burst + 300, 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeQoS(t, tc.cfg)
			for _, h := range tc.hosts {
				f.submit(h, tc.backlog, tc.op, tc.size)
			}
			f.advance(time.Second)
			for i, h := range tc.hosts {
				if got := float64(f.got[h]); !within(got, tc.want[i], 0.02) {
					t.Errorf("%s: %v commands in a second, want %v", h, got, tc.want[i])
				}
			}
		})
	}
}

// TestQoSFIFO: a command that comes while others are held waits behind
// them, even when the limit has room for it at that moment; hosts take
// turns.
func TestQoSFIFO(t *testing.T) {
	f := newFakeQoS(t, QoSConfig{Limits: QoSLimits{IOPS: 100}})
	first := f.submit(maskHostA, 20, nvme.OpRead, 4096)
	if want := int(100*limits.QoSBurst.Seconds()) + 1; first != want {
		t.Fatalf("%d commands went at once, want the burst's %d", first, want)
	}
	f.clock += float64(time.Second) // room for the burst, but 14 wait
	if n := f.submit(maskHostB, 3, nvme.OpRead, 4096); n != 0 {
		t.Fatalf("%d of B's commands passed A's held ones", n)
	}
	f.q.run()
	// A's and B's in turn: B's three among the first six let go.
	if len(f.order) < 6 {
		t.Fatalf("%d let go, want at least 6", len(f.order))
	}
	b := 0
	for _, h := range f.order[:6] {
		if h == maskHostB {
			b++
		}
	}
	if b != 3 {
		t.Fatalf("order %v: B's commands did not take turns with A's", f.order)
	}
	// An idle second banks no more than the burst.
	if f.q.held != 17-6 {
		t.Fatalf("%d still held, want 11: the burst's worth went", f.q.held)
	}
}

// TestQoSLiveChange: held commands are looked at again under new limits at
// once; with none, all go.
func TestQoSLiveChange(t *testing.T) {
	f := newFakeQoS(t, QoSConfig{Limits: QoSLimits{IOPS: 10}})
	f.submit(maskHostA, 50, nvme.OpRead, 4096)
	f.advance(time.Second)
	if got := f.got[maskHostA]; got > 12 {
		t.Fatalf("%d in a second at 10 IOPS", got)
	}
	f.q.set(QoSConfig{Limits: QoSLimits{IOPS: 1000}})
	f.advance(100 * time.Millisecond)
	if got := f.got[maskHostA]; got != 50 {
		t.Fatalf("%d of 50 went after the limit was raised", got)
	}
	f.q.set(QoSConfig{Limits: QoSLimits{IOPS: 1}})
	f.submit(maskHostA, 10, nvme.OpRead, 4096)
	f.q.set(QoSConfig{})
	if got := f.got[maskHostA]; got != 60 {
		t.Fatalf("%d of 60 went once the limit was removed", got)
	}
	if n := f.submit(maskHostA, 5, nvme.OpRead, 4096); n != 5 {
		t.Fatalf("%d of 5 went at once with no limit", n)
	}
}

// TestQoSForgetsIdleHosts: the state of hosts that hold nothing and owe
// nothing is dropped past QoSHostEntries, so that hosts named at will do
// not grow it.
func TestQoSForgetsIdleHosts(t *testing.T) {
	f := newFakeQoS(t, QoSConfig{PerHost: QoSLimits{IOPS: 1000}})
	for i := range 3 * limits.QoSHostEntries {
		f.submit("nqn.2026-11.io.example:h"+string(rune('a'+i%26))+time.Duration(i).String(), 1, nvme.OpRead, 4096)
		f.clock += float64(time.Second)
	}
	if n := len(f.q.hosts); n > limits.QoSHostEntries {
		t.Fatalf("%d hosts kept, more than %d", n, limits.QoSHostEntries)
	}
}

// qosRig is a loop rig whose namespace has QoS c.
func qosRig(t *testing.T, c QoSConfig) (*rig, *host, *host) {
	t.Helper()
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.QoS = c })
	admin, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	return r, admin, r.ioConnect(1, cntlid)
}

// flood submits n reads at once on h; their statuses arrive on the
// channel, nil for a queue that closed.
func flood(h *host, n int) <-chan *nvme.Status {
	out := make(chan *nvme.Status, n)
	for i := range n {
		go func() {
			rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
			if err := h.lq.Submit(ioCmd(nvme.OpRead, uint16(200+i), 0, 8), make([]byte, 4096), rsp); err != nil {
				out <- nil
				return
			}
			st := rsp.Status()
			out <- &st
		}()
	}
	return out
}

// waitQoSHeld waits until the namespace holds n commands.
func waitQoSHeld(t *testing.T, ns *Namespace, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ns.QoSStats().Held < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands held, want %d", ns.QoSStats().Held, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func collect(t *testing.T, ch <-chan *nvme.Status, n int, within time.Duration) []*nvme.Status {
	t.Helper()
	var out []*nvme.Status
	timeout := time.After(within)
	for range n {
		select {
		case st := <-ch:
			out = append(out, st)
		case <-timeout:
			t.Fatalf("%d of %d commands completed in %v", len(out), n, within)
		}
	}
	return out
}

// TestQoSHeldNotFailed: commands over the limit wait and succeed; admin
// commands, Keep Alive and Flush are never held.
func TestQoSHeldNotFailed(t *testing.T) {
	r, admin, io := qosRig(t, QoSConfig{Limits: QoSLimits{IOPS: 20}})
	ch := flood(io, 10)
	waitQoSHeld(t, r.ns, 8)
	start := time.Now()
	admin.mustOK(newCmd(nvme.OpAdminKeepAlive, 50), nil)
	if _, st := identify(admin, nvme.CNSController, 0); !st.IsSuccess() {
		t.Fatalf("identify: %v", st)
	}
	f := newCmd(nvme.OpFlush, 51)
	f.SetNSID(1)
	io.mustOK(f, nil)
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("admin commands and a flush took %v behind held reads", d)
	}
	for _, st := range collect(t, ch, 10, 5*time.Second) {
		if st == nil || !st.IsSuccess() {
			t.Fatalf("a held read completed with %v", st)
		}
	}
	st := r.ns.QoSStats()
	if st.Held != 0 || st.HeldTotal < 8 || st.Waited <= 0 || st.Hosts[testHostNQN].Waited != st.Waited {
		t.Fatalf("stats %+v", st)
	}
}

// TestQoSLiveRemove: removing the limit lets what it held go at once.
func TestQoSLiveRemove(t *testing.T) {
	r, _, io := qosRig(t, QoSConfig{Limits: QoSLimits{IOPS: 1}})
	ch := flood(io, 10)
	waitQoSHeld(t, r.ns, 9)
	if err := r.ns.SetQoS(QoSConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range collect(t, ch, 10, 2*time.Second) {
		if st == nil || !st.IsSuccess() {
			t.Fatalf("a read completed with %v", st)
		}
	}
	if r.ns.qos.Load() != nil {
		t.Fatal("the I/O path still sees a QoS with no limit")
	}
}

// TestQoSQueueGone: the commands held for a queue that goes are completed
// (Aborted SQ Deleted), so that the transport gets its requests back.
func TestQoSQueueGone(t *testing.T) {
	r, _, io := qosRig(t, QoSConfig{Limits: QoSLimits{IOPS: 1}})
	io.lq.parsed = nil
	flood(io, 10)
	waitQoSHeld(t, r.ns, 9)
	q := io.lq.q
	io.lq.Close()
	if n := r.ns.QoSStats().Held; n != 0 {
		t.Fatalf("%d commands still held for a queue gone", n)
	}
	if n := q.held.Load(); n != 0 {
		t.Fatalf("the queue counts %d held", n)
	}
}

// TestQoSNamespaceRemoved: the commands a removed namespace held fail at
// once with Invalid Namespace, as commands to a namespace gone do, rather
// than holding its removal up.
func TestQoSNamespaceRemoved(t *testing.T) {
	r, _, io := qosRig(t, QoSConfig{Limits: QoSLimits{IOPS: 1}})
	ch := flood(io, 10)
	waitQoSHeld(t, r.ns, 9)
	if err := r.sub.RemoveNamespace(1); err != nil {
		t.Fatal(err)
	}
	invalid := 0
	for _, st := range collect(t, ch, 10, 2*time.Second) {
		if st != nil && *st == nvme.StatusInvalidNamespace.WithDNR() {
			invalid++
		}
	}
	if invalid != 9 {
		t.Fatalf("%d of the 9 held reads failed with Invalid Namespace", invalid)
	}
}

// TestQoSNoAllocs: a command held and let go allocates nothing, nor does
// one under a limit that has room.
func TestQoSNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		iops uint64
	}{
		{"room", 1 << 40},
		{"held", 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, io := qosRig(t, QoSConfig{Limits: QoSLimits{IOPS: tc.iops}})
			cmd := ioCmd(nvme.OpRead, 1, 0, 8)
			buf := make([]byte, 4096)
			rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
			do := func() {
				if err := io.lq.Submit(cmd, buf, rsp); err != nil || !rsp.Status().IsSuccess() {
					t.Fatalf("read: %v %v", err, rsp.Status())
				}
			}
			for range 400 { // past the burst, and the host's state made
				do()
			}
			before := r.ns.QoSStats().HeldTotal
			if n := testing.AllocsPerRun(200, do); n != 0 {
				t.Errorf("%v allocations per read", n)
			}
			held := r.ns.QoSStats().HeldTotal - before
			if tc.name == "held" && held == 0 {
				t.Fatal("no read was held: the test measured the wrong path")
			}
		})
	}
}
