package fabric

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

func testSecret(t *testing.T, h dhchap.Hash, fill byte) dhchap.Secret {
	t.Helper()
	s, err := dhchap.NewSecret(h, bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// authHost plays the host's side of DH-HMAC-CHAP as the Linux host does
// (drivers/nvme/host/auth.c): Negotiate offering every hash and group,
// Challenge, Reply, Success1 and, bidirectional, Success2.
type authHost struct {
	h       *host
	hostNQN string
	subNQN  string
	key     dhchap.Secret
	ctrlKey dhchap.Secret // zero: unidirectional
	hashes  []byte        // offered; nil: all
	groups  []byte
	tid     uint16
	// mangle changes the Reply before it is sent.
	mangle func(reply []byte)
	// chosen by the controller
	hash  dhchap.Hash
	group dhchap.Group
}

func authCmd(fctype uint8, cid uint16, n int) nvme.Command {
	c := newCmd(nvme.OpFabrics, cid)
	c.SetFCType(fctype)
	c.SetAuth(uint32(n))
	return withData(c, n)
}

func (a *authHost) send(msg []byte) {
	a.h.t.Helper()
	a.h.mustOK(authCmd(nvme.FCTypeAuthSend, 10, len(msg)), msg)
}

func (a *authHost) receive() []byte {
	a.h.t.Helper()
	buf := bytes.Repeat([]byte{0xee}, 4096) // stale bytes must not come back
	a.h.mustOK(authCmd(nvme.FCTypeAuthRecv, 11, len(buf)), buf)
	return buf
}

// run authenticates; it returns the Failure1 explanation the controller
// sent, 0 on success, or an error for a controller response that does not
// verify (the host would send Failure2).
func (a *authHost) run() (uint8, error) {
	t := a.h.t
	t.Helper()
	hashes, groups := a.hashes, a.groups
	if hashes == nil {
		hashes = []byte{1, 2, 3}
	}
	if groups == nil {
		groups = []byte{0, 1, 2, 3, 4, 5}
	}
	buf := make([]byte, 4096)
	n := nvme.PutAuthNegotiate(buf, a.tid, hashes, groups)
	a.send(buf[:n])
	msg := a.receive()
	if m := nvme.AuthMessage(msg); m.ID() == nvme.AuthIDFailure1 {
		return m.FailureExplanation(), nil
	}
	ch := nvme.AuthChallenge(msg)
	if !ch.Valid() || msg[0] != nvme.AuthTypeDHCHAP || msg[1] != nvme.AuthIDChallenge || nvme.AuthMessage(msg).TID() != a.tid {
		return 0, fmt.Errorf("not a challenge: % x", msg[:16])
	}
	a.hash, a.group = dhchap.Hash(ch.HashID()), dhchap.Group(ch.DHGroup())
	if int(msg[6]) != a.hash.Size() {
		return 0, fmt.Errorf("HL %d for %v", msg[6], a.hash)
	}
	for _, b := range msg[nvme.AuthChallengeSize(a.hash.Size(), int(ch.DHVLen())):] {
		if b != 0 {
			return 0, fmt.Errorf("bytes after the challenge not zeroed")
		}
	}
	c1 := ch.C1()
	var dhv, ks []byte
	if a.group != dhchap.Null {
		k, err := a.group.NewKey(nil)
		if err != nil {
			return 0, err
		}
		ks, err = k.Shared(ch.DHValue())
		if err != nil {
			return 0, err
		}
		dhv = k.Public()
		c1 = dhchap.Augment(a.hash, ks, c1)
	}
	r1 := dhchap.HostResponse(a.hash, a.key.Transform(a.hostNQN), c1, ch.Seq(), a.tid, a.hostNQN, a.subNQN)
	var c2 []byte
	s2 := uint32(0)
	if !a.ctrlKey.IsZero() {
		c2, s2 = bytes.Repeat([]byte{0xc2}, a.hash.Size()), 77
	}
	n = nvme.PutAuthReply(buf, a.tid, s2, r1, c2, dhv)
	if a.mangle != nil {
		a.mangle(buf[:n])
	}
	a.send(buf[:n])
	msg = a.receive()
	m := nvme.AuthMessage(msg)
	if m.ID() == nvme.AuthIDFailure1 {
		return m.FailureExplanation(), nil
	}
	if m.ID() != nvme.AuthIDSuccess1 || m.TID() != a.tid {
		return 0, fmt.Errorf("not success1: % x", msg[:16])
	}
	s1 := nvme.AuthSuccess1(msg)
	if c2 == nil {
		if s1.RValid() {
			return 0, fmt.Errorf("R2 without a challenge")
		}
		return 0, nil
	}
	ca2 := c2
	if ks != nil {
		ca2 = dhchap.Augment(a.hash, ks, c2)
	}
	want := dhchap.ControllerResponse(a.hash, a.ctrlKey.Transform(a.subNQN), ca2, s2, a.tid, a.hostNQN, a.subNQN)
	if !s1.RValid() || !bytes.Equal(s1.Response(), want) {
		n = nvme.PutAuthFailure(buf, nvme.AuthIDFailure2, a.tid, nvme.AuthFailFailed)
		a.send(buf[:n])
		return 0, fmt.Errorf("controller response does not verify")
	}
	n = nvme.PutAuthSuccess2(buf, a.tid)
	a.send(buf[:n])
	return 0, nil
}

// authRig is a subsystem where testHostNQN must authenticate.
func authRig(t *testing.T, keys HostAuth, pol AuthPolicy, opts Options) *rig {
	t.Helper()
	if opts.AuthTimeout == 0 {
		opts.AuthTimeout = time.Minute
	}
	return newRigOpts(t, opts, func(sc *SubsystemConfig, _ *NamespaceConfig) {
		sc.AllowAnyHost = false
		sc.Hosts = []string{testHostNQN, "nqn.2026-11.io.example:nokey"}
		sc.HostAuth = map[string]HostAuth{testHostNQN: keys}
		sc.Auth = pol
	})
}

// connectOnly connects an admin queue and returns it with the Connect DW0.
func (r *rig) connectOnly(hostnqn string) (*host, uint32) {
	r.t.Helper()
	h := r.dial(0, 32)
	rsp := h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, hostnqn, testHostID, 0xffff))
	return h, rsp.DW0()
}

