package control

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The steps plan builds. Each does one fabric change and records it in
// m.running; m.mu is held.

func (m *Manager) addSubsystem(sc config.Subsystem) step {
	var opened []backend
	var keys map[string]fabric.HostAuth
	var policy fabric.AuthPolicy
	return step{
		what: "add subsystem " + sc.NQN,
		prepare: func() (err error) {
			if keys, err = hostAuths(sc.Hosts); err != nil {
				return fmt.Errorf("subsystem %s: %w", sc.NQN, err)
			}
			if policy, err = authPolicy(sc); err != nil {
				return fmt.Errorf("subsystem %s: %w", sc.NQN, err)
			}
			for _, nc := range sc.Namespaces {
				b, err := openNamespace(sc.NQN, nc, m.log)
				if err != nil {
					releaseAll(opened)
					opened = nil
					return fmt.Errorf("subsystem %s namespace %d: %w", sc.NQN, nc.NSID, err)
				}
				opened = append(opened, b)
			}
			return nil
		},
		abort: func() { releaseAll(opened) },
		do: func(m *Manager) error {
			s, err := m.tgt.AddSubsystem(fabric.SubsystemConfig{
				NQN: sc.NQN, Serial: sc.Serial, Model: sc.Model, AllowAnyHost: sc.AllowAnyHost, Hosts: config.HostNQNs(sc.Hosts),
				HostAuth: keys, Auth: policy, Ports: portIDs(sc.Ports),
				CNTLIDMin: nvme.CNTLID(sc.CNTLIDMin), CNTLIDMax: nvme.CNTLID(sc.CNTLIDMax),
			})
			if err != nil {
				releaseAll(opened)
				return err
			}
			rs := sc
			rs.Namespaces = nil
			m.running.Subsystems = append(m.running.Subsystems, rs)
			for i, b := range opened {
				if err := m.attach(s, sc.Namespaces[i], b); err != nil {
					releaseAll(opened[i+1:])
					return err
				}
			}
			return nil
		},
	}
}

// attach adds an opened namespace to s and to the running configuration.
func (m *Manager) attach(s *fabric.Subsystem, nc config.Namespace, b backend) error {
	fc := b.NamespaceConfig
	fc.Hosts, fc.QoS = nc.Hosts, qosConfig(nc)
	if m.gw != nil {
		fc.Reservations = resvSharer{m}
	}
	ns, err := s.AddNamespace(fc)
	if err != nil {
		b.release()
		return err
	}
	if m.gw != nil {
		// Its I/O is refused until the group's reservations of it are
		// applied here (reconcileShared clears the mark).
		m.gw.sharedMu.Lock()
		ns.SetSharedStateUnknown(true)
		m.gw.sharedMu.Unlock()
	}
	rs := findSubsystem(m.running, s.NQN())
	rs.Namespaces = append(rs.Namespaces, nc)
	slices.SortFunc(rs.Namespaces, func(a, b config.Namespace) int { return int(int64(a.NSID) - int64(b.NSID)) })
	m.log.Info("namespace added", "subnqn", s.NQN(), "nsid", nc.NSID, "backend", nc.Backend, "path", nc.Path,
		"bytes", fc.Device.Size(), "block_size", fc.Device.BlockSize(), "uuid", nc.ResolvedUUID(s.NQN()).String())
	return nil
}

// liveSubsystem is the target's subsystem nqn, which a step changes.
func (m *Manager) liveSubsystem(nqn string) (*fabric.Subsystem, error) {
	if s := m.tgt.Subsystem(nqn); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("subsystem %s: %w", nqn, fabric.ErrNoSubsystem)
}

func releaseAll(bs []backend) {
	for _, b := range bs {
		b.release()
	}
}

func (m *Manager) removeSubsystem(nqn string) step {
	return step{what: "remove subsystem " + nqn, do: func(m *Manager) error {
		err := m.tgt.RemoveSubsystem(nqn)
		m.running.Subsystems = slices.DeleteFunc(m.running.Subsystems, func(s config.Subsystem) bool { return s.NQN == nqn })
		return err
	}}
}

