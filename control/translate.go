package control

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

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
