package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// FieldError is one problem found by Validate. Validate joins all of them
// with errors.Join; errors.As finds the first.
type FieldError struct {
	// Key is the path of the offending value, as in
	// "subsystems[0].namespaces[1].nsid".
	Key string
	Msg string
}

// cntlidMax is nvme.CNTLIDMax as the int the file's keys are.
const cntlidMax = int(nvme.CNTLIDMax)

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks the whole configuration and returns every problem found,
// joined, each naming its key. It expects defaults to have been applied
// (see ApplyDefaults). It does not look at namespace paths on the machine:
// CheckPaths does.
func (c *Config) Validate() error {
	var p problems
	c.validatePorts(&p)
	c.validateReferrals(&p)
	c.validateSubsystems(&p)
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		p.add("state_dir", "%q: want an absolute path, or \"\" for none", c.StateDir)
	}
	// ANATT is a byte of seconds; 0 would make the Linux host reset a
	// controller as soon as a group is in change.
	if c.ANATransitionTime < time.Second || c.ANATransitionTime > 255*time.Second {
		p.add("ana_transition_time", "%v: want 1s..255s", c.ANATransitionTime)
	}
	for j, h := range c.Discovery.Hosts {
		hk := fmt.Sprintf("discovery.hosts[%d]", j)
		if err := nvme.CheckNQN(h.NQN); err != nil {
			p.add(hk, "%v", err)
		}
		h.check(&p, hk)
	}
	c.GatewayGroup.validate(&p)
	c.validateGroupImages(&p)
	c.validateGroupKeys(&p)
	c.RDMA.validate(&p)
	c.TCP.validate(&p)
	c.Controller.validate(&p)
	c.Metrics.validate(&p)
	c.Log.validate(&p)
	return errors.Join(p...)
}

func (c *Config) validatePorts(p *problems) {
	if len(c.Ports) == 0 {
		p.add("ports", "at least one port is required")
	}
	type listenKey struct {
		transport string
		addr      netip.Addr
		port      int
	}
	seen := make(map[listenKey]int)
	ids := make(map[int]int)
	for i, pt := range c.Ports {
		k := fmt.Sprintf("ports[%d]", i)
		switch j, dup := ids[pt.ID]; {
		case pt.ID < 1 || pt.ID > nvme.PortIDMax:
			p.add(k+".id", "%d is out of range 1..%d", pt.ID, nvme.PortIDMax)
		case dup:
			p.add(k+".id", "%d is also the ID of ports[%d]", pt.ID, j)
		default:
			ids[pt.ID] = i
		}
		for g, state := range pt.ANAGroups {
			gk := k + ".ana_groups." + g
			if id, err := strconv.Atoi(g); err != nil || id < 1 || id > limits.ANAGroups {
				p.add(gk, "%q is not an ANA group ID (want 1..%d)", g, limits.ANAGroups)
			}
			if _, ok := nvme.ParseANAState(state); !ok {
				p.add(gk, "%q is not an ANA state (want optimized, non-optimized, inaccessible, persistent-loss or change)", state)
			}
		}
		switch pt.Transport {
		case "rdma", "tcp", "loop":
		default:
			p.add(k+".transport", "%q is not a transport (want rdma, tcp or loop)", pt.Transport)
		}
		addr, err := netip.ParseAddr(pt.Address)
		if err != nil {
			p.add(k+".address", "%q is not an IP address", pt.Address)
		}
		if pt.Port < 1 || pt.Port > 65535 {
			p.add(k+".port", "%d is out of range 1..65535", pt.Port)
		}
		if err != nil {
			continue
		}
		lk := listenKey{pt.Transport, addr.Unmap(), pt.Port}
		if j, dup := seen[lk]; dup {
			p.add(k, "same transport, address and port as ports[%d]", j)
		} else {
			seen[lk] = i
		}
	}
}