func TestAuthRequiredBeforeCommands(t *testing.T) {
	r := authRig(t, HostAuth{Key: testSecret(t, dhchap.SHA256, 1)}, AuthPolicy{}, Options{})
	h, dw0 := r.connectOnly(testHostNQN)
	if dw0&nvme.ConnectAuthATR == 0 {
		t.Fatalf("Connect DW0 %#x: ATR not set", dw0)
	}
	get := newCmd(nvme.OpFabrics, 3)
	get.SetFCType(nvme.FCTypePropertyGet)
	get.SetProperty(1, nvme.PropCAP, 0)
	set := newCmd(nvme.OpFabrics, 4)
	set.SetFCType(nvme.FCTypePropertySet)
	set.SetProperty(0, nvme.PropCC, ccEnable)
	ident := withData(newCmd(nvme.OpAdminIdentify, 5), 4096)
	ident.SetCDW(10, 1)
	ka := newCmd(nvme.OpAdminKeepAlive, 6)
	for name, c := range map[string]nvme.Command{"property get": get, "property set": set, "identify": ident, "keep alive": ka} {
		if st := h.submit(c, make([]byte, 4096)).Status(); st != nvme.StatusAuthRequired.WithDNR() {
			t.Errorf("%s before authentication: %v, want Authentication Required", name, st)
		}
	}
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: testSecret(t, dhchap.SHA256, 1)}
	if fail, err := a.run(); fail != 0 || err != nil {
		t.Fatalf("authentication: failure %d, %v", fail, err)
	}
	h.propSet(nvme.PropCC, ccEnable)
	if csts := h.propGet(nvme.PropCSTS, false); csts&1 == 0 {
		t.Fatal("not ready after authentication")
	}
	// A host with no key is not asked to authenticate.
	_, dw0 = r.connectOnly("nqn.2026-11.io.example:nokey")
	if dw0&nvme.ConnectAuthATR != 0 {
		t.Fatalf("ATR set for a host without a key")
	}
}