func (m *Manager) addNamespace(nqn string, nc config.Namespace) step {
	var b backend
	return step{
		what: fmt.Sprintf("add namespace %d to %s", nc.NSID, nqn),
		prepare: func() (err error) {
			b, err = openNamespace(nqn, nc, m.log)
			if err != nil {
				return fmt.Errorf("subsystem %s namespace %d: %w", nqn, nc.NSID, err)
			}
			return nil
		},
		abort: func() { b.release() },
		do: func(m *Manager) error {
			s := m.tgt.Subsystem(nqn)
			if s == nil {
				b.release()
				return fmt.Errorf("subsystem %s: %w", nqn, fabric.ErrNoSubsystem)
			}
			return m.attach(s, nc, b)
		},
	}
}

func (m *Manager) removeNamespace(nqn string, nsid uint32) step {
	return step{what: fmt.Sprintf("remove namespace %d from %s", nsid, nqn), do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		// Off the running configuration even if closing the backend
		// failed: the namespace is gone for hosts either way.
		err = s.RemoveNamespace(nvme.NSID(nsid))
		rs := findSubsystem(m.running, nqn)
		rs.Namespaces = slices.DeleteFunc(rs.Namespaces, func(n config.Namespace) bool { return n.NSID == nsid })
		m.log.Info("namespace removed", "subnqn", nqn, "nsid", nsid, "err", err)
		return err
	}}
}

// resizeNamespace makes namespace nc.NSID size bytes for hosts, which
// plan worked out from nc.Size (0: the backend's size then).
func (m *Manager) resizeNamespace(nqn string, nc config.Namespace, size int64) step {
	what := fmt.Sprintf("resize namespace %d of %s to %v", nc.NSID, nqn, config.Bytes(size))
	if nc.Size == 0 {
		what += ", the size of " + backingName(nc)
	}
	return step{what: what, do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		if err := s.ResizeNamespace(nvme.NSID(nc.NSID), size); err != nil {
			return err
		}
		*findNamespace(findSubsystem(m.running, nqn), nc.NSID) = nc
		m.log.Info("namespace resized", "subnqn", nqn, "nsid", nc.NSID, "bytes", size, "size", nc.Size)
		return nil
	}}
}

func (m *Manager) addHost(nqn string, host config.Host) step {
	return hostStep(fmt.Sprintf("allow host %s on %s", host.NQN, nqn), nqn, host, func(m *Manager, s *fabric.Subsystem, keys fabric.HostAuth) {
		// The secrets first: the host is never in without them.
		s.SetHostAuth(host.NQN, keys)
		s.AddHost(host.NQN)
		rs := findSubsystem(m.running, nqn)
		rs.Hosts = append(rs.Hosts, host)
	})
}

// hostStep is a step on host's entry in subsystem nqn that parses its
// secrets first (prepare): apply gets the live subsystem and the keys.
func hostStep(what, nqn string, host config.Host, apply func(m *Manager, s *fabric.Subsystem, keys fabric.HostAuth)) step {
	var keys fabric.HostAuth
	return step{
		what:    what,
		prepare: func() (err error) { keys, err = hostAuth(host); return err },
		do: func(m *Manager) error {
			s, err := m.liveSubsystem(nqn)
			if err != nil {
				return err
			}
			apply(m, s, keys)
			return nil
		},
	}
}

// setHostAuth rotates a host's secrets on a subsystem (nqn), or on the
// discovery subsystem (nvme.DiscoveryNQN). Never logs them.
func (m *Manager) setHostAuth(nqn string, host config.Host) step {
	what := fmt.Sprintf("set the DH-HMAC-CHAP secrets of host %s on %s", host.NQN, nqn)
	return hostStep(what, nqn, host, func(m *Manager, s *fabric.Subsystem, keys fabric.HostAuth) {
		s.SetHostAuth(host.NQN, keys)
		hosts := &m.running.Discovery.Hosts
		if nqn != nvme.DiscoveryNQN {
			hosts = &findSubsystem(m.running, nqn).Hosts
		}
		switch h := config.FindHost(*hosts, host.NQN); {
		case nqn == nvme.DiscoveryNQN && !host.HasSecret():
			// discovery.hosts lists only hosts that must authenticate
			*hosts = slices.DeleteFunc(*hosts, func(e config.Host) bool { return e.NQN == host.NQN })
		case h != nil:
			*h = host
		default:
			*hosts = append(*hosts, host)
		}
		m.log.Info("host secrets set", "subnqn", nqn, "hostnqn", host.NQN, "authenticate", keys.Required(), "bidirectional", !keys.CtrlKey.IsZero())
	})
}