func (c *Config) validateSubsystems(p *problems) {
	if len(c.Subsystems) == 0 && !c.GatewayGroup.Enabled() {
		// A gateway's subsystems come from its group, which may have
		// none yet.
		p.add("subsystems", "at least one subsystem is required")
	}
	nqns := make(map[string]int)
	// Identifiers are unique across all subsystems: the Linux host refuses
	// a namespace whose IDs another subsystem's namespace has too.
	uuids := make(map[uuid.UUID]string)
	nguids := make(map[[16]byte]idOwner)
	eui64s := make(map[[8]byte]string)
	for i, s := range c.Subsystems {
		k := fmt.Sprintf("subsystems[%d]", i)
		if err := nvme.CheckSubsystemNQN(s.NQN); err != nil {
			p.add(k+".nqn", "%v", err)
		} else if j, dup := nqns[s.NQN]; dup {
			p.add(k+".nqn", "%q is also the NQN of subsystems[%d]", s.NQN, j)
		} else {
			nqns[s.NQN] = i
		}

		hosts := make(map[string]int)
		for j, h := range s.Hosts {
			hk := fmt.Sprintf("%s.hosts[%d]", k, j)
			if err := nvme.CheckNQN(h.NQN); err != nil {
				p.add(hk, "%v", err)
			} else if prev, dup := hosts[h.NQN]; dup {
				p.add(hk, "%q is also hosts[%d]", h.NQN, prev)
			} else {
				hosts[h.NQN] = j
			}
			h.check(p, hk)
		}
		if _, _, err := s.AuthNames(); err != nil {
			p.add(k+".dhchap", "%v", err)
		}
		switch {
		case !s.AllowAnyHost && len(s.Hosts) == 0:
			p.add(k+".hosts", "empty while allow_any_host is false: no host could connect")
		case s.AllowAnyHost && len(s.Hosts) > 0:
			p.add(k+".allow_any_host", "true while hosts lists %d hosts: set one or the other", len(s.Hosts))
		}

		c.validatePortsOf(p, k, s)
		if err := checkIdentifyString(s.Serial, 20); err != nil {
			p.add(k+".serial", "%v", err)
		}
		if err := checkIdentifyString(s.Model, 40); err != nil {
			p.add(k+".model", "%v", err)
		}

		nsids := make(map[uint32]int)
		for j, n := range s.Namespaces {
			nk := fmt.Sprintf("%s.namespaces[%d]", k, j)
			dupNSID := false
			if !nvme.NSID(n.NSID).Valid() {
				p.add(nk+".nsid", "%d is not a valid NSID (want 1..%d)", n.NSID, nvme.MaxNSID)
			} else if prev, dup := nsids[n.NSID]; dup {
				p.add(nk+".nsid", "%d is also the NSID of namespaces[%d]", n.NSID, prev)
				dupNSID = true
			} else {
				nsids[n.NSID] = j
			}
			n.validate(p, nk)
			n.validateMask(p, nk)
			if n.ANAGroup < 1 || n.ANAGroup > limits.ANAGroups {
				p.add(nk+".ana_group", "%d is out of range 1..%d", n.ANAGroup, limits.ANAGroups)
			}
			n.uniqueIDs(p, nk, s.NQN, nguids, eui64s)
			if dupNSID && n.UUID == "" {
				continue // its derived UUID repeats too: one problem is enough
			}

			if n.UUID != "" {
				u, err := uuid.Parse(n.UUID)
				if err != nil {
					p.add(nk+".uuid", "%q is not a UUID", n.UUID)
					continue
				}
				if u == uuid.Nil {
					// An all-zero UUID means "no UUID" in the
					// identification descriptors.
					p.add(nk+".uuid", "the nil UUID is reserved")
					continue
				}
			}
			u := n.ResolvedUUID(s.NQN)
			if other, dup := uuids[u]; dup {
				p.add(nk+".uuid", "%s is also the UUID of %s", u, other)
			} else {
				uuids[u] = nk
			}
		}
	}
}

