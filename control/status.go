package control

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Status is what the target serves and who is connected.
type Status struct {
	Ports       []PortStatus       `json:"ports"`
	Subsystems  []SubsystemStatus  `json:"subsystems"`
	Controllers []ControllerStatus `json:"controllers"`
	// Group is the gateway group, for a gateway of one.
	Group *GroupStatus `json:"group,omitempty"`
}

// PortStatus is one port.
type PortStatus struct {
	ID        uint16 `json:"id"`
	Transport string `json:"transport"`
	Address   string `json:"address"`
	Port      int    `json:"port"`
	// ANAGroups is the state, through this port, of every ANA group a
	// namespace is in or the configuration names.
	ANAGroups map[string]string `json:"ana_groups"`
	// State is PortLive or PortDown; Reason and DownSince say why and
	// since when a port is down.
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"`
	DownSince *time.Time `json:"down_since,omitempty"`
}

// Port states.
const (
	// PortLive: the port accepts connections.
	PortLive = "live"
	// PortDown: the port accepts none; its RDMA device was removed, and
	// the transport listens again once the address is usable.
	PortDown = "down"
)

// portState sets ps's State, Reason and DownSince from tgt.
func portState(tgt *fabric.Target, ps *PortStatus) {
	ps.State = PortLive
	if st, ok := tgt.PortState(ps.ID); ok && st.Down {
		since := st.Since
		ps.State, ps.Reason, ps.DownSince = PortDown, st.Reason, &since
	}
}

// SubsystemStatus is one subsystem with its namespaces and allowed hosts.
type SubsystemStatus struct {
	NQN          string   `json:"nqn"`
	AllowAnyHost bool     `json:"allow_any_host"`
	Hosts        []string `json:"hosts"`
	Serial       string   `json:"serial"`
	Model        string   `json:"model"`
	// Ports are the IDs of the ports that serve it; empty: every port.
	Ports      []int             `json:"ports"`
	CNTLIDMin  int               `json:"cntlid_min"`
	CNTLIDMax  int               `json:"cntlid_max"`
	Namespaces []NamespaceStatus `json:"namespaces"`
}

// NamespaceStatus is one namespace, its size as hosts see it.
type NamespaceStatus struct {
	NSID    uint32 `json:"nsid"`
	Backend string `json:"backend"`
	Path    string `json:"path,omitempty"`
	// Pool and Image name an rbd namespace's image.
	Pool      string `json:"pool,omitempty"`
	Image     string `json:"image,omitempty"`
	Size      int64  `json:"size"`
	BlockSize uint32 `json:"block_size"`
	ReadOnly  bool   `json:"read_only"`
	UUID      string `json:"uuid"`
	ANAGroup  uint32 `json:"ana_group"`
	// Reservation is the namespace's persistent reservation, if any host
	// registered.
	Reservation *ReservationStatus `json:"reservation,omitempty"`
	// Hosts is the namespace's mask: the hosts that see it; none: every
	// host the subsystem allows.
	Hosts []string `json:"hosts,omitempty"`
	// QoS is its limits and what they held, if it has or had any.
	QoS *QoSStatus `json:"qos,omitempty"`
}

// QoSStatus is a namespace's QoS limits and what they held since the
// target started.
type QoSStatus struct {
	// Limits are the namespace's, all hosts together; PerHost those of
	// each host without limits of its own.
	Limits  QoSRequest `json:"limits"`
	PerHost QoSRequest `json:"per_host"`
	// Hosts are the hosts with limits of their own, or held commands.
	Hosts []HostQoSStatus `json:"hosts,omitempty"`
	// Held is how many commands wait now; HeldTotal how many waited, for
	// WaitedSeconds in all.
	Held          int     `json:"held"`
	HeldTotal     uint64  `json:"held_total"`
	WaitedSeconds float64 `json:"waited_seconds"`
}

// HostQoSStatus is one host's QoS on a namespace.
type HostQoSStatus struct {
	NQN string `json:"nqn"`
	// Limits are its own, nil when the default applies.
	Limits        *QoSRequest `json:"limits,omitempty"`
	Held          int         `json:"held"`
	WaitedSeconds float64     `json:"waited_seconds"`
}

// ReservationStatus is a namespace's registrants and holder.
type ReservationStatus struct {
	Generation  uint32             `json:"generation"`
	Type        string             `json:"type"` // "none", or the reservation type
	Holders     []string           `json:"holders"`
	Registrants []RegistrantStatus `json:"registrants"`
	PTPL        bool               `json:"persist_through_power_loss"`
}

// RegistrantStatus is a registered host (by host identifier) and its key.
type RegistrantStatus struct {
	HostID string `json:"host_id"`
	Key    uint64 `json:"key"`
}

// ControllerStatus is one connected controller.
type ControllerStatus struct {
	SubNQN      string        `json:"subnqn"`
	HostNQN     string        `json:"hostnqn"`
	HostAddress string        `json:"host_address"`
	CNTLID      uint16        `json:"cntlid"`
	PortID      uint16        `json:"port_id"`
	IOQueues    int           `json:"io_queues"`
	KATO        time.Duration `json:"kato_ns"`
	Connected   time.Time     `json:"connected"`
	Discovery   bool          `json:"discovery"`
}

