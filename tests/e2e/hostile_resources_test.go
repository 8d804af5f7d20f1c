//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// What a hostile host holds or leaves behind: AERs past the limit, queues that
// post no receives, disconnects mid-transfer (TestHostile), and a host that
// vanishes (TestVanishedHost). The target must give everything back.

// aerFlood: far more Asynchronous Event Requests than the controller holds.
// Returns how many the target held (those without a response).
func (hs *hostile) aerFlood() (held int) {
	const cat = "aer-flood"
	hs.controllerUp()
	const n = 64
	for i := 0; i < n; i++ {
		hs.n.Sent[cat]++
		if err := hs.admin.Send(rdmatest.NewCommand(nvme.OpAdminAsyncEvent, hs.nextCID())); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	got := 0
	for {
		rsp, err := hs.admin.Recv(2 * time.Second)
		if err != nil {
			break
		}
		got++
		hs.n.status(cat, rsp.Status())
		if rsp.Status().IsSuccess() {
			hs.problem("%s: an AER completed with success, and no event happened", cat)
		}
	}
	// The controller goes with its AERs held.
	hs.closeController()
	return n - got
}

// noReceives: queues that stop posting receives. The first posts none, so
// even its Connect's response cannot land; the second posts one (its
// Connect's) and then sends reads whose data the target moves before it
// finds no receive for the response. Either queue must be torn down by the
// target, its buffers back.
func (hs *hostile) noReceives() {
	const cat = "no-receives"
	var silent []*rdmatest.Conn
	for i := 0; i < 2; i++ {
		hs.n.Sent[cat]++
		c, err := hs.dial(0, rdmatest.Options{Recvs: -1})
		if err != nil {
			hs.problem("%s: %v", cat, err)
			continue
		}
		c.Send(hs.connectCmd(c, 0, nvme.CNTLIDDynamic, 0))
		silent = append(silent, c)
	}
	hs.controllerUp()
	for qid := uint16(2); qid <= 3; qid++ {
		c, err := hs.dial(qid, rdmatest.Options{Recvs: 1, NoRepost: true})
		if err != nil {
			hs.problem("%s: %v", cat, err)
			continue
		}
		rsp, err := c.Do(hs.connectCmd(c, nvme.QID(qid), nvme.CNTLID(hs.cntlid), 0), hTimeout)
		if err != nil || !rsp.Status().IsSuccess() {
			hs.problem("%s: I/O Connect: %v %s", cat, err, statusOf(rsp))
			c.Close()
			continue
		}
		for k := 0; k < 8; k++ {
			hs.n.Sent[cat]++
			off := hSlots + k*hSlotSize
			c.Send(c.IOCommand(nvme.OpRead, hs.nextCID(), hNoiseNSID, uint64(k*128), 128, off, 64*kib))
		}
		silent = append(silent, c)
	}
	// Well past the target's 10 s (rdma responseTimeout, checked every 5 s).
	_ = waitFor(45*time.Second, func() bool {
		for _, c := range silent {
			if c.Alive() == nil {
				return false
			}
		}
		return true
	})
	for _, c := range silent {
		if c.Alive() == nil {
			hs.problem("%s: the target kept a queue whose host posts no receives for 45 s", cat)
		} else {
			hs.n.Lost[cat]++
		}
		c.Close()
	}
	hs.closeController()
}

// midTransfer: connections closed with large reads and writes in flight.
func (hs *hostile) midTransfer() {
	const cat = "mid-transfer-disconnect"
	for i := 0; i < 9; i++ {
		hs.controllerUp()
		for k := 0; k < 16; k++ {
			op := nvme.OpWrite
			if k%2 == 1 {
				op = nvme.OpRead
			}
			off := hSlots + k*hSlotSize
			nlb := 128
			if i%3 == 2 {
				nlb = 2048 // 1 MiB: several READs or WRITEs per command
				off = hBig
			}
			hs.n.Sent[cat]++
			if err := hs.io.Send(hs.io.IOCommand(uint8(op), hs.nextCID(), hNoiseNSID, uint64(k*2048%(hNSBlocks-2048)), uint32(nlb), off, nlb*512)); err != nil {
				break
			}
		}
		if i%2 == 1 {
			time.Sleep(time.Duration(hs.rng.IntN(3)) * time.Millisecond)
		}
		hs.closeController()
	}
}

// TestVanishedHost: a host connects with KATO 2 s, an admin and two I/O
// queues, leaves AERs with the controller, and goes silent without
// disconnecting. The target must tear the controller down once KATO passes,
// not before, and give back every queue pair, slot and buffer.
func TestVanishedHost(t *testing.T) {
	sub := nqn("vanish")
	tgt, _ := startTarget(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
	}})
	hs := newHostile(t, sub)
	t.Cleanup(hs.closeController)
	var expired0 float64
	if targetKind == kindNvmeofTgt {
		expired0, _ = metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total")
	}
	const kato = 2 * time.Second
	admin, err := hs.dial(0, rdmatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs.admin = admin
	rsp, err := admin.Do(hs.connectCmd(admin, 0, nvme.CNTLIDDynamic, uint32(kato.Milliseconds())), hTimeout)
	if err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("Connect: %v %s", err, statusOf(rsp))
	}
	cntlid := nvme.CNTLID(rsp.DW0())
	if rsp, err := admin.Enable(hs.nextCID(), hTimeout); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("CC.EN: %v %s", err, statusOf(rsp))
	}
	var ios []*rdmatest.Conn
	for qid := nvme.QID(1); qid <= 2; qid++ {
		c, err := hs.dial(uint16(qid), rdmatest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ios = append(ios, c)
		if rsp, err := c.Do(hs.connectCmd(c, qid, cntlid, 0), hTimeout); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("I/O Connect %d: %v %s", qid, err, statusOf(rsp))
		}
	}
	for i := 0; i < 4; i++ {
		admin.Send(rdmatest.NewCommand(nvme.OpAdminAsyncEvent, hs.nextCID()))
	}
	// The last command the target hears from this host: the silence is
	// timed from before it is sent.
	silent := time.Now()
	if rsp, err := admin.Do(rdmatest.NewCommand(nvme.OpAdminKeepAlive, hs.nextCID()), hTimeout); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("Keep Alive: %v %s", err, statusOf(rsp))
	}
	t.Run("connected", func(t *testing.T) {
		requireTgt(t, "status")
		p := tgt.(*tgtProcess)
		st := p.status(t)
		if len(st.Controllers) != 1 || st.Controllers[0].IOQueues != 2 {
			t.Fatalf("status with the host connected: %+v; want its controller with 2 I/O queues", st.Controllers)
		}
	})

	// Silence: nothing sent, nothing closed. The target must disconnect.
	if err := waitFor(30*time.Second, func() bool { return admin.Disconnected() }); err != nil {
		t.Fatalf("the target has not disconnected the silent host %v after its last command (KATO %v)", time.Since(silent).Round(time.Millisecond), kato)
	}
	gone := time.Since(silent)
	t.Logf("silent host disconnected after %v (KATO %v)", gone.Round(time.Millisecond), kato)
	if gone < kato {
		t.Errorf("the controller was torn down %v after the host's last command, before its KATO %v", gone, kato)
	}
	for i, c := range ios {
		if err := waitFor(10*time.Second, c.Disconnected); err != nil {
			t.Errorf("I/O queue %d not disconnected with its controller", i+1)
		}
	}
	t.Run("released", func(t *testing.T) {
		requireTgt(t, "status and metrics")
		p := tgt.(*tgtProcess)
		waitTornDown(t)
		checkBuffersReleased(t)
		if st := p.status(t); len(st.Controllers) != 0 {
			t.Errorf("status after KATO: %+v; want no controller", st.Controllers)
		}
		if v, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total"); v != expired0+1 {
			t.Errorf("nvmeof_tgt_keepalive_expired_total went from %v to %v, want one more", expired0, v)
		}
	})
	// Everything came back: the host can connect again.
	hs.closeController()
	for _, c := range ios {
		c.Close()
	}
	hs.controllerUp()
	hs.writeOwnData("after", 0, 8)
	hs.readOwn("after", 0, 8)
	hs.closeController()
}
