package fabric

import (
	"fmt"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// hostQueues counts the queues each host has bound by Connect, admin and
// I/O, over all its controllers and ports: Options.MaxConnectionsPerHost
// bounds them, so one host cannot take every queue a transport has room
// for (rdma.max_queues) from the others.
//
// A host is known by the NQN it asserts, except one that has a key on some
// subsystem: its queues count against the address they came from
// (pending) until they authenticate, and move to the NQN then. A peer that
// cannot authenticate therefore cannot hold the places of the host it
// names, on any subsystem; it holds its own address's. (Hosts behind one
// address, NAT or containers sharing the host's network, share that
// address's places until they authenticate.)
type hostQueues struct {
	mu      sync.Mutex
	n       map[string]int // by host NQN
	pending map[string]int // by host address, queues not yet authenticated
}

// hostClaim is where a queue is counted: key in hostQueues.n, or in
// hostQueues.pending when pending.
type hostClaim struct {
	key     string
	pending bool
}

func (h *hostQueues) count(c hostClaim) *map[string]int {
	if c.pending {
		return &h.pending
	}
	return &h.n
}

// take counts c if its host is under max; h.mu is held.
func (h *hostQueues) take(c hostClaim, max int) (int, bool) {
	m := h.count(c)
	if n := (*m)[c.key]; n >= max {
		return n, false
	}
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[c.key]++
	return 0, true
}

// drop gives c's place back; h.mu is held.
func (h *hostQueues) drop(c hostClaim) {
	m := *h.count(c)
	if m[c.key]--; m[c.key] <= 0 {
		delete(m, c.key)
	}
}

// claimHost counts q against its host's cap, before a Connect binds q. Past
// the cap it refuses with Controller Busy, without DNR: the host may try
// again once some of its queues are gone (nvmet and SPDK answer a
// controller or queue they cannot allocate the same way).
func (q *Queue) claimHost(a *connectArgs) nvme.Status {
	t := q.t
	c := hostClaim{key: hostKey(a.hostNQN, q.hint.Remote)}
	if t.hasKey(a.hostNQN) {
		// Counted by address until this queue authenticates: on a
		// subsystem where the host has no key (discovery, say) for its
		// whole life. Otherwise a peer naming the host could fill its
		// places there.
		addr := hostOf(q.hint.Remote)
		if addr == "" {
			addr = "(unknown address)"
		}
		c = hostClaim{key: addr, pending: true}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	if q.hostClaim != (hostClaim{}) {
		return nvme.StatusSuccess
	}
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	max := t.opts.MaxConnectionsPerHost
	if c.pending {
		// Refused at once when the host already has its cap authenticated.
		if n := t.hosts.n[a.hostNQN]; n >= max {
			return q.refuseHost(a, fmt.Errorf("host has %d connections, the most one host may have", n))
		}
	}
	if n, ok := t.hosts.take(c, max); !ok {
		if c.pending {
			return q.refuseHost(a, fmt.Errorf("address %s has %d connections waiting to authenticate, the most one host may have", c.key, n))
		}
		return q.refuseHost(a, fmt.Errorf("host has %d connections, the most one host may have", n))
	}
	q.hostClaim = c
	return nvme.StatusSuccess
}

// hostKey is what a host is counted by: its NQN, or for a host that sends
// none (SPDK's tools), its address, so that every such host does not share
// one cap. An NQN holds no NUL byte (nvme.CheckNQN), so the two never meet.
func hostKey(hostNQN, remote string) string {
	if hostNQN != "" {
		return hostNQN
	}
	return "\x00" + hostOf(remote)
}

func (q *Queue) refuseHost(a *connectArgs, err error) nvme.Status {
	q.t.stats.hostLimit.Add(1)
	a.err = err
	return nvme.StatusConnectControllerBusy
}

// claimAuthenticated moves q's place from its address to hostNQN once q
// has authenticated. It reports false, leaving q counted where it was, when
// the host already has its cap of authenticated queues (the caller
// disconnects q).
func (q *Queue) claimAuthenticated(hostNQN string) bool {
	t := q.t
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.hostClaim.pending {
		return true
	}
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	to := hostClaim{key: hostNQN}
	if _, ok := t.hosts.take(to, t.opts.MaxConnectionsPerHost); !ok {
		t.stats.hostLimit.Add(1)
		return false
	}
	t.hosts.drop(q.hostClaim)
	q.hostClaim = to
	return true
}

// releaseHost gives q's place under its host's cap back: when its Connect
// failed, or the queue is gone.
func (q *Queue) releaseHost() {
	q.mu.Lock()
	c := q.hostClaim
	q.hostClaim = hostClaim{}
	q.mu.Unlock()
	if c == (hostClaim{}) {
		return
	}
	t := q.t
	t.hosts.mu.Lock()
	t.hosts.drop(c)
	t.hosts.mu.Unlock()
}

// HostConnections reports how many authenticated (or not required to
// authenticate) queues host has connected.
func (t *Target) HostConnections(host string) int {
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	return t.hosts.n[host]
}

// hostQueuesLeft is how many more queues host may connect.
func (t *Target) hostQueuesLeft(host string) int {
	return max(0, t.opts.MaxConnectionsPerHost-t.HostConnections(host))
}

// pendingConnections reports how many queues from address addr are
// waiting to authenticate.
func (t *Target) pendingConnections(addr string) int {
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	return t.hosts.pending[addr]
}

// hasKey reports whether host has a DH-HMAC-CHAP key on any subsystem,
// discovery included.
func (t *Target) hasKey(host string) bool {
	t.mu.Lock()
	subs := make([]*Subsystem, 0, len(t.subsystems)+1)
	for _, s := range t.subsystems {
		subs = append(subs, s)
	}
	subs = append(subs, t.discovery)
	t.mu.Unlock()
	for _, s := range subs {
		if k, ok := s.hostAuth(host); ok && k.Required() {
			return true
		}
	}
	return false
}
