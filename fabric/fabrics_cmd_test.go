package fabric

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestAdminConnect(t *testing.T) {
	allowOnly := func(sc *SubsystemConfig, _ *NamespaceConfig) {
		sc.AllowAnyHost = false
		sc.Hosts = []string{testHostNQN}
	}
	tests := []struct {
		name    string
		opts    []rigOpt
		hintQID int
		cmd     func() nvme.Command
		data    []byte
		want    nvme.Status
		wantDW0 uint32
	}{
		{name: "ok", cmd: func() nvme.Command { return connectCmd(0, 31, 5000) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusSuccess},
		{name: "allowed host", opts: []rigOpt{allowOnly}, cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusSuccess},
		{name: "refused host", opts: []rigOpt{allowOnly}, cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, "nqn.2026-11.io.example:intruder", testHostID, 0xffff), want: nvme.StatusConnectInvalidHost.WithDNR()},
		{name: "unknown subsystem", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData("nqn.2026-11.io.example:nope", testHostNQN, testHostID, 0xffff),
			want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 1<<16 | 256},
		{name: "zero host ID", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, testHostNQN, [16]byte{}, 0xffff),
			want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 1 << 16},
		{name: "static CNTLID", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, testHostNQN, testHostID, 7),
			want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 1<<16 | 16},
		{name: "bad RECFMT", cmd: func() nvme.Command {
			c := connectCmd(0, 31, 0)
			c.SetConnect(1, 0, 31, 0, 0)
			return c
		}, data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusConnectIncompatibleFormat.WithDNR()},
		{name: "SQSIZE zero", cmd: func() nvme.Command { return connectCmd(0, 0, 0) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 44},
		{name: "admin SQSIZE too big", cmd: func() nvme.Command { return connectCmd(0, 63, 0) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 44},
		{name: "QID differs from transport", hintQID: 3, cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusConnectInvalidParameters.WithDNR(), wantDW0: 42},
		{name: "short SGL", cmd: func() nvme.Command { return withData(connectCmd(0, 31, 0), 512) },
			data: connectData(testNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusDataSGLLengthInvalid.WithDNR()},
		{name: "discovery", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(nvme.DiscoveryNQN, testHostNQN, testHostID, 0xffff), want: nvme.StatusSuccess},
		// SPDK's initiator and tools send an empty Host NQN unless told
		// otherwise; nvmet and SPDK's target take it where any host may
		// connect, and so do we.
		{name: "empty host NQN, any host", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, "", testHostID, 0xffff), want: nvme.StatusSuccess},
		{name: "empty host NQN, discovery", cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(nvme.DiscoveryNQN, "", testHostID, 0xffff), want: nvme.StatusSuccess},
		{name: "empty host NQN, host list", opts: []rigOpt{allowOnly}, cmd: func() nvme.Command { return connectCmd(0, 31, 0) },
			data: connectData(testNQN, "", testHostID, 0xffff), want: nvme.StatusConnectInvalidHost.WithDNR()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			h := r.dial(tc.hintQID, 32)
			rsp := h.submit(tc.cmd(), tc.data)
			if got := rsp.Status(); got != tc.want {
				t.Fatalf("status %v, want %v", got, tc.want)
			}
			if tc.want.IsSuccess() {
				if rsp.DW0() == 0 || rsp.DW0() > 0xffef {
					t.Fatalf("CNTLID %d out of the dynamic range", rsp.DW0())
				}
				if r.tgt.Stats().Controllers != 1 {
					t.Fatalf("controllers = %d, want 1", r.tgt.Stats().Controllers)
				}
				if st := r.tgt.Stats(); st.Connects != 1 || st.ConnectRejects != 0 {
					t.Fatalf("connects %d rejects %d, want 1 and 0", st.Connects, st.ConnectRejects)
				}
				return
			}
			if tc.wantDW0 != 0 && rsp.DW0() != tc.wantDW0 {
				t.Fatalf("DW0 %#x, want %#x", rsp.DW0(), tc.wantDW0)
			}
			// The transport refuses a short SGL before the Connect runs.
			if want := map[bool]uint64{true: 0, false: 1}[tc.name == "short SGL"]; r.tgt.Stats().ConnectRejects != want {
				t.Fatalf("ConnectRejects = %d, want %d", r.tgt.Stats().ConnectRejects, want)
			}
			if r.tgt.Stats().Controllers != 0 {
				t.Fatalf("a refused connect left a controller")
			}
		})
	}
}

