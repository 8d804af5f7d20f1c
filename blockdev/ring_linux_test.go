package blockdev

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newTestRing(t *testing.T, entries int) *Ring {
	t.Helper()
	r, err := NewRing(entries)
	if err != nil {
		// io_uring is part of every kernel this product supports; a host that
		// forbids it must not make the test pass silently.
		t.Fatalf("NewRing: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// reapAll waits (briefly polling) until want completions have arrived.
func reapAll(t *testing.T, r *Ring, want int) []Completion {
	t.Helper()
	var got []Completion
	buf := make([]Completion, 8)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want {
		if err := r.Submit(); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		n := r.Reap(buf)
		got = append(got, buf[:n]...)
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after 10s", len(got), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if r.Pending() != 0 {
		t.Fatalf("Pending() = %d after every completion", r.Pending())
	}
	return got
}

// closeAsync runs d.Close on another goroutine and returns its result.
func closeAsync(d Device) <-chan error {
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	return closed
}

// wantClosed fails unless Close returns nil within 5 s; why says what it
// would be waiting for.
func wantClosed(t *testing.T, closed <-chan error, why string) {
	t.Helper()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting " + why)
	}
}

// The queued path must leave the same bytes as the blocking one, on every
// fd-backed kind, buffered or not, for any mix of sizes and flags.
func TestRingReadWrite(t *testing.T) {
	const size = 1 << 20
	for _, k := range kinds(t) {
		if k.name == "memory" {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			d := k.open(t, size, 512)
			q, ok := d.(Queuer)
			if !ok {
				t.Fatalf("%T does not implement Queuer", d)
			}
			r := newTestRing(t, 8)
			cases := []struct {
				off     int64
				n       int
				durable bool
			}{
				{0, 4096, false},
				{4096, 512, true},
				{64 << 10, 128 << 10, false},
				{size - 4096, 4096, true},
			}
			for i, c := range cases {
				p := mmapBuf(t, c.n)
				pattern(p, c.off, byte(i+1))
				if err := q.QueueWrite(r, p, c.off, c.durable, uint64(100+i)); err != nil {
					t.Fatalf("QueueWrite %d: %v", i, err)
				}
			}
			if err := q.QueueFlush(r, 99); err != nil {
				t.Fatalf("QueueFlush: %v", err)
			}
			tags := map[uint64]bool{}
			for _, c := range reapAll(t, r, len(cases)+1) {
				if c.Err != nil {
					t.Fatalf("completion %d: %v", c.Tag, c.Err)
				}
				tags[c.Tag] = true
			}
			if len(tags) != len(cases)+1 {
				t.Fatalf("tags %v: want %d distinct", tags, len(cases)+1)
			}
			for i, c := range cases {
				p := mmapBuf(t, c.n)
				if err := q.QueueRead(r, p, c.off, uint64(i)); err != nil {
					t.Fatalf("QueueRead %d: %v", i, err)
				}
				if got := reapAll(t, r, 1); got[0].Err != nil || got[0].Tag != uint64(i) {
					t.Fatalf("read completion %+v", got[0])
				}
				wantPattern(t, p, c.off, byte(i+1))
				// And the blocking path reads what the ring wrote.
				b := mmapBuf(t, c.n)
				if _, err := d.ReadAt(b, c.off); err != nil {
					t.Fatalf("ReadAt: %v", err)
				}
				wantPattern(t, b, c.off, byte(i+1))
			}
		})
	}
}

func TestRingRefusals(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name    string
		entries int
		queue   func(q Queuer, r *Ring) error
		want    error
	}{
		{"read past end", 4, func(q Queuer, r *Ring) error { return q.QueueRead(r, mmapBuf(t, 4096), size, 1) }, ErrOutOfRange},
		{"unaligned offset", 4, func(q Queuer, r *Ring) error { return q.QueueWrite(r, mmapBuf(t, 4096), 100, false, 1) }, ErrInvalidArgument},
		{"unaligned buffer", 4, func(q Queuer, r *Ring) error { return q.QueueWrite(r, unalignedBuf(4096), 0, false, 1) }, ErrNotQueued},
		{"ring full", 1, func(q Queuer, r *Ring) error {
			if err := q.QueueFlush(r, 1); err != nil {
				return err
			}
			return q.QueueFlush(r, 2)
		}, ErrNotQueued},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := directFileKind().open(t, size, 512)
			r := newTestRing(t, tc.entries)
			err := tc.queue(d.(Queuer), r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// Close must wait for queued operations: the fd stays valid under them.
func TestRingCloseWaitsForInflight(t *testing.T) {
	d := directFileKind().open(t, 1<<20, 512)
	r := newTestRing(t, 4)
	p := mmapBuf(t, 4096)
	pattern(p, 0, 7)
	if err := d.(Queuer).QueueWrite(r, p, 0, true, 1); err != nil {
		t.Fatal(err)
	}
	closed := closeAsync(d)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with an operation queued and not reaped", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := reapAll(t, r, 1); got[0].Err != nil {
		t.Fatalf("write: %v", got[0].Err)
	}
	wantClosed(t, closed, "after the completion was reaped")
	if err := d.(Queuer).QueueRead(r, p, 0, 2); !errors.Is(err, ErrClosed) {
		t.Fatalf("QueueRead after Close: %v, want ErrClosed", err)
	}
}

// When the kernel refuses the ring itself, the operations it did not take
// complete with that error instead of waiting forever, and the device can
// still close.
func TestRingSubmitFailure(t *testing.T) {
	d := directFileKind().open(t, 1<<20, 512)
	r := newTestRing(t, 4)
	for i := uint64(0); i < 2; i++ {
		if err := d.(Queuer).QueueRead(r, mmapBuf(t, 4096), int64(i)*4096, i); err != nil {
			t.Fatal(err)
		}
	}
	// The ring's fd number names /dev/null for one Submit: io_uring_enter
	// fails with EOPNOTSUPP. dup3 swaps it atomically, so no other open can
	// take the number in between.
	fd := r.ring.FD()
	saved, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(saved)
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, fd, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	err = r.Submit()
	if err := unix.Dup3(saved, fd, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("Submit on a bad ring: %v, want EOPNOTSUPP", err)
	}
	out := make([]Completion, 4)
	n := r.Reap(out)
	if n != 2 {
		t.Fatalf("Reap returned %d completions, want the 2 operations not taken", n)
	}
	for _, c := range out[:n] {
		if !errors.Is(c.Err, unix.EOPNOTSUPP) {
			t.Fatalf("completion %d: %v, want EOPNOTSUPP", c.Tag, c.Err)
		}
	}
	if r.Pending() != 0 || r.Space() != 4 {
		t.Fatalf("pending %d, space %d after the failures", r.Pending(), r.Space())
	}
	// The ring still works, and nothing holds the device open.
	if err := d.(Queuer).QueueFlush(r, 9); err != nil {
		t.Fatal(err)
	}
	if got := reapAll(t, r, 1); got[0].Err != nil || got[0].Tag != 9 {
		t.Fatalf("flush after the failure: %+v", got[0])
	}
	wantClosed(t, closeAsync(d), "for operations that failed")
}