// Status describes the running target.
func (m *Manager) Status() Status {
	m.mu.Lock()
	cfg := m.running.Clone()
	m.mu.Unlock()
	st := Status{Ports: []PortStatus{}, Subsystems: []SubsystemStatus{}, Controllers: []ControllerStatus{}}
	used := map[uint32]bool{}
	for _, sc := range cfg.Subsystems {
		ss := SubsystemStatus{NQN: sc.NQN, AllowAnyHost: sc.AllowAnyHost, Hosts: config.HostNQNs(sc.Hosts),
			Serial: sc.Serial, Model: sc.Model, Ports: append([]int{}, sc.Ports...), CNTLIDMin: sc.CNTLIDMin,
			CNTLIDMax: sc.CNTLIDMax, Namespaces: []NamespaceStatus{}}
		for _, nc := range sc.Namespaces {
			used[nc.ANAGroup] = true
			ns := NamespaceStatus{NSID: nc.NSID, Backend: nc.Backend, Path: nc.Path, Pool: nc.Pool, Image: nc.Image, ReadOnly: nc.ReadOnly,
				UUID: nc.ResolvedUUID(sc.NQN).String(), Size: int64(nc.Size), BlockSize: nc.BlockSize, ANAGroup: nc.ANAGroup}
			if fn := m.liveNamespace(sc.NQN, nc.NSID); fn != nil {
				info := fn.Info()
				ns.Size, ns.BlockSize = info.Size, info.BlockSize
				ns.Reservation = reservationStatus(fn.Reservation())
				ns.QoS = qosStatus(nc, fn.QoSStats())
			}
			ns.Hosts = slices.Clone(nc.Hosts)
			ss.Namespaces = append(ss.Namespaces, ns)
		}
		st.Subsystems = append(st.Subsystems, ss)
	}
	ports := map[uint16]*fabric.Port{}
	for _, p := range m.tgt.Ports() {
		ports[p.ID] = p
	}
	for _, p := range cfg.Ports {
		ps := PortStatus{ID: uint16(p.ID), Transport: p.Transport, Address: p.Address, Port: p.Port, ANAGroups: map[string]string{}}
		groups := maps.Clone(used)
		for g := range p.ANAGroups {
			id, _ := strconv.Atoi(g)
			groups[uint32(id)] = true
		}
		for g := range groups {
			state := nvme.ANAOptimized
			if fp := ports[ps.ID]; fp != nil {
				state = fp.ANAState(g)
			}
			ps.ANAGroups[strconv.Itoa(int(g))] = state.String()
		}
		portState(m.tgt, &ps)
		st.Ports = append(st.Ports, ps)
	}
	for _, ci := range m.tgt.Controllers() {
		st.Controllers = append(st.Controllers, ControllerStatus{
			SubNQN: ci.SubNQN, HostNQN: ci.HostNQN, HostAddress: ci.HostAddress, CNTLID: uint16(ci.CNTLID),
			PortID: ci.PortID, IOQueues: ci.IOQueues, KATO: ci.KATO, Connected: ci.Connected, Discovery: ci.Discovery,
		})
	}
	st.Group = m.Group()
	return st
}

// reservationStatus shows a namespace's reservation; nil when no host has
// registered.
func reservationStatus(r fabric.ReservationInfo) *ReservationStatus {
	if len(r.Registrants) == 0 && r.Type == 0 && !r.PTPL {
		return nil
	}
	rs := &ReservationStatus{Generation: r.Generation, Type: r.Type.String(), PTPL: r.PTPL, Holders: []string{},
		Registrants: []RegistrantStatus{}}
	for _, h := range r.Holders {
		rs.Holders = append(rs.Holders, h.String())
	}
	for _, g := range r.Registrants {
		rs.Registrants = append(rs.Registrants, RegistrantStatus{HostID: g.HostID.String(), Key: g.Key})
	}
	return rs
}

// qosStatus shows a namespace's QoS; nil when it has no limit and never
// held a command.
func qosStatus(nc config.Namespace, st fabric.QoSStats) *QoSStatus {
	if nc.QoS.IsZero() && nc.QoSPerHost.IsZero() && st.HeldTotal == 0 {
		return nil
	}
	qs := &QoSStatus{Limits: qosRequestOf(nc.QoS), PerHost: qosRequestOf(nc.QoSPerHost.Default),
		Held: st.Held, HeldTotal: st.HeldTotal, WaitedSeconds: st.Waited.Seconds()}
	hosts := map[string]*HostQoSStatus{}
	for _, h := range nc.QoSPerHost.Hosts {
		l := qosRequestOf(h.QoS)
		hosts[h.NQN] = &HostQoSStatus{NQN: h.NQN, Limits: &l}
	}
	for nqn, hs := range st.Hosts {
		h := hosts[nqn]
		if h == nil {
			h = &HostQoSStatus{NQN: nqn}
			hosts[nqn] = h
		}
		h.Held, h.WaitedSeconds = hs.Held, hs.Waited.Seconds()
	}
	for _, nqn := range slices.Sorted(maps.Keys(hosts)) {
		qs.Hosts = append(qs.Hosts, *hosts[nqn])
	}
	return qs
}
