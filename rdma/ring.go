package rdma

// ring is a fixed-capacity FIFO, allocated once. Requests waiting for a
// resource wait here, and only the head may take it, so no request starves.
type ring[T comparable] struct {
	buf  []T
	head int
	n    int
}

func newRing[T comparable](capacity int) ring[T] { return ring[T]{buf: make([]T, capacity)} }

func (r *ring[T]) len() int { return r.n }

// push appends v; it reports false when the ring is full.
func (r *ring[T]) push(v T) bool {
	if r.n == len(r.buf) {
		return false
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
	return true
}

func (r *ring[T]) peek() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	return r.buf[r.head], true
}

func (r *ring[T]) pop() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v, true
}

// removeIf drops every element for which drop reports true, keeping order.
func (r *ring[T]) removeIf(drop func(T) bool) {
	n := r.n
	for i := 0; i < n; i++ {
		v, _ := r.pop()
		if !drop(v) {
			r.push(v) // cannot fail: it puts back one it took
		}
	}
}
