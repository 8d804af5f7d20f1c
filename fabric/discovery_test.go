package fabric

import (
	"fmt"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestAdminOpcodes sends every admin command to an NVM and to a discovery
// controller: a discovery controller takes only Identify Controller, the
// discovery log, keep-alive and the two features NVMe-oF 1.1 §5 gives it.
func TestAdminOpcodes(t *testing.T) {
	r := newRig(t)
	nvm, _ := r.adminConnect(testNQN, testHostNQN, 0)
	disc, _ := r.adminConnect(nvme.DiscoveryNQN, testHostNQN, 0)

	cmd := func(op uint8, set func(c nvme.Command)) func() nvme.Command {
		return func() nvme.Command {
			c := newCmd(op, 30)
			if set != nil {
				set(c)
			}
			return c
		}
	}
	ident := func(cns uint8, nsid nvme.NSID) func() nvme.Command {
		return cmd(nvme.OpAdminIdentify, func(c nvme.Command) {
			c.SetIdentify(cns, 0, 0)
			c.SetNSID(nsid)
			withData(c, nvme.IdentifyDataSize)
		})
	}
	getLog := func(lid uint8, n int, off uint64) func() nvme.Command {
		return cmd(nvme.OpAdminGetLogPage, func(c nvme.Command) {
			c.SetNSID(nvme.NSIDAll)
			c.SetGetLogPage(lid, uint32(n/4), off)
			withData(c, n)
		})
	}
	feat := func(op, fid uint8, dw10, dw11 uint32, data int) func() nvme.Command {
		return cmd(op, func(c nvme.Command) {
			c.SetCDW(10, uint32(fid)|dw10)
			c.SetCDW(11, dw11)
			if data > 0 {
				withData(c, data)
			}
		})
	}
	var (
		ok      = nvme.StatusSuccess
		opcode  = nvme.StatusInvalidOpcode.WithDNR()
		field   = nvme.StatusInvalidField.WithDNR()
		logPage = nvme.StatusInvalidLogPage.WithDNR()
		noSave  = nvme.StatusFeatureNotSaveable.WithDNR()
	)
	tests := []struct {
		name          string
		cmd           func() nvme.Command
		data          int
		wantNVM, want nvme.Status // want: on the discovery controller
	}{
		{"identify controller", ident(nvme.CNSController, 0), 4096, ok, ok},
		{"identify namespace", ident(nvme.CNSNamespace, 1), 4096, ok, field},
		{"identify active list", ident(nvme.CNSActiveNSList, 0), 4096, ok, field},
		{"identify descriptors", ident(nvme.CNSNSDescriptorList, 1), 4096, ok, field},
		{"identify unknown CNS", ident(0x1f, 0), 4096, field, field},
		{"log discovery", getLog(nvme.LogDiscovery, 1024, 0), 1024, logPage, ok},
		{"log SMART", getLog(nvme.LogSMART, 512, 0), 512, ok, logPage},
		{"log error", getLog(nvme.LogError, 64, 0), 64, ok, logPage},
		{"log effects", getLog(nvme.LogCommandEffects, 4096, 0), 4096, ok, logPage},
		{"log unaligned offset", getLog(nvme.LogDiscovery, 64, 2), 64, field, field},
		{"log offset past the end", getLog(nvme.LogDiscovery, 64, 1<<20), 64, logPage, field},
		{"log offset past the end of SMART", getLog(nvme.LogSMART, 64, 1<<20), 64, field, logPage},
		{"log above MDTS", getLog(nvme.LogDiscovery, 256<<10, 0), 0, field, field},
		{"set keep-alive", feat(nvme.OpAdminSetFeatures, nvme.FeatKeepAliveTimer, 0, 0, 0), 0, ok, ok},
		{"set async event config", feat(nvme.OpAdminSetFeatures, nvme.FeatAsyncEventConfig, 0, nvme.AECDiscoveryChanged, 0), 0, ok, ok},
		{"set keep-alive saved", feat(nvme.OpAdminSetFeatures, nvme.FeatKeepAliveTimer, 1<<31, 0, 0), 0, noSave, noSave},
		{"set arbitration saved", feat(nvme.OpAdminSetFeatures, nvme.FeatArbitration, 1<<31, 0, 0), 0, noSave, noSave},
		{"set queues", feat(nvme.OpAdminSetFeatures, nvme.FeatNumberOfQueues, 0, 0, 0), 0, ok, field},
		{"set write cache", feat(nvme.OpAdminSetFeatures, nvme.FeatVolatileWriteCache, 0, 1, 0), 0, ok, field},
		{"set unknown", feat(nvme.OpAdminSetFeatures, 0x7e, 0, 0, 0), 0, field, field},
		{"get keep-alive", feat(nvme.OpAdminGetFeatures, nvme.FeatKeepAliveTimer, 0, 0, 0), 0, ok, ok},
		{"get async event config default", feat(nvme.OpAdminGetFeatures, nvme.FeatAsyncEventConfig, 1<<8, 0, 0), 0, ok, ok},
		{"get keep-alive capabilities", feat(nvme.OpAdminGetFeatures, nvme.FeatKeepAliveTimer, 3<<8, 0, 0), 0, ok, ok},
		{"get keep-alive bad select", feat(nvme.OpAdminGetFeatures, nvme.FeatKeepAliveTimer, 4<<8, 0, 0), 0, field, field},
		{"get queues", feat(nvme.OpAdminGetFeatures, nvme.FeatNumberOfQueues, 0, 0, 0), 0, ok, field},
		{"get host identifier", feat(nvme.OpAdminGetFeatures, nvme.FeatHostIdentifier, 0, 1, 16), 16, ok, field},
		{"get host identifier capabilities", feat(nvme.OpAdminGetFeatures, nvme.FeatHostIdentifier, 3<<8, 0, 16), 16, ok, field},
		{"get unknown", feat(nvme.OpAdminGetFeatures, 0x7e, 0, 0, 0), 0, field, field},
		{"keep alive", cmd(nvme.OpAdminKeepAlive, nil), 0, ok, ok},
		{"abort", cmd(nvme.OpAdminAbort, nil), 0, ok, opcode},
		// Async Event Request is held until an event: TestAsyncEventRequest.
	}
	handled := map[uint8]bool{
		nvme.OpAdminIdentify: true, nvme.OpAdminGetLogPage: true, nvme.OpAdminSetFeatures: true,
		nvme.OpAdminGetFeatures: true, nvme.OpAdminKeepAlive: true, nvme.OpAdminAbort: true,
		nvme.OpAdminAsyncEvent: true, nvme.OpFabrics: true,
	}
	for op := 0; op < 256; op++ {
		if !handled[uint8(op)] {
			tests = append(tests, struct {
				name          string
				cmd           func() nvme.Command
				data          int
				wantNVM, want nvme.Status
			}{fmt.Sprintf("opcode %#02x", op), cmd(uint8(op), nil), 0, opcode, opcode})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, h := range []struct {
				name string
				h    *host
				want nvme.Status
			}{{"nvm", nvm, tc.wantNVM}, {"discovery", disc, tc.want}} {
				if st := h.h.submit(tc.cmd(), make([]byte, tc.data)).Status(); st != h.want {
					t.Errorf("%s controller: status %v, want %v", h.name, st, h.want)
				}
			}
		})
	}
}