func (m *Manager) setAuthPolicy(sc config.Subsystem) step {
	var p fabric.AuthPolicy
	return step{
		what:    fmt.Sprintf("set dhchap_hashes %v and dhchap_dhgroups %v on %s", sc.DHCHAPHashes, sc.DHCHAPDHGroups, sc.NQN),
		prepare: func() (err error) { p, err = authPolicy(sc); return err },
		do: func(m *Manager) error {
			s, err := m.liveSubsystem(sc.NQN)
			if err != nil {
				return err
			}
			s.SetAuthPolicy(p)
			rs := findSubsystem(m.running, sc.NQN)
			rs.DHCHAPHashes, rs.DHCHAPDHGroups = sc.DHCHAPHashes, sc.DHCHAPDHGroups
			return nil
		},
	}
}

func (m *Manager) removeHost(nqn, host string) step {
	return step{what: fmt.Sprintf("remove host %s from %s", host, nqn), do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		n := s.RemoveHost(host)
		s.SetHostAuth(host, fabric.HostAuth{})
		rs := findSubsystem(m.running, nqn)
		rs.Hosts = slices.DeleteFunc(rs.Hosts, func(h config.Host) bool { return h.NQN == host })
		m.log.Info("host removed", "subnqn", nqn, "hostnqn", host, "controllers_deleted", n)
		return nil
	}}
}

func (m *Manager) setAllowAnyHost(nqn string, any bool) step {
	return step{what: fmt.Sprintf("allow_any_host %v on %s", any, nqn), do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		n := s.SetAllowAnyHost(any)
		findSubsystem(m.running, nqn).AllowAnyHost = any
		m.log.Info("allow_any_host changed", "subnqn", nqn, "allow_any_host", any, "controllers_deleted", n)
		return nil
	}}
}

func portName(p config.Port) string {
	return p.Transport + " " + net.JoinHostPort(p.Address, strconv.Itoa(p.Port))
}

func (m *Manager) addPort(p config.Port) step {
	return step{what: "add port " + portName(p), do: func(m *Manager) error {
		tr, err := m.transport(p.Transport)
		if err != nil {
			return fmt.Errorf("port %s: %w", portName(p), err)
		}
		fp := &fabric.Port{ID: uint16(p.ID), Address: p.Address, Service: strconv.Itoa(p.Port)}
		if err := m.tgt.AddPort(tr, fp); err != nil {
			return err
		}
		m.running.Ports = append(m.running.Ports, p)
		return m.tgt.SetANAStates(fp.ID, anaStates(p.ANAGroups))
	}}
}

func (m *Manager) removePort(p config.Port) step {
	return step{what: "remove port " + portName(p), do: func(m *Manager) error {
		err := m.tgt.RemovePort(uint16(p.ID))
		m.running.Ports = slices.DeleteFunc(m.running.Ports, func(q config.Port) bool { return q.ID == p.ID })
		return err
	}}
}

// setANAStates sets the ANA states of a port, live: hosts stay connected
// and are told.
func (m *Manager) setANAStates(p config.Port) step {
	return step{what: fmt.Sprintf("set the ANA states of port %d to %v", p.ID, p.ANAGroups), do: func(m *Manager) error {
		if err := m.tgt.SetANAStates(uint16(p.ID), anaStates(p.ANAGroups)); err != nil {
			return err
		}
		findPort(m.running, p.ID).ANAGroups = maps.Clone(p.ANAGroups)
		return nil
	}}
}

