package fabric

import (
	"errors"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// backendStatus is the one place a backend error becomes an NVMe status.
func backendStatus(op uint8, err error) nvme.Status {
	switch {
	case err == nil:
		return nvme.StatusSuccess
	case errors.Is(err, blockdev.ErrFenced), errors.Is(err, blockdev.ErrTimeout):
		// This gateway lost the storage, not the data: a status the host
		// retries on another path. The Linux host fails over on any Path
		// Related status without DNR (nvme_decide_disposition), but only
		// an ANA one (301h-303h, nvme_is_ana_error) takes this path out
		// of its choice (NVME_NS_ANA_PENDING) until it has read the ANA
		// log again; after 300h it may pick this path again at once (a
		// fenced client fails every I/O at once: a loop). A generic
		// status (06h) it retries here up to nvme_max_retries, then fails
		// the I/O with EIO. Neither marks the namespace or controller dead.
		return nvme.StatusANAInaccessible
	case op == nvme.OpDSM && (errors.Is(err, blockdev.ErrNotSupported) || errors.Is(err, syscall.EOPNOTSUPP)):
		// Deallocate is advisory: a backend that cannot discard keeps the data.
		return nvme.StatusSuccess
	case errors.Is(err, blockdev.ErrOutOfRange):
		return nvme.StatusLBAOutOfRange.WithDNR()
	case errors.Is(err, blockdev.ErrReadOnly), errors.Is(err, syscall.EROFS):
		return nvme.StatusNamespaceWriteProtected.WithDNR()
	case errors.Is(err, blockdev.ErrInvalidArgument):
		return nvme.StatusInvalidField.WithDNR()
	case errors.Is(err, blockdev.ErrNotSupported), errors.Is(err, syscall.EOPNOTSUPP):
		return nvme.StatusInvalidOpcode.WithDNR()
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return nvme.StatusCapacityExceeded.WithDNR()
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.EBADMSG):
		if op == nvme.OpRead {
			return nvme.StatusUnrecoveredReadError
		}
		return nvme.StatusWriteFault
	}
	// Anything else is a local fault the host may retry.
	return nvme.StatusInternalError
}

// fail maps a backend error, counts and logs it.
func (ns *Namespace) fail(r *Request, op uint8, err error) nvme.Status {
	st := backendStatus(op, err)
	if !st.IsSuccess() {
		ns.stats.shard(r).errors.Add(1)
		r.errLBA = r.Cmd.SLBA()
		// At most one line a second: a failing disk must not flood the log.
		now := time.Now().Unix()
		if last := ns.lastErrLog.Load(); now != last && ns.lastErrLog.CompareAndSwap(last, now) {
			r.q.log.Warn("backend I/O failed", "nsid", ns.nsid, "opcode", op, "err", err, "status", st.String())
		}
	}
	return st
}
