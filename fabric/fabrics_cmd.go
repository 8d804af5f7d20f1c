package fabric

import (
	"log/slog"
	"net"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// connectInvalid sets the Invalid Parameter Offset and attribute in DW0:
// off is a byte of the SQE, or of the Connect data when data is set.
func connectInvalid(r *Request, data bool, off uint16) nvme.Status {
	r.setResult(nvme.MakeConnectInvalidResult(data, off))
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
			return r.invalidField(nvme.ErrLocFCType)
		}
		if !q.authorized() {
			return nvme.StatusAuthRequired.WithDNR()
		}
		if r.Cmd.FCType() == nvme.FCTypePropertyGet {
			r.handle = handlePropertyGet
		} else {
			r.handle = handlePropertySet
		}
		return nvme.StatusSuccess
	case nvme.FCTypeAuthSend, nvme.FCTypeAuthRecv:
		return q.parseAuth(r, r.Cmd.FCType() == nvme.FCTypeAuthSend)
	}
	r.errLoc = nvme.ErrLocFCType
	return nvme.StatusInvalidOpcode.WithDNR()
}

// connectArgs is a Connect command (NVMe-oF 1.1 §3.3) with its data, as
// both the admin and the I/O queue flavour use it.
type connectArgs struct {
	qid     nvme.QID
	sqsize  uint32 // entries: SQSIZE+1
	kato    uint32 // milliseconds
	cntlid  nvme.CNTLID
	subNQN  string
	hostNQN string
	hostID  [16]byte
	s       *Subsystem
	// err is a local failure behind the refusal, for the log.
	err error
}

// handleConnect runs a Connect: the checks every queue shares, then the
// admin or I/O queue Connect, as nvmet_execute_admin_connect and
// nvmet_execute_io_connect. Refusals are counted and logged here only.
func handleConnect(r *Request) nvme.Status {
	q := r.q
	var buf [nvme.ConnectDataSize]byte
	r.copyFromData(buf[:])
	d := nvme.ConnectData(buf[:])
	a := connectArgs{
		qid: r.Cmd.ConnectQID(), sqsize: uint32(r.Cmd.ConnectSQSize()) + 1, kato: r.Cmd.ConnectKATO(),
		cntlid: d.CNTLID(), subNQN: d.SubNQN(), hostNQN: d.HostNQN(), hostID: d.HostID(),
	}
	st := parseConnect(r, &a)
	// One Connect per queue: two pipelined ones (with keyed data, both
	// parsed before either runs) would each make a controller, and the
	// first would never be removed.
	claimed := st.IsSuccess() && q.connecting.CompareAndSwap(false, true)
	if st.IsSuccess() && !claimed {
		st = nvme.StatusCommandSequenceError.WithDNR()
	}
	if claimed {
		st = q.claimHost(&a)
	}
	if claimed && st.IsSuccess() {
		if a.qid == 0 {
			st = executeAdminConnect(r, &a)
		} else {
			st = executeIOConnect(r, &a)
		}
	}
	if claimed && !st.IsSuccess() {
		q.connecting.Store(false) // the host may try again on this queue
		q.releaseHost()
	}
	switch {
	case st.IsSuccess():
		q.t.stats.connects.Add(1)
		if q.port.DisableSQFlow && r.Cmd.ConnectCATTR()&nvme.ConnectCATTRDisableSQFlow != 0 {
			q.sqFlowOff.Store(true)
		}
	case st == nvme.StatusCommandSequenceError.WithDNR():
		// The host's ordering (an I/O queue before CC.EN, a QID connected
		// twice), not a refused Connect.
	default:
		q.t.stats.rejects.Add(1)
		lvl := slog.LevelInfo
		args := []any{"subnqn", a.subNQN, "hostnqn", a.hostNQN, "qid", a.qid, "remote", q.hint.Remote, "status", st.String()}
		if st == nvme.StatusConnectInvalidHost.WithDNR() || a.err != nil {
			lvl = slog.LevelWarn
		}
		if a.err != nil {
			args = append(args, "err", a.err)
		}
		q.t.refusalLog.log(q.log, lvl, "connect refused", args...)
	}
	return st
}

// parseConnect validates what every Connect must get right: the format, the
// queue it names, the subsystem and the host.
func parseConnect(r *Request, a *connectArgs) nvme.Status {
	q := r.q
	if r.Cmd.ConnectRECFMT() != 0 {
		return nvme.StatusConnectIncompatibleFormat.WithDNR()
	}
	if q.hint.QID >= 0 && int(a.qid) != q.hint.QID {
		return connectInvalid(r, false, nvme.ErrLocConnectQID)
	}
	// SQSIZE 0, a queue of one entry, is invalid (NVMe-oF 1.1 §3.3).
	if a.sqsize == 1 || (q.hint.Depth > 0 && int(a.sqsize) > q.hint.Depth) {
		return connectInvalid(r, false, nvme.ErrLocConnectSQSize)
	}
	// A subsystem the port does not serve is, through that port, as
	// unknown (nvmet answers the same).
	if a.s = q.t.Subsystem(a.subNQN); a.s == nil || !a.s.servedOn(q.port) {
		return connectInvalid(r, true, nvme.IPOSubNQN)
	}
	// An empty Host NQN (SPDK's initiator sends one unless told otherwise)
	// is taken where any host may connect, as nvmet and SPDK take it; a
	// host list never holds it, so hostAllowed refuses it elsewhere.
	if a.hostID == ([16]byte{}) {
		return connectInvalid(r, true, nvme.IPOHostID)
	}
	if !a.s.hostAllowed(a.hostNQN) {
		return nvme.StatusConnectInvalidHost.WithDNR()
	}
	return nvme.StatusSuccess
}

