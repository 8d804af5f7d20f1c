package fabric

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// staleMarker fills the data buffers before each fuzzed command, standing
// for what an earlier command left there.
const staleMarker = "\xeeSTALE\xee\x00"

// FuzzCommand sends arbitrary capsules with arbitrary data to an admin and
// an I/O queue: every one must complete, echo its CID, never panic, and a
// command that succeeds moving data to the host must have written all of it.
func FuzzCommand(f *testing.F) {
	seed := func(c nvme.Command, qid byte) {
		b := append([]byte{qid}, c...)
		f.Add(b, make([]byte, 64))
	}
	seed(ioCmd(nvme.OpRead, 1, 0, 1), 1)
	seed(ioCmd(nvme.OpWrite, 2, 8, 8), 1)
	seed(ioCmd(nvme.OpDSM, 3, 0, 1), 1)
	id := newCmd(nvme.OpAdminIdentify, 4)
	id.SetIdentify(nvme.CNSController, 0, 0)
	seed(withData(id, 4096), 0)
	gl := newCmd(nvme.OpAdminGetLogPage, 5)
	gl.SetGetLogPage(nvme.LogSMART, 128, 0)
	seed(withData(gl, 512), 0)
	seed(connectCmd(1, 31, 0), 1)
	// Get Features Host Identifier, supported capabilities: once sent 16
	// bytes it never wrote.
	hid := newCmd(nvme.OpAdminGetFeatures, 6)
	hid.SetCDW(10, uint32(nvme.FeatHostIdentifier)|uint32(nvme.FeatSelectSupported)<<8)
	seed(withData(hid, 16), 0)
	f.Fuzz(func(t *testing.T, in []byte, data []byte) {
		if len(in) < 1+nvme.CommandSize {
			return
		}
		r := newRig(t)
		admin, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
		h := admin
		if in[0]&1 == 1 {
			h = r.ioConnect(1, cntlid)
		}
		c := nvme.Command(append([]byte(nil), in[1:1+nvme.CommandSize]...))
		// Offer at most 1 MiB whatever the SGL says.
		if n := int(c.SGL1().Length()); n > len(data) && n <= 1<<20 {
			data = append(data, make([]byte, n-len(data))...)
		}
		if c.Opcode() == nvme.OpAdminAsyncEvent && h == admin {
			return // held until an event: a valid reason not to complete
		}
		// What the buffers held before: a command must not send any of it.
		for i := range data {
			data[i] = staleMarker[i%len(staleMarker)]
		}
		rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
		moved, err := h.lq.SubmitN(c, data, rsp)
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		if rsp.SQID() != h.lq.q.qid {
			t.Fatalf("SQID %d on queue %d", rsp.SQID(), h.lq.q.qid)
		}
		if rsp.Status().IsSuccess() && nvme.OpcodeDataDirection(c.Opcode()) == nvme.DataDirCtrlToHost {
			for i := 0; i+len(staleMarker) <= moved; i += len(staleMarker) {
				if string(data[i:i+len(staleMarker)]) == staleMarker {
					t.Fatalf("opcode %#x succeeded and sent bytes %d.. it never wrote", c.Opcode(), i)
				}
			}
		}
	})
}
