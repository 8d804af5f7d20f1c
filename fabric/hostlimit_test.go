package fabric

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// TestMaxConnectionsPerHost: a host NQN's queues, admin and I/O over all
// its controllers, are capped; a Connect past the cap is refused with
// Controller Busy (no DNR: the host may retry) and counted; other hosts are
// not affected; a queue gone, or a Connect refused for any reason, gives
// its place back.
func TestMaxConnectionsPerHost(t *testing.T) {
	// A step connects a queue: op "admin" (a new controller of host) or
	// "io" (I/O queue qid of host's step-ctrl controller), or "close"
	// closes the queue step opened. have is host's count after the step.
	type step struct {
		op     string
		host   string
		qid    nvme.QID
		ctrl   int // the step whose admin queue's controller "io" joins
		subnqn string
		want   nvme.Status
		have   int
	}
	const a, b = "nqn.2026-11.io.example:a", "nqn.2026-11.io.example:b"
	busy := nvme.StatusConnectControllerBusy
	ok := nvme.StatusSuccess
	tests := []struct {
		name      string
		max       int
		steps     []step
		wantLimit uint64
	}{
		{name: "I/O queue past the cap", max: 2, wantLimit: 1, steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
			{op: "io", host: a, qid: 1, want: ok, have: 2},
			{op: "io", host: a, qid: 2, want: busy, have: 2},
		}},
		{name: "second controller past the cap", max: 1, wantLimit: 1, steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
			{op: "admin", host: a, want: busy, have: 1},
		}},
		{name: "another host is not counted", max: 1, wantLimit: 1, steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
			{op: "admin", host: b, want: ok, have: 1},
			{op: "admin", host: b, want: busy, have: 1},
		}},
		{name: "a queue gone gives its place back", max: 2, wantLimit: 2, steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
			{op: "io", host: a, qid: 1, want: ok, have: 2},
			{op: "io", host: a, qid: 2, want: busy, have: 2},
			{op: "close", ctrl: 1, host: a, have: 1},
			{op: "io", host: a, qid: 2, want: ok, have: 2},
			{op: "io", host: a, qid: 3, want: busy, have: 2},
		}},
		{name: "the controller gone gives every place back", max: 3, steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
			{op: "io", host: a, qid: 1, want: ok, have: 2},
			{op: "io", host: a, qid: 2, want: ok, have: 3},
			{op: "close", ctrl: 0, host: a, have: 0},
			{op: "admin", host: a, want: ok, have: 1},
		}},
		{name: "a Connect refused otherwise takes no place", max: 1, steps: []step{
			{op: "admin", host: a, subnqn: "nqn.2026-11.io.example:nope", want: nvme.StatusConnectInvalidParameters.WithDNR(), have: 0},
			{op: "admin", host: a, want: ok, have: 1},
		}},
		{name: "the default", steps: []step{
			{op: "admin", host: a, want: ok, have: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigOpts(t, Options{MaxConnectionsPerHost: tc.max})
			if tc.max == 0 && r.tgt.Options().MaxConnectionsPerHost != DefaultMaxConnectionsPerHost {
				t.Fatalf("cap %d, want the default %d", r.tgt.Options().MaxConnectionsPerHost, DefaultMaxConnectionsPerHost)
			}
			hosts := make([]*host, len(tc.steps))
			ctrls := make([]nvme.CNTLID, len(tc.steps))
			for i, s := range tc.steps {
				sub := testNQN
				if s.subnqn != "" {
					sub = s.subnqn
				}
				var rsp nvme.Completion
				switch s.op {
				case "admin":
					hosts[i] = r.dial(0, 32)
					rsp = hosts[i].submit(connectCmd(0, 31, 0), connectData(sub, s.host, testHostID, 0xffff))
					if rsp.Status().IsSuccess() {
						hosts[i].propSet(nvme.PropCC, ccEnable)
						ctrls[i] = nvme.CNTLID(rsp.DW0())
					}
				case "io":
					hosts[i] = r.dial(int(s.qid), 64)
					rsp = hosts[i].submit(connectCmd(s.qid, 63, 0), connectData(sub, s.host, testHostID, ctrls[s.ctrl]))
				case "close":
					hosts[s.ctrl].lq.Close()
				}
				if s.op != "close" && rsp.Status() != s.want {
					t.Fatalf("step %d (%s %s qid %d): status %v, want %v", i, s.op, s.host, s.qid, rsp.Status(), s.want)
				}
				// The controller's other queues go asynchronously once its
				// admin queue is gone.
				deadline := time.Now().Add(2 * time.Second)
				for r.tgt.HostConnections(s.host) != s.have && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if n := r.tgt.HostConnections(s.host); n != s.have {
					t.Fatalf("step %d (%s %s): host has %d connections, want %d", i, s.op, s.host, n, s.have)
				}
			}
			if st := r.tgt.Stats(); st.HostLimitRejects != tc.wantLimit {
				t.Fatalf("%d Connects counted as refused for the host cap, want %d", st.HostLimitRejects, tc.wantLimit)
			}
		})
	}
}