func (n Namespace) validate(p *problems, k string) {
	bs, bsOK := n.BlockSize, true
	switch {
	case limits.ValidBlockSize(bs):
	case bs == 0 && n.Backend == BackendBlock:
		bs = 512 // the device's own block size is at least 512
	default:
		p.add(k+".block_size", "%d is not a block size (want 512 or 4096)", n.BlockSize)
		bsOK = false
	}

	switch n.Backend {
	case BackendMemory:
		if n.Size == 0 {
			p.add(k+".size", "required for the memory backend")
		}
		if n.Path != "" {
			p.add(k+".path", "must be empty for the memory backend")
		}
	case BackendFile, BackendBlock:
		// What the path is on this machine is CheckPaths' business.
		checkPath(p, k, n.Path)
	case BackendRBD:
		n.validateRBD(p, k)
	default:
		p.add(k+".backend", "%q is not a backend (want file, block, memory or rbd)", n.Backend)
	}
	if n.Backend != BackendRBD {
		for _, kv := range [][2]string{{"pool", n.Pool}, {"image", n.Image}, {"ceph_conf", n.CephConf}, {"client", n.Client}} {
			if kv[1] != "" {
				p.add(k+"."+kv[0], "only for the rbd backend (backend is %s)", n.Backend)
			}
		}
	}

	if bsOK && n.Size%Bytes(bs) != 0 {
		p.add(k+".size", "%s is not a multiple of the block size %d", n.Size, bs)
	}

	// All zeroes means "none" in Identify Namespace (base 1.4 §5.15.2).
	if n.NGUID != "" && n.NGUID != NGUIDNone {
		if g, err := ParseNGUID(string(n.NGUID)); err != nil {
			p.add(k+".nguid", "%q: %v, or none", n.NGUID, err)
		} else if g == ([16]byte{}) {
			p.add(k+".nguid", "all zero, which means no NGUID: write none, or leave the key out for one derived from the UUID")
		}
	}
	if n.EUI64 != "" {
		if e, err := ParseEUI64(string(n.EUI64)); err != nil {
			p.add(k+".eui64", "%q: %v", n.EUI64, err)
		} else if e == ([8]byte{}) {
			p.add(k+".eui64", "all zero, which means no EUI64: leave the key out")
		}
	}
}

// idOwner is the namespace that has an NGUID, and whether it was
// configured rather than derived.
type idOwner struct {
	key        string
	configured bool
}

// uniqueIDs records the namespace's NGUID and EUI64 and reports one that
// another namespace has. Two derived NGUIDs collide only when their UUIDs
// do, which is reported there.
func (n Namespace) uniqueIDs(p *problems, k, subnqn string, nguids map[[16]byte]idOwner, eui64s map[[8]byte]string) {
	if g := n.ResolvedNGUID(subnqn); g != ([16]byte{}) {
		me := idOwner{k, n.NGUID != ""}
		switch other, dup := nguids[g]; {
		case !dup:
			nguids[g] = me
		case me.configured:
			p.add(k+".nguid", "%x is also the NGUID of %s", g, other.key)
		case other.configured:
			p.add(other.key+".nguid", "%x is also the NGUID of %s, derived from its UUID", g, k)
		}
	}
	if e := n.ResolvedEUI64(); e != ([8]byte{}) {
		if other, dup := eui64s[e]; dup {
			p.add(k+".eui64", "%x is also the EUI64 of %s", e, other)
		} else {
			eui64s[e] = k
		}
	}
}

// validateRBD checks an rbd namespace's keys; whether its ceph_conf can be
// read is CheckPaths' business, and whether the pool and image exist the
// cluster's, when the namespace is opened.
func (n Namespace) validateRBD(p *problems, k string) {
	if n.Path != "" {
		p.add(k+".path", "must be empty for the rbd backend (the image is pool and image)")
	}
	// rbd(8) and librbd name an image pool/image@snapshot: neither name
	// may hold the separators.
	for _, kv := range [][2]string{{"pool", n.Pool}, {"image", n.Image}} {
		if kv[1] == "" {
			p.add(k+"."+kv[0], "required for the rbd backend")
		} else if err := checkRBDName(kv[1]); err != nil {
			p.add(k+"."+kv[0], "%q: %v", kv[1], err)
		}
	}
	if n.CephConf != "" && !filepath.IsAbs(n.CephConf) {
		p.add(k+".ceph_conf", "%q is not absolute", n.CephConf)
	}
	if id := strings.TrimPrefix(n.Client, "client."); id == "" {
		p.add(k+".client", "%q: want a Ceph client name such as admin or client.admin", n.Client)
	} else if err := checkRBDName(id); err != nil || strings.ContainsAny(id, " \t") {
		p.add(k+".client", "%q: want a Ceph client name such as admin or client.admin", n.Client)
	}
	if n.BufferedIO {
		p.add(k+".buffered_io", "only for the file and block backends")
	}
}

// checkRBDName checks a pool, image or client name.
func checkRBDName(s string) error {
	if len(s) > 255 {
		return fmt.Errorf("%d bytes, more than 255", len(s))
	}
	for _, r := range s {
		switch {
		case r == '/' || r == '@':
			return fmt.Errorf("has %q, which separates pool, image and snapshot", r)
		case r < 0x20 || r == 0x7f:
			return errors.New("has a control character")
		}
	}
	return nil
}

