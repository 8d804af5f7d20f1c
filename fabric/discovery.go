package fabric

import (
	"net"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// parseDiscoveryAdmin is parseAdmin for a discovery controller, after
// nvmet_parse_discovery_cmd: it takes only the admin commands NVMe-oF 1.1
// §5 requires of one, and routes them to the discovery handlers.
func (c *Controller) parseDiscoveryAdmin(r *Request) nvme.Status {
	switch r.Cmd.Opcode() {
	case nvme.OpAdminIdentify:
		r.DataLen, r.Dir, r.handle = nvme.IdentifyDataSize, DirCtrlToHost, handleDiscIdentify
	case nvme.OpAdminGetLogPage:
		return c.parseGetLogPage(r, handleDiscGetLogPage)
	case nvme.OpAdminSetFeatures:
		r.handle = handleDiscSetFeatures
	case nvme.OpAdminGetFeatures:
		r.handle = handleDiscGetFeatures
	case nvme.OpAdminAsyncEvent:
		r.handle = handleAsyncEvent
	case nvme.OpAdminKeepAlive:
		r.handle = handleKeepAlive
	default:
		return r.invalidOpcode()
	}
	return nvme.StatusSuccess
}

// handleDiscIdentify answers Identify Controller only: a discovery
// controller has no namespaces.
func handleDiscIdentify(r *Request) nvme.Status {
	if r.Cmd.CNS() != nvme.CNSController {
		return r.invalidField(nvme.ErrLocCDW10)
	}
	var buf [nvme.IdentifyDataSize]byte
	r.q.ctrl.Load().discIdentify(nvme.IdentifyController(buf[:]))
	r.fillData(buf[:])
	return nvme.StatusSuccess
}

// discIdentify fills Identify Controller for a discovery controller into
// the zeroed id.
func (c *Controller) discIdentify(id nvme.IdentifyController) {
	c.identifyCommon(id)
	id.SetCNTRLTYPE(nvme.ControllerTypeDiscovery)
	id.SetMAXCMD(AdminQueueDepth)
	id.SetOAES(nvme.OAESDiscoveryChanged)
}

// handleDiscGetLogPage returns the discovery log page, the only log page a
// discovery controller has.
func handleDiscGetLogPage(r *Request) nvme.Status {
	off := r.Cmd.LogPageOffset()
	if off&3 != 0 {
		return r.invalidField(nvme.ErrLocCDW12)
	}
	if r.Cmd.LogPageID() != nvme.LogDiscovery {
		return nvme.StatusInvalidLogPage.WithDNR()
	}
	c := r.q.ctrl.Load()
	c.discoveryLogRead(r.Cmd.LogPageRAE())
	return r.sendLog(c.discoveryLog(), off)
}

// discFeature reports whether a discovery controller has feature fid:
// Keep Alive Timer and Asynchronous Event Configuration (NVMe-oF 1.1 §5).
func discFeature(fid uint8) bool {
	return fid == nvme.FeatKeepAliveTimer || fid == nvme.FeatAsyncEventConfig
}

func handleDiscSetFeatures(r *Request) nvme.Status {
	if discFeature(r.Cmd.FeatureID()) {
		return handleSetFeatures(r)
	}
	if r.Cmd.FeatureSave() {
		return nvme.StatusFeatureNotSaveable.WithDNR()
	}
	return r.invalidField(nvme.ErrLocCDW10)
}

func handleDiscGetFeatures(r *Request) nvme.Status {
	if discFeature(r.Cmd.FeatureID()) {
		return handleGetFeatures(r)
	}
	return r.invalidField(nvme.ErrLocCDW10)
}

// discoveryLog builds the discovery log page (NVMe-oF 1.1 §5.3) as this
// host sees it: one entry per port and subsystem the host may connect to.
func (c *Controller) discoveryLog() []byte {
	t := c.s.t
	type rec struct {
		p *Port
		s *Subsystem
	}
	local := ""
	c.mu.Lock()
	if c.admin != nil {
		local = c.admin.hint.LocalIP
	}
	c.mu.Unlock()
	// The generation before the entries: a change made while they are
	// listed moves it past this log's, and the host reads again (libnvme
	// compares a log's generation with its next read's).
	gen := t.discoveryGeneration()
	var recs []rec
	for _, p := range t.Ports() {
		for _, s := range t.Subsystems() {
			if s.hostAllowed(c.hostNQN) && s.servedOn(p) {
				recs = append(recs, rec{p, s})
			}
		}
	}
	refs := t.Referrals()
	discoveryListed()
	n := len(recs) + len(refs)
	log := make([]byte, nvme.DiscoveryLogHeaderSize+n*nvme.DiscoveryLogEntrySize)
	nvme.PutDiscoveryLogHeader(log, gen, uint64(n))
	for i, rc := range recs {
		addr := rc.p.Address
		if ip := net.ParseIP(addr); ip != nil && ip.IsUnspecified() && local != "" {
			addr = local
		}
		e := nvme.DiscoveryLogEntry{
			TRTYPE: rc.p.TRType, ADRFAM: rc.p.AdrFam, SUBTYPE: nvme.SubtypeNVMe, TREQ: rc.p.treq(),
			PORTID: rc.p.ID, CNTLID: nvme.CNTLIDDynamic, ASQSZ: AdminQueueDepth,
			TRSVCID: rc.p.Service, SubNQN: rc.s.nqn, TRADDR: addr, TSAS: rc.p.TSAS,
		}
		e.MarshalTo(log[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:])
	}
	for i, ref := range refs {
		e := ref.entry()
		e.MarshalTo(log[nvme.DiscoveryLogHeaderSize+(len(recs)+i)*nvme.DiscoveryLogEntrySize:])
	}
	return log
}

// treq is the port's Transport Requirements: no secure channel specified,
// and SQ flow control disable where the transport serves it (hosts then
// disable it: nvme-cli does for an entry that says so).
func (p *Port) treq() uint8 {
	if p.DisableSQFlow {
		return nvme.TREQNotSpecified | nvme.TREQDisableSQFlow
	}
	return nvme.TREQNotSpecified
}

// discoveryListed, in tests, runs once discoveryLog has listed the entries.
var discoveryListed = func() {}

// Referral is another discovery service, listed in the discovery log of
// every port (NVMe-oF 1.1 §5.3: an entry of subtype referral).
type Referral struct {
	Transport string // "rdma", "tcp"
	Address   string
	Service   string // TRSVCID, "4420"
	// PortID is the PORTID shown for it.
	PortID uint16
}

// entry is the referral's discovery log entry.
func (r Referral) entry() nvme.DiscoveryLogEntry {
	e := nvme.DiscoveryLogEntry{
		SUBTYPE: nvme.SubtypeReferral, PORTID: r.PortID, CNTLID: nvme.CNTLIDDynamic, ASQSZ: AdminQueueDepth,
		TRSVCID: r.Service, SubNQN: nvme.DiscoveryNQN, TRADDR: r.Address, ADRFAM: nvme.AdrFamIPv4,
	}
	if ip := net.ParseIP(r.Address); ip != nil && ip.To4() == nil {
		e.ADRFAM = nvme.AdrFamIPv6
	}
	switch r.Transport {
	case "rdma":
		e.TRTYPE = nvme.TRTypeRDMA
		e.TSAS = nvme.RDMATSAS(nvme.RDMAQPTypeConnected, 1, 1, 0)
	case "tcp":
		e.TRTYPE = nvme.TRTypeTCP
		e.TSAS = nvme.TCPTSAS(nvme.TCPSecTypeNone)
	case "loop":
		e.TRTYPE, e.ADRFAM = nvme.TRTypeLoop, nvme.AdrFamLoop
	}
	return e
}

// SetReferrals replaces the referrals every discovery log lists.
func (t *Target) SetReferrals(refs []Referral) {
	t.mu.Lock()
	changed := !slices.Equal(t.referrals, refs)
	t.referrals = slices.Clone(refs)
	t.mu.Unlock()
	if changed {
		t.discoveryChanged()
	}
}

// Referrals lists the referrals.
func (t *Target) Referrals() []Referral {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.referrals)
}