// Every hash with the null group and two FFDHE groups, unidirectional and
// bidirectional, on the admin queue and an I/O queue.
func TestAuthSucceeds(t *testing.T) {
	for _, h := range dhchap.Hashes {
		for _, g := range []dhchap.Group{dhchap.Null, dhchap.FFDHE2048, dhchap.FFDHE4096} {
			for _, bidi := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/bidi=%v", h, g, bidi), func(t *testing.T) {
					keys := HostAuth{Key: testSecret(t, h, 1)}
					if bidi {
						keys.CtrlKey = testSecret(t, dhchap.SHA512, 2)
					}
					r := authRig(t, keys, AuthPolicy{Hashes: []dhchap.Hash{h}, Groups: []dhchap.Group{g}}, Options{})
					adm, _ := r.connectOnly(testHostNQN)
					a := &authHost{h: adm, hostNQN: testHostNQN, subNQN: testNQN, key: keys.Key, ctrlKey: keys.CtrlKey, tid: 3}
					if fail, err := a.run(); fail != 0 || err != nil {
						t.Fatalf("admin queue: failure %d, %v", fail, err)
					}
					if a.hash != h || a.group != g {
						t.Fatalf("controller chose %v/%v", a.hash, a.group)
					}
					adm.propSet(nvme.PropCC, ccEnable)
					setFeatures(adm, 0x07, 0x00010001) // one I/O queue
					io := r.dial(1, 64)
					rsp := io.mustOK(connectCmd(1, 63, 0), connectData(testNQN, testHostNQN, testHostID, 1))
					if rsp.DW0()&nvme.ConnectAuthATR == 0 {
						t.Fatal("I/O queue: ATR not set")
					}
					rd := ioCmd(nvme.OpRead, 9, 0, 1)
					if st := io.submit(rd, make([]byte, 512)).Status(); st != nvme.StatusAuthRequired.WithDNR() {
						t.Fatalf("read before authenticating the I/O queue: %v", st)
					}
					a.h, a.tid = io, 4
					if fail, err := a.run(); fail != 0 || err != nil {
						t.Fatalf("I/O queue: failure %d, %v", fail, err)
					}
					io.mustOK(rd, make([]byte, 512))
					if st := r.tgt.Stats(); st.AuthSucceeded != 2 || st.AuthFailed != 0 {
						t.Fatalf("stats %+v", st)
					}
				})
			}
		}
	}
}

func setFeatures(h *host, fid uint8, v uint32) nvme.Completion {
	c := newCmd(nvme.OpAdminSetFeatures, 20)
	c.SetCDW(10, uint32(fid))
	c.SetCDW(11, v)
	return h.mustOK(c, nil)
}

