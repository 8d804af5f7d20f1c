package fabric

import (
	"fmt"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// hostQueues counts the queues each host NQN has bound by Connect, admin
// and I/O, over all its controllers and ports: Options.MaxConnectionsPerHost
// bounds them, so one host cannot take every queue a transport has room
// for (rdma.max_queues) from the others. The count is by host NQN, what
// the host asserts: hosts that share an address but not an NQN are
// counted apart.
type hostQueues struct {
	mu sync.Mutex
	n  map[string]int
}

// claimHost counts q against its host's cap, before a Connect binds q. Past
// the cap it refuses with Controller Busy, without DNR: the host may try
// again once some of its queues are gone (nvmet and SPDK answer a
// controller or queue they cannot allocate the same way).
func (q *Queue) claimHost(a *connectArgs) nvme.Status {
	t := q.t
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone || q.hostClaim != "" {
		return nvme.StatusSuccess
	}
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	if n := t.hosts.n[a.hostNQN]; n >= t.opts.MaxConnectionsPerHost {
		t.stats.hostLimit.Add(1)
		a.err = fmt.Errorf("host has %d connections, the most one host may have", n)
		return nvme.StatusConnectControllerBusy
	}
	if t.hosts.n == nil {
		t.hosts.n = map[string]int{}
	}
	t.hosts.n[a.hostNQN]++
	q.hostClaim = a.hostNQN
	return nvme.StatusSuccess
}

// releaseHost gives q's place under its host's cap back: when its Connect
// failed, or the queue is gone.
func (q *Queue) releaseHost() {
	q.mu.Lock()
	host := q.hostClaim
	q.hostClaim = ""
	q.mu.Unlock()
	if host == "" {
		return
	}
	t := q.t
	t.hosts.mu.Lock()
	if t.hosts.n[host]--; t.hosts.n[host] <= 0 {
		delete(t.hosts.n, host)
	}
	t.hosts.mu.Unlock()
}

// HostConnections reports how many queues host has connected.
func (t *Target) HostConnections(host string) int {
	t.hosts.mu.Lock()
	defer t.hosts.mu.Unlock()
	return t.hosts.n[host]
}
