package rdma

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// TestEngineConnectAfterTeardown runs the engine on the real core: a Connect
// whose data (keyed, fetched with RDMA READ) arrives after its queue was
// torn down must not create a controller, since nothing would ever remove
// it. The live case shows the test sees a controller when one is made.
func TestEngineConnectAfterTeardown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		teardown bool
		want     int64 // controllers after the READ completes
	}{
		{"live queue", false, 1},
		{"queue torn down", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := fabric.NewTarget(fabric.Options{})
			const subnqn = "nqn.2026-11.io.nvmeof-tgt:engine-test"
			if _, err := tgt.AddSubsystem(fabric.SubsystemConfig{NQN: subnqn, AllowAnyHost: true}); err != nil {
				t.Fatal(err)
			}
			h := newBench(t, benchOpts{})
			q, c, _ := h.open(benchOpts{depth: 4})
			fq := tgt.NewQueue(&fabric.Port{Transport: "rdma", Address: "10.0.0.1", Service: "4420"}, q,
				fabric.QueueHint{QID: 0, Depth: 4, Remote: "test"})
			q.core = fq

			connect := nvme.Command(make([]byte, nvme.CommandSize))
			connect.SetOpcode(nvme.OpFabrics)
			connect.SetFCType(nvme.FCTypeConnect)
			connect.SetCID(1)
			connect.SetConnect(0, 0, 3, 0, 0)
			connect.SGL1().SetKeyed(0x10000, nvme.ConnectDataSize, 0xbeef, false)
			h.capsule(q, c, connect, 0)
			_, _, _, idx := splitWRID(c.sends[len(c.sends)-1].WRID)
			r := &q.reqs[idx]
			if r.state != rsReading {
				t.Fatalf("Connect is %s, want reading its data", r.state)
			}
			// The host's data lands in the request's buffers, as the READ would
			// put it.
			data := nvme.ConnectData(make([]byte, nvme.ConnectDataSize))
			data.SetCNTLID(nvme.CNTLIDDynamic)
			data.SetHostID([16]byte{1})
			data.SetSubNQN(subnqn)
			data.SetHostNQN("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001")
			copy(r.segs[0], data)

			if tc.teardown {
				q.teardown("host disconnected")
				h.e.flush()
			}
			h.finish(q, c, kindRead, verbs.WCSuccess)
			if got := tgt.Stats().Controllers; got != tc.want {
				t.Fatalf("%d controllers, want %d (Connect status %v)", got, tc.want, r.fr.Rsp.Status())
			}
			if !tc.teardown {
				h.finish(q, c, kindSend, verbs.WCSuccess)
				if st := r.fr.Rsp.Status(); !st.IsSuccess() {
					t.Fatalf("Connect failed: %v", st)
				}
				q.teardown("host disconnected")
			}
			h.flushAll(c)
			h.gone(q, c)
			if got := tgt.Stats().Controllers; got != 0 {
				t.Fatalf("%d controllers left once the admin queue is gone", got)
			}
		})
	}
}