// Refusals: each ends in a Failure1 with the spec's explanation, the queue
// stays closed to other commands, and the target disconnects it.
func TestAuthRefused(t *testing.T) {
	right := testSecret(t, dhchap.SHA256, 1)
	cases := []struct {
		name   string
		keys   HostAuth
		pol    AuthPolicy
		host   func(a *authHost)
		reason uint8
	}{
		{"wrong host key", HostAuth{Key: right}, AuthPolicy{}, func(a *authHost) { a.key = testSecret(t, dhchap.SHA256, 9) }, nvme.AuthFailFailed},
		{"same key, other transformation", HostAuth{Key: right}, AuthPolicy{}, func(a *authHost) { a.key = testSecret(t, dhchap.SHA384, 1) }, nvme.AuthFailFailed},
		{"bidirectional, no controller key", HostAuth{Key: right}, AuthPolicy{}, func(a *authHost) { a.ctrlKey = testSecret(t, 0, 2) }, nvme.AuthFailFailed},
		{"no common hash", HostAuth{Key: right}, AuthPolicy{Hashes: []dhchap.Hash{dhchap.SHA512}}, func(a *authHost) { a.hashes = []byte{1} }, nvme.AuthFailHashUnusable},
		{"no common group", HostAuth{Key: right}, AuthPolicy{Groups: []dhchap.Group{dhchap.FFDHE8192}}, func(a *authHost) { a.groups = []byte{0, 1} }, nvme.AuthFailDHGroupUnusable},
		{"DH value 1", HostAuth{Key: right}, AuthPolicy{Groups: []dhchap.Group{dhchap.FFDHE2048}}, func(a *authHost) {
			a.mangle = func(b []byte) {
				rp := nvme.AuthReply(b)
				clear(rp.DHValue())
				rp.DHValue()[255] = 1
			}
		}, nvme.AuthFailDHGroupUnusable},
		{"DH value p-1", HostAuth{Key: right}, AuthPolicy{Groups: []dhchap.Group{dhchap.FFDHE2048}}, func(a *authHost) {
			a.mangle = func(b []byte) {
				v := nvme.AuthReply(b).DHValue()
				pm1 := dhchap.FFDHE2048.Prime()
				pm1.Sub(pm1, big.NewInt(1)).FillBytes(v)
			}
		}, nvme.AuthFailDHGroupUnusable},
		{"null group with a DH value", HostAuth{Key: right}, AuthPolicy{Groups: []dhchap.Group{dhchap.Null}}, func(a *authHost) {
			a.mangle = func(b []byte) { b[10] = 4 } // DHVLEN past nothing
		}, nvme.AuthFailIncorrectPayload},
		{"wrong transaction ID", HostAuth{Key: right}, AuthPolicy{}, func(a *authHost) {
			a.mangle = func(b []byte) { b[4]++ }
		}, nvme.AuthFailIncorrectPayload},
		{"short hash length", HostAuth{Key: right}, AuthPolicy{}, func(a *authHost) {
			a.mangle = func(b []byte) { b[6] = 16 }
		}, nvme.AuthFailIncorrectPayload},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := authRig(t, c.keys, c.pol, Options{})
			h, _ := r.connectOnly(testHostNQN)
			a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: right}
			c.host(a)
			fail, err := a.run()
			if err != nil {
				t.Fatal(err)
			}
			if fail != c.reason {
				t.Fatalf("failure explanation %d, want %d", fail, c.reason)
			}
			get := newCmd(nvme.OpFabrics, 3)
			get.SetFCType(nvme.FCTypePropertyGet)
			get.SetProperty(1, nvme.PropCAP, 0)
			h.mayClose = true
			if st := h.submit(get, nil).Status(); st != 0 && st != nvme.StatusAuthRequired.WithDNR() {
				t.Fatalf("after a failed authentication: %v", st)
			}
			waitDisconnected(t, h, "after a failed authentication")
			if r.tgt.Stats().AuthFailed == 0 || r.tgt.Stats().AuthSucceeded != 0 {
				t.Fatalf("stats %+v", r.tgt.Stats())
			}
		})
	}
}

// A controller response the host cannot verify: the host sends Failure2,
// the queue is not authenticated, and the target disconnects it.
func TestAuthWrongControllerKey(t *testing.T) {
	keys := HostAuth{Key: testSecret(t, dhchap.SHA256, 1), CtrlKey: testSecret(t, dhchap.SHA256, 2)}
	r := authRig(t, keys, AuthPolicy{}, Options{})
	h, _ := r.connectOnly(testHostNQN)
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: keys.Key, ctrlKey: testSecret(t, dhchap.SHA256, 3)}
	if _, err := a.run(); err == nil {
		t.Fatal("a wrong controller key verified")
	}
	h.mayClose = true
	if st := h.submit(newCmd(nvme.OpAdminKeepAlive, 6), nil).Status(); st != 0 && st != nvme.StatusAuthRequired.WithDNR() {
		t.Fatalf("after Failure2: %v", st)
	}
	waitDisconnected(t, h, "after Failure2")
}

