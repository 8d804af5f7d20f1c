package tcp

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// ioCase is one kind of I/O of the allocation test and the benchmark.
type ioCase struct {
	name         string
	op           uint8
	size         int
	inCapsule    bool
	hdgst, ddgst bool
	noSQFlow     bool
}

var ioCases = []ioCase{
	{name: "read-4k", op: nvme.OpRead, size: 4 << 10},
	{name: "read-4k-success", op: nvme.OpRead, size: 4 << 10, noSQFlow: true},
	{name: "write-4k-incapsule", op: nvme.OpWrite, size: 4 << 10, inCapsule: true},
	{name: "write-4k-r2t", op: nvme.OpWrite, size: 4 << 10},
	{name: "read-4k-digests", op: nvme.OpRead, size: 4 << 10, hdgst: true, ddgst: true},
	{name: "write-4k-r2t-digests", op: nvme.OpWrite, size: 4 << 10, hdgst: true, ddgst: true},
	{name: "read-128k", op: nvme.OpRead, size: 128 << 10},
	{name: "write-128k", op: nvme.OpWrite, size: 128 << 10},
}

// ioLoop returns a function that runs one I/O of tc on a fresh controller
// of r, cycling over the namespace.
func ioLoop(t testing.TB, r *rig, tc ioCase) func() {
	var cattr uint8
	if tc.noSQFlow {
		cattr = nvme.ConnectCATTRDisableSQFlow
	}
	_, c := r.controller(t, tcptest.Options{HeaderDigest: tc.hdgst, DataDigest: tc.ddgst}, cattr)
	buf := make([]byte, tc.size)
	nlb := uint32(tc.size / 512)
	cmd := tcptest.IO(tc.op, 1, 1, 0, nlb)
	span := uint64(nsSize/512) - uint64(nlb)
	var lba uint64
	return func() {
		cmd.SetSLBA(lba)
		lba = (lba + uint64(nlb)) % span
		rsp, err := c.Do(cmd, buf, tc.op == nvme.OpWrite, tc.inCapsule)
		if err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("%s: %v %v", tc.name, err, rsp.Status())
		}
	}
}

// TestNoAllocsPerIO: once a connection has warmed up, an I/O allocates
// nothing: not in the target (reader, writer, pool, core) nor in the test
// initiator, whose allocations would count too (the count is the
// process's).
func TestNoAllocsPerIO(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	r := newRig(t, Config{}, fabric.Options{})
	for _, tc := range ioCases {
		t.Run(tc.name, func(t *testing.T) {
			do := ioLoop(t, r, tc)
			for range 200 {
				do()
			}
			if n := testing.AllocsPerRun(500, do); n != 0 {
				t.Errorf("%v allocations per I/O", n)
			}
		})
	}
}

// BenchmarkIO drives the target over 127.0.0.1 from the test initiator in
// the same process, one command at a time, with the memory backend:
// allocs/op is the target's and the initiator's together, and the
// initiator allocates nothing per I/O (TestNoAllocsPerIO).
func BenchmarkIO(b *testing.B) {
	for _, tc := range ioCases {
		b.Run(tc.name, func(b *testing.B) {
			r := newRig(b, Config{}, fabric.Options{})
			do := ioLoop(b, r, tc)
			for range 100 {
				do()
			}
			b.ReportAllocs()
			b.SetBytes(int64(tc.size))
			b.ResetTimer()
			for b.Loop() {
				do()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "io/s")
		})
	}
}