func TestConnectTwiceOnOneQueue(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	rsp := h.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	if rsp.Status() != nvme.StatusCommandSequenceError.WithDNR() {
		t.Fatalf("second connect: %v", rsp.Status())
	}
}

func TestCommandsBeforeConnect(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	c := newCmd(nvme.OpAdminIdentify, 9)
	c.SetIdentify(nvme.CNSController, 0, 0)
	if st := h.submit(withData(c, 4096), make([]byte, 4096)).Status(); st != nvme.StatusCommandSequenceError.WithDNR() {
		t.Fatalf("identify before connect: %v", st)
	}
}

func TestIOQueueConnect(t *testing.T) {
	r := newRig(t)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	tests := []struct {
		name   string
		qid    nvme.QID
		sqsize uint16
		data   []byte
		want   nvme.Status
		reject bool // counted in ConnectRejects
	}{
		{"ok", 1, 63, connectData(testNQN, testHostNQN, testHostID, cntlid), nvme.StatusSuccess, false},
		{"QID in use", 1, 63, connectData(testNQN, testHostNQN, testHostID, cntlid), nvme.StatusCommandSequenceError.WithDNR(), false},
		{"unknown controller", 2, 63, connectData(testNQN, testHostNQN, testHostID, cntlid+1), nvme.StatusConnectInvalidParameters.WithDNR(), true},
		{"other host", 2, 63, connectData(testNQN, "nqn.2026-11.io.example:h2", testHostID, cntlid), nvme.StatusConnectInvalidParameters.WithDNR(), true},
		{"other host ID", 2, 63, connectData(testNQN, testHostNQN, [16]byte{9}, cntlid), nvme.StatusConnectInvalidParameters.WithDNR(), true},
		{"QID above granted queues", 5, 63, connectData(testNQN, testHostNQN, testHostID, cntlid), nvme.StatusConnectInvalidParameters.WithDNR(), true},
		{"SQSIZE above MQES", 2, 64, connectData(testNQN, testHostNQN, testHostID, cntlid), nvme.StatusConnectInvalidParameters.WithDNR(), true},
		{"I/O queue to the discovery subsystem", 2, 63, connectData(nvme.DiscoveryNQN, testHostNQN, testHostID, cntlid), nvme.StatusConnectInvalidParameters.WithDNR(), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := r.dial(int(tc.qid), 128)
			before := r.tgt.Stats().ConnectRejects
			if got := h.submit(connectCmd(tc.qid, tc.sqsize, 0), tc.data).Status(); got != tc.want {
				t.Fatalf("status %v, want %v", got, tc.want)
			}
			if got := r.tgt.Stats().ConnectRejects - before; got != map[bool]uint64{true: 1}[tc.reject] {
				t.Fatalf("ConnectRejects went up by %d", got)
			}
		})
	}
}

func TestIOConnectBeforeEnable(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	cntlid := nvme.CNTLID(h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff)).DW0())
	io := r.dial(1, 64)
	if st := io.submit(connectCmd(1, 63, 0), connectData(testNQN, testHostNQN, testHostID, cntlid)).Status(); st != nvme.StatusCommandSequenceError.WithDNR() {
		t.Fatalf("I/O connect before CC.EN: %v", st)
	}
	if got := r.tgt.Stats().ConnectRejects; got != 0 {
		t.Fatalf("ConnectRejects = %d: a Command Sequence Error is not a refusal", got)
	}
}

