package control

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// step is one change to the running target. prepare, when set, does what
// can fail before anything changes (opening a backend); abort undoes it
// when another step's prepare failed. do makes the change and records it
// in the running configuration.
type step struct {
	what    string
	prepare func() error
	abort   func()
	do      func(m *Manager) error
}

// ErrShrink refuses a namespace made smaller: the host's data past the new
// end would be lost. A forced change allows it.
var ErrShrink = errors.New("namespace would shrink")

// plan returns the steps that turn the running configuration old into
// next, and the keys whose change needs a restart. Removals come first,
// then changes in place, then additions, ports last, so that a host told
// of a new subsystem can connect to it.
func (m *Manager) plan(old, next *config.Config, opts changeOpts) (steps []step, restart []string, err error) {
	// A file or device serves one namespace. Checked on the whole next
	// configuration: a namespace replaced on its own path is in it once,
	// and the old one is removed before the new one is added.
	if err := next.CheckBackings(); err != nil {
		return nil, nil, err
	}
	restart = staticChanges(old, next)
	var removes, changes, adds []step
	for _, os := range old.Subsystems {
		if findSubsystem(next, os.NQN) == nil {
			removes = append(removes, m.removeSubsystem(os.NQN))
		}
	}
	for _, ns := range next.Subsystems {
		os := findSubsystem(old, ns.NQN)
		if os == nil {
			adds = append(adds, m.addSubsystem(ns))
			continue
		}
		if os.Serial != ns.Serial {
			restart = append(restart, subKey(ns.NQN, "serial"))
		}
		if os.Model != ns.Model {
			restart = append(restart, subKey(ns.NQN, "model"))
		}
		r, c, a, err := m.planSubsystem(*os, ns, opts)
		if err != nil {
			return nil, nil, err
		}
		removes, changes, adds = append(removes, r...), append(changes, c...), append(adds, a...)
	}
	changes = append(changes, m.planDiscovery(old.Discovery.Hosts, next.Discovery.Hosts)...)
	if !reflect.DeepEqual(old.Referrals, next.Referrals) {
		changes = append(changes, m.setReferrals(next.Referrals))
	}
	// Ports are known by ID. A port whose address changed is another
	// listener; one whose ANA states alone changed stays, and its hosts
	// with it.
	for _, op := range old.Ports {
		np := findPort(next, op.ID)
		if np == nil || !sameListener(op, *np) {
			removes = append(removes, m.removePort(op))
		}
	}
	for _, np := range next.Ports {
		switch op := findPort(old, np.ID); {
		case op == nil || !sameListener(*op, np):
			adds = append(adds, m.addPort(np))
		case !maps.Equal(op.ANAGroups, np.ANAGroups):
			changes = append(changes, m.setANAStates(np))
		}
	}
	return slices.Concat(removes, changes, adds), restart, nil
}

// sameListener reports whether two ports listen on the same address.
func sameListener(a, b config.Port) bool {
	return a.ID == b.ID && a.Transport == b.Transport && a.Address == b.Address && a.Port == b.Port
}

func findPort(c *config.Config, id int) *config.Port {
	for i := range c.Ports {
		if c.Ports[i].ID == id {
			return &c.Ports[i]
		}
	}
	return nil
}

// planDiscovery sets the secrets of the hosts that must authenticate to the
// discovery subsystem.
func (m *Manager) planDiscovery(old, next []config.Host) []step {
	var steps []step
	for _, h := range old {
		if config.FindHost(next, h.NQN) == nil {
			steps = append(steps, m.setHostAuth(nvme.DiscoveryNQN, config.Host{NQN: h.NQN}))
		}
	}
	for _, h := range next {
		if o := config.FindHost(old, h.NQN); o == nil || *o != h || h.HasSecretFile() {
			steps = append(steps, m.setHostAuth(nvme.DiscoveryNQN, h))
		}
	}
	return steps
}

