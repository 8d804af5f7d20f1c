package fabric

import "sync"

// nsWorkers run a namespace's blocking backend calls (file and block I/O
// not on a poller's io_uring, Write Zeroes, Dataset Management) off the
// transport's pollers. A worker starts when a command waits and none is
// idle, up to max, and stays until the namespace closes: a namespace that
// never had such a command has no goroutine and no queue, so a target
// with a thousand file namespaces served through io_uring keeps none.
type nsWorkers struct {
	max int

	mu   sync.Mutex
	cond sync.Cond // on mu: a command waits, or stop
	// waiting[head:] are the commands waiting, oldest first.
	waiting []*Request
	head    int
	started int
	// idle counts workers asleep on cond that no submit has woken yet.
	idle    int
	stopped bool
	wg      sync.WaitGroup
}

func newNSWorkers(max int) *nsWorkers {
	w := &nsWorkers{max: max}
	w.cond.L = &w.mu
	return w
}

// submit queues r, which has r.io set, for a worker. It reports false,
// queueing nothing, when workQueueDepth commands wait already.
func (w *nsWorkers) submit(r *Request) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || len(w.waiting)-w.head >= workQueueDepth {
		return false
	}
	if len(w.waiting) == cap(w.waiting) && w.head > 0 {
		// Reuse the room of those taken rather than grow.
		n := copy(w.waiting, w.waiting[w.head:])
		clear(w.waiting[n:])
		w.waiting, w.head = w.waiting[:n], 0
	}
	w.waiting = append(w.waiting, r)
	switch {
	case w.idle > 0:
		w.idle--
		w.cond.Signal()
	case w.started < w.max:
		w.started++
		w.wg.Add(1)
		go w.run()
	}
	return true
}

// run executes waiting commands until stop, once none is left.
func (w *nsWorkers) run() {
	defer w.wg.Done()
	w.mu.Lock()
	for {
		for w.head == len(w.waiting) {
			if w.stopped {
				w.mu.Unlock()
				return
			}
			w.idle++
			w.cond.Wait()
		}
		r := w.waiting[w.head]
		w.waiting[w.head] = nil
		if w.head++; w.head == len(w.waiting) {
			w.waiting, w.head = w.waiting[:0], 0
		}
		w.mu.Unlock()
		r.complete(r.io(r))
		w.mu.Lock()
	}
}

// queued is how many commands wait for a worker.
func (w *nsWorkers) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting) - w.head
}

// stop lets the workers finish the waiting commands and waits for them to
// end. Nothing is queued after it.
func (w *nsWorkers) stop() {
	w.mu.Lock()
	w.stopped = true
	w.cond.Broadcast()
	w.mu.Unlock()
	w.wg.Wait()
}
