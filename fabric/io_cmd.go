package fabric

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func (c *Controller) parseIO(r *Request) nvme.Status {
	if !c.enabled.Load() {
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	ns := c.lookup(r.Cmd.NSID())
	if ns == nil {
		r.errLoc = nvme.ErrLocNSID
		return nvme.StatusInvalidNamespace.WithDNR()
	}
	r.ns = ns
	if st := c.ioPathStatus(ns); !st.IsSuccess() {
		return st // not DNR: the host retries on another path
	}
	switch op := r.Cmd.Opcode(); op {
	case nvme.OpRead, nvme.OpWrite:
		if st := ns.checkRange(r); !st.IsSuccess() {
			return st
		}
		n := uint64(r.Cmd.NumBlocks()) << ns.blockShift
		if n > uint64(c.port.MDTS) {
			return r.invalidField(nvme.ErrLocCDW12)
		}
		r.DataLen = uint32(n)
		if op == nvme.OpRead {
			r.Dir, r.handle = DirCtrlToHost, handleRead
		} else {
			if ns.readOnly {
				return nvme.StatusNamespaceWriteProtected.WithDNR()
			}
			r.Dir, r.handle = DirHostToCtrl, handleWrite
		}
	case nvme.OpFlush:
		r.handle = handleFlush
	case nvme.OpWriteZeroes:
		if ns.readOnly {
			return nvme.StatusNamespaceWriteProtected.WithDNR()
		}
		if st := ns.checkRange(r); !st.IsSuccess() {
			return st
		}
		r.handle = handleWriteZeroes
	case nvme.OpResvRegister, nvme.OpResvReport, nvme.OpResvAcquire, nvme.OpResvRelease:
		return c.parseResv(r)
	case nvme.OpDSM:
		if ns.readOnly && r.Cmd.DSMDeallocate() {
			return nvme.StatusNamespaceWriteProtected.WithDNR()
		}
		r.DataLen = uint32(r.Cmd.DSMNumRanges()) * nvme.DSMRangeSize
		r.Dir, r.handle = DirHostToCtrl, handleDSM
	default:
		r.errLoc = nvme.ErrLocOpcode
		return nvme.StatusInvalidOpcode.WithDNR()
	}
	return nvme.StatusSuccess
}

// checkRange rejects a command whose SLBA/NLB reach past the namespace.
func (ns *Namespace) checkRange(r *Request) nvme.Status {
	slba, nlb, nb := r.Cmd.SLBA(), uint64(r.Cmd.NumBlocks()), ns.nblocks.Load()
	if slba >= nb || nlb > nb-slba {
		r.errLoc = nvme.ErrLocCDW10
		r.errLBA = slba
		return nvme.StatusLBAOutOfRange.WithDNR()
	}
	return nvme.StatusSuccess
}

// submit runs fn inline for backends that never block, or hands it to the
// namespace's workers. When their queue is full (a flood of Write Zeroes or
// Dataset Management on a slow file), the command is refused with a status
// the host retries, rather than blocking the transport's poller and with it
// every other queue it serves.
func (ns *Namespace) submit(r *Request, fn handler) nvme.Status {
	if ns.work == nil {
		return fn(r)
	}
	r.io = fn
	if ns.work.submit(r) {
		return statusPending
	}
	r.io = nil
	ns.stats.workersFull.Add(1)
	return nvme.StatusCommandInterrupted
}

// submitQueued puts a read, write, flush or Write Zeroes on the queue's
// IOContext when it can, and otherwise submits fn.
func (ns *Namespace) submitQueued(r *Request, op uint8, fn handler) nvme.Status {
	if st, ok := ns.queueIO(r, op, nil); ok {
		return st
	}
	return ns.submit(r, fn)
}

func handleRead(r *Request) nvme.Status  { return r.ns.submitQueued(r, nvme.OpRead, doRead) }
func handleWrite(r *Request) nvme.Status { return r.ns.submitQueued(r, nvme.OpWrite, doWrite) }
func handleFlush(r *Request) nvme.Status { return r.ns.submitQueued(r, nvme.OpFlush, doFlush) }
func handleWriteZeroes(r *Request) nvme.Status {
	return r.ns.submitQueued(r, nvme.OpWriteZeroes, doWriteZeroes)
}

// handleDSM queues a deallocation's ranges on the queue's IOContext when
// the backend can (every range checked first: none is discarded of a
// command that fails), and otherwise submits doDSM.
func handleDSM(r *Request) nvme.Status {
	ns := r.ns
	if r.Cmd.DSMDeallocate() && ns.zeroQueuer != nil && r.ioContext() != nil {
		var buf [256 * nvme.DSMRangeSize]byte
		n := r.copyFromData(buf[:r.DataLen])
		dsm := buf[:n-n%nvme.DSMRangeSize]
		for i := 0; i < len(dsm); i += nvme.DSMRangeSize {
			if st := ns.checkDSMRange(r, nvme.DSMRange(dsm[i:i+nvme.DSMRangeSize])); !st.IsSuccess() {
				return st
			}
		}
		if st, ok := ns.queueIO(r, nvme.OpDSM, dsm); ok {
			return st
		}
	}
	return ns.submit(r, doDSM)
}

// checkDSMRange rejects a Dataset Management range past the namespace.
func (ns *Namespace) checkDSMRange(r *Request, rg nvme.DSMRange) nvme.Status {
	slba, nlb := rg.SLBA(), uint64(rg.NumBlocks())
	if nb := ns.nblocks.Load(); nlb != 0 && (slba >= nb || nlb > nb-slba) {
		r.errLBA = slba
		return nvme.StatusLBAOutOfRange.WithDNR()
	}
	return nvme.StatusSuccess
}

func doRead(r *Request) nvme.Status {
	ns := r.ns
	off := int64(r.Cmd.SLBA() << ns.blockShift)
	for _, seg := range r.Data {
		if _, err := ns.dev.ReadAt(seg, off); err != nil {
			return ns.fail(r, nvme.OpRead, err)
		}
		off += int64(len(seg))
	}
	r.dataWritten = true
	ns.stats.count(r, nvme.OpRead)
	return nvme.StatusSuccess
}

// durable reports whether write or Write Zeroes r must be durable before its
// completion: Force Unit Access, or a host that turned the volatile write
// cache off.
func (r *Request) durable() bool {
	return r.Cmd.FUA() || !r.q.ctrl.Load().wce.Load()
}

func doWrite(r *Request) nvme.Status {
	ns := r.ns
	off := int64(r.Cmd.SLBA() << ns.blockShift)
	for _, seg := range r.Data {
		if _, err := ns.dev.WriteAt(seg, off); err != nil {
			return ns.fail(r, nvme.OpWrite, err)
		}
		off += int64(len(seg))
	}
	if r.durable() {
		if err := ns.dev.Flush(); err != nil {
			return ns.fail(r, nvme.OpFlush, err)
		}
	}
	ns.stats.count(r, nvme.OpWrite)
	return nvme.StatusSuccess
}

func doFlush(r *Request) nvme.Status {
	ns := r.ns
	ns.stats.count(r, nvme.OpFlush)
	if err := ns.dev.Flush(); err != nil {
		return ns.fail(r, nvme.OpFlush, err)
	}
	return nvme.StatusSuccess
}

func doWriteZeroes(r *Request) nvme.Status {
	ns := r.ns
	ns.stats.shard(r).zeroOps.Add(1)
	off := int64(r.Cmd.SLBA() << ns.blockShift)
	n := int64(r.Cmd.NumBlocks()) << ns.blockShift
	if err := ns.dev.WriteZeroes(off, n); err != nil {
		return ns.fail(r, nvme.OpWriteZeroes, err)
	}
	if r.durable() {
		if err := ns.dev.Flush(); err != nil {
			return ns.fail(r, nvme.OpFlush, err)
		}
	}
	return nvme.StatusSuccess
}

func doDSM(r *Request) nvme.Status {
	ns := r.ns
	if !r.Cmd.DSMDeallocate() {
		// Only attributes (access hints): nothing to do.
		return nvme.StatusSuccess
	}
	var buf [256 * nvme.DSMRangeSize]byte
	n := r.copyFromData(buf[:r.DataLen])
	ns.stats.shard(r).discardOps.Add(1)
	for i := 0; i+nvme.DSMRangeSize <= n; i += nvme.DSMRangeSize {
		rg := nvme.DSMRange(buf[i : i+nvme.DSMRangeSize])
		slba, nlb := rg.SLBA(), uint64(rg.NumBlocks())
		if nlb == 0 {
			continue
		}
		if st := ns.checkDSMRange(r, rg); !st.IsSuccess() {
			return st
		}
		if err := ns.dev.Discard(int64(slba<<ns.blockShift), int64(nlb<<ns.blockShift)); err != nil {
			if st := ns.fail(r, nvme.OpDSM, err); !st.IsSuccess() {
				return st
			}
		}
	}
	return nvme.StatusSuccess
}