func TestProperties(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	capv := nvme.CAP(h.propGet(nvme.PropCAP, true))
	if capv.MQES() != 63 || !capv.CQR() || capv.CSS()&1 == 0 {
		t.Fatalf("CAP %#x: MQES %d CQR %v CSS %#x", uint64(capv), capv.MQES(), capv.CQR(), capv.CSS())
	}
	if vs := h.propGet(nvme.PropVS, false); vs != uint64(nvme.MakeVS(1, 3, 0)) {
		t.Fatalf("VS %#x", vs)
	}
	if cc := h.propGet(nvme.PropCC, false); cc != ccEnable {
		t.Fatalf("CC %#x, want %#x", cc, ccEnable)
	}
	bad := []struct {
		name   string
		fctype uint8
		attr   uint8
		off    uint32
	}{
		{"get CAP as 4 bytes", nvme.FCTypePropertyGet, 0, nvme.PropCAP},
		{"get CC as 8 bytes", nvme.FCTypePropertyGet, 1, nvme.PropCC},
		{"get unknown", nvme.FCTypePropertyGet, 0, 0x30},
		{"set CAP", nvme.FCTypePropertySet, 0, nvme.PropCAP},
		{"set CSTS", nvme.FCTypePropertySet, 0, nvme.PropCSTS},
		{"set 8 bytes", nvme.FCTypePropertySet, 1, nvme.PropCC},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c := newCmd(nvme.OpFabrics, 4)
			c.SetFCType(tc.fctype)
			c.SetProperty(tc.attr, tc.off, 0)
			if st := h.submit(c, nil).Status(); st != nvme.StatusInvalidField.WithDNR() {
				t.Fatalf("status %v, want Invalid Field", st)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	h.propSet(nvme.PropCC, ccEnable|1<<14) // SHN normal
	deadline := time.Now().Add(5 * time.Second)
	for {
		csts := nvme.CSTS(h.propGet(nvme.PropCSTS, false))
		if csts.SHST() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSTS %#x: shutdown never completed", uint32(csts))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInvalidCC(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	h.propSet(nvme.PropCC, 1|5<<16|4<<20) // IOSQES 5
	csts := nvme.CSTS(h.propGet(nvme.PropCSTS, false))
	if csts.Ready() || !csts.Fatal() {
		t.Fatalf("CSTS %#x: want CFS and not RDY for an invalid CC", uint32(csts))
	}
}

func TestKeepAliveExpiry(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 1000)
	// Keep-alives hold the controller up past its timeout...
	for i := 0; i < 4; i++ {
		time.Sleep(400 * time.Millisecond)
		h.mustOK(newCmd(nvme.OpAdminKeepAlive, 7), nil)
	}
	// ...and silence lets it expire: the target disconnects the queue.
	select {
	case <-h.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("keep-alive expiry did not disconnect the admin queue")
	}
	if got := r.tgt.Stats().KAExpired; got != 1 {
		t.Fatalf("KAExpired = %d", got)
	}
	if got := r.tgt.Stats().Controllers; got != 0 {
		t.Fatalf("controllers = %d after expiry", got)
	}
}

func TestAdminQueueLossDeletesController(t *testing.T) {
	r := newRig(t)
	h, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	h.lq.Close()
	select {
	case <-io.lq.Disconnected():
	case <-time.After(5 * time.Second):
		t.Fatal("I/O queue not disconnected after its admin queue went away")
	}
	if r.tgt.Stats().Controllers != 0 {
		t.Fatal("controller not deleted")
	}
}

// TestKeepAliveDisabledBySetFeatures: Set Features Keep Alive Timer with
// KATO 0 turns the timer off (NVMe base §5.27.1.12); a Keep Alive after it
// must not arm a timer of zero that deletes the controller at once.
func TestKeepAliveDisabledBySetFeatures(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 1000)
	setFeatures(h, nvme.FeatKeepAliveTimer, 0)
	h.mustOK(newCmd(nvme.OpAdminKeepAlive, 7), nil)
	select {
	case <-h.lq.Disconnected():
		t.Fatal("the controller was deleted after KATO 0 and a Keep Alive")
	case <-time.After(1500 * time.Millisecond): // past the 1 s KATO it had
	}
	if got := r.tgt.Stats().KAExpired; got != 0 {
		t.Fatalf("KAExpired = %d", got)
	}
	h.mustOK(newCmd(nvme.OpAdminKeepAlive, 8), nil)
}
