package fabric

import (
	"math/bits"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func (c *Controller) parseAdmin(r *Request) nvme.Status {
	if !c.ready() {
		// Only Fabrics commands before CSTS.RDY (NVMe-oF 1.1 §3.5).
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	if c.isDiscovery() {
		return c.parseDiscoveryAdmin(r)
	}
	switch r.Cmd.Opcode() {
	case nvme.OpAdminIdentify:
		r.DataLen, r.Dir, r.handle = nvme.IdentifyDataSize, DirCtrlToHost, handleIdentify
	case nvme.OpAdminGetLogPage:
		return c.parseGetLogPage(r, handleGetLogPage)
	case nvme.OpAdminSetFeatures:
		r.handle = handleSetFeatures
	case nvme.OpAdminGetFeatures:
		// The host identifier is data, except for its capabilities
		// (SEL 011b), which are all in DW0.
		if r.Cmd.FeatureID() == nvme.FeatHostIdentifier && r.Cmd.FeatureSelect() != nvme.FeatSelectSupported {
			r.DataLen, r.Dir = nvme.HostIDSize, DirCtrlToHost
		}
		r.handle = handleGetFeatures
	case nvme.OpAdminAsyncEvent:
		r.handle = handleAsyncEvent
	case nvme.OpAdminKeepAlive:
		r.handle = handleKeepAlive
	case nvme.OpAdminAbort:
		r.handle = handleAbort
	default:
		return r.invalidOpcode()
	}
	return nvme.StatusSuccess
}

// parseGetLogPage sizes a Get Log Page transfer and binds h.
func (c *Controller) parseGetLogPage(r *Request, h handler) nvme.Status {
	n := uint64(r.Cmd.LogPageNumDwords()) * 4
	if n > uint64(c.port.MDTS) {
		return r.invalidField(nvme.ErrLocCDW10)
	}
	r.DataLen, r.Dir, r.handle = uint32(n), DirCtrlToHost, h
	return nvme.StatusSuccess
}

// fillData copies src into the data buffers and zeroes the rest: the
// buffers are reused and must not leak earlier contents to the host.
func (r *Request) fillData(src []byte) {
	r.dataWritten = true
	n := 0
	for _, seg := range r.Data {
		k := copy(seg, src[min(n, len(src)):])
		clear(seg[k:])
		n += len(seg)
	}
}

func handleKeepAlive(r *Request) nvme.Status {
	r.q.ctrl.Load().keepAlive()
	return nvme.StatusSuccess
}

func handleAbort(r *Request) nvme.Status {
	// Commands are not abortable once received: DW0 bit 0 set means
	// "not aborted" (NVMe base §5.1).
	r.setResult(1)
	return nvme.StatusSuccess
}

func handleAsyncEvent(r *Request) nvme.Status {
	return r.q.ctrl.Load().holdAER(r)
}

func handleIdentify(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	var buf [nvme.IdentifyDataSize]byte
	switch r.Cmd.CNS() {
	case nvme.CNSController:
		c.identify(nvme.IdentifyController(buf[:]))
	case nvme.CNSNamespace:
		nsid := r.Cmd.NSID()
		if nsid == 0 || nsid > c.s.nn() {
			r.errLoc = nvme.ErrLocNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		// An inactive NSID returns zeroes (NVMe base §5.15.2), one
		// masked from this host too: it is not attached to this
		// controller.
		if ns := c.namespace(nsid); ns != nil {
			ns.identify(nvme.IdentifyNamespace(buf[:]))
		}
	case nvme.CNSActiveNSList:
		start := r.Cmd.NSID()
		if start >= nvme.NSIDAll-1 { // FFFFFFFEh and FFFFFFFFh (base 1.4 §5.15.2, CNS 02h)
			r.errLoc = nvme.ErrLocNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		var ids []nvme.NSID
		for _, ns := range c.namespaces() {
			if ns.nsid > start {
				ids = append(ids, ns.nsid)
			}
		}
		nvme.PutNSList(buf[:], ids)
	case nvme.CNSNSDescriptorList:
		ns := c.namespace(r.Cmd.NSID())
		if ns == nil {
			r.errLoc = nvme.ErrLocNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		nvme.PutNSDescriptors(buf[:], ns.descriptors())
	default:
		return r.invalidField(nvme.ErrLocCDW10)
	}
	r.fillData(buf[:])
	return nvme.StatusSuccess
}

// psd0MaxPower is the Maximum Power of the one power state, which the Linux
// host shows in nvme id-ctrl: 25 W in centiwatts.
const psd0MaxPower = 2500

// identifyCommon fills the part of Identify Controller (NVMe base
// §5.15.2.1, NVMe-oF §4.1) that NVM and discovery controllers share into
// the zeroed id.
func (c *Controller) identifyCommon(id nvme.IdentifyController) {
	o := c.s.t.opts
	id.SetSerialNumber(c.s.serial)
	id.SetModelNumber(c.s.model)
	id.SetFirmwareRevision(o.FirmwareRevision)
	id.SetMDTS(uint8(bits.TrailingZeros32(c.port.MDTS / 4096)))
	id.SetCNTLID(c.id)
	id.SetVersion(nvme.Version1_3)
	id.SetCTRATT(nvme.CTRATTHostID128)
	id.SetLPA(nvme.LPAExtendedData)
	id.SetELPE(errorLogEntries - 1)
	id.SetAERL(aerLimit - 1)
	id.SetKAS(uint16(kasUnit / (100 * time.Millisecond)))
	id.SetSubNQN(c.s.nqn)
	id.SetMSDBD(1)
	// SGLs without alignment, keyed data blocks (RDMA; NVMe/TCP has
	// Transport SGL Data Blocks instead), SGLs longer than the data, and
	// offsets for in-capsule data (the Linux host's test for inline data
	// is bit 20).
	sgls := uint32(nvme.SGLSSupported | nvme.SGLSKeyed | nvme.SGLSOversized | nvme.SGLSOffsetInData)
	if c.port.TransportSGL {
		sgls &^= nvme.SGLSKeyed
	}
	id.SetSGLS(sgls)
	id.PSD(0).SetMP(psd0MaxPower)
}

// identify fills Identify Controller for an NVM controller into the zeroed
// id.
func (c *Controller) identify(id nvme.IdentifyController) {
	c.identifyCommon(id)
	id.SetCNTRLTYPE(nvme.ControllerTypeIO)
	id.SetRAB(6)
	// More than one host may have a controller, and the controller reports
	// ANA (base 2.0 §8.1.3): every state, ANAGRPID changeable while
	// attached (ANACAP bit 6 clear: the host then re-reads the log). The
	// Linux host refuses a controller with CMIC.ANA and MNAN 0.
	id.SetCMIC(nvme.CMICMultiController | nvme.CMICANAReporting)
	id.SetANACAP(nvme.ANACAPOptimized | nvme.ANACAPNonOptimized | nvme.ANACAPInaccessible |
		nvme.ANACAPPersistentLoss | nvme.ANACAPChange)
	id.SetANATT(uint8(min(255, (c.s.t.opts.ANATransitionTime+time.Second-1)/time.Second)))
	id.SetANAGRPMAX(limits.ANAGroups)
	id.SetNANAGRPID(limits.ANAGroups)
	id.SetMNAN(uint32(c.s.nn()))
	id.SetOAES(nvme.OAESNSAttrNotices | nvme.OAESANAChange)
	id.SetACL(3)
	id.SetFRMW(1<<nvme.FRMWSlotsShift | nvme.FRMWSlot1ReadOnly) // one slot, read-only
	id.SetSQES(nvme.QueueEntrySizes(nvme.CommandSizeShift))
	id.SetCQES(nvme.QueueEntrySizes(nvme.CompletionSizeShift))
	id.SetMAXCMD(uint16(c.port.MaxQueueDepth))
	id.SetNN(uint32(c.s.nn()))
	id.SetONCS(nvme.ONCSDSM | nvme.ONCSWriteZeroes | nvme.ONCSReservations)
	id.SetVWC(nvme.VWCPresent)
	id.SetIOCCSZ((nvme.CommandSize + c.port.InCapsuleDataSize) / 16)
	id.SetIORCSZ(nvme.CompletionSize / 16)
}

// identify fills Identify Namespace (NVMe base §5.15.2.2) into the zeroed
// id: one LBA format (NLBAF 0), the device's block size.
func (ns *Namespace) identify(id nvme.IdentifyNamespace) {
	nb := ns.nblocks.Load()
	id.SetNSZE(nb)
	id.SetNCAP(nb)
	id.SetNUSE(nb)
	id.SetNMIC(nvme.NMICShared)
	id.SetANAGRPID(ns.ANAGroup())
	rescap := uint8(nvme.RESCAPTypes | nvme.RESCAPIEKEY)
	if ns.statePath != "" {
		rescap |= nvme.RESCAPPTPL
	}
	id.SetRESCAP(rescap)
	id.SetNGUID(ns.nguid)
	id.SetEUI64(ns.eui64)
	id.LBAF(0).SetLBADS(uint8(ns.blockShift))
	if ns.dev.DiscardZeroes() {
		// Deallocated blocks read as zeroes; Write Zeroes may deallocate.
		id.SetDLFEAT(nvme.DLFEATReadZeroes | nvme.DLFEATWriteZeroesDeallocates)
	}
}

// descriptors is the Namespace Identification Descriptor list (NVMe base
// 1.4 §5.15.2, CNS 03h): an all-zero EUI64 or NGUID is no identifier and
// has no descriptor; the CSI is the NVM command set's.
func (ns *Namespace) descriptors() nvme.NSDescriptors {
	csi := uint8(0)
	d := nvme.NSDescriptors{UUID: &ns.uuid, CSI: &csi}
	if ns.eui64 != ([8]byte{}) {
		d.EUI64 = &ns.eui64
	}
	if ns.nguid != ([16]byte{}) {
		d.NGUID = &ns.nguid
	}
	return d
}

func handleGetLogPage(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	off := r.Cmd.LogPageOffset()
	if off&3 != 0 {
		return r.invalidField(nvme.ErrLocCDW12)
	}
	var log []byte
	switch r.Cmd.LogPageID() {
	case nvme.LogSupportedPages:
		log = make([]byte, nvme.SupportedLogPagesSize)
		nvme.PutSupportedLogPages(log, []uint8{nvme.LogSupportedPages, nvme.LogError, nvme.LogSMART,
			nvme.LogFirmwareSlot, nvme.LogChangedNSList, nvme.LogCommandEffects, nvme.LogANA, nvme.LogReservationNotification})
	case nvme.LogError:
		log = c.errorLog()
	case nvme.LogSMART:
		log = c.smartLog()
	case nvme.LogFirmwareSlot:
		log = make([]byte, nvme.FirmwareSlotLogSize)
		fw := nvme.FirmwareSlotLog{AFI: 1}
		fw.FRS[0] = c.s.t.opts.FirmwareRevision
		fw.MarshalTo(log)
	case nvme.LogChangedNSList:
		log = make([]byte, nvme.ChangedNSListSize)
		nvme.PutChangedNSList(log, c.takeChangedNS(r.Cmd.LogPageRAE()))
	case nvme.LogCommandEffects:
		log = commandEffectsLog()
	case nvme.LogReservationNotification:
		log = make([]byte, nvme.ResvNotificationSize)
		nvme.PutResvNotification(log, c.events.takeResvLog(r.Cmd.LogPageRAE()))
	case nvme.LogANA:
		p := c.anaLog(r.Cmd.LogPageLSP()&nvme.LSPANAReturnGroupsOnly != 0)
		c.events.logRead(aenANA, r.Cmd.LogPageRAE())
		return r.sendLogWindow(p.size, off, p.put)
	default:
		return nvme.StatusInvalidLogPage.WithDNR()
	}
	return r.sendLog(log, off)
}

// sendLog sends log from byte off, which the caller checked for alignment.
func (r *Request) sendLog(log []byte, off uint64) nvme.Status {
	if off > uint64(len(log)) {
		return r.invalidField(nvme.ErrLocCDW12)
	}
	r.fillData(log[off:])
	return nvme.StatusSuccess
}

// sendLogWindow sends from byte off of a log page size bytes long that is
// never built whole: put writes the bytes at [off, off+len(b)) into each
// data buffer b, zeros past the page (as fillData leaves them).
func (r *Request) sendLogWindow(size, off uint64, put func(b []byte, off uint64)) nvme.Status {
	if off > size {
		return r.invalidField(nvme.ErrLocCDW12)
	}
	r.dataWritten = true
	for _, seg := range r.Data {
		put(seg, off)
		off += uint64(len(seg))
	}
	return nvme.StatusSuccess
}

func (c *Controller) errorLog() []byte {
	log := make([]byte, errorLogEntries*nvme.ErrorLogEntrySize)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.errLog {
		c.errLog[i].MarshalTo(log[i*nvme.ErrorLogEntrySize:])
	}
	return log
}

func (c *Controller) smartLog() []byte {
	var sl nvme.SMARTLog
	for _, ns := range c.namespaces() {
		st := ns.Stats()
		// Data units are thousands of 512-byte units, rounded up (§5.14.1.2).
		sl.DataUnitsRead += (st.ReadBytes/512 + 999) / 1000
		sl.DataUnitsWritten += (st.WriteBytes/512 + 999) / 1000
		sl.HostReadCommands += st.ReadOps
		sl.HostWriteCommands += st.WriteOps
		sl.MediaErrors += st.Errors
	}
	sl.Temperature = 300
	sl.AvailableSpare = 100
	sl.AvailableSpareThreshold = 10
	sl.PowerCycles = 1
	sl.PowerOnHours = uint64(time.Since(c.created).Hours())
	c.mu.Lock()
	sl.NumErrLogEntries = c.errCount
	c.mu.Unlock()
	log := make([]byte, nvme.SMARTLogSize)
	sl.MarshalTo(log)
	return log
}

// Commands Supported and Effects (NVMe base §5.14.1.5): CSUPP, plus LBCC
// for commands that change logical block content.
var (
	adminEffects = map[uint8]uint32{
		nvme.OpAdminGetLogPage: nvme.EffectsCSUPP, nvme.OpAdminIdentify: nvme.EffectsCSUPP,
		nvme.OpAdminAbort: nvme.EffectsCSUPP, nvme.OpAdminSetFeatures: nvme.EffectsCSUPP,
		nvme.OpAdminGetFeatures: nvme.EffectsCSUPP, nvme.OpAdminAsyncEvent: nvme.EffectsCSUPP,
		nvme.OpAdminKeepAlive: nvme.EffectsCSUPP,
	}
	ioEffects = map[uint8]uint32{
		nvme.OpFlush: nvme.EffectsCSUPP, nvme.OpRead: nvme.EffectsCSUPP,
		nvme.OpWrite:        nvme.EffectsCSUPP | nvme.EffectsLBCC,
		nvme.OpWriteZeroes:  nvme.EffectsCSUPP | nvme.EffectsLBCC,
		nvme.OpDSM:          nvme.EffectsCSUPP | nvme.EffectsLBCC,
		nvme.OpResvRegister: nvme.EffectsCSUPP, nvme.OpResvReport: nvme.EffectsCSUPP,
		nvme.OpResvAcquire: nvme.EffectsCSUPP, nvme.OpResvRelease: nvme.EffectsCSUPP,
	}
)

func commandEffectsLog() []byte {
	log := make([]byte, nvme.CommandEffectsLogSize)
	nvme.PutCommandEffects(log, adminEffects, ioEffects)
	return log
}

func handleSetFeatures(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	fid := r.Cmd.FeatureID()
	v := r.Cmd.CDW(11)
	if r.Cmd.FeatureSave() {
		return nvme.StatusFeatureNotSaveable.WithDNR()
	}
	switch fid {
	case nvme.FeatNumberOfQueues:
		nsqr, ncqr := r.Cmd.NumQueues()
		if nsqr == nvme.NumQueuesInvalid || ncqr == nvme.NumQueuesInvalid {
			return r.invalidField(nvme.ErrLocCDW11)
		}
		n := uint32(max(nsqr, ncqr)) + 1
		n = min(n, uint32(c.port.MaxIOQueues))
		// No more than the host may still connect under its cap, so that a
		// host near it gets fewer I/O queues rather than a controller whose
		// I/O queue Connects fail. At least one: the field is 0's based.
		// Best effort: a snapshot, not a reservation, so two controllers
		// of one host set up at once may still see an I/O Connect refused.
		n = max(1, min(n, uint32(c.s.t.hostQueuesLeft(c.hostKey()))))
		c.mu.Lock()
		c.nrIOQ = uint16(n)
		c.mu.Unlock()
		r.setResult(nvme.MakeNumQueuesResult(uint16(n-1), uint16(n-1)))
	case nvme.FeatKeepAliveTimer:
		kato := time.Duration(v) * time.Millisecond
		if kato > 0 {
			kato = (kato + kasUnit - 1) / kasUnit * kasUnit
			kato = min(kato, c.s.t.opts.KATOMax)
		}
		c.mu.Lock()
		c.kato = kato
		switch {
		case kato == 0 && c.kaTimer != nil:
			c.kaTimer.Stop()
		case kato > 0 && c.kaTimer == nil:
			c.kaTimer = time.AfterFunc(kato, c.keepAliveExpired)
		case kato > 0:
			c.kaTimer.Reset(kato)
		}
		c.mu.Unlock()
	case nvme.FeatAsyncEventConfig:
		c.events.setAEC(v)
	case nvme.FeatVolatileWriteCache:
		c.wce.Store(v&1 != 0)
	case nvme.FeatHostIdentifier:
		// Over fabrics the host identifier is Connect's (nvmet answers
		// the same).
		return nvme.StatusCommandSequenceError.WithDNR()
	case nvme.FeatReservationMask:
		return c.setResvMask(r, v)
	case nvme.FeatReservationPersist:
		return setPTPL(r, v&1 != 0)
	case nvme.FeatArbitration, nvme.FeatPowerManagement, nvme.FeatTemperatureThreshold,
		nvme.FeatErrorRecovery, nvme.FeatWriteAtomicity:
		c.mu.Lock()
		c.feat[fid] = v
		c.mu.Unlock()
	default:
		return r.invalidField(nvme.ErrLocCDW10)
	}
	return nvme.StatusSuccess
}

func featureDefault(fid uint8) uint32 {
	if fid == nvme.FeatTemperatureThreshold {
		return 343 // 70 °C in Kelvin
	}
	return 0
}

func handleGetFeatures(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	fid := r.Cmd.FeatureID()
	sel := r.Cmd.FeatureSelect()
	if sel > nvme.FeatSelectSupported {
		return r.invalidField(nvme.ErrLocCDW10)
	}
	if sel == nvme.FeatSelectSupported {
		// Supported capabilities: changeable, not saveable, not per namespace.
		switch fid {
		case nvme.FeatNumberOfQueues, nvme.FeatKeepAliveTimer, nvme.FeatAsyncEventConfig, nvme.FeatVolatileWriteCache,
			nvme.FeatArbitration, nvme.FeatPowerManagement, nvme.FeatTemperatureThreshold, nvme.FeatErrorRecovery,
			nvme.FeatWriteAtomicity:
			r.setResult(nvme.FeatCapChangeable)
			return nvme.StatusSuccess
		case nvme.FeatHostIdentifier:
			return nvme.StatusSuccess
		case nvme.FeatReservationMask, nvme.FeatReservationPersist:
			r.setResult(nvme.FeatCapChangeable | nvme.FeatCapPerNamespace)
			return nvme.StatusSuccess
		}
		return r.invalidField(nvme.ErrLocCDW10)
	}
	current := sel == nvme.FeatSelectCurrent
	c.mu.Lock()
	defer c.mu.Unlock()
	switch fid {
	case nvme.FeatNumberOfQueues:
		n := uint32(c.port.MaxIOQueues)
		if current {
			n = uint32(c.nrIOQ)
		}
		r.setResult(nvme.MakeNumQueuesResult(uint16(n-1), uint16(n-1)))
	case nvme.FeatKeepAliveTimer:
		if current {
			r.setResult(uint32(c.kato / time.Millisecond))
		}
	case nvme.FeatAsyncEventConfig:
		if current {
			r.setResult(c.events.getAEC())
		}
	case nvme.FeatVolatileWriteCache:
		if !current || c.wce.Load() {
			r.setResult(1)
		}
	case nvme.FeatArbitration, nvme.FeatPowerManagement, nvme.FeatTemperatureThreshold,
		nvme.FeatErrorRecovery, nvme.FeatWriteAtomicity:
		v, ok := c.feat[fid]
		if !current || !ok {
			v = featureDefault(fid)
		}
		r.setResult(v)
	case nvme.FeatReservationMask, nvme.FeatReservationPersist:
		ns := c.namespace(r.Cmd.NSID())
		if ns == nil {
			r.errLoc = nvme.ErrLocNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		switch {
		case fid == nvme.FeatReservationPersist && current && ns.resv.load().PTPL:
			r.setResult(1)
		case fid == nvme.FeatReservationMask && current:
			if m, ok := c.resvMasks[ns.nsid]; ok {
				r.setResult(m)
			} else {
				r.setResult(c.resvMaskAll)
			}
		}
	case nvme.FeatHostIdentifier:
		// Only the 128-bit host identifier exists over fabrics (EXHID).
		if !r.Cmd.HostIDExtended() {
			return r.invalidField(nvme.ErrLocCDW11)
		}
		r.fillData(c.hostID[:])
	default:
		return r.invalidField(nvme.ErrLocCDW10)
	}
	return nvme.StatusSuccess
}