// Authentication Send/Receive with bad fields get Invalid Field and change
// nothing: a transaction after them succeeds. (Messages out of step end the
// transaction: TestAuthFailureEndsQueue.)
func TestAuthBadFields(t *testing.T) {
	r := authRig(t, HostAuth{Key: testSecret(t, dhchap.SHA256, 1)}, AuthPolicy{}, Options{})
	h, _ := r.connectOnly(testHostNQN)
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN}
	bad := []struct {
		name string
		mod  func(c nvme.Command)
	}{
		{"secp", func(c nvme.Command) { c[43] = 0xea }},
		{"spsp0", func(c nvme.Command) { c[41] = 2 }},
		{"spsp1", func(c nvme.Command) { c[42] = 0 }},
		{"zero length", func(c nvme.Command) { c.SetAuth(0) }},
		{"too long", func(c nvme.Command) { c.SetAuth(MaxAuthLength + 1) }},
	}
	for _, b := range bad {
		for _, fc := range []uint8{nvme.FCTypeAuthSend, nvme.FCTypeAuthRecv} {
			c := authCmd(fc, 12, 64)
			b.mod(c)
			if st := h.submit(c, make([]byte, MaxAuthLength+1)).Status(); st != nvme.StatusInvalidField.WithDNR() {
				t.Errorf("%s fctype %d: %v", b.name, fc, st)
			}
		}
	}
	// After all that, a proper transaction still succeeds.
	a.key, a.tid = testSecret(t, dhchap.SHA256, 1), 9
	if fail, err := a.run(); fail != 0 || err != nil {
		t.Fatalf("failure %d, %v", fail, err)
	}
}

// A queue that does not authenticate in time is disconnected; a stalled
// re-authentication does not disconnect an authenticated queue.
func TestAuthTimeout(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	// Long enough for the second queue's transaction under -race on a loaded machine (100 ms
	// was not), short beside the waits below.
	const timeout = time.Second
	r := authRig(t, HostAuth{Key: key}, AuthPolicy{}, Options{AuthTimeout: timeout})
	silent, _ := r.connectOnly(testHostNQN)
	done, _ := r.connectOnly(testHostNQN)
	a := &authHost{h: done, hostNQN: testHostNQN, subNQN: testNQN, key: key}
	if fail, err := a.run(); fail != 0 || err != nil {
		t.Fatalf("failure %d, %v", fail, err)
	}
	// Start a re-authentication and stall it.
	buf := make([]byte, 128)
	a.send(buf[:nvme.PutAuthNegotiate(buf, 5, []byte{1}, []byte{0})])
	select {
	case <-silent.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("unauthenticated queue still connected")
	}
	time.Sleep(3 * timeout)
	select {
	case <-done.lq.Disconnected():
		t.Fatal("authenticated queue disconnected by a stalled re-authentication")
	default:
	}
	done.propGet(nvme.PropVS, false)
	if n := r.tgt.Stats().AuthTimeouts; n != 1 {
		t.Fatalf("%d timeouts, want 1", n)
	}
}

// TestAuthTimeoutNotExtended: a queue that has not authenticated cannot
// hold off its deadline by Negotiating again and again (it would hold its
// place under the host cap for ever); its deadline runs from its Connect.
func TestAuthTimeoutNotExtended(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	const timeout = 300 * time.Millisecond
	r := authRig(t, HostAuth{Key: key}, AuthPolicy{}, Options{AuthTimeout: timeout})
	h, _ := r.connectOnly(testHostNQN)
	h.mayClose = true
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: key}
	buf := make([]byte, 128)
	start := time.Now()
	for time.Since(start) < 5*timeout {
		select {
		case <-h.lq.Disconnected():
			if el := time.Since(start); el > 3*timeout {
				t.Fatalf("disconnected after %v; Negotiates extended the %v deadline", el, timeout)
			}
			return
		default:
		}
		a.send(buf[:nvme.PutAuthNegotiate(buf, 1, []byte{1}, []byte{0})])
		time.Sleep(timeout / 4)
	}
	t.Fatalf("a queue that Negotiates every %v is still connected after %v", timeout/4, 5*timeout)
}