// TestMaxConnectionsPerHostMany: many hosts at the cap together, each
// refused once past it, none counted against another.
func TestMaxConnectionsPerHostMany(t *testing.T) {
	const hosts, per = 16, 3
	r := newRigOpts(t, Options{MaxConnectionsPerHost: per})
	for i := range hosts {
		nqn := fmt.Sprintf("nqn.2026-11.io.example:h%d", i)
		h := r.dial(0, 32)
		rsp := h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, nqn, testHostID, 0xffff))
		h.propSet(nvme.PropCC, ccEnable)
		cntlid := nvme.CNTLID(rsp.DW0())
		for qid := nvme.QID(1); qid <= per; qid++ {
			rsp := r.dial(int(qid), 64).submit(connectCmd(qid, 63, 0), connectData(testNQN, nqn, testHostID, cntlid))
			if want := qid < per; rsp.Status().IsSuccess() != want {
				t.Fatalf("host %d qid %d: status %v, want success %v", i, qid, rsp.Status(), want)
			}
		}
	}
	if st := r.tgt.Stats(); st.HostLimitRejects != hosts || st.ConnectRejects != hosts {
		t.Fatalf("host-cap refusals %d, Connect refusals %d; want %d each", st.HostLimitRejects, st.ConnectRejects, hosts)
	}
}

// TestHostCapUnauthenticated: a host that must authenticate counts against
// its NQN only once a queue has authenticated. Until then the queue counts
// against the address it came from, so a peer that cannot authenticate,
// naming the host, takes the places of its own address and not the host's;
// and an authenticated queue past the host's cap is disconnected.
func TestHostCapUnauthenticated(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	r := authRig(t, HostAuth{Key: key}, AuthPolicy{}, Options{MaxConnectionsPerHost: 2})
	dialFrom := func(remote string) *host {
		t.Helper()
		lq, err := r.lt.DialFrom("loop0", remote, 0, 32)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(lq.Close)
		return &host{t: t, lq: lq}
	}
	connect := func(h *host) nvme.Completion {
		t.Helper()
		return h.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	}
	// On the discovery subsystem, where the host has no key, a peer naming
	// it counts against its own address too.
	for i := range 3 {
		h := dialFrom("10.0.0.67:1")
		st := h.submit(connectCmd(0, 31, 0), connectData(nvme.DiscoveryNQN, testHostNQN, testHostID, 0xffff)).Status()
		if want := i < 2; st.IsSuccess() != want {
			t.Fatalf("impostor's discovery Connect %d: %v, want success %v", i+1, st, want)
		}
	}
	if n, p := r.tgt.HostConnections(testHostNQN), r.tgt.pendingConnections("10.0.0.67"); n != 0 || p != 2 {
		t.Fatalf("discovery: host counted %d, impostor's address %d; want 0 and 2", n, p)
	}
	// The impostor fills its address's places with the host's NQN.
	const evil, good = "10.0.0.66:1", "10.0.0.2:1"
	for i := range 3 {
		want := nvme.StatusSuccess
		if i == 2 {
			want = nvme.StatusConnectControllerBusy
		}
		if st := connect(dialFrom(evil)).Status(); st != want {
			t.Fatalf("impostor's Connect %d: %v, want %v", i+1, st, want)
		}
	}
	if n, p := r.tgt.HostConnections(testHostNQN), r.tgt.pendingConnections("10.0.0.66"); n != 0 || p != 2 {
		t.Fatalf("host counted %d, impostor's address %d waiting; want 0 and 2", n, p)
	}
	// The host itself, from its own address, connects and authenticates.
	auth := func(h *host) (uint8, error) {
		a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: key}
		return a.run()
	}
	h1 := dialFrom(good)
	if st := connect(h1).Status(); !st.IsSuccess() {
		t.Fatalf("the host's Connect beside the impostor's: %v", st)
	}
	if fail, err := auth(h1); fail != 0 || err != nil {
		t.Fatalf("the host's authentication: failure %d, %v", fail, err)
	}
	h2 := dialFrom(good)
	if st := connect(h2).Status(); !st.IsSuccess() {
		t.Fatalf("the host's second Connect: %v", st)
	}
	if fail, err := auth(h2); fail != 0 || err != nil {
		t.Fatalf("the host's second authentication: failure %d, %v", fail, err)
	}
	if n, p := r.tgt.HostConnections(testHostNQN), r.tgt.pendingConnections("10.0.0.2"); n != 2 || p != 0 {
		t.Fatalf("after authenticating: host %d, waiting %d; want 2 and 0", n, p)
	}
	// At the cap: a third Connect is refused at once.
	if st := connect(dialFrom(good)).Status(); st != nvme.StatusConnectControllerBusy {
		t.Fatalf("Connect past the cap of authenticated queues: %v, want Controller Busy", st)
	}
	// One that got in before the cap filled is disconnected when it
	// authenticates: the impostor's, with the host's key (as if it had it).
	r.tgt.hosts.mu.Lock()
	r.tgt.hosts.n[testHostNQN] = 0 // pretend the host's two are not yet counted
	r.tgt.hosts.mu.Unlock()
	late := dialFrom("10.0.0.3:1")
	if st := connect(late).Status(); !st.IsSuccess() {
		t.Fatalf("late Connect: %v", st)
	}
	r.tgt.hosts.mu.Lock()
	r.tgt.hosts.n[testHostNQN] = 2
	r.tgt.hosts.mu.Unlock()
	// The target disconnects it once it has authenticated, maybe before
	// the host has Success1.
	late.mayClose = true
	_, _ = auth(late)
	select {
	case <-late.lq.Disconnected():
	case <-time.After(2 * time.Second):
		t.Fatal("an authenticated queue past the host's cap was kept")
	}
	deadline := time.Now().Add(2 * time.Second)
	for r.tgt.pendingConnections("10.0.0.3") != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n, p := r.tgt.HostConnections(testHostNQN), r.tgt.pendingConnections("10.0.0.3"); n != 2 || p != 0 {
		t.Fatalf("after the late queue left: host counted %d, its address %d waiting; want 2 and 0", n, p)
	}
}

