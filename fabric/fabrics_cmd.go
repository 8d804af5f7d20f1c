package fabric

import (
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Offsets used as Invalid Parameter Offsets in Connect replies (NVMe-oF 1.1
// §3.3.1): bytes of the SQE, or of the Connect data with IATTR set.
const (
	ipoSQEQID    = 42
	ipoSQESQSize = 44
	ipoDataHost  = 0
	ipoDataCNTL  = 16
	ipoDataSub   = 256
	ipoDataHNQN  = 512
)

// connectInvalid sets the Invalid Parameter Offset and attribute in DW0,
// encoded as the Linux host decodes it: offset in bits 15:0, bit 16 set when
// the offset is into the Connect data.
func connectInvalid(r *Request, data bool, off uint16) nvme.Status {
	v := uint32(off)
	if data {
		v |= 1 << 16
	}
	r.setResult(v)
	r.errLoc = off
	return nvme.StatusConnectInvalidParameters.WithDNR()
}

func (q *Queue) parseFabrics(r *Request) nvme.Status {
	switch r.Cmd.FCType() {
	case nvme.FCTypeConnect:
		if q.ctrl.Load() != nil {
			return nvme.StatusCommandSequenceError.WithDNR()
		}
		r.DataLen = nvme.ConnectDataSize
		r.Dir = DirHostToCtrl
		r.handle = handleConnect
		return nvme.StatusSuccess
	case nvme.FCTypePropertyGet, nvme.FCTypePropertySet:
		if q.ctrl.Load() == nil {
			return nvme.StatusCommandSequenceError.WithDNR()
		}
		if q.qid != 0 {
			return r.invalidField(4)
		}
		if r.Cmd.FCType() == nvme.FCTypePropertyGet {
			r.handle = handlePropertyGet
		} else {
			r.handle = handlePropertySet
		}
		return nvme.StatusSuccess
	}
	r.errLoc = 4
	return nvme.StatusInvalidOpcode.WithDNR()
}

func handleConnect(r *Request) nvme.Status {
	q := r.q
	t := q.t
	var buf [nvme.ConnectDataSize]byte
	r.copyFromData(buf[:])
	d := nvme.ConnectData(buf[:])
	cmd := r.Cmd

	if cmd.ConnectRECFMT() != 0 {
		t.stats.rejects.Add(1)
		return nvme.StatusConnectIncompatibleFormat.WithDNR()
	}
	qid := cmd.ConnectQID()
	sqsize := uint32(cmd.ConnectSQSize())
	if q.hint.QID >= 0 && int(qid) != q.hint.QID {
		t.stats.rejects.Add(1)
		return connectInvalid(r, false, ipoSQEQID)
	}
	if sqsize == 0 || (q.hint.Depth > 0 && int(sqsize)+1 > q.hint.Depth) {
		t.stats.rejects.Add(1)
		return connectInvalid(r, false, ipoSQESQSize)
	}
	subnqn, hostnqn := d.SubNQN(), d.HostNQN()
	s := t.Subsystem(subnqn)
	if s == nil {
		t.stats.rejects.Add(1)
		q.log.Info("connect to unknown subsystem refused", "subnqn", subnqn, "hostnqn", hostnqn, "remote", q.hint.Remote)
		return connectInvalid(r, true, ipoDataSub)
	}
	if hostnqn == "" {
		t.stats.rejects.Add(1)
		return connectInvalid(r, true, ipoDataHNQN)
	}
	hostID := d.HostID()
	if hostID == ([16]byte{}) {
		t.stats.rejects.Add(1)
		return connectInvalid(r, true, ipoDataHost)
	}
	if !s.hostAllowed(hostnqn) {
		t.stats.rejects.Add(1)
		q.log.Warn("host not allowed", "subnqn", subnqn, "hostnqn", hostnqn, "remote", q.hint.Remote)
		return nvme.StatusConnectInvalidHost.WithDNR()
	}

	if qid == 0 {
		if cntlid := d.CNTLID(); cntlid != 0xffff && cntlid != 0xfffe {
			t.stats.rejects.Add(1)
			return connectInvalid(r, true, ipoDataCNTL)
		}
		if sqsize+1 > AdminQueueDepth {
			t.stats.rejects.Add(1)
			return connectInvalid(r, false, ipoSQESQSize)
		}
		kato := time.Duration(cmd.ConnectKATO()) * time.Millisecond
		if kato > 0 {
			kato = (kato + kasUnit - 1) / kasUnit * kasUnit
			if kato > t.opts.KATOMax {
				kato = t.opts.KATOMax
			}
		}
		c, err := s.newController(hostnqn, hostID, q.port, kato)
		if err != nil {
			t.stats.rejects.Add(1)
			q.log.Warn("connect refused", "subnqn", subnqn, "err", err)
			return nvme.StatusConnectControllerBusy
		}
		if st := c.addQueue(q, 0, sqsize+1); !st.IsSuccess() {
			c.delete("admin connect failed")
			return st
		}
		t.stats.connects.Add(1)
		c.log.Info("controller created", "kato", kato, "remote", q.hint.Remote)
		r.setResult(uint32(c.id))
		return nvme.StatusSuccess
	}

	// I/O queue: join an existing controller of the same host.
	if s.discovery {
		t.stats.rejects.Add(1)
		return connectInvalid(r, false, ipoSQEQID)
	}
	s.mu.Lock()
	c := s.controllers[d.CNTLID()]
	s.mu.Unlock()
	if c == nil {
		t.stats.rejects.Add(1)
		return connectInvalid(r, true, ipoDataCNTL)
	}
	if c.hostNQN != hostnqn || c.hostID != hostID {
		t.stats.rejects.Add(1)
		return connectInvalid(r, true, ipoDataHNQN)
	}
	if !c.ready() {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	c.mu.Lock()
	nr := c.nrIOQ
	c.mu.Unlock()
	if qid > nr {
		t.stats.rejects.Add(1)
		return connectInvalid(r, false, ipoSQEQID)
	}
	if sqsize+1 > q.port.MaxQueueDepth {
		t.stats.rejects.Add(1)
		return connectInvalid(r, false, ipoSQESQSize)
	}
	if st := c.addQueue(q, qid, sqsize+1); !st.IsSuccess() {
		return st
	}
	t.stats.connects.Add(1)
	r.setResult(uint32(c.id))
	return nvme.StatusSuccess
}

func handlePropertyGet(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	eight := r.Cmd.PropertyAttrib()&7 == 1
	var v uint64
	switch off := r.Cmd.PropertyOffset(); off {
	case nvme.PropCAP:
		if !eight {
			return r.invalidField(40)
		}
		v = uint64(c.capability())
	case nvme.PropVS, nvme.PropCC, nvme.PropCSTS, nvme.PropNSSR:
		if eight {
			return r.invalidField(40)
		}
		c.mu.Lock()
		switch off {
		case nvme.PropVS:
			v = uint64(nvme.MakeVS(1, 3, 0))
		case nvme.PropCC:
			v = uint64(c.cc)
		case nvme.PropCSTS:
			v = uint64(c.csts)
		}
		c.mu.Unlock()
	default:
		return r.invalidField(44)
	}
	r.Rsp.SetResult64(v)
	return nvme.StatusSuccess
}

func handlePropertySet(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	if r.Cmd.PropertyAttrib()&7 != 0 {
		return r.invalidField(40)
	}
	switch r.Cmd.PropertyOffset() {
	case nvme.PropCC:
		c.setCC(uint32(r.Cmd.PropertyValue()))
		return nvme.StatusSuccess
	}
	// CAP, VS and CSTS are read-only; NVM Subsystem Reset is not supported.
	return r.invalidField(44)
}