// A rotated key: the next transaction takes the new key and refuses the old.
func TestAuthKeyRotation(t *testing.T) {
	old, neu := testSecret(t, dhchap.SHA256, 1), testSecret(t, dhchap.SHA384, 2)
	r := authRig(t, HostAuth{Key: old}, AuthPolicy{}, Options{})
	h1, _ := r.connectOnly(testHostNQN)
	if fail, err := (&authHost{h: h1, hostNQN: testHostNQN, subNQN: testNQN, key: old}).run(); fail != 0 || err != nil {
		t.Fatalf("old key before rotation: %d %v", fail, err)
	}
	r.sub.SetHostAuth(testHostNQN, HostAuth{Key: neu})
	h2, _ := r.connectOnly(testHostNQN)
	if fail, _ := (&authHost{h: h2, hostNQN: testHostNQN, subNQN: testNQN, key: old}).run(); fail != nvme.AuthFailFailed {
		t.Fatalf("old key after rotation: failure %d", fail)
	}
	h3, _ := r.connectOnly(testHostNQN)
	if fail, err := (&authHost{h: h3, hostNQN: testHostNQN, subNQN: testNQN, key: neu}).run(); fail != 0 || err != nil {
		t.Fatalf("new key: %d %v", fail, err)
	}
	// The queue authenticated before the rotation keeps working.
	h1.propGet(nvme.PropVS, false)
	// Removing the key: new queues are not asked to authenticate.
	r.sub.SetHostAuth(testHostNQN, HostAuth{})
	if _, dw0 := r.connectOnly(testHostNQN); dw0&nvme.ConnectAuthATR != 0 {
		t.Fatal("ATR after the key was removed")
	}
}

// Keep-alive does not expire while the admin queue authenticates: the host
// cannot send Keep Alive yet, and its DH may take longer than KATO (seen
// with ffdhe4096 and a 5 s KATO in the emulated guest).
func TestAuthOutlastsKATO(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	r := authRig(t, HostAuth{Key: key}, AuthPolicy{}, Options{})
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 1000), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	time.Sleep(2500 * time.Millisecond) // more than KATO (1 s)
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: key}
	if fail, err := a.run(); fail != 0 || err != nil {
		t.Fatalf("after waiting past KATO: failure %d, %v", fail, err)
	}
	if n := r.tgt.Stats().KAExpired; n != 0 {
		t.Fatalf("keep-alive expired %d times during authentication", n)
	}
}

// TestAuthOffTransportGoroutine: the modular exponentiations of a DH
// exchange (making the controller's key for the Challenge, the shared
// secret from the Reply) do not run on the goroutine that executes the
// command, which is a poller serving every host's I/O: Execute returns
// while they run, and the command completes when they are done.
func TestAuthOffTransportGoroutine(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	r := authRig(t, HostAuth{Key: key}, AuthPolicy{Groups: []dhchap.Group{dhchap.FFDHE2048}}, Options{})
	h, _ := r.connectOnly(testHostNQN)
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	authComputeHook = func() {
		entered <- struct{}{}
		<-release
	}
	t.Cleanup(func() {
		close(release)
		authComputeHook = nil
	})
	executed := make(chan uint8, 16) // the FCType of each command Execute returned from
	h.lq.executed = func(r *Request) { executed <- r.Cmd.FCType() }
	a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: key}
	done := make(chan error, 1)
	go func() {
		fail, err := a.run()
		if err == nil && fail != 0 {
			err = fmt.Errorf("failure %d", fail)
		}
		done <- err
	}()
	for _, step := range []struct {
		name string
		cmd  uint8
	}{{"challenge", nvme.FCTypeAuthRecv}, {"reply", nvme.FCTypeAuthSend}} {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no DH computation", step.name)
		}
		timeout := time.After(2 * time.Second)
	wait:
		for {
			select {
			case fc := <-executed:
				if fc == step.cmd {
					break wait
				}
			case <-timeout:
				t.Fatalf("%s: Execute did not return while the DH computation ran: it runs on the transport's goroutine", step.name)
			}
		}
		release <- struct{}{}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("authentication did not finish")
	}
}