// planSubsystem compares one subsystem's hosts and namespaces.
func (m *Manager) planSubsystem(os, ns config.Subsystem, opts changeOpts) (removes, changes, adds []step, err error) {
	nqn := ns.NQN
	for _, h := range os.Hosts {
		if config.FindHost(ns.Hosts, h.NQN) == nil {
			removes = append(removes, m.removeHost(nqn, h.NQN))
		}
	}
	for _, h := range ns.Hosts {
		if o := config.FindHost(os.Hosts, h.NQN); o != nil && (*o != h || h.HasSecretFile()) {
			// New secrets, or files whose content may have changed.
			changes = append(changes, m.setHostAuth(nqn, h))
		}
	}
	if !slices.Equal(os.DHCHAPHashes, ns.DHCHAPHashes) || !slices.Equal(os.DHCHAPDHGroups, ns.DHCHAPDHGroups) {
		changes = append(changes, m.setAuthPolicy(ns))
	}
	if os.AllowAnyHost && !ns.AllowAnyHost {
		removes = append(removes, m.setAllowAnyHost(nqn, false))
	}
	if !slices.Equal(os.Ports, ns.Ports) {
		changes = append(changes, m.setSubsystemPorts(nqn, ns.Ports))
	}
	if os.CNTLIDMin != ns.CNTLIDMin || os.CNTLIDMax != ns.CNTLIDMax {
		changes = append(changes, m.setCNTLIDRange(ns))
	}
	for _, on := range os.Namespaces {
		nn := findNamespace(&ns, on.NSID)
		switch {
		case nn == nil:
			removes = append(removes, m.removeNamespace(nqn, on.NSID))
		case !sameBackend(on, *nn):
			// Another backend, path or identity: the host sees the old
			// namespace go and the new one come.
			removes = append(removes, m.removeNamespace(nqn, on.NSID))
			adds = append(adds, m.addNamespace(nqn, *nn))
		case on.Backend == config.BackendMemory && nn.Size != on.Size:
			return nil, nil, nil, fmt.Errorf("namespace %d of %s: a memory namespace cannot change size; remove it and add it again", on.NSID, nqn)
		default:
			if on.ANAGroup != nn.ANAGroup {
				// Hosts stay: they re-read the ANA log.
				changes = append(changes, m.setANAGroup(nqn, on.NSID, nn.ANAGroup))
				on.ANAGroup = nn.ANAGroup
			}
			if !slices.Equal(on.Hosts, nn.Hosts) {
				// Hosts stay; those whose view changed are told.
				changes = append(changes, m.setNamespaceHosts(nqn, on.NSID, nn.Hosts))
				on.Hosts = nn.Hosts
			}
			if !sameQoS(on, *nn) {
				changes = append(changes, m.setNamespaceQoS(nqn, *nn))
				on.QoS, on.QoSPerHost = nn.QoS, nn.QoSPerHost
			}
			if on.Backend == config.BackendMemory {
				break
			}
			st, err := m.planResize(nqn, on, *nn, opts)
			if err != nil {
				return nil, nil, nil, err
			}
			if st != nil {
				changes = append(changes, *st)
			}
		}
	}
	for _, nn := range ns.Namespaces {
		if findNamespace(&os, nn.NSID) == nil {
			adds = append(adds, m.addNamespace(nqn, nn))
		}
	}
	for _, h := range ns.Hosts {
		if config.FindHost(os.Hosts, h.NQN) == nil {
			adds = append(adds, m.addHost(nqn, h))
		}
	}
	if !os.AllowAnyHost && ns.AllowAnyHost {
		adds = append(adds, m.setAllowAnyHost(nqn, true))
	}
	return removes, changes, adds, nil
}

// planResize resizes a file or block namespace whose size changed in the
// configuration, or whose backend opts.reread picks: size 0 takes the
// backend's size now (a file's length, the whole device), after the
// operator grew the file or volume. The size is compared with what hosts
// see, not with the configuration's (0 says nothing of it): less is
// refused with ErrShrink unless forced, and nothing to change is no step.
func (m *Manager) planResize(nqn string, on, nn config.Namespace, opts changeOpts) (*step, error) {
	changed := !reflect.DeepEqual(liveless(nn), liveless(on))
	if !changed && (opts.reread == nil || !opts.reread(nqn, nn)) {
		return nil, nil
	}
	fns := m.liveNamespace(nqn, nn.NSID)
	if fns == nil {
		return nil, fmt.Errorf("namespace %d of %s: %w", nn.NSID, nqn, fabric.ErrNoNamespace)
	}
	info := fns.Info()
	backing, err := fns.BackingSize()
	if err != nil {
		return nil, fmt.Errorf("namespace %d of %s: %w", nn.NSID, nqn, err)
	}
	target := int64(nn.Size) &^ (int64(info.BlockSize) - 1)
	if nn.Size == 0 {
		target = backing
	}
	switch {
	case target <= 0:
		return nil, fmt.Errorf("namespace %d of %s: %s is smaller than one %d-byte block", nn.NSID, nqn, backingName(nn), info.BlockSize)
	case nn.Backend == config.BackendBlock && target > backing:
		return nil, fmt.Errorf("namespace %d of %s: %v is past the end of %s (%v): %w", nn.NSID, nqn, nn.Size, nn.Path, config.Bytes(backing), blockdev.ErrInvalidArgument)
	case target < info.Size && !opts.force && nn.Size == 0:
		return nil, fmt.Errorf("namespace %d of %s: %s is now %v, hosts see %v: %w (force to allow it)",
			nn.NSID, nqn, backingName(nn), config.Bytes(backing), config.Bytes(info.Size), ErrShrink)
	case target < info.Size && !opts.force:
		return nil, fmt.Errorf("namespace %d of %s: %v to %v: %w (force to allow it)", nn.NSID, nqn, config.Bytes(info.Size), nn.Size, ErrShrink)
	case target == info.Size && !changed:
		return nil, nil
	}
	st := m.resizeNamespace(nqn, nn, target)
	return &st, nil
}

