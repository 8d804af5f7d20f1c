package fabric

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	testNQN     = "nqn.2026-11.io.example:test"
	testHostNQN = "nqn.2026-11.io.example:host1"
)

var testHostID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// rig is a target with one subsystem on a loop port.
type rig struct {
	t   *testing.T
	tgt *Target
	lt  *LoopTransport
	sub *Subsystem
	ns  *Namespace
}

type rigOpt func(*SubsystemConfig, *NamespaceConfig)

func newRig(t *testing.T, opts ...rigOpt) *rig {
	t.Helper()
	return newRigOpts(t, Options{}, opts...)
}

func newRigOpts(t *testing.T, o Options, opts ...rigOpt) *rig {
	t.Helper()
	tgt := NewTarget(o)
	lt := NewLoopTransport(TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	sc := SubsystemConfig{NQN: testNQN, AllowAnyHost: true}
	dev, err := blockdev.NewMemory(4<<20, 512)
	if err != nil {
		t.Fatal(err)
	}
	nc := NamespaceConfig{NSID: 1, Device: dev, UUID: [16]byte{0xaa, 1}, NGUID: [16]byte{0xbb, 2}}
	for _, o := range opts {
		o(&sc, &nc)
	}
	sub, err := tgt.AddSubsystem(sc)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := sub.AddNamespace(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.AddPort(lt, &Port{Address: "loop0", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	return &rig{t: t, tgt: tgt, lt: lt, sub: sub, ns: ns}
}

func newCmd(op uint8, cid uint16) nvme.Command {
	c := nvme.Command(make([]byte, nvme.CommandSize))
	c.SetOpcode(op)
	c.SetCID(cid)
	c.SetFlags(nvme.PSDTSGLContig << 6)
	return c
}

// withData sets a keyed SGL offering n bytes, as the Linux host does.
func withData(c nvme.Command, n int) nvme.Command {
	c.SGL1().SetKeyed(0x1000, uint32(n), 0x42, false)
	return c
}

func connectCmd(qid nvme.QID, sqsize uint16, kato uint32) nvme.Command {
	c := newCmd(nvme.OpFabrics, 1)
	c.SetFCType(nvme.FCTypeConnect)
	c.SetConnect(0, qid, sqsize, 0, kato)
	return withData(c, nvme.ConnectDataSize)
}

func connectData(subnqn, hostnqn string, hostID [16]byte, cntlid nvme.CNTLID) []byte {
	b := make([]byte, nvme.ConnectDataSize)
	d := nvme.ConnectData(b)
	d.SetHostID(hostID)
	d.SetCNTLID(cntlid)
	d.SetSubNQN(subnqn)
	d.SetHostNQN(hostnqn)
	return b
}

// host is one host queue with helpers.
type host struct {
	t  *testing.T
	lq *LoopQueue
	// mayClose: a submit that finds the queue closed by the target returns
	// a zero completion instead of failing the test.
	mayClose bool
}

func (r *rig) dial(qid, depth int) *host {
	r.t.Helper()
	lq, err := r.lt.Dial("loop0", qid, depth)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(lq.Close)
	return &host{t: r.t, lq: lq}
}

func (h *host) submit(c nvme.Command, data []byte) nvme.Completion {
	h.t.Helper()
	rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
	done := make(chan error, 1)
	go func() { done <- h.lq.Submit(c, data, rsp) }()
	select {
	case err := <-done:
		if err != nil && h.mayClose {
			return nvme.Completion(make([]byte, nvme.CompletionSize))
		}
		if err != nil {
			h.t.Fatalf("submit opcode %#x: %v", c.Opcode(), err)
		}
	case <-time.After(5 * time.Second):
		h.t.Fatalf("opcode %#x: no completion", c.Opcode())
	}
	if rsp.CID() != c.CID() {
		h.t.Fatalf("completion CID %d, want %d", rsp.CID(), c.CID())
	}
	return rsp
}

func (h *host) mustOK(c nvme.Command, data []byte) nvme.Completion {
	h.t.Helper()
	rsp := h.submit(c, data)
	if st := rsp.Status(); !st.IsSuccess() {
		h.t.Fatalf("opcode %#x fctype %#x: status %v", c.Opcode(), c.FCType(), st)
	}
	return rsp
}

func (h *host) propSet(off uint32, v uint64) {
	c := newCmd(nvme.OpFabrics, 2)
	c.SetFCType(nvme.FCTypePropertySet)
	c.SetProperty(0, off, v)
	h.mustOK(c, nil)
}

func (h *host) propGet(off uint32, eight bool) uint64 {
	c := newCmd(nvme.OpFabrics, 3)
	c.SetFCType(nvme.FCTypePropertyGet)
	attr := uint8(0)
	if eight {
		attr = 1
	}
	c.SetProperty(attr, off, 0)
	rsp := h.mustOK(c, nil)
	return uint64(rsp.DW0()) | uint64(rsp.DW1())<<32
}

// ccEnable is CC with EN, IOSQES 6 and IOCQES 4.
const ccEnable = 1 | 6<<16 | 4<<20

// adminConnect connects and enables a controller and returns its admin
// queue and CNTLID.
func (r *rig) adminConnect(subnqn, hostnqn string, kato uint32) (*host, nvme.CNTLID) {
	r.t.Helper()
	h := r.dial(0, 32)
	rsp := h.mustOK(connectCmd(0, 31, kato), connectData(subnqn, hostnqn, testHostID, 0xffff))
	h.propSet(nvme.PropCC, ccEnable)
	if csts := h.propGet(nvme.PropCSTS, false); csts&1 == 0 {
		r.t.Fatalf("CSTS %#x: not ready after CC.EN", csts)
	}
	return h, nvme.CNTLID(rsp.DW0())
}

// ioConnect connects I/O queue qid to controller cntlid.
func (r *rig) ioConnect(qid nvme.QID, cntlid nvme.CNTLID) *host {
	r.t.Helper()
	h := r.dial(int(qid), 64)
	h.mustOK(connectCmd(qid, 63, 0), connectData(testNQN, testHostNQN, testHostID, cntlid))
	return h
}

func ioCmd(op uint8, cid uint16, slba uint64, nlb uint32) nvme.Command {
	c := newCmd(op, cid)
	c.SetNSID(1)
	c.SetSLBA(slba)
	c.SetNumBlocks(nlb)
	return withData(c, int(nlb)*512)
}
