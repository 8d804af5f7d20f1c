package fabric

import (
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Asynchronous events the target sends when its configuration changes while
// hosts are connected (after nvmet's nvmet_ns_changed and
// nvmet_port_disc_changed). An event of a kind is sent once and then masked
// until the host reads its log page without Retain Asynchronous Event, as
// the base specification (§5.2) asks: a host is never flooded.

// aenKind is one kind of notice a controller masks after sending it.
type aenKind uint8

const (
	aenNSAttr    aenKind = 1 << iota // Namespace Attribute Changed, log page 04h
	aenDiscovery                     // Discovery Log Page Change, log page 70h
)

// nsChanged records nsid in the Changed Namespace List of every controller
// of the subsystem, and sends each that enabled it a Namespace Attribute
// Changed notice.
func (s *Subsystem) nsChanged(nsid nvme.NSID) {
	for _, c := range s.controllerList() {
		c.nsChanged(nsid)
	}
}

func (c *Controller) nsChanged(nsid nvme.NSID) {
	c.mu.Lock()
	switch {
	case slices.Contains(c.changedNS, nsid):
	case len(c.changedNS) == 1 && c.changedNS[0] == nvme.NSIDAll:
		// Overflowed: the host rescans every namespace anyway.
	case len(c.changedNS) == nvme.MaxChangedNSEntries:
		c.changedNS = append(c.changedNS[:0], nvme.NSIDAll)
	default:
		c.changedNS = append(c.changedNS, nsid)
	}
	send := c.maskAEN(aenNSAttr, nvme.AECNSAttrNotices)
	c.mu.Unlock()
	if send {
		c.postEvent(nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoNSAttrChanged, nvme.LogChangedNSList))
	}
}

// maskAEN reports whether a notice of kind k, enabled by AEC bit aec, is to
// be sent now, and masks it if so. c.mu is held.
func (c *Controller) maskAEN(k aenKind, aec uint32) bool {
	if c.deleted || c.aec&aec == 0 || c.aenMasked&k != 0 {
		return false
	}
	c.aenMasked |= k
	return true
}

// takeChangedNS returns the Changed Namespace List and clears it; unless the
// host retains the event, the notice is unmasked.
func (c *Controller) takeChangedNS(retain bool) []nvme.NSID {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.changedNS
	c.changedNS = nil
	if !retain {
		c.aenMasked &^= aenNSAttr
	}
	return list
}

// discoveryChanged moves the discovery log's generation counter on and
// tells the discovery controllers that asked for it (a persistent discovery
// controller: nvme discover --persistent, or one with KATO).
func (t *Target) discoveryChanged() {
	t.mu.Lock()
	t.genctr++
	t.mu.Unlock()
	for _, c := range t.discovery.controllerList() {
		c.mu.Lock()
		send := c.maskAEN(aenDiscovery, nvme.AECDiscoveryChanged)
		c.mu.Unlock()
		if send {
			c.postEvent(nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoDiscoveryChanged, nvme.LogDiscovery))
		}
	}
}

// discoveryLogRead unmasks the discovery change notice once the host read
// the log page without retaining the event.
func (c *Controller) discoveryLogRead(retain bool) {
	if retain {
		return
	}
	c.mu.Lock()
	c.aenMasked &^= aenDiscovery
	c.mu.Unlock()
}

// controllerList snapshots the subsystem's controllers.
func (s *Subsystem) controllerList() []*Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		out = append(out, c)
	}
	return out
}
