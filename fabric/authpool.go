package fabric

import (
	"runtime"
	"sync"
)

// authPool runs the steps of DH-HMAC-CHAP that take milliseconds, a
// modular exponentiation each (the controller's DH key for a Challenge, the
// shared secret from a Reply: about 29 ms apiece for ffdhe8192), off the
// goroutine that executes the command. That goroutine is a poller serving
// every host's I/O, and any peer that reaches the port can start a
// transaction without a key.
//
// At most workers jobs run at once on the target and at most one per host
// address; addresses take turns; their threads have the lowest priority. A peer that floods the port with
// Negotiates so queues behind itself, holding at most one worker, and an
// address may have at most perAddr jobs waiting or running (each queue has at most
// one: queueAuth.busy).
type authPool struct {
	workers, perAddr int

	mu      sync.Mutex
	running int
	// ready are the addresses with a job to run and none running, in turn.
	ready []string
	lines map[string]*authLine
}

// authLine is one address's jobs; busy while one of them runs.
type authLine struct {
	jobs []func()
	busy bool
}

// DefaultAuthWorkers is how many DH computations run at once: half the
// CPUs, at least one, so that a flood of authentications never takes every
// CPU from the pollers.
func DefaultAuthWorkers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func newAuthPool(workers, perAddr int) *authPool {
	return &authPool{workers: workers, perAddr: perAddr, lines: map[string]*authLine{}}
}

// submit queues fn for addr. It reports false, running nothing, when addr
// has perAddr jobs waiting or running already.
func (p *authPool) submit(addr string, fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[addr]
	if l == nil {
		l = &authLine{}
		p.lines[addr] = l
	}
	n := len(l.jobs)
	if l.busy {
		n++
	}
	if n >= p.perAddr {
		return false
	}
	l.jobs = append(l.jobs, fn)
	if !l.busy && len(l.jobs) == 1 {
		p.ready = append(p.ready, addr)
	}
	if p.running < p.workers {
		p.running++
		go p.work()
	}
	return true
}

// work runs jobs, one address's at a time, until none is ready, on a
// thread of the lowest priority (lowerPriority).
func (p *authPool) work() {
	lowerPriority()
	p.mu.Lock()
	for len(p.ready) > 0 {
		addr := p.ready[0]
		p.ready = p.ready[1:]
		l := p.lines[addr]
		fn := l.jobs[0]
		l.jobs = l.jobs[1:]
		l.busy = true
		p.mu.Unlock()
		fn()
		p.mu.Lock()
		l.busy = false
		if len(l.jobs) > 0 {
			p.ready = append(p.ready, addr) // behind the others that wait
		} else {
			delete(p.lines, addr)
		}
	}
	p.running--
	p.mu.Unlock()
}