// executeAdminConnect creates a controller with q as its admin queue.
func executeAdminConnect(r *Request, a *connectArgs) nvme.Status {
	q := r.q
	t := q.t
	if a.cntlid != nvme.CNTLIDDynamic && a.cntlid != nvme.CNTLIDStatic {
		return connectInvalid(r, true, nvme.IPOCNTLID)
	}
	if a.sqsize > AdminQueueDepth {
		return connectInvalid(r, false, nvme.ErrLocConnectSQSize)
	}
	kato := time.Duration(a.kato) * time.Millisecond
	if kato > 0 {
		kato = (kato + kasUnit - 1) / kasUnit * kasUnit
		kato = min(kato, t.opts.KATOMax)
	}
	c, err := a.s.newController(a.hostNQN, a.hostID, q.port, kato)
	if err != nil {
		a.err = err
		return nvme.StatusConnectControllerBusy
	}
	atr := q.authOnConnect(a)
	if st := c.addQueue(q, 0, a.sqsize); !st.IsSuccess() {
		c.delete("admin connect failed")
		return st
	}
	c.log.Info("controller created", "kato", kato, "remote", q.hint.Remote, "authenticate", atr != 0)
	r.setResult(uint32(c.id) | atr)
	return nvme.StatusSuccess
}

// executeIOConnect adds q as an I/O queue of an existing controller of the
// same host.
func executeIOConnect(r *Request, a *connectArgs) nvme.Status {
	q := r.q
	if a.s.discovery {
		return connectInvalid(r, false, nvme.ErrLocConnectQID)
	}
	a.s.mu.Lock()
	c := a.s.controllers[a.cntlid]
	a.s.mu.Unlock()
	if c == nil {
		return connectInvalid(r, true, nvme.IPOCNTLID)
	}
	if c.hostNQN != a.hostNQN || c.hostID != a.hostID {
		return connectInvalid(r, true, nvme.IPOHostNQN)
	}
	// The controller's queues come over its admin queue's port and from
	// its host's address: another host that learned the CNTLID cannot add
	// queues to it from elsewhere.
	if !c.sameHostPath(q) {
		return connectInvalid(r, true, nvme.IPOCNTLID)
	}
	if !c.ready() {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	c.mu.Lock()
	nr := c.nrIOQ
	c.mu.Unlock()
	if a.qid > nvme.QID(nr) {
		return connectInvalid(r, false, nvme.ErrLocConnectQID)
	}
	if a.sqsize > q.port.MaxQueueDepth {
		return connectInvalid(r, false, nvme.ErrLocConnectSQSize)
	}
	atr := q.authOnConnect(a)
	if st := c.addQueue(q, a.qid, a.sqsize); !st.IsSuccess() {
		return st
	}
	r.setResult(uint32(c.id) | atr)
	return nvme.StatusSuccess
}

func handlePropertyGet(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	eight := r.Cmd.PropertySize() == nvme.PropertySize8
	var v uint64
	switch off := r.Cmd.PropertyOffset(); off {
	case nvme.PropCAP:
		if !eight {
			return r.invalidField(nvme.ErrLocPropertySize)
		}
		v = uint64(c.capability())
	case nvme.PropVS, nvme.PropCC, nvme.PropCSTS, nvme.PropNSSR:
		if eight {
			return r.invalidField(nvme.ErrLocPropertySize)
		}
		c.mu.Lock()
		switch off {
		case nvme.PropVS:
			v = nvme.Version1_3
		case nvme.PropCC:
			v = uint64(c.cc)
		case nvme.PropCSTS:
			v = uint64(c.csts)
		}
		c.mu.Unlock()
	default:
		return r.invalidField(nvme.ErrLocPropertyOffset)
	}
	r.Rsp.SetResult64(v)
	return nvme.StatusSuccess
}

func handlePropertySet(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	if r.Cmd.PropertySize() != nvme.PropertySize4 {
		return r.invalidField(nvme.ErrLocPropertySize)
	}
	switch r.Cmd.PropertyOffset() {
	case nvme.PropCC:
		c.setCC(uint32(r.Cmd.PropertyValue()))
		return nvme.StatusSuccess
	}
	// CAP, VS and CSTS are read-only; NVM Subsystem Reset is not supported.
	return r.invalidField(nvme.ErrLocPropertyOffset)
}

// authOnConnect: a host with a key on the subsystem must authenticate the
// queue before anything else runs on it. It returns the Connect response's
// AUTHREQ bits. Set before the queue is bound, so no command slips in.
func (q *Queue) authOnConnect(a *connectArgs) uint32 {
	keys, ok := a.s.hostAuth(a.hostNQN)
	if !ok || !keys.Required() {
		return 0
	}
	q.requireAuth(keys)
	return nvme.ConnectAuthATR
}

// sameHostPath reports whether q came over the controller's port and from
// the address of the host whose admin queue made it.
func (c *Controller) sameHostPath(q *Queue) bool {
	c.mu.Lock()
	admin := c.admin
	c.mu.Unlock()
	return q.port == c.port && admin != nil && hostOf(admin.hint.Remote) == hostOf(q.hint.Remote)
}

// hostOf is the host part of a transport address ("10.0.0.2:41234").
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