// TestNumberOfQueuesWithinCap: Set Features Number of Queues grants no more
// I/O queues than the host may still connect, so that a host near its cap
// gets a smaller controller rather than one whose I/O Connects fail.
func TestNumberOfQueuesWithinCap(t *testing.T) {
	cases := []struct {
		name      string
		max, have int // the cap, and the host's queues before the controller
		want      uint32
	}{
		{"the transport's limit", 64, 0, 4},
		{"room for two", 5, 2, 2},
		{"room for none still grants one", 3, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigOpts(t, Options{MaxConnectionsPerHost: tc.max})
			for range tc.have {
				h := r.dial(0, 32)
				h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			}
			h := r.dial(0, 32)
			h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			h.propSet(nvme.PropCC, ccEnable)
			rsp := setFeatures(h, nvme.FeatNumberOfQueues, 15|15<<16)
			if got := rsp.DW0(); got != (tc.want-1)|(tc.want-1)<<16 {
				t.Fatalf("Number of Queues granted %#x, want %d queues", got, tc.want)
			}
		})
	}
}

// TestConnectRefusalLogBounded: a host that floods the target with Connects
// it refuses cannot flood the log. The first refusals are logged, then at
// most limitedLogBurst per limitedLogEvery, and the next
// line logged says how many were left out; every refusal is still counted.
func TestConnectRefusalLogBounded(t *testing.T) {
	var log syncBuffer
	r := newRigOpts(t, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	var clock atomic.Int64 // seconds
	r.tgt.refusalLog.now = func() time.Time { return time.Unix(clock.Load(), 0) }
	const flood = 1000
	for range flood {
		h := r.dial(0, 32)
		rsp := h.submit(connectCmd(0, 31, 0), connectData("nqn.2026-11.io.example:nope", testHostNQN, testHostID, 0xffff))
		if rsp.Status().IsSuccess() {
			t.Fatal("Connect to a missing subsystem succeeded")
		}
		h.lq.Close()
	}
	lines := strings.Count(log.String(), `msg="connect refused"`)
	if lines < 1 || lines > 2*limitedLogBurst {
		t.Fatalf("%d refusals logged %d lines, want 1..%d", flood, lines, 2*limitedLogBurst)
	}
	if got := r.tgt.Stats().ConnectRejects; got != flood {
		t.Fatalf("%d refusals counted, want %d", got, flood)
	}
	// Later, a refusal is logged again with the count of those left out.
	clock.Add(int64(limitedLogBurst * limitedLogEvery / time.Second))
	h := r.dial(0, 32)
	h.submit(connectCmd(0, 31, 0), connectData("nqn.2026-11.io.example:nope", testHostNQN, testHostID, 0xffff))
	if !strings.Contains(log.String(), fmt.Sprintf("suppressed=%d", flood-lines)) {
		t.Fatalf("no line says %d refusals were left out:\n%s", flood-lines, tail(log.String(), 600))
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// syncBuffer is a bytes.Buffer safe for the target's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
