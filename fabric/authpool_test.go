package fabric

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestAuthPool: jobs of one address run one at a time, addresses take
// turns, no more than the pool's workers run at once, and an address with
// its share waiting is refused.
func TestAuthPool(t *testing.T) {
	p := newAuthPool(2, 3)
	var (
		mu              sync.Mutex
		order           []string
		running, most   int
		runningA, mostA int
		gate            = make(chan struct{})
		wg              sync.WaitGroup
	)
	job := func(name, addr string) func() {
		wg.Add(1)
		return func() {
			defer wg.Done()
			mu.Lock()
			order = append(order, name)
			running++
			most = max(most, running)
			if addr == "a" {
				runningA++
				mostA = max(mostA, runningA)
			}
			mu.Unlock()
			<-gate
			mu.Lock()
			running--
			if addr == "a" {
				runningA--
			}
			mu.Unlock()
		}
	}
	for _, n := range []string{"a1", "a2", "a3"} {
		if !p.submit("a", job(n, "a")) {
			t.Fatalf("%s refused", n)
		}
	}
	// a1 runs; a2 and a3 wait: a third waiting job of a's is one too many.
	time.Sleep(50 * time.Millisecond)
	if p.submit("a", func() {}) {
		t.Fatal("a fourth job of one address accepted with three queued and running")
	}
	for _, n := range []string{"b1", "c1"} {
		if !p.submit(n[:1], job(n, n[:1])) {
			t.Fatalf("%s refused", n)
		}
	}
	for range 5 { // a1, a2, a3, b1, c1
		gate <- struct{}{}
	}
	wg.Wait()
	if most > 2 {
		t.Errorf("%d jobs ran at once on 2 workers", most)
	}
	if mostA > 1 {
		t.Errorf("%d jobs of one address ran at once", mostA)
	}
	// b1 and c1 came after a's three but run before a3: addresses take turns.
	if i, j := slices.Index(order, "c1"), slices.Index(order, "a3"); i > j {
		t.Errorf("order %v: c1 waited behind all of a's jobs", order)
	}
	// The workers finish just after their last job.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		running, lines, ready := p.running, len(p.lines), len(p.ready)
		p.mu.Unlock()
		if running == 0 && lines == 0 && ready == 0 {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("pool not empty after its jobs: running %d lines %d ready %d", running, lines, ready)
		}
	}
}