// checkPath reports whether a file or block namespace's path is usable.
func checkPath(p *problems, k, path string) bool {
	switch {
	case path == "":
		p.add(k+".path", "required for the file and block backends")
	case !filepath.IsAbs(path):
		// The service's working directory is not the operator's.
		p.add(k+".path", "%q is not absolute", path)
	default:
		return true
	}
	return false
}

// validate checks the bounds the rdma package defines (rdma.*Min, *Max).
func (r RDMA) validate(p *problems) {
	// Identify Controller reports the capsule size (IOCCSZ) in 16-byte
	// units, so only multiples of 16 can be advertised.
	if r.InCapsuleDataSize > limits.RDMAInCapsuleDataSizeMax || r.InCapsuleDataSize%16 != 0 {
		p.add("rdma.in_capsule_data_size", "%s: want a multiple of 16 in 0..%s", r.InCapsuleDataSize, Bytes(limits.RDMAInCapsuleDataSizeMax))
	}
	checkRange(p, "rdma.max_queue_depth", r.MaxQueueDepth, limits.RDMAQueueDepthMin, limits.RDMAQueueDepthMax)
	checkRange(p, "rdma.max_io_queues", r.MaxIOQueues, limits.RDMAIOQueuesMin, limits.RDMAIOQueuesMax)
	if r.MaxQueues != 0 && (r.MaxQueues < limits.RDMAQueuesMin || r.MaxQueues > limits.RDMAQueuesMax) {
		p.add("rdma.max_queues", "%d: want 0 (by the device) or %d..%d", r.MaxQueues, limits.RDMAQueuesMin, limits.RDMAQueuesMax)
	}
	checkRange(p, "rdma.pollers", r.Pollers, limits.RDMAPollersMin, limits.RDMAPollersMax)

	// MDTS is reported as a power of two in units of the 4KiB minimum
	// memory page size (Identify Controller byte 77).
	mdtsOK := r.MDTS.isPow2() && r.MDTS >= limits.RDMAMDTSMin && r.MDTS <= limits.RDMAMDTSMax
	if !mdtsOK {
		p.add("rdma.mdts", "%s: want a power of two in %s..%s", r.MDTS, Bytes(limits.RDMAMDTSMin), Bytes(limits.RDMAMDTSMax))
	}
	switch {
	case !r.IOUnitSize.isPow2() || r.IOUnitSize < limits.RDMAIOUnitSizeMin:
		p.add("rdma.io_unit_size", "%s: want a power of two of at least %s", r.IOUnitSize, Bytes(limits.RDMAIOUnitSizeMin))
	case mdtsOK && r.IOUnitSize > r.MDTS:
		p.add("rdma.io_unit_size", "%s is larger than rdma.mdts %s", r.IOUnitSize, r.MDTS)
	}
	if mdtsOK && r.BufferPoolSize < r.MDTS {
		// One maximal transfer must fit, or it could never be served.
		p.add("rdma.buffer_pool_size", "%s is smaller than rdma.mdts %s", r.BufferPoolSize, r.MDTS)
	}
	if r.PollIdle < 0 || r.PollIdle > limits.RDMAPollIdleMax {
		p.add("rdma.poll_idle", "%s: want 0..%s", r.PollIdle, limits.RDMAPollIdleMax)
	}
	if r.PollNap < 0 || r.PollNap > limits.RDMAPollNapMax {
		p.add("rdma.poll_nap", "%s: want 0..%s", r.PollNap, limits.RDMAPollNapMax)
	}
	checkMode(p, "rdma.send_with_invalidate", r.SendWithInvalidate)
	checkMode(p, "rdma.io_uring", r.IOUring)
	checkMode(p, "rdma.srq", r.SRQ)
}

