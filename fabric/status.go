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
