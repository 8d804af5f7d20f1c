package fabric

import (
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// In-band authentication with DH-HMAC-CHAP (base 2.0 §8.13, NVMe-oF
// Authentication Send/Receive), in the manner of nvmet's
// fabrics-cmd-auth.c: a queue whose host has a key is told so in its
// Connect response (AUTHREQ.ATR) and takes nothing but Authentication
// Send/Receive until a transaction succeeds. The Linux host authenticates
// the admin queue and then every I/O queue, one transaction each.

// HostAuth is a host's DH-HMAC-CHAP secrets on one subsystem.
type HostAuth struct {
	// Key is the host's secret: set, the host must authenticate.
	Key dhchap.Secret
	// CtrlKey is the controller's secret, for hosts that authenticate the
	// controller in turn (bidirectional); zero: such a host is refused.
	CtrlKey dhchap.Secret
}

// Required reports whether a host with these secrets must authenticate.
func (a HostAuth) Required() bool { return !a.Key.IsZero() }

// AuthPolicy is what a subsystem lets a transaction use, most preferred
// first: the controller picks the first the host offers.
type AuthPolicy struct {
	Hashes []dhchap.Hash
	Groups []dhchap.Group
}

// DefaultAuthPolicy allows every hash and group; it prefers SHA-256 and
// ffdhe2048, the cheapest with a DH exchange, so that a recorded
// transaction does not give away a value to attack the secret offline.
var DefaultAuthPolicy = AuthPolicy{Hashes: dhchap.PreferredHashes, Groups: dhchap.PreferredGroups}

// DefaultAuthTimeout bounds an authentication: a queue not authenticated
// this long after its Connect (or a Negotiate) is disconnected; a stalled
// re-authentication of an authenticated queue is abandoned.
const DefaultAuthTimeout = 30 * time.Second

// MaxAuthLength bounds Authentication Send/Receive data. The largest
// message a host sends with one protocol descriptor is a Reply with
// SHA-512 and ffdhe8192, 1,168 bytes; the Linux host receives into 4 KiB.
const MaxAuthLength = 8192

// authComputeHook, set by tests, runs before each DH computation.
var authComputeHook func()

// authStep is where a queue's transaction stands: what the controller
// waits for (a Send) or has to say (a Receive).
type authStep uint8

const (
	authIdle          authStep = iota // no transaction: a Negotiate starts one
	authSendChallenge                 // Receive gets the Challenge
	authWaitReply                     // Send brings the Reply
	authSendSuccess1                  // Receive gets Success1
	authWaitSuccess2                  // Send brings Success2 (bidirectional)
	authSendFailure1                  // Receive gets Failure1
)

// queueAuth is one queue's authentication state.
type queueAuth struct {
	mu     sync.Mutex
	step   authStep
	reason uint8 // Failure1's Reason Code Explanation
	tid    uint16
	keys   HostAuth
	hash   dhchap.Hash
	group  dhchap.Group
	dh     *dhchap.Key
	ks     []byte // session key Ks
	c1, c2 []byte
	s1, s2 uint32
	timer  *time.Timer
	// busy: a DH computation for this queue is on the target's authPool;
	// a message meanwhile is out of step.
	busy bool
	// failed: a transaction failed; the queue is disconnected after
	// authFailLinger (authFailed).
	failed atomic.Bool
	linger *time.Timer
}

// authFailLinger is how long a queue whose transaction failed stays
// connected before the target disconnects it: time for the host to read
// the Failure1 and give the queue up itself, as the Linux host does.
const authFailLinger = time.Second

// requireAuth makes q take only authentication commands until it is
// authenticated, and starts the clock on it.
func (q *Queue) requireAuth(keys HostAuth) {
	a := &queueAuth{keys: keys}
	a.timer = time.AfterFunc(q.t.opts.AuthTimeout, func() { q.authTimedOut(a) })
	q.auth.Store(a)
}

// stopTimers stops the transaction's deadline and a pending disconnect.
func (a *queueAuth) stopTimers() {
	a.timer.Stop()
	a.mu.Lock()
	if a.linger != nil {
		a.linger.Stop()
	}
	a.mu.Unlock()
}

// authenticating reports whether q is in its first authentication, within
// its deadline: it has not authenticated, and no transaction failed.
func (q *Queue) authenticating() bool {
	a := q.auth.Load()
	return a != nil && !q.authDone.Load() && !a.failed.Load()
}

// authorized reports whether q may run commands other than Connect and
// Authentication Send/Receive.
func (q *Queue) authorized() bool { return q.auth.Load() == nil || q.authDone.Load() }

// authTimedOut: a queue that never authenticated is disconnected; a stalled
// re-authentication is abandoned (the queue stays authenticated).
func (q *Queue) authTimedOut(a *queueAuth) {
	a.mu.Lock()
	a.reset()
	a.mu.Unlock()
	if !q.authDone.Load() {
		q.t.stats.authTimeouts.Add(1)
		log := q.t.log
		if q.ctrl.Load() != nil {
			log = q.log // written before ctrl was published
		}
		log.Warn("authentication not completed in time: disconnecting", "remote", q.hint.Remote, "timeout", q.t.opts.AuthTimeout)
		q.conn.Disconnect()
	}
}

// reset ends the transaction and forgets its secrets.
func (a *queueAuth) reset() {
	a.step = authIdle
	a.forgetDH()
	a.c2, a.s1, a.s2 = nil, 0, 0
}

// forgetDH drops what only R1 and R2 need: the DH key, Ks and C1.
func (a *queueAuth) forgetDH() {
	clear(a.ks)
	a.dh, a.ks, a.c1 = nil, nil, nil
}

// fail ends the transaction with a Failure1 to send.
func (a *queueAuth) fail(reason uint8) {
	a.reset()
	a.step, a.reason = authSendFailure1, reason
}

func (q *Queue) parseAuth(r *Request, send bool) nvme.Status {
	if q.ctrl.Load() == nil {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	if r.Cmd.AuthSECP() != nvme.SECPDHCHAP {
		return r.invalidField(nvme.ErrLocAuthSECP)
	}
	if s0, s1 := r.Cmd.AuthSPSP(); s0 != nvme.AuthSPSP {
		return r.invalidField(nvme.ErrLocAuthSPSP0)
	} else if s1 != nvme.AuthSPSP {
		return r.invalidField(nvme.ErrLocAuthSPSP1)
	}
	n := r.Cmd.AuthLen()
	if n == 0 || n > MaxAuthLength || (send && n < nvme.AuthFailureSize) {
		return r.invalidField(nvme.ErrLocAuthLen)
	}
	r.DataLen = n
	if send {
		r.Dir = DirHostToCtrl
		r.handle = handleAuthSend
	} else {
		r.Dir = DirCtrlToHost
		r.handle = handleAuthReceive
	}
	return nvme.StatusSuccess
}

func handleAuthSend(r *Request) nvme.Status {
	q := r.q
	a := q.auth.Load()
	if a == nil {
		// This host has no key here: nothing to authenticate with.
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	msg := make([]byte, r.DataLen)
	r.copyFromData(msg)
	m := nvme.AuthMessage(msg)
	c := q.ctrl.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.busy:
		// The host sends nothing while the controller computes.
		a.fail(nvme.AuthFailIncorrectMessage)
	case m.Type() == nvme.AuthTypeCommon && m.ID() == nvme.AuthIDNegotiate:
		// Starts a transaction, or restarts one (re-authentication). A
		// queue not yet authenticated keeps the deadline of its Connect:
		// Negotiating again must not hold it (and its place) for ever.
		a.reset()
		a.tid = m.TID()
		if q.authDone.Load() {
			a.timer.Reset(q.t.opts.AuthTimeout)
		}
		a.negotiate(q, c, nvme.AuthNegotiate(msg))
	case m.Type() == nvme.AuthTypeCommon && m.ID() == nvme.AuthIDFailure2:
		// The host refuses us (a wrong controller response, say), or sends
		// it out of the blue: either way the transaction failed.
		a.reset()
		q.authFailed(c, a, "host sent Failure2", m.FailureExplanation())
		return nvme.StatusSuccess
	case m.Type() != nvme.AuthTypeDHCHAP:
		a.fail(nvme.AuthFailIncorrectMessage)
	case m.TID() != a.tid && (a.step == authWaitReply || a.step == authWaitSuccess2):
		a.fail(nvme.AuthFailIncorrectPayload)
	case m.ID() == nvme.AuthIDReply && a.step == authWaitReply:
		if a.group != dhchap.Null {
			// The shared secret is a modular exponentiation.
			return q.authAsync(r, a, authWaitReply, func() nvme.Status {
				a.reply(q, c, nvme.AuthReply(msg))
				if a.step == authSendFailure1 {
					q.authFailed(c, a, "refused", a.reason)
				}
				return nvme.StatusSuccess
			})
		}
		a.reply(q, c, nvme.AuthReply(msg))
	case m.ID() == nvme.AuthIDSuccess2 && a.step == authWaitSuccess2:
		a.reset()
		q.authSucceeded(c, a, true)
	default:
		a.fail(nvme.AuthFailIncorrectMessage)
	}
	if a.step == authSendFailure1 {
		q.authFailed(c, a, "refused", a.reason)
	}
	return nvme.StatusSuccess
}

// authAsync runs fn, the rest of a command that makes a DH computation, on
// the target's authPool, and completes r with its status; a.mu is held, and
// fn runs with it held. fn runs only if the transaction is still at step
// when its turn comes (a timeout may have ended it meanwhile). An address
// with too many computations waiting has its transaction failed instead.
func (q *Queue) authAsync(r *Request, a *queueAuth, step authStep, fn func() nvme.Status) nvme.Status {
	a.busy = true
	ok := q.t.authPool.submit(hostOf(q.hint.Remote), func() {
		a.mu.Lock()
		a.busy = false
		var st nvme.Status
		switch {
		case q.isGone():
			st = nvme.StatusAbortSQDeleted
		case a.step != step:
			st = nvme.StatusCommandSequenceError.WithDNR()
		default:
			st = fn()
		}
		a.mu.Unlock()
		r.complete(st)
	})
	if ok {
		return statusPending
	}
	a.busy = false
	a.fail(nvme.AuthFailFailed)
	q.authFailed(q.ctrl.Load(), a, "too many authentications waiting from this address", a.reason)
	if r.Dir == DirCtrlToHost {
		return a.receive(r, q, q.ctrl.Load())
	}
	return nvme.StatusSuccess
}

// negotiate picks the hash and DH group: the subsystem's first that the
// host offers.
func (a *queueAuth) negotiate(q *Queue, c *Controller, m nvme.AuthNegotiate) {
	if !m.Valid() {
		a.fail(nvme.AuthFailIncorrectPayload)
		return
	}
	if m.SCC() != 0 {
		a.fail(nvme.AuthFailConcatMismatch) // no secure channel (TLS) here
		return
	}
	// The keys now in force: a rotation takes effect at the next
	// transaction.
	if keys, ok := c.s.hostAuth(c.hostNQN); ok && keys.Required() {
		a.keys = keys
	}
	pol := c.s.authPolicy()
	for i := range int(m.NAPD()) {
		id, hashes, groups, ok := m.Protocol(i)
		if !ok {
			a.fail(nvme.AuthFailIncorrectPayload)
			return
		}
		if id != nvme.AuthIDDHCHAP {
			continue
		}
		h, hok := firstOffered(pol.Hashes, hashes)
		if !hok {
			a.fail(nvme.AuthFailHashUnusable)
			return
		}
		g, gok := firstOffered(pol.Groups, groups)
		if !gok {
			a.fail(nvme.AuthFailDHGroupUnusable)
			return
		}
		a.hash, a.group, a.step = h, g, authSendChallenge
		return
	}
	a.fail(nvme.AuthFailNotUsable)
}

func firstOffered[T ~uint8](ours []T, offered []byte) (T, bool) {
	for _, v := range ours {
		if slices.Contains(offered, byte(v)) {
			return v, true
		}
	}
	return 0, false
}

// reply checks the host's response R1 and takes its challenge C2.
func (a *queueAuth) reply(q *Queue, c *Controller, m nvme.AuthReply) {
	if !m.Valid() || m.HL() != a.hash.Size() {
		a.fail(nvme.AuthFailIncorrectPayload)
		return
	}
	challenge := a.c1
	if a.group != dhchap.Null {
		if int(m.DHVLen()) != a.group.Size() {
			a.fail(nvme.AuthFailIncorrectPayload)
			return
		}
		if authComputeHook != nil {
			authComputeHook()
		}
		ks, err := a.dh.Shared(m.DHValue())
		if err != nil {
			a.fail(nvme.AuthFailDHGroupUnusable)
			return
		}
		a.ks = ks
		challenge = dhchap.Augment(a.hash, ks, a.c1)
	} else if m.DHVLen() != 0 {
		a.fail(nvme.AuthFailIncorrectPayload)
		return
	}
	want := dhchap.HostResponse(a.hash, a.keys.Key.Transform(c.hostNQN), challenge, a.s1, a.tid, c.hostNQN, c.s.nqn)
	if !dhchap.Equal(m.Response(), want) {
		a.fail(nvme.AuthFailFailed)
		return
	}
	// Sequence number 0 with a challenge asks for no controller
	// authentication (the challenge only seeds a TLS PSK).
	if m.CValid() && m.Seq() != 0 {
		if a.keys.CtrlKey.IsZero() {
			// The host wants to authenticate us and we have no key to.
			a.fail(nvme.AuthFailFailed)
			return
		}
		a.c2, a.s2 = slices.Clone(m.C2()), m.Seq()
	} else {
		q.authSucceeded(c, a, false)
	}
	a.step = authSendSuccess1
}

// authSucceeded marks q authenticated; the transaction's clock stops.
func (q *Queue) authSucceeded(c *Controller, a *queueAuth, bidirectional bool) {
	a.timer.Stop()
	if q.authDone.Load() {
		return // a re-authentication
	}
	if !q.claimAuthenticated(c.hostNQN) {
		// Authenticated, but the host has its cap of queues already.
		c.log.Warn("authenticated queue past the host's connection cap: disconnecting", "qid", q.qid,
			"max_connections_per_host", q.t.opts.MaxConnectionsPerHost, "remote", q.hint.Remote)
		q.conn.Disconnect()
		return
	}
	q.authDone.Store(true)
	q.t.stats.authOK.Add(1)
	if q.qid == 0 {
		c.log.Info("host authenticated", "hash", a.hash.String(), "dhgroup", a.group.String(), "bidirectional", bidirectional)
	}
}

// authFailed: a transaction failed. The queue is not authenticated, and
// is disconnected after authFailLinger, whether it had authenticated before
// or not: it is not left open for retries, nor, after a stray message,
// unauthenticated with no deadline. a.mu is held.
func (q *Queue) authFailed(c *Controller, a *queueAuth, why string, reason uint8) {
	q.authDone.Store(false)
	q.t.stats.authFailed.Add(1)
	q.t.authFailLog.log(c.log, slog.LevelWarn, "authentication failed", "why", why, "reason", reason, "remote", q.hint.Remote)
	if a.failed.Swap(true) {
		return
	}
	a.timer.Stop()
	a.linger = time.AfterFunc(authFailLinger, q.conn.Disconnect)
}

// isGone reports whether the transport destroyed q.
func (q *Queue) isGone() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.gone
}

func handleAuthReceive(r *Request) nvme.Status {
	q := r.q
	a := q.auth.Load()
	if a == nil {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	c := q.ctrl.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy {
		a.fail(nvme.AuthFailIncorrectMessage)
		q.authFailed(c, a, "receive while computing", a.reason)
	} else if a.step == authSendChallenge && a.group != dhchap.Null {
		// The controller's DH key is a modular exponentiation.
		return q.authAsync(r, a, authSendChallenge, func() nvme.Status { return a.receive(r, q, c) })
	}
	return a.receive(r, q, c)
}

// receive answers an Authentication Receive with what the step has to say.
// a.mu is held.
func (a *queueAuth) receive(r *Request, q *Queue, c *Controller) nvme.Status {
	buf := make([]byte, MaxAuthLength)
	var n int
	switch a.step {
	case authSendChallenge:
		n = a.challenge(buf)
		if n == 0 {
			a.fail(nvme.AuthFailFailed)
			q.authFailed(c, a, "DH key", a.reason)
			return nvme.StatusInternalError
		}
		if n > int(r.DataLen) {
			// The host's buffer is too small for our Challenge.
			a.fail(nvme.AuthFailIncorrectPayload)
			q.authFailed(c, a, "allocation length too small", a.reason)
			return r.invalidField(nvme.ErrLocAuthLen)
		}
		a.step = authWaitReply
	case authSendSuccess1:
		var r2 []byte
		if a.c2 != nil {
			ch := a.c2
			if a.group != dhchap.Null {
				ch = dhchap.Augment(a.hash, a.ks, a.c2)
			}
			r2 = dhchap.ControllerResponse(a.hash, a.keys.CtrlKey.Transform(c.s.nqn), ch, a.s2, a.tid, c.hostNQN, c.s.nqn)
		}
		n = nvme.PutAuthSuccess1(buf, a.tid, a.hash.Size(), r2)
		if r2 != nil {
			a.step = authWaitSuccess2
			a.forgetDH()
		} else {
			a.reset()
		}
	case authSendFailure1:
		n = nvme.PutAuthFailure(buf, nvme.AuthIDFailure1, a.tid, a.reason)
		a.reset()
	default:
		// Nothing to say: the host is out of step.
		n = nvme.PutAuthFailure(buf, nvme.AuthIDFailure1, a.tid, nvme.AuthFailIncorrectMessage)
		a.reset()
		q.authFailed(c, a, "receive out of step", nvme.AuthFailIncorrectMessage)
	}
	r.fillData(buf[:min(n, int(r.DataLen))])
	return nvme.StatusSuccess
}

// challenge writes the Challenge: C1, S1 and, with a DH group, a fresh
// public value. 0 if no DH key could be made.
func (a *queueAuth) challenge(buf []byte) int {
	a.c1 = make([]byte, a.hash.Size())
	var s [4]byte
	rand.Read(a.c1)
	for a.s1 == 0 {
		rand.Read(s[:])
		a.s1 = binary.LittleEndian.Uint32(s[:]) // 0 is not a sequence number
	}
	var pub []byte
	if a.group != dhchap.Null {
		if authComputeHook != nil {
			authComputeHook()
		}
		k, err := a.group.NewKey(nil)
		if err != nil {
			return 0
		}
		a.dh, pub = k, k.Public()
	}
	return nvme.PutAuthChallenge(buf, a.tid, uint8(a.hash), uint8(a.group), a.s1, a.c1, pub)
}