// validate checks the bounds package limits defines for the tcp transport
// (limits.TCP*).
func (c TCP) validate(p *problems) {
	if c.InCapsuleDataSize%16 != 0 || c.InCapsuleDataSize < limits.TCPInCapsuleDataSizeMin || c.InCapsuleDataSize > limits.TCPInCapsuleDataSizeMax {
		p.add("tcp.in_capsule_data_size", "%s: want a multiple of 16 in %s..%s", c.InCapsuleDataSize, Bytes(limits.TCPInCapsuleDataSizeMin), Bytes(limits.TCPInCapsuleDataSizeMax))
	}
	checkRange(p, "tcp.max_queue_depth", c.MaxQueueDepth, limits.TCPQueueDepthMin, limits.TCPQueueDepthMax)
	checkRange(p, "tcp.max_io_queues", c.MaxIOQueues, limits.TCPIOQueuesMin, limits.TCPIOQueuesMax)
	mdtsOK := c.MDTS.isPow2() && c.MDTS >= limits.TCPMDTSMin && c.MDTS <= limits.TCPMDTSMax
	if !mdtsOK {
		p.add("tcp.mdts", "%s: want a power of two in %s..%s", c.MDTS, Bytes(limits.TCPMDTSMin), Bytes(limits.TCPMDTSMax))
	}
	if c.MaxH2CData%4 != 0 || c.MaxH2CData < limits.TCPMaxH2CDataMin || c.MaxH2CData > limits.TCPMaxH2CDataMax {
		p.add("tcp.max_h2c_data", "%s: want a multiple of 4 in %s..%s", c.MaxH2CData, Bytes(limits.TCPMaxH2CDataMin), Bytes(limits.TCPMaxH2CDataMax))
	}
	switch {
	case !c.IOUnitSize.isPow2() || c.IOUnitSize < limits.TCPIOUnitSizeMin:
		p.add("tcp.io_unit_size", "%s: want a power of two of at least %s", c.IOUnitSize, Bytes(limits.TCPIOUnitSizeMin))
	case mdtsOK && c.IOUnitSize > c.MDTS:
		p.add("tcp.io_unit_size", "%s is larger than tcp.mdts %s", c.IOUnitSize, c.MDTS)
	}
	if mdtsOK && c.BufferPoolSize < c.MDTS {
		// One maximal transfer must fit, or it could never be served.
		p.add("tcp.buffer_pool_size", "%s is smaller than tcp.mdts %s", c.BufferPoolSize, c.MDTS)
	}
	checkRange(p, "tcp.max_connections", c.MaxConnections, limits.TCPMaxConnectionsMin, limits.TCPMaxConnectionsMax)
	if c.MaxConnectionsPerAddress < 1 || c.MaxConnectionsPerAddress > c.MaxConnections {
		p.add("tcp.max_connections_per_address", "%d: want 1..tcp.max_connections (%d)", c.MaxConnectionsPerAddress, c.MaxConnections)
	}
	if c.ICReqTimeout < limits.TCPICReqTimeoutMin || c.ICReqTimeout > limits.TCPICReqTimeoutMax {
		p.add("tcp.icreq_timeout", "%s: want %s..%s", c.ICReqTimeout, limits.TCPICReqTimeoutMin, limits.TCPICReqTimeoutMax)
	}
}

// checkMode validates an auto/on/off key.
func checkMode(p *problems, key, v string) {
	switch v {
	case ModeAuto, ModeOn, ModeOff:
	default:
		p.add(key, "%q: want auto, on or off", v)
	}
}

func checkRange(p *problems, key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add(key, "%d is out of range %d..%d", v, lo, hi)
	}
}

func (c Controller) validate(p *problems) {
	// KATO is a 32-bit count of milliseconds (Connect command, CDW12).
	const limit = time.Duration(math.MaxUint32) * time.Millisecond
	if c.KeepAliveTimeoutMax < time.Second || c.KeepAliveTimeoutMax > limit {
		p.add("controller.kato_max", "%s: want 1s..%s", c.KeepAliveTimeoutMax, limit)
	}
	// More than a device has queues for would cap nothing.
	checkRange(p, "controller.max_connections_per_host", c.MaxConnectionsPerHost, 1, limits.RDMAQueuesMax)
}

func (m Metrics) validate(p *problems) {
	if m.Listen == "" {
		return
	}
	_, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		p.add("metrics.listen", "%q: want host:port, or empty to disable", m.Listen)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		p.add("metrics.listen", "%q: port %q is not in 1..65535", m.Listen, port)
	}
}

func (l Log) validate(p *problems) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "%q: want debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		p.add("log.format", "%q: want text or json", l.Format)
	}
}