// waitDisconnected fails the test unless the target disconnects h in time.
func waitDisconnected(t *testing.T, h *host, what string) {
	t.Helper()
	select {
	case <-h.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the queue is still connected", what)
	}
}

// TestAuthFailureEndsQueue: a transaction that fails, and any message out of
// step, ends the transaction with a failure and the queue of a host that
// must authenticate is disconnected, authenticated before or not: it is not
// left open for retries, nor, after a stray Failure2 or Receive, left
// unauthenticated with no deadline (while keep-alive waited for it for ever).
func TestAuthFailureEndsQueue(t *testing.T) {
	key := testSecret(t, dhchap.SHA256, 1)
	buf := make([]byte, 256)
	cases := []struct {
		name          string
		authenticated bool // authenticate first
		// do sends what ends the transaction; it returns the Failure1
		// explanation received, if any.
		do   func(a *authHost) (uint8, bool)
		want uint8
	}{
		{"wrong key", false, func(a *authHost) (uint8, bool) {
			a.key = testSecret(t, dhchap.SHA256, 9)
			fail, _ := a.run()
			return fail, true
		}, nvme.AuthFailFailed},
		{"reply before negotiate", false, func(a *authHost) (uint8, bool) {
			a.send(buf[:nvme.PutAuthReply(buf, 0, 0, make([]byte, 32), nil, nil)])
			return nvme.AuthMessage(a.receive()).FailureExplanation(), true
		}, nvme.AuthFailIncorrectMessage},
		{"receive with nothing to say", false, func(a *authHost) (uint8, bool) {
			return nvme.AuthMessage(a.receive()).FailureExplanation(), true
		}, nvme.AuthFailIncorrectMessage},
		{"stray Failure2 when authenticated", true, func(a *authHost) (uint8, bool) {
			a.send(buf[:nvme.PutAuthFailure(buf, nvme.AuthIDFailure2, a.tid, nvme.AuthFailFailed)])
			return 0, false
		}, 0},
		{"stray Receive when authenticated", true, func(a *authHost) (uint8, bool) {
			return nvme.AuthMessage(a.receive()).FailureExplanation(), true
		}, nvme.AuthFailIncorrectMessage},
		{"re-authentication with a wrong key", true, func(a *authHost) (uint8, bool) {
			a.key, a.tid = testSecret(t, dhchap.SHA256, 9), 7
			fail, _ := a.run()
			return fail, true
		}, nvme.AuthFailFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := authRig(t, HostAuth{Key: key}, AuthPolicy{}, Options{})
			h := r.dial(0, 32)
			h.mustOK(connectCmd(0, 31, 1000), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			a := &authHost{h: h, hostNQN: testHostNQN, subNQN: testNQN, key: key}
			if c.authenticated {
				if fail, err := a.run(); fail != 0 || err != nil {
					t.Fatalf("authenticate: %d %v", fail, err)
				}
			}
			if fail, got := c.do(a); got && fail != c.want {
				t.Fatalf("failure explanation %d, want %d", fail, c.want)
			}
			h.mayClose = true
			get := newCmd(nvme.OpFabrics, 3)
			get.SetFCType(nvme.FCTypePropertyGet)
			get.SetProperty(1, nvme.PropCAP, 0)
			if st := h.submit(get, nil).Status(); st != 0 && st != nvme.StatusAuthRequired.WithDNR() {
				t.Fatalf("after a failed transaction: %v", st)
			}
			waitDisconnected(t, h, "after a failed transaction")
			if r.tgt.Stats().AuthFailed == 0 {
				t.Fatalf("stats %+v", r.tgt.Stats())
			}
		})
	}
}
