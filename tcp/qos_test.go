package tcp

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// TestQoSHeld: a namespace's QoS holds commands over its limit in fabric;
// over TCP they complete later, from the namespace's timer, and none
// fails; the connection closed while the limit holds commands gives every
// buffer back.
func TestQoSHeld(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	ns := r.tgt.Subsystem(testNQN).Namespaces()[0]
	if err := ns.SetQoS(fabric.QoSConfig{Limits: fabric.QoSLimits{IOPS: 40}}); err != nil {
		t.Fatal(err)
	}
	_, io := r.controller(t, tcptest.Options{}, 0)
	const n = 12
	start := time.Now()
	bufs := make([][]byte, n)
	for i := range n {
		bufs[i] = make([]byte, 4096)
		if err := io.Submit(tcptest.IO(nvme.OpRead, uint16(i), 1, uint64(i*8), 8), bufs[i], false, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if rsp, err := io.Wait(uint16(i)); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("read %d: %v %v", i, err, rsp)
		}
	}
	// 40 IOPS with 50 ms of credit: 2 at once, the other 10 a 25 ms
	// apart at least.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("%d reads at 40 IOPS took %v", n, d)
	}
	if st := ns.QoSStats(); st.HeldTotal < n-3 || st.Held != 0 {
		t.Errorf("QoS stats %+v", st)
	}

	// Held when the connection goes: the rig's cleanup checks that every
	// pool byte came back.
	if err := ns.SetQoS(fabric.QoSConfig{Limits: fabric.QoSLimits{IOPS: 1}}); err != nil {
		t.Fatal(err)
	}
	_, io2 := r.controller(t, tcptest.Options{}, 0)
	for i := range n {
		if err := io2.Submit(tcptest.IO(nvme.OpRead, uint16(i), 1, uint64(i*8), 8), bufs[i], false, false); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "reads held", func() bool { return ns.QoSStats().Held >= n-2 })
	io2.Close()
	eventually(t, 5*time.Second, "held reads let go", func() bool { return ns.QoSStats().Held == 0 })
	eventually(t, 5*time.Second, "buffers given back", func() bool { return r.tr.pool.out() == 0 })
}