// backingName names what backs a namespace, for messages: its path, or
// its RBD image as rbd(8) names it.
func backingName(n config.Namespace) string {
	if n.Backend == config.BackendRBD {
		return "rbd image " + n.Pool + "/" + n.Image
	}
	return n.Path
}

// liveNamespace is the target's namespace nsid of subsystem nqn, or nil.
func (m *Manager) liveNamespace(nqn string, nsid uint32) *fabric.Namespace {
	s := m.tgt.Subsystem(nqn)
	if s == nil {
		return nil
	}
	for _, ns := range s.Namespaces() {
		if ns.NSID() == nvme.NSID(nsid) {
			return ns
		}
	}
	return nil
}

// sameBackend reports whether a and b differ at most in size, ANA group,
// mask and QoS, which change in place.
func sameBackend(a, b config.Namespace) bool {
	a.Size, a.ANAGroup = b.Size, b.ANAGroup
	return reflect.DeepEqual(liveless(a), liveless(b))
}

// sameQoS reports whether a and b have the same QoS limits; an empty
// list of hosts is none, as a file may write it.
func sameQoS(a, b config.Namespace) bool {
	return a.QoS == b.QoS && a.QoSPerHost.Default == b.QoSPerHost.Default && slices.Equal(a.QoSPerHost.Hosts, b.QoSPerHost.Hosts)
}

// liveless is n without its mask and QoS, which their own steps change.
func liveless(n config.Namespace) config.Namespace {
	n.Hosts, n.QoS, n.QoSPerHost = nil, config.QoS{}, config.QoSPerHost{}
	return n
}

// staticChanges names the keys outside ports and subsystems that differ:
// they size what was set up at start (registered pools, pollers, listeners
// of the metrics endpoint) and take effect at the next start.
func staticChanges(old, next *config.Config) []string {
	var keys []string
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	for i := 0; i < ov.NumField(); i++ {
		sec := ov.Type().Field(i)
		if !isStatic(sec) {
			continue
		}
		if sec.Type.Kind() != reflect.Struct {
			if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
				keys = append(keys, tagOf(sec))
			}
			continue
		}
		for j := 0; j < sec.Type.NumField(); j++ {
			if !reflect.DeepEqual(ov.Field(i).Field(j).Interface(), nv.Field(i).Field(j).Interface()) {
				keys = append(keys, tagOf(sec)+"."+tagOf(sec.Type.Field(j)))
			}
		}
	}
	return keys
}

// isStatic reports whether a section or top-level key of the
// configuration is set up at start only: ports, referrals, subsystems and
// discovery change live; state_dir and ana_transition_time do not.
func isStatic(sec reflect.StructField) bool {
	return sec.Type.Kind() != reflect.Slice && sec.Type != reflect.TypeOf(config.Discovery{})
}

// withRestartKeys is c with the keys that take effect only at the next
// start (staticChanges' sections, a subsystem's serial and model, as plan
// names them) as file has them. persist writes it: the file keeps what it
// last said for them, while the target runs with what it started with.
func withRestartKeys(c, file *config.Config) *config.Config {
	out := c.Clone()
	ov, fv := reflect.ValueOf(out).Elem(), reflect.ValueOf(file).Elem()
	for i := 0; i < ov.NumField(); i++ {
		if isStatic(ov.Type().Field(i)) {
			ov.Field(i).Set(fv.Field(i))
		}
	}
	for i := range out.Subsystems {
		if fs := findSubsystem(file, out.Subsystems[i].NQN); fs != nil {
			out.Subsystems[i].Serial, out.Subsystems[i].Model = fs.Serial, fs.Model
		}
	}
	return out
}

func tagOf(f reflect.StructField) string {
	k := f.Tag.Get("mapstructure")
	if i := slices.Index([]byte(k), ','); i >= 0 {
		k = k[:i]
	}
	return k
}

func subKey(nqn, key string) string { return "subsystems[" + strconv.Quote(nqn) + "]." + key }

func findSubsystem(c *config.Config, nqn string) *config.Subsystem {
	for i := range c.Subsystems {
		if c.Subsystems[i].NQN == nqn {
			return &c.Subsystems[i]
		}
	}
	return nil
}

func findNamespace(s *config.Subsystem, nsid uint32) *config.Namespace {
	for i := range s.Namespaces {
		if s.Namespaces[i].NSID == nsid {
			return &s.Namespaces[i]
		}
	}
	return nil
}
