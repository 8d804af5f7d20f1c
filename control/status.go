package control

import (
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Status is what the target serves and who is connected.
type Status struct {
	Ports       []PortStatus       `json:"ports"`
	Subsystems  []SubsystemStatus  `json:"subsystems"`
	Controllers []ControllerStatus `json:"controllers"`
}

// PortStatus is one port.
type PortStatus struct {
	ID        uint16 `json:"id"`
	Transport string `json:"transport"`
	Address   string `json:"address"`
	Port      int    `json:"port"`
}

// SubsystemStatus is one subsystem with its namespaces and allowed hosts.
type SubsystemStatus struct {
	NQN          string            `json:"nqn"`
	AllowAnyHost bool              `json:"allow_any_host"`
	Hosts        []string          `json:"hosts"`
	Serial       string            `json:"serial"`
	Model        string            `json:"model"`
	Namespaces   []NamespaceStatus `json:"namespaces"`
}

// NamespaceStatus is one namespace, its size as hosts see it.
type NamespaceStatus struct {
	NSID      uint32 `json:"nsid"`
	Backend   string `json:"backend"`
	Path      string `json:"path,omitempty"`
	Size      int64  `json:"size"`
	BlockSize uint32 `json:"block_size"`
	ReadOnly  bool   `json:"read_only"`
	UUID      string `json:"uuid"`
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
	for _, p := range cfg.Ports {
		st.Ports = append(st.Ports, PortStatus{ID: uint16(p.ID), Transport: p.Transport, Address: p.Address, Port: p.Port})
	}
	for _, sc := range cfg.Subsystems {
		ss := SubsystemStatus{NQN: sc.NQN, AllowAnyHost: sc.AllowAnyHost, Hosts: config.HostNQNs(sc.Hosts),
			Serial: sc.Serial, Model: sc.Model, Namespaces: []NamespaceStatus{}}
		fs := m.tgt.Subsystem(sc.NQN)
		for _, nc := range sc.Namespaces {
			ns := NamespaceStatus{NSID: nc.NSID, Backend: nc.Backend, Path: nc.Path, ReadOnly: nc.ReadOnly,
				UUID: nc.ResolvedUUID(sc.NQN).String(), Size: int64(nc.Size), BlockSize: nc.BlockSize}
			if fs != nil {
				for _, fn := range fs.Namespaces() {
					if fn.NSID() == nvme.NSID(nc.NSID) {
						info := fn.Info()
						ns.Size, ns.BlockSize = info.Size, info.BlockSize
					}
				}
			}
			ss.Namespaces = append(ss.Namespaces, ns)
		}
		st.Subsystems = append(st.Subsystems, ss)
	}
	for _, ci := range m.tgt.Controllers() {
		st.Controllers = append(st.Controllers, ControllerStatus{
			SubNQN: ci.SubNQN, HostNQN: ci.HostNQN, HostAddress: ci.HostAddress, CNTLID: uint16(ci.CNTLID),
			PortID: ci.PortID, IOQueues: ci.IOQueues, KATO: ci.KATO, Connected: ci.Connected, Discovery: ci.Discovery,
		})
	}
	return st
}