// Warnings lists what Validate accepts but the operator should hear
// about: subsystem and host NQNs not in a form of NVMe base §4.5. Linux
// hosts and nvmet take them (blktests uses "blktests-subsystem-1"); other
// initiators may not.
func (c *Config) Warnings() []*FieldError {
	var w []*FieldError
	warn := func(key, nqn string) {
		if nvme.CheckNQN(nqn) == nil && !nvme.IsSpecNQN(nqn) {
			w = append(w, &FieldError{Key: key, Msg: fmt.Sprintf("%q is not of the form nqn.yyyy-mm.reverse-domain:name; Linux accepts it, other hosts may not", nqn)})
		}
	}
	for i, s := range c.Subsystems {
		k := fmt.Sprintf("subsystems[%d]", i)
		warn(k+".nqn", s.NQN)
		for j, h := range s.Hosts {
			warn(fmt.Sprintf("%s.hosts[%d]", k, j), h.NQN)
		}
	}
	return w
}

// checkIdentifyString checks a value for a space-padded ASCII field of
// Identify Controller.
func checkIdentifyString(s string, limit int) error {
	if s == "" {
		return errors.New("empty (leave the key out for the default)")
	}
	if len(s) > limit {
		return fmt.Errorf("%q is %d characters, more than %d", s, len(s), limit)
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return fmt.Errorf("%q has characters other than printable ASCII", s)
		}
	}
	return nil
}

func (c *Config) validateReferrals(p *problems) {
	for i, r := range c.Referrals {
		k := fmt.Sprintf("referrals[%d]", i)
		switch r.Transport {
		case "rdma", "tcp", "loop":
		default:
			p.add(k+".transport", "%q is not a transport (want rdma, tcp or loop)", r.Transport)
		}
		if _, err := netip.ParseAddr(r.Address); err != nil {
			p.add(k+".address", "%q is not an IP address", r.Address)
		}
		if r.Port < 1 || r.Port > 65535 {
			p.add(k+".port", "%d is out of range 1..65535", r.Port)
		}
		if r.PortID < 0 || r.PortID > nvme.PortIDMax {
			p.add(k+".port_id", "%d is out of range 0..%d", r.PortID, nvme.PortIDMax)
		}
	}
}

// validatePortsOf checks a subsystem's ports and controller ID range.
func (c *Config) validatePortsOf(p *problems, k string, s Subsystem) {
	seen := make(map[int]int)
	for j, id := range s.Ports {
		pk := fmt.Sprintf("%s.ports[%d]", k, j)
		if prev, dup := seen[id]; dup {
			p.add(pk, "%d is also ports[%d]", id, prev)
			continue
		}
		seen[id] = j
		if !slices.ContainsFunc(c.Ports, func(pt Port) bool { return pt.ID == id }) {
			p.add(pk, "%d is the ID of no port", id)
		}
	}
	switch {
	case s.CNTLIDMin < 1 || s.CNTLIDMin > cntlidMax:
		p.add(k+".cntlid_min", "%d is out of range 1..%d", s.CNTLIDMin, cntlidMax)
	case s.CNTLIDMax < 1 || s.CNTLIDMax > cntlidMax:
		p.add(k+".cntlid_max", "%d is out of range 1..%d", s.CNTLIDMax, cntlidMax)
	case s.CNTLIDMin > s.CNTLIDMax:
		p.add(k+".cntlid_max", "%d is below cntlid_min %d", s.CNTLIDMax, s.CNTLIDMin)
	}
}

// validateMask checks a namespace's mask and its QoS hosts: NQNs, once
// each, at most limits.NamespaceHosts. A mask may name a host the
// subsystem does not let connect: it only narrows what the subsystem
// allows, and the host may be added to it later.
func (n Namespace) validateMask(p *problems, k string) {
	checkHostList := func(key string, nqns []string) {
		if len(nqns) > limits.NamespaceHosts {
			p.add(key, "%d hosts, more than %d", len(nqns), limits.NamespaceHosts)
			return
		}
		seen := make(map[string]int, len(nqns))
		for j, h := range nqns {
			hk := fmt.Sprintf("%s[%d]", key, j)
			if err := nvme.CheckNQN(h); err != nil {
				p.add(hk, "%v", err)
			} else if prev, dup := seen[h]; dup {
				p.add(hk, "%q is also %s[%d]", h, key, prev)
			} else {
				seen[h] = j
			}
		}
	}
	checkHostList(k+".hosts", n.Hosts)
	qh := make([]string, len(n.QoSPerHost.Hosts))
	for i, h := range n.QoSPerHost.Hosts {
		qh[i] = h.NQN
	}
	checkHostList(k+".qos_per_host.hosts", qh)
}
