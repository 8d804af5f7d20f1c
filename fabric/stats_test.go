package fabric

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestLatencyBucket(t *testing.T) {
	us := int64(time.Microsecond)
	for _, tc := range []struct {
		d    int64
		want int
	}{
		{-5, 0},
		{0, 0},
		{1, 0},
		{8 * us, 0},
		{8*us + 1, 1},
		{16 * us, 1},
		{16*us + 1, 2},
		{100 * us, 4},                 // 64us < d <= 128us
		{int64(10 * time.Second), 21}, // 8.4s < d <= 16.8s
		{int64(30 * time.Second), 22}, // 16.8s < d <= 33.6s
		{int64(LatencyBound(LatencyBuckets - 1)), LatencyBuckets - 1},
		{int64(LatencyBound(LatencyBuckets-1)) + 1, LatencyBuckets},
		{int64(time.Hour), LatencyBuckets},
	} {
		if got := latencyBucket(tc.d); got != tc.want {
			t.Errorf("latencyBucket(%d) = %d, want %d", tc.d, got, tc.want)
		}
		if tc.d > 0 && tc.want < LatencyBuckets {
			if b := int64(LatencyBound(tc.want)); tc.d > b {
				t.Errorf("latency %d in bucket %d, above its bound %d", tc.d, tc.want, b)
			}
		}
	}
}

// TestLatencyBounds checks that the bounded buckets reach the Linux host's
// default I/O timeout (nvme_core.io_timeout, 30 s), after which it aborts the
// command: slower ones are not latencies a host waits for, but stuck I/O.
func TestLatencyBounds(t *testing.T) {
	if b := LatencyBound(LatencyBuckets - 1); b < 30*time.Second {
		t.Errorf("last bound %v, want at least 30s", b)
	}
	for i := 1; i < LatencyBuckets; i++ {
		if LatencyBound(i) != 2*LatencyBound(i-1) {
			t.Errorf("bound %d = %v, want twice %v", i, LatencyBound(i), LatencyBound(i-1))
		}
	}
}

// TestLatencyHistogram checks that every read, write and flush that ran is
// counted once, in its operation's histogram, and that parse failures and
// other commands are not.
func TestLatencyHistogram(t *testing.T) {
	r := newRig(t)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io1 := r.ioConnect(1, cntlid)
	io2 := r.ioConnect(2, cntlid) // another stat shard
	buf := make([]byte, 4096)
	for i, h := range []*host{io1, io2, io1} {
		h.mustOK(ioCmd(nvme.OpWrite, uint16(i), 0, 8), buf)
		h.mustOK(ioCmd(nvme.OpRead, uint16(i), 0, 8), buf)
		h.mustOK(ioCmd(nvme.OpRead, uint16(i), 8, 8), buf)
	}
	io2.mustOK(ioCmd(nvme.OpFlush, 9, 0, 0), nil)
	// Out of range: fails at Parse, so it is not timed.
	if st := io1.submit(ioCmd(nvme.OpRead, 10, 1<<30, 8), buf).Status(); st.IsSuccess() {
		t.Fatal("read past the end succeeded")
	}
	io1.mustOK(ioCmd(nvme.OpWriteZeroes, 11, 0, 8), nil)

	st := r.ns.Stats()
	for _, tc := range []struct {
		name string
		op   int
		want uint64
	}{
		{"read", LatRead, 6},
		{"write", LatWrite, 3},
		{"flush", LatFlush, 1},
	} {
		h := st.Latency[tc.op]
		if got := h.Count(); got != tc.want {
			t.Errorf("%s: count %d, want %d (buckets %v)", tc.name, got, tc.want, h.Buckets)
		}
		if h.Sum <= 0 {
			t.Errorf("%s: sum %v, want > 0", tc.name, h.Sum)
		}
	}
}
