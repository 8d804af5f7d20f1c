package fabric

import (
	"math/bits"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Offsets of command fields, reported as error log parameter locations.
const (
	locNSID  = 4
	locCDW10 = 40
	locCDW11 = 44
	locCDW12 = 48
)

func (c *Controller) parseAdmin(r *Request) nvme.Status {
	if !c.ready() {
		// Only Fabrics commands before CSTS.RDY (NVMe-oF 1.1 §3.5).
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	disc := c.isDiscovery()
	switch r.Cmd.Opcode() {
	case nvme.OpAdminIdentify:
		r.DataLen, r.Dir, r.handle = nvme.IdentifyDataSize, DirCtrlToHost, handleIdentify
	case nvme.OpAdminGetLogPage:
		n := uint64(r.Cmd.LogPageNumDwords()) * 4
		if n > uint64(c.port.MDTS) {
			return r.invalidField(locCDW10)
		}
		r.DataLen, r.Dir, r.handle = uint32(n), DirCtrlToHost, handleGetLogPage
	case nvme.OpAdminSetFeatures:
		r.handle = handleSetFeatures
	case nvme.OpAdminGetFeatures:
		if r.Cmd.FeatureID() == nvme.FeatHostIdentifier && !disc {
			r.DataLen, r.Dir = 16, DirCtrlToHost
		}
		r.handle = handleGetFeatures
	case nvme.OpAdminAsyncEvent:
		r.handle = handleAsyncEvent
	case nvme.OpAdminKeepAlive:
		r.handle = handleKeepAlive
	case nvme.OpAdminAbort:
		if disc {
			return nvme.StatusInvalidOpcode.WithDNR()
		}
		r.handle = handleAbort
	default:
		r.errLoc = 0
		return nvme.StatusInvalidOpcode.WithDNR()
	}
	return nvme.StatusSuccess
}

// fillData copies src into the data buffers and zeroes the rest: the
// buffers are reused and must not leak earlier contents to the host.
func (r *Request) fillData(src []byte) {
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
		id := c.identify()
		id.MarshalTo(buf[:])
	case nvme.CNSNamespace:
		if c.isDiscovery() {
			return r.invalidField(locCDW10)
		}
		nsid := r.Cmd.NSID()
		if nsid == 0 || nsid > c.s.nn() {
			r.errLoc = locNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		// An inactive NSID returns zeroes (NVMe base §5.15.2).
		if ns := c.s.namespace(nsid); ns != nil {
			id := ns.identify()
			id.MarshalTo(buf[:])
		}
	case nvme.CNSActiveNSList:
		if c.isDiscovery() {
			return r.invalidField(locCDW10)
		}
		start := r.Cmd.NSID()
		if start >= 0xfffffffe {
			r.errLoc = locNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		var ids []uint32
		for _, id := range c.s.activeNSIDs() {
			if id > start {
				ids = append(ids, id)
			}
		}
		nvme.PutNSList(buf[:], ids)
	case nvme.CNSNSDescriptorList:
		if c.isDiscovery() {
			return r.invalidField(locCDW10)
		}
		ns := c.s.namespace(r.Cmd.NSID())
		if ns == nil {
			r.errLoc = locNSID
			return nvme.StatusInvalidNamespace.WithDNR()
		}
		csi := uint8(0)
		nvme.PutNSDescriptors(buf[:], nvme.NSDescriptors{NGUID: &ns.nguid, UUID: &ns.uuid, CSI: &csi})
	default:
		return r.invalidField(locCDW10)
	}
	r.fillData(buf[:])
	return nvme.StatusSuccess
}

// identify builds Identify Controller (NVMe base §5.15.2.1, NVMe-oF §4.1).
func (c *Controller) identify() nvme.IdentifyController {
	o := c.s.t.opts
	id := nvme.IdentifyController{
		SerialNumber:     c.s.serial,
		ModelNumber:      c.s.model,
		FirmwareRevision: o.FirmwareRevision,
		MDTS:             uint8(bits.TrailingZeros32(c.port.MDTS / 4096)),
		CNTLID:           c.id,
		Version:          nvme.MakeVS(1, 3, 0),
		CTRATT:           1, // 128-bit host identifier
		LPA:              1 << 2,
		ELPE:             errorLogEntries - 1,
		AERL:             aerLimit - 1,
		KAS:              uint16(kasUnit / (100 * time.Millisecond)),
		SubNQN:           c.s.nqn,
		MSDBD:            1,
		// SGLs without alignment, keyed data blocks, SGLs longer than the
		// data, and offsets for in-capsule data (the Linux host's test for
		// inline data is bit 20).
		SGLS: 1 | 1<<2 | 1<<18 | 1<<20,
	}
	if c.isDiscovery() {
		id.CNTRLTYPE = 2
		id.MAXCMD = AdminQueueDepth
		id.OAES = 1 << 31 // discovery log page change notices
		return id
	}
	id.CNTRLTYPE = 1
	id.RAB = 6
	id.CMIC = 1 << 1 // more than one host may have a controller
	id.OAES = 1 << 8 // namespace attribute notices
	id.ACL = 3
	id.FRMW = 1<<1 | 1 // one slot, read-only
	id.SQES = 0x66
	id.CQES = 0x44
	id.MAXCMD = uint16(c.port.MaxQueueDepth)
	id.NN = c.s.nn()
	id.ONCS = 1<<2 | 1<<3 // Dataset Management, Write Zeroes
	id.VWC = 1
	id.IOCCSZ = (nvme.CommandSize + c.port.InCapsuleDataSize) / 16
	id.IORCSZ = nvme.CompletionSize / 16
	return id
}

// identify builds Identify Namespace (NVMe base §5.15.2.2).
func (ns *Namespace) identify() nvme.IdentifyNamespace {
	id := nvme.IdentifyNamespace{
		NSZE: ns.nblocks, NCAP: ns.nblocks, NUSE: ns.nblocks,
		NMIC:       1,
		NGUID:      ns.nguid,
		LBAFormats: []nvme.LBAFormat{{LBADS: uint8(ns.blockShift)}},
	}
	if ns.dev.DiscardZeroes() {
		// Deallocated blocks read as zeroes; Write Zeroes may deallocate.
		id.DLFEAT = 1 | 1<<3
	}
	return id
}

func handleGetLogPage(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	off := r.Cmd.LogPageOffset()
	if off&3 != 0 {
		return r.invalidField(locCDW12)
	}
	var log []byte
	lid := r.Cmd.LogPageID()
	if c.isDiscovery() {
		if lid != nvme.LogDiscovery {
			return nvme.StatusInvalidLogPage.WithDNR()
		}
		log = c.discoveryLog()
	} else {
		switch lid {
		case nvme.LogSupportedPages:
			log = make([]byte, 1024)
			nvme.PutSupportedLogPages(log, []uint8{nvme.LogSupportedPages, nvme.LogError, nvme.LogSMART,
				nvme.LogFirmwareSlot, nvme.LogChangedNSList, nvme.LogCommandEffects})
		case nvme.LogError:
			log = c.errorLog()
		case nvme.LogSMART:
			log = c.smartLog()
		case nvme.LogFirmwareSlot:
			log = make([]byte, 512)
			fw := nvme.FirmwareSlotLog{AFI: 1}
			fw.FRS[0] = c.s.t.opts.FirmwareRevision
			fw.MarshalTo(log)
		case nvme.LogChangedNSList:
			log = make([]byte, 4096)
			c.mu.Lock()
			nvme.PutChangedNSList(log, c.changedNS)
			if !r.Cmd.LogPageRAE() {
				c.changedNS = nil
			}
			c.mu.Unlock()
		case nvme.LogCommandEffects:
			log = commandEffectsLog()
		default:
			return nvme.StatusInvalidLogPage.WithDNR()
		}
	}
	if off > uint64(len(log)) {
		return r.invalidField(locCDW12)
	}
	r.fillData(log[off:])
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
	for _, nsid := range c.s.activeNSIDs() {
		ns := c.s.namespace(nsid)
		if ns == nil {
			continue
		}
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
	log := make([]byte, 512)
	sl.MarshalTo(log)
	return log
}

// commandEffectsLog marks the supported commands (NVMe base §5.14.1.5):
// CSUPP, plus LBCC for commands that change logical block content.
func commandEffectsLog() []byte {
	log := make([]byte, 4096)
	set := func(idx int, v uint32) {
		log[idx*4] = byte(v)
	}
	for _, op := range []uint8{nvme.OpAdminGetLogPage, nvme.OpAdminIdentify, nvme.OpAdminAbort,
		nvme.OpAdminSetFeatures, nvme.OpAdminGetFeatures, nvme.OpAdminAsyncEvent, nvme.OpAdminKeepAlive} {
		set(int(op), 1)
	}
	for _, op := range []uint8{nvme.OpFlush, nvme.OpRead} {
		set(256+int(op), 1)
	}
	for _, op := range []uint8{nvme.OpWrite, nvme.OpWriteZeroes, nvme.OpDSM} {
		set(256+int(op), 1|1<<1)
	}
	return log
}

func handleSetFeatures(r *Request) nvme.Status {
	c := r.q.ctrl.Load()
	fid := r.Cmd.FeatureID()
	v := r.Cmd.CDW(11)
	if r.Cmd.FeatureSave() {
		return nvme.StatusFeatureNotSaveable.WithDNR()
	}
	if c.isDiscovery() && fid != nvme.FeatKeepAliveTimer && fid != nvme.FeatAsyncEventConfig {
		return r.invalidField(locCDW10)
	}
	switch fid {
	case nvme.FeatNumberOfQueues:
		nsqr, ncqr := v&0xffff, v>>16
		if nsqr == 0xffff || ncqr == 0xffff {
			return r.invalidField(locCDW11)
		}
		n := uint32(max(nsqr, ncqr)) + 1
		n = min(n, uint32(c.port.MaxIOQueues))
		c.mu.Lock()
		c.nrIOQ = uint16(n)
		c.nrIOQSet = true
		c.mu.Unlock()
		r.setResult((n-1)<<16 | (n - 1))
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
		c.mu.Lock()
		c.aec = v
		c.mu.Unlock()
	case nvme.FeatVolatileWriteCache:
		c.wce.Store(v&1 != 0)
	case nvme.FeatArbitration, nvme.FeatPowerManagement, nvme.FeatTemperatureThreshold,
		nvme.FeatErrorRecovery, nvme.FeatWriteAtomicity:
		c.mu.Lock()
		c.feat[fid] = v
		c.mu.Unlock()
	default:
		return r.invalidField(locCDW10)
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
	if sel > 3 {
		return r.invalidField(locCDW10)
	}
	if c.isDiscovery() && fid != nvme.FeatKeepAliveTimer && fid != nvme.FeatAsyncEventConfig {
		return r.invalidField(locCDW10)
	}
	if sel == 3 {
		// Supported capabilities: changeable, not saveable, not per namespace.
		switch fid {
		case nvme.FeatNumberOfQueues, nvme.FeatKeepAliveTimer, nvme.FeatAsyncEventConfig, nvme.FeatVolatileWriteCache,
			nvme.FeatArbitration, nvme.FeatPowerManagement, nvme.FeatTemperatureThreshold, nvme.FeatErrorRecovery,
			nvme.FeatWriteAtomicity:
			r.setResult(1 << 2)
			return nvme.StatusSuccess
		case nvme.FeatHostIdentifier:
			return nvme.StatusSuccess
		}
		return r.invalidField(locCDW10)
	}
	current := sel == 0
	c.mu.Lock()
	defer c.mu.Unlock()
	switch fid {
	case nvme.FeatNumberOfQueues:
		n := uint32(c.port.MaxIOQueues)
		if current {
			n = uint32(c.nrIOQ)
		}
		r.setResult((n-1)<<16 | (n - 1))
	case nvme.FeatKeepAliveTimer:
		if current {
			r.setResult(uint32(c.kato / time.Millisecond))
		}
	case nvme.FeatAsyncEventConfig:
		if current {
			r.setResult(c.aec)
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
	case nvme.FeatHostIdentifier:
		// Only the 128-bit host identifier exists over fabrics (EXHID).
		if r.Cmd.CDW(11)&1 == 0 {
			return r.invalidField(locCDW11)
		}
		r.fillData(c.hostID[:])
	default:
		return r.invalidField(locCDW10)
	}
	return nvme.StatusSuccess
}
