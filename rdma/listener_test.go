package rdma

import "testing"

// TestCheckQueuesAllocs: the listener's periodic check hands each poller
// its check without allocating. It runs every few seconds for the life of
// the target; a method value made per call (p.e.checkStuck) was a 16-byte
// closure per poller per tick.
func TestCheckQueuesAllocs(t *testing.T) {
	const runs = 100
	newPoller := func() *poller {
		p := &poller{ctl: make(chan func(), 4*runs), e: &engine{}}
		p.checkStuck = p.e.checkStuck
		return p
	}
	p1, p2 := newPoller(), newPoller()
	l := &listener{conns: map[uintptr]*cmConn{1: {p: p1}, 2: {p: p1}, 3: {p: p2}}}
	if n := testing.AllocsPerRun(runs, l.checkQueues); n != 0 {
		t.Errorf("checkQueues: %v allocations per call, want 0", n)
	}
	// One check per poller per call, however many queues it has.
	if got, want := len(p1.ctl)+len(p2.ctl), 2*(runs+1); got != want {
		t.Errorf("%d checks handed to the pollers over %d calls, want %d", got, runs+1, want)
	}
}
