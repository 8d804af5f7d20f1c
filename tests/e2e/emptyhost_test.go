//go:build e2e

package e2e

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// TestEmptyHostNQN: SPDK's user-space initiator and its tools send an empty Host NQN in
// Connect unless told otherwise. The kernel's nvmet and SPDK's target take it on a subsystem
// that allows any host and on discovery; so must nvmeof-tgt, and refuse it where a host list
// applies. The suite's own initiator plays that host: a controller, an I/O queue, a write read
// back; `status` shows the controller with its empty host NQN.
func TestEmptyHostNQN(t *testing.T) {
	requireTgt(t, "status is nvmeof-tgt's API")
	h := newHost(t)
	anySub, listed := nqn("empty-any"), nqn("empty-listed")
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: anySub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")}},
		{NQN: listed, Hosts: []string{h.NQN}, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")}},
	}})
	var id [16]byte
	copy(id[:], uuidBytes(h.ID))
	dial := func(qid uint16) *rdmatest.Conn {
		t.Helper()
		c, err := rdmatest.Dial(rdmatest.Options{Addr: labAddr, Port: portRDMA, QID: qid, Depth: 16, DataSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	connect := func(c *rdmatest.Conn, sub string, qid nvme.QID, cntlid nvme.CNTLID) nvme.Completion {
		t.Helper()
		rsp, err := c.Do(c.ConnectCommand(rdmatest.ConnectParams{HostNQN: "", SubNQN: sub, HostID: id,
			CNTLID: cntlid, QID: qid, SQSize: 15, CID: 1}, 0), hTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return rsp
	}

	t.Run("any host", func(t *testing.T) {
		admin := dial(0)
		rsp := connect(admin, anySub, 0, nvme.CNTLIDDynamic)
		if !rsp.Status().IsSuccess() {
			t.Fatalf("Connect with an empty Host NQN to an allow-any subsystem: %s", statusOf(rsp))
		}
		cntlid := nvme.CNTLID(rsp.DW0())
		if rsp, err := admin.Enable(2, hTimeout); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("CC.EN: %v %s", err, statusOf(rsp))
		}
		io := dial(1)
		if rsp := connect(io, anySub, 1, cntlid); !rsp.Status().IsSuccess() {
			t.Fatalf("I/O queue Connect: %s", statusOf(rsp))
		}
		want := pattern(4096, 7)
		copy(io.Data(), want)
		if rsp, err := io.Do(io.IOCommand(nvme.OpWrite, 2, 1, 8, 8, 0, 4096), hTimeout); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("write: %v %s", err, statusOf(rsp))
		}
		clear(io.Data()[:4096])
		if rsp, err := io.Do(io.IOCommand(nvme.OpRead, 3, 1, 8, 8, 0, 4096), hTimeout); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("read: %v %s", err, statusOf(rsp))
		}
		if !bytes.Equal(io.Data()[:4096], want) {
			t.Fatal("read back other data than written")
		}
		st := p.status(t)
		found := false
		for _, c := range st.Controllers {
			found = found || (c.SubNQN == anySub && c.HostNQN == "" && c.CNTLID == uint16(cntlid) && c.IOQueues == 1)
		}
		if !found {
			t.Fatalf("status does not show controller %d of %s with an empty host NQN: %+v", cntlid, anySub, st.Controllers)
		}
	})
	t.Run("discovery", func(t *testing.T) {
		if rsp := connect(dial(0), discoveryNQN, 0, nvme.CNTLIDDynamic); !rsp.Status().IsSuccess() {
			t.Fatalf("Connect with an empty Host NQN to discovery: %s", statusOf(rsp))
		}
	})
	t.Run("host list", func(t *testing.T) {
		if rsp := connect(dial(0), listed, 0, nvme.CNTLIDDynamic); rsp.Status() != nvme.StatusConnectInvalidHost.WithDNR() {
			t.Fatalf("Connect with an empty Host NQN to a subsystem with a host list: %s, want Connect Invalid Host", statusOf(rsp))
		}
	})
}