func (m *Manager) setReferrals(refs []config.Referral) step {
	return step{what: fmt.Sprintf("set %d referrals", len(refs)), do: func(m *Manager) error {
		m.tgt.SetReferrals(referrals(refs))
		m.running.Referrals = slices.Clone(refs)
		return nil
	}}
}

// setSubsystemPorts changes the ports that serve a subsystem; hosts
// connected through one that no longer does are disconnected.
func (m *Manager) setSubsystemPorts(nqn string, ports []int) step {
	return step{what: fmt.Sprintf("serve %s on ports %v", nqn, ports), do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		n := s.SetPorts(portIDs(ports))
		findSubsystem(m.running, nqn).Ports = slices.Clone(ports)
		m.log.Info("subsystem ports changed", "subnqn", nqn, "ports", ports, "controllers_deleted", n)
		return nil
	}}
}

// setCNTLIDRange changes the IDs new controllers of a subsystem get.
func (m *Manager) setCNTLIDRange(sc config.Subsystem) step {
	return step{what: fmt.Sprintf("controller IDs %d..%d for %s", sc.CNTLIDMin, sc.CNTLIDMax, sc.NQN), do: func(m *Manager) error {
		s, err := m.liveSubsystem(sc.NQN)
		if err != nil {
			return err
		}
		if err := s.SetCNTLIDRange(nvme.CNTLID(sc.CNTLIDMin), nvme.CNTLID(sc.CNTLIDMax)); err != nil {
			return err
		}
		rs := findSubsystem(m.running, sc.NQN)
		rs.CNTLIDMin, rs.CNTLIDMax = sc.CNTLIDMin, sc.CNTLIDMax
		return nil
	}}
}

// setANAGroup moves a namespace to another ANA group, live.
func (m *Manager) setANAGroup(nqn string, nsid, group uint32) step {
	return step{what: fmt.Sprintf("move namespace %d of %s to ANA group %d", nsid, nqn, group), do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		if err := s.SetNamespaceANAGroup(nvme.NSID(nsid), group); err != nil {
			return err
		}
		findNamespace(findSubsystem(m.running, nqn), nsid).ANAGroup = group
		return nil
	}}
}

// setNamespaceHosts masks a namespace to hosts (none: every host), live:
// the controllers whose view changed are told, and their hosts add or
// remove the disk.
func (m *Manager) setNamespaceHosts(nqn string, nsid uint32, hosts []string) step {
	what := fmt.Sprintf("show namespace %d of %s to hosts %v", nsid, nqn, hosts)
	if len(hosts) == 0 {
		what = fmt.Sprintf("show namespace %d of %s to every host", nsid, nqn)
	}
	return step{what: what, do: func(m *Manager) error {
		s, err := m.liveSubsystem(nqn)
		if err != nil {
			return err
		}
		if err := s.SetNamespaceHosts(nvme.NSID(nsid), hosts); err != nil {
			return err
		}
		findNamespace(findSubsystem(m.running, nqn), nsid).Hosts = slices.Clone(hosts)
		m.log.Info("namespace mask changed", "subnqn", nqn, "nsid", nsid, "hosts", hosts)
		return nil
	}}
}

// setNamespaceQoS sets a namespace's QoS limits, live.
func (m *Manager) setNamespaceQoS(nqn string, nc config.Namespace) step {
	return step{what: fmt.Sprintf("set the QoS of namespace %d of %s", nc.NSID, nqn), do: func(m *Manager) error {
		ns := m.liveNamespace(nqn, nc.NSID)
		if ns == nil {
			return fmt.Errorf("namespace %d of %s: %w", nc.NSID, nqn, fabric.ErrNoNamespace)
		}
		if err := ns.SetQoS(qosConfig(nc)); err != nil {
			return err
		}
		rn := findNamespace(findSubsystem(m.running, nqn), nc.NSID)
		rn.QoS = nc.QoS
		rn.QoSPerHost = config.QoSPerHost{Default: nc.QoSPerHost.Default, Hosts: slices.Clone(nc.QoSPerHost.Hosts)}
		m.log.Info("namespace QoS changed", "subnqn", nqn, "nsid", nc.NSID, "qos", nc.QoS, "qos_per_host", nc.QoSPerHost)
		return nil
	}}
}
