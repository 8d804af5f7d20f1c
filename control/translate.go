package control

import (
	"log/slog"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TargetOptions are the core's options from a configuration.
func TargetOptions(c *config.Config, firmware string, log *slog.Logger) fabric.Options {
	return fabric.Options{
		KATOMax:               c.Controller.KeepAliveTimeoutMax,
		MaxConnectionsPerHost: c.Controller.MaxConnectionsPerHost,
		ANATransitionTime:     c.ANATransitionTime,
		StateDir:              c.StateDir,
		FirmwareRevision:      firmware,
		Logger:                log,
	}
}

// anaStates are a port's ANA group states (Validate checked the names).
func anaStates(groups map[string]string) map[uint32]nvme.ANAState {
	out := make(map[uint32]nvme.ANAState, len(groups))
	for g, name := range groups {
		id, _ := strconv.Atoi(g)
		s, _ := nvme.ParseANAState(name)
		out[uint32(id)] = s
	}
	return out
}

func referrals(refs []config.Referral) []fabric.Referral {
	out := make([]fabric.Referral, len(refs))
	for i, r := range refs {
		out[i] = fabric.Referral{Transport: r.Transport, Address: r.Address, Service: strconv.Itoa(r.Port), PortID: uint16(r.PortID)}
	}
	return out
}

func portIDs(ids []int) []uint16 {
	out := make([]uint16, len(ids))
	for i, id := range ids {
		out[i] = uint16(id)
	}
	return out
}

// The one place configuration structs become the core's option types
// (config knows the file format only; the transports' options are made in
// cmd, which links them).

// hostAuth is a host entry's secrets, read from files where given.
func hostAuth(h config.Host) (fabric.HostAuth, error) {
	key, ctrlKey, err := h.Secrets()
	return fabric.HostAuth{Key: key, CtrlKey: ctrlKey}, err
}

// hostAuths is the secrets of the hosts that have any, by NQN.
func hostAuths(hosts []config.Host) (map[string]fabric.HostAuth, error) {
	out := map[string]fabric.HostAuth{}
	for _, h := range hosts {
		if !h.HasSecret() {
			continue
		}
		a, err := hostAuth(h)
		if err != nil {
			return nil, err
		}
		out[h.NQN] = a
	}
	return out, nil
}

// authPolicy is the subsystem's allowed hashes and groups; the zero policy
// (fabric.DefaultAuthPolicy) when it names none.
func authPolicy(s config.Subsystem) (fabric.AuthPolicy, error) {
	hs, gs, err := s.AuthNames()
	return fabric.AuthPolicy{Hashes: hs, Groups: gs}, err
}

// qosLimits is a set of QoS limits as fabric takes them.
func qosLimits(q config.QoS) fabric.QoSLimits {
	return fabric.QoSLimits{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		BW: uint64(q.BW), ReadBW: uint64(q.ReadBW), WriteBW: uint64(q.WriteBW)}
}

// qosConfig is a namespace's QoS as fabric takes it.
func qosConfig(n config.Namespace) fabric.QoSConfig {
	c := fabric.QoSConfig{Limits: qosLimits(n.QoS), PerHost: qosLimits(n.QoSPerHost.Default)}
	if len(n.QoSPerHost.Hosts) > 0 {
		c.Hosts = make(map[string]fabric.QoSLimits, len(n.QoSPerHost.Hosts))
		for _, h := range n.QoSPerHost.Hosts {
			c.Hosts[h.NQN] = qosLimits(h.QoS)
		}
	}
	return c
}
