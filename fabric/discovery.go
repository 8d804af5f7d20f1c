package fabric

import (
	"net"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

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
	var recs []rec
	for _, p := range t.Ports() {
		for _, s := range t.Subsystems() {
			if s.hostAllowed(c.hostNQN) {
				recs = append(recs, rec{p, s})
			}
		}
	}
	log := make([]byte, nvme.DiscoveryLogHeaderSize+len(recs)*nvme.DiscoveryLogEntrySize)
	nvme.PutDiscoveryLogHeader(log, t.discoveryGeneration(), uint64(len(recs)))
	for i, rc := range recs {
		addr := rc.p.Address
		if ip := net.ParseIP(addr); ip != nil && ip.IsUnspecified() && local != "" {
			addr = local
		}
		e := nvme.DiscoveryLogEntry{
			TRTYPE: rc.p.TRType, ADRFAM: rc.p.AdrFam, SUBTYPE: nvme.SubtypeNVMe,
			PORTID: rc.p.ID, CNTLID: nvme.CNTLIDDynamic, ASQSZ: AdminQueueDepth,
			TRSVCID: rc.p.Service, SubNQN: rc.s.nqn, TRADDR: addr, TSAS: rc.p.TSAS,
		}
		e.MarshalTo(log[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:])
	}
	return log
}
