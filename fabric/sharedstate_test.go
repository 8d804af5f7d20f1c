package fabric

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestSharedStateUnknown: while the namespace's shared state cannot be
// read (another target may hold a reservation this one does not know),
// every I/O command to it fails with a path error the host retries on
// another path, never DNR; then it is served again.
func TestSharedStateUnknown(t *testing.T) {
	r := newRig(t)
	_, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	io := r.ioConnect(1, cntlid)
	buf := make([]byte, 512)
	io.mustOK(ioCmd(nvme.OpWrite, 1, 0, 1), buf)
	report := newCmd(nvme.OpResvReport, 5)
	report.SetNSID(1)
	report.SetCDW(10, uint32(len(buf)/4-1))
	report.SetCDW(11, 1) // EDS: 128-bit host IDs, as fabrics require
	cmds := []struct {
		name string
		cmd  nvme.Command
		data []byte
	}{
		{"write", ioCmd(nvme.OpWrite, 2, 0, 1), buf},
		{"read", ioCmd(nvme.OpRead, 3, 0, 1), buf},
		{"reservation report", withData(report, len(buf)), buf},
	}
	r.ns.SetSharedStateUnknown(true)
	for _, c := range cmds {
		st := io.submit(c.cmd, c.data).Status()
		if st.DNR() || st.SCT() != nvme.SCTPath {
			t.Errorf("%s while the shared state is unknown: %v, want a path error without DNR", c.name, st)
		}
	}
	r.ns.SetSharedStateUnknown(false)
	for _, c := range cmds {
		io.mustOK(c.cmd, c.data)
	}
}
