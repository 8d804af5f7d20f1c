package config

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// ImportNvmetcli converts the JSON that `nvmetcli save` writes (the
// configuration of Linux's nvmet: top-level hosts, ports and subsystems)
// into this target's YAML, with the ports, referrals and subsystems
// sections only. Each setting that cannot be carried is named in the
// notes, one line each, starting with its nvmetcli path. The error is for
// JSON that cannot be read at all, or (ErrKeysNotCarried) for hosts that
// would lose their DH-HMAC-CHAP keys; the YAML may still fail Validate
// (say, with no RDMA or TCP port left), which the notes then explain.
//
// What is carried, so that hosts see what nvmet showed them: RDMA and TCP
// ports (port ID, transport, address, service; not a TCP port that nvmet
// serves with TLS, which this target has not) with the ANA state of every group that a
// namespace uses or nvmet names, written out for each port, since nvmet
// and this target differ on a group left out (anaGroups); each port's
// enabled RDMA and TCP referrals, listed here on every port; each subsystem's
// NQN, the ports nvmet links it to, its CNTLID range, allow_any_host,
// allowed_hosts with their DH-HMAC-CHAP keys (o says where the keys go)
// and their preferred hash and DH group, serial and model; each enabled
// namespace's NSID, ANA group, device path (its backend inferred on this
// machine, as blockdev.KindOf does), UUID and NGUID (none when nvmet had
// none). File namespaces get block_size 4096: nvmet gives a file the block
// size of its filesystem capped at 4KiB, which is 4KiB on ext4, xfs and
// tmpfs, and the host's partition table depends on it. A disabled
// namespace (enable 0) is skipped, not served; so is a subsystem that
// nvmet links to no RDMA or TCP port, since here a subsystem without ports
// is served on every port.
func ImportNvmetcli(data []byte, o ImportOptions) (*Import, error) {
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("nvmetcli JSON: %w", err)
	}
	if root == nil {
		return nil, errors.New("nvmetcli JSON: want an object with hosts, ports and subsystems")
	}
	if o.KeyDir != "" && !filepath.IsAbs(o.KeyDir) {
		// The YAML names the files, and serve wants absolute paths.
		return nil, fmt.Errorf("key directory %q is not absolute", o.KeyDir)
	}
	im := &importer{o: o, hostKeys: map[string]*hostKeys{}, keyFileNames: map[string]bool{},
		links: map[string][]int{}, elsewhere: map[string][]string{}}
	for _, k := range sortedKeys(root) {
		switch k {
		case "hosts":
			im.hosts(root[k])
		case "ports", "subsystems":
			// Below, ports first: a subsystem is served on the ports
			// that link it.
		default:
			im.note(k, "not carried")
		}
	}
	im.ports(root["ports"])
	im.subsystems(root["subsystems"])
	im.unusedKeys()
	if len(im.keyErrs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrKeysNotCarried, strings.Join(im.keyErrs, "; "))
	}
	im.anaGroups()
	return &Import{YAML: im.yaml(), Notes: im.notes, KeyFiles: im.keyFiles, InlineSecrets: im.inline}, nil
}

type importer struct {
	c     Config
	o     ImportOptions
	notes []string

	links     map[string][]int    // by subsystem NQN, the IDs of the carried ports that link it
	elsewhere map[string][]string // by subsystem NQN, the ports not carried that link it
	ana       []map[int]string    // per carried port, the states of the groups nvmet created there
	referrals []*referralFrom     // in the order first seen

	hostKeys     map[string]*hostKeys // by host NQN, from the hosts list
	hostOrder    []*hostKeys          // in the hosts list's order
	keyFiles     []KeyFile
	keyFileNames map[string]bool // base names taken in KeyDir
	keyErrs      []string        // hosts whose keys cannot be carried
	inline       bool            // the YAML holds a secret
}

func (im *importer) note(path, format string, args ...any) {
	im.notes = append(im.notes, path+": "+fmt.Sprintf(format, args...))
}

// noteRest names every key of m not in known, unless its value is one of
// the nvmet defaults given for it.
func (im *importer) noteRest(path string, m map[string]any, known map[string]bool, defaults map[string][]string) {
	for _, k := range sortedKeys(m) {
		if known[k] {
			continue
		}
		v, _ := scalar(m[k])
		if slices.Contains(defaults[k], v) {
			continue
		}
		if sub, ok := m[k].(map[string]any); ok {
			im.noteRest(path+"."+k, sub, nil, nil)
			continue
		}
		if list, ok := m[k].([]any); ok && len(list) == 0 {
			continue
		}
		if strings.Contains(k, "key") {
			// DH-HMAC-CHAP and TLS keys are secrets: name them only.
			im.note(path+"."+k, "set: not carried")
			continue
		}
		im.note(path+"."+k, "%s: not carried", describe(m[k]))
	}
}

// Subsystem attributes at nvmet's defaults, which need no note.
var subsystemDefaults = map[string][]string{
	"pi_enable": {"0"},
	"qid_max":   {"128"},
	"ieee_oui":  {"0x000000"},
}

func (im *importer) subsystems(v any) {
	for i, sv := range asList(v) {
		path := fmt.Sprintf("subsystems[%d]", i)
		m := asMap(sv)
		nqn, _ := scalar(m["nqn"])
		if nqn == "" {
			im.note(path, "no nqn: skipped")
			continue
		}
		s := Subsystem{NQN: nqn, Ports: slices.Sorted(slices.Values(im.links[nqn]))}
		if len(s.Ports) == 0 && len(im.c.Ports) > 0 {
			// nvmet serves a subsystem only on the ports that link it;
			// here one without ports would be served on every port.
			if e := im.elsewhere[nqn]; len(e) > 0 {
				im.note(path, "%s: skipped: nvmet serves it only on %s, not carried; add it with ports: [...] to serve it here", nqn, strings.Join(e, ", "))
			} else {
				im.note(path, "%s: skipped: no port links it, so nvmet serves it nowhere; add it with ports: [...] to serve it here", nqn)
			}
			im.skipKeys(m)
			continue
		}
		attr := asMap(m["attr"])
		anyHost, _ := scalar(attr["allow_any_host"])
		s.AllowAnyHost = anyHost == "1"
		s.Serial, _ = scalar(attr["serial"])
		s.Model, _ = scalar(attr["model"])
		s.CNTLIDMin, s.CNTLIDMax = im.cntlids(path+".attr", attr)
		im.noteRest(path+".attr", attr, map[string]bool{"allow_any_host": true, "serial": true, "model": true, "cntlid_min": true, "cntlid_max": true}, subsystemDefaults)
		var allowed []string
		for _, h := range asList(m["allowed_hosts"]) {
			if hs, ok := scalar(h); ok {
				allowed = append(allowed, hs)
			}
		}
		if s.AllowAnyHost && len(allowed) > 0 {
			// nvmet ignores the list then, and authenticates no one; this
			// target refuses both.
			im.note(path+".allowed_hosts", "%s: not carried: allow_any_host is 1, so nvmet lets any host in too", strings.Join(allowed, ", "))
		}
		if !s.AllowAnyHost {
			im.allowHosts(path, &s, allowed)
			if len(s.Hosts) == 0 {
				im.note(path, "%s: skipped: allow_any_host is 0 and no host is allowed, so no host can connect", nqn)
				continue
			}
		}
		for j, nv := range asList(m["namespaces"]) {
			if n, ok := im.namespace(fmt.Sprintf("%s.namespaces[%d]", path, j), asMap(nv)); ok {
				s.Namespaces = append(s.Namespaces, n)
			}
		}
		im.noteRest(path, m, map[string]bool{"nqn": true, "attr": true, "allowed_hosts": true, "namespaces": true}, nil)
		im.c.Subsystems = append(im.c.Subsystems, s)
	}
	if len(im.c.Ports) == 0 && len(im.c.Subsystems) > 0 {
		im.note("subsystems", "no RDMA or TCP port is carried, so neither are the ports' links: each subsystem is served on every port you add")
	}
}

// cntlids carries a subsystem's controller ID range, nvmet's default
// (1..FFEFh, this target's too) where an attribute is missing or one
// nvmet would not have taken.
func (im *importer) cntlids(path string, attr map[string]any) (lo, hi int) {
	get := func(k string, def int) int {
		s, ok := scalar(attr[k])
		if !ok {
			return def
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > cntlidMax {
			im.note(path+"."+k, "%q: not carried: want 1..%d; %d instead", s, cntlidMax, def)
			return def
		}
		return v
	}
	lo, hi = get("cntlid_min", 1), get("cntlid_max", cntlidMax)
	if lo > hi {
		im.note(path, "cntlid_min %d is above cntlid_max %d: not carried; 1..%d instead", lo, hi, cntlidMax)
		return 1, cntlidMax
	}
	return lo, hi
}

func (im *importer) namespace(path string, m map[string]any) (Namespace, bool) {
	ns, _ := scalar(m["nsid"])
	nsid, err := strconv.ParseUint(ns, 10, 32)
	if err != nil {
		im.note(path, "nsid %q: skipped: not a namespace ID", ns)
		return Namespace{}, false
	}
	if e, ok := scalar(m["enable"]); ok && e == "0" {
		im.note(path, "nsid %d, enable 0: skipped, since this target has no disabled namespaces; add it to serve it", nsid)
		return Namespace{}, false
	}
	dev := asMap(m["device"])
	n := Namespace{NSID: uint32(nsid), ANAGroup: im.anaGroup(path, m)}
	n.Path, _ = scalar(dev["path"])
	if n.Path == "" {
		im.note(path, "nsid %d has no device.path: skipped", nsid)
		return Namespace{}, false
	}
	kind, err := limits.BackendOf(n.Path)
	if _, serr := os.Stat(n.Path); errors.Is(serr, fs.ErrNotExist) {
		// Converting on another machine than the target: a missing path
		// under /dev is a device, not a file for serve to create there.
		if strings.HasPrefix(n.Path, "/dev/") {
			kind = limits.BackendBlock
		}
		im.note(path+".device.path", "%s does not exist on this machine: taken as %s", n.Path, kind)
		if kind == limits.BackendFile {
			im.note(path+".device.path", "%s: serve creates a missing file only when given a size", n.Path)
		}
	} else if err != nil {
		im.note(path+".device.path", "%s: %v: taken as %s", n.Path, err, kind)
	}
	n.Backend = kind
	if kind == limits.BackendFile {
		n.BlockSize = 4096 // nvmet's for a file on ext4, xfs, tmpfs
	}
	if u, _ := scalar(dev["uuid"]); u != "" {
		if p, err := uuid.Parse(u); err == nil && p != uuid.Nil {
			n.UUID = p.String()
		} else if err != nil {
			im.note(path+".device.uuid", "%q: not carried: not a UUID", u)
		}
	}
	n.NGUID, n.EUI64 = im.ids(path+".device", dev)
	im.noteRest(path+".device", dev, map[string]bool{"path": true, "uuid": true, "nguid": true, "eui64": true}, map[string][]string{"p2pmem": {"0"}})
	im.noteRest(path+".ana", asMap(m["ana"]), map[string]bool{"grpid": true}, nil)
	im.noteRest(path+".resv", asMap(m["resv"]), nil, map[string][]string{"enable": {"0"}})
	im.noteRest(path, m, map[string]bool{"nsid": true, "enable": true, "device": true, "ana": true, "ana_grpid": true, "resv": true}, nil)
	return n, true
}

// anaGroup is a namespace's ANA group. nvmetcli writes ana_grpid, and
// since v0.8 the same configfs file as the attribute "ana": {"grpid"};
// restoring, it writes ana_grpid last, so that one wins.
func (im *importer) anaGroup(path string, m map[string]any) uint32 {
	key := path + ".ana_grpid"
	s, ok := scalar(m["ana_grpid"])
	if !ok {
		key = path + ".ana.grpid"
		s, ok = scalar(asMap(m["ana"])["grpid"])
	}
	if !ok {
		return limits.ANAGroup
	}
	g, err := strconv.Atoi(s)
	if err != nil || g < 1 || g > limits.ANAGroups {
		im.note(key, "%q: not carried: ANA groups are 1..%d (nvmet's too); in group %d instead", s, limits.ANAGroups, limits.ANAGroup)
		return limits.ANAGroup
	}
	return uint32(g)
}

// ids carries a namespace's NGUID and EUI64 as hosts saw them. nvmet
// reports an NGUID only when given one (device_nguid; zero otherwise), so
// a zero or missing one is carried as none, not left to be derived. nvmet
// has no EUI64 attribute; one in the JSON is carried all the same.
func (im *importer) ids(path string, dev map[string]any) (nguid, eui64 HexID) {
	nguid = NGUIDNone
	if s, _ := scalar(dev["nguid"]); s != "" {
		switch g, err := ParseNGUID(s); {
		case err != nil:
			im.note(path+".nguid", "%q: not carried: %v; this target derives one from the UUID", s, err)
			nguid = ""
		case g != [16]byte{}:
			nguid = HexID(hex.EncodeToString(g[:]))
		}
	}
	if s, _ := scalar(dev["eui64"]); s != "" {
		switch e, err := ParseEUI64(s); {
		case err != nil:
			im.note(path+".eui64", "%q: not carried: %v", s, err)
		case e != [8]byte{}:
			eui64 = HexID(hex.EncodeToString(e[:]))
		}
	}
	return nguid, eui64
}

func (im *importer) ports(v any) {
	list := asList(v)
	// nvmet's port IDs, so that one given to a port this target cannot
	// number as nvmet did takes none of them.
	taken := map[int]bool{}
	for _, pv := range list {
		if id, ok := portID(asMap(pv)["portid"]); ok {
			taken[id] = true
		}
	}
	used := map[int]bool{}
	for i, pv := range list {
		m := asMap(pv)
		id, _ := scalar(m["portid"])
		path := fmt.Sprintf("ports[%d]", i)
		addr := asMap(m["addr"])
		get := func(k string) string { s, _ := scalar(addr[k]); return s }
		var links []string
		for _, s := range asList(m["subsystems"]) {
			if nqn, ok := scalar(s); ok {
				links = append(links, nqn)
			}
		}
		where := fmt.Sprintf("portid %s, %s %s:%s", id, get("trtype"), get("traddr"), get("trsvcid"))
		notCarried := func(format string, args ...any) {
			im.note(path, "%s: not carried: %s", where, fmt.Sprintf(format, args...))
			for _, nqn := range links {
				im.elsewhere[nqn] = append(im.elsewhere[nqn], fmt.Sprintf("portid %s (%s)", id, get("trtype")))
			}
		}
		trtype := get("trtype")
		if trtype != "rdma" && trtype != "tcp" {
			notCarried("this target serves RDMA and TCP only")
			continue
		}
		if trtype == "tcp" && (strings.HasPrefix(get("tsas"), "tls") || get("treq") == "required") {
			// Served without TLS, its hosts' traffic would go in the clear.
			notCarried("nvmet serves it with TLS (tsas %q, treq %q), which this target has not", get("tsas"), get("treq"))
			continue
		}
		if f := get("adrfam"); f != "ipv4" && f != "ipv6" {
			notCarried("address family %q (want ipv4 or ipv6)", f)
			continue
		}
		a, err := netip.ParseAddr(get("traddr"))
		if err != nil {
			notCarried("%q is not an IP address", get("traddr"))
			continue
		}
		port := defaultPort
		if s := get("trsvcid"); s != "" {
			if port, err = strconv.Atoi(s); err != nil {
				notCarried("service %q is not a port number", s)
				continue
			}
		}
		pid, ok := portID(m["portid"])
		if !ok || used[pid] {
			// Hosts see the port ID (PORTID in the discovery log), but
			// connect by address: a new one serves the same.
			pid = 1
			for taken[pid] || used[pid] {
				pid++
			}
			im.note(path+".portid", "%s: not carried: want a port ID in 1..%d not taken by another port; id %d instead", describe(m["portid"]), nvme.PortIDMax, pid)
		}
		used[pid] = true
		im.noteRest(path+".addr", addr, map[string]bool{"trtype": true, "adrfam": true, "traddr": true, "trsvcid": true},
			map[string][]string{"treq": {"not specified", "not required"}, "tsas": {"none", "not specified"}})
		param := asMap(m["param"])
		if s, ok := scalar(param["inline_data_size"]); ok {
			def := Bytes(limits.RDMAInCapsuleDataSize)
			if trtype == "tcp" {
				def = Bytes(limits.TCPInCapsuleDataSize)
			}
			im.note(path+".param.inline_data_size", "%s: not carried: %s.in_capsule_data_size (default %s) is one setting for every %s port", s, trtype, def, trtype)
		}
		im.noteRest(path+".param", param, map[string]bool{"inline_data_size": true}, map[string][]string{"pi_enable": {"0"}})
		im.ana = append(im.ana, im.portANA(path, m))
		for j, r := range asList(m["referrals"]) {
			im.referral(fmt.Sprintf("%s.referrals[%d]", path, j), pid, asMap(r))
		}
		for _, nqn := range links {
			if !slices.Contains(im.links[nqn], pid) {
				im.links[nqn] = append(im.links[nqn], pid)
			}
		}
		im.noteRest(path, m, map[string]bool{"portid": true, "addr": true, "param": true, "referrals": true, "subsystems": true, "ana_groups": true}, nil)
		im.c.Ports = append(im.c.Ports, Port{ID: pid, Transport: trtype, Address: a.String(), Port: port})
	}
	for _, r := range im.referrals {
		im.c.Referrals = append(im.c.Referrals, r.r)
		if len(r.ports) < len(im.c.Ports) {
			// A referral here is in the discovery log of every port.
			im.note(r.path, "%s: nvmet lists it in the discovery log of portid %s only; here every port lists it", r.what, joinInts(r.ports))
		}
	}
}

// portID reads an nvmetcli port ID as this target takes one.
func portID(v any) (int, bool) {
	s, _ := scalar(v)
	id, err := strconv.Atoi(s)
	return id, err == nil && id >= 1 && id <= nvme.PortIDMax
}

// portANA reads the states of the groups created on a port.
func (im *importer) portANA(path string, m map[string]any) map[int]string {
	states := map[int]string{}
	for j, g := range asList(m["ana_groups"]) {
		gk := fmt.Sprintf("%s.ana_groups[%d]", path, j)
		gm := asMap(g)
		gs, _ := scalar(gm["grpid"])
		st, _ := scalar(asMap(gm["ana"])["state"])
		gid, err := strconv.Atoi(gs)
		if err != nil || gid < 1 || gid > limits.ANAGroups {
			// The kernel takes 1..NVMET_MAX_ANAGRPS, though nvmetcli
			// writes up to 1024.
			im.note(gk, "group %s %s: not carried: ANA groups are 1..%d (nvmet's too)", gs, st, limits.ANAGroups)
			continue
		}
		if _, ok := nvme.ParseANAState(st); !ok {
			im.note(gk, "group %d state %q: not carried: not an ANA state; %s, as nvmet leaves it", gid, st, nvmetANADefault(gid))
			continue
		}
		states[gid] = st
		im.noteRest(gk+".ana", asMap(gm["ana"]), map[string]bool{"state": true}, nil)
		im.noteRest(gk, gm, map[string]bool{"grpid": true, "ana": true}, nil)
	}
	return states
}

// nvmetANADefault is the state of a group through a port where nvmet has
// no state written for it: group 1, which every port has, is optimized;
// any other is inaccessible (nvmet_ports_make, nvmet_ana_group_make).
func nvmetANADefault(group int) string {
	if group == limits.ANAGroup {
		return "optimized"
	}
	return "inaccessible"
}

// anaGroups gives every carried port the state, through it, of each
// group a carried namespace uses or nvmet names on any port. A group left
// out here is optimized, where in nvmet it is inaccessible unless created
// on the port: written out, each port shows hosts what nvmet's did.
func (im *importer) anaGroups() {
	groups := map[int]bool{}
	for _, states := range im.ana {
		for g := range states {
			groups[g] = true
		}
	}
	for _, s := range im.c.Subsystems {
		for _, n := range s.Namespaces {
			groups[int(n.ANAGroup)] = true
		}
	}
	if len(groups) == 0 {
		return
	}
	for i := range im.c.Ports {
		p := &im.c.Ports[i]
		p.ANAGroups = map[string]string{}
		for g := range groups {
			st, ok := im.ana[i][g]
			if !ok {
				st = nvmetANADefault(g)
			}
			p.ANAGroups[strconv.Itoa(g)] = st
		}
	}
}

// referralFrom is a referral carried, and the ports nvmet lists it on.
type referralFrom struct {
	r     Referral
	path  string // where first seen
	what  string
	ports []int
}

// referral carries an enabled RDMA or TCP referral of the port with ID pid.
// nvmet keeps referrals per port; here they are one list, in the
// discovery log of every port, so the same referral on several ports is
// carried once.
func (im *importer) referral(path string, pid int, m map[string]any) {
	addr := asMap(m["addr"])
	get := func(k string) string { s, _ := scalar(addr[k]); return s }
	name, _ := scalar(m["name"])
	what := fmt.Sprintf("%s (%s %s:%s)", name, get("trtype"), get("traddr"), get("trsvcid"))
	if e, _ := scalar(m["enable"]); e != "1" {
		// nvmet lists a referral once enabled; nvmetcli restores
		// enable only when saved.
		im.note(path, "%s: not enabled, so nvmet does not list it: skipped", what)
		return
	}
	trtype := get("trtype")
	if trtype != "rdma" && trtype != "tcp" {
		im.note(path, "%s: not carried: this target lists RDMA and TCP referrals only", what)
		return
	}
	if trtype == "tcp" && (strings.HasPrefix(get("tsas"), "tls") || get("treq") == "required") {
		// Listed here with no security, hosts would be sent to it without
		// TLS.
		im.note(path, "%s: not carried: a TLS referral (tsas %q, treq %q), which this target cannot list", what, get("tsas"), get("treq"))
		return
	}
	if f := get("adrfam"); f != "ipv4" && f != "ipv6" {
		im.note(path, "%s: not carried: address family %q (want ipv4 or ipv6)", what, f)
		return
	}
	a, err := netip.ParseAddr(get("traddr"))
	if err != nil {
		im.note(path, "%s: not carried: %q is not an IP address", what, get("traddr"))
		return
	}
	r := Referral{Transport: trtype, Address: a.String(), Port: defaultPort}
	if s := get("trsvcid"); s != "" {
		if r.Port, err = strconv.Atoi(s); err != nil || r.Port < 1 || r.Port > 65535 {
			im.note(path, "%s: not carried: service %q is not a port number", what, s)
			return
		}
	}
	if s := get("portid"); s != "" {
		if r.PortID, err = strconv.Atoi(s); err != nil || r.PortID < 0 || r.PortID > nvme.PortIDMax {
			im.note(path+".addr.portid", "%q: not carried: want 0..%d; listed with port_id 0", s, nvme.PortIDMax)
			r.PortID = 0
		}
	}
	im.noteRest(path+".addr", addr, map[string]bool{"trtype": true, "adrfam": true, "traddr": true, "trsvcid": true, "portid": true},
		map[string][]string{"treq": {"not specified", "not required"}, "tsas": {"none", "not specified"}})
	im.noteRest(path, m, map[string]bool{"name": true, "addr": true, "enable": true}, nil)
	for _, rf := range im.referrals {
		if rf.r == r {
			if !slices.Contains(rf.ports, pid) {
				rf.ports = append(rf.ports, pid)
			}
			return
		}
	}
	im.referrals = append(im.referrals, &referralFrom{r: r, path: path, what: what, ports: []int{pid}})
}

func joinInts(l []int) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// yaml writes the ports, referrals and subsystems. Strings are
// double-quoted with Go escapes, which YAML's double-quoted style shares.
func (im *importer) yaml() []byte {
	var b bytes.Buffer
	q := strconv.Quote
	b.WriteString("# Converted from nvmetcli's saved configuration by `nvmeof-tgt config import-nvmetcli`.\n")
	b.WriteString("ports:\n")
	if len(im.c.Ports) == 0 {
		b.WriteString("  [] # no RDMA or TCP port could be carried: add one\n")
	}
	for _, p := range im.c.Ports {
		fmt.Fprintf(&b, "  - {id: %d, transport: %s, address: %s, port: %d", p.ID, p.Transport, q(p.Address), p.Port)
		if len(p.ANAGroups) > 0 {
			var groups []string
			for _, g := range slices.SortedFunc(maps.Keys(p.ANAGroups), byNumber) {
				groups = append(groups, g+": "+p.ANAGroups[g])
			}
			fmt.Fprintf(&b, ", ana_groups: {%s}", strings.Join(groups, ", "))
		}
		b.WriteString("}\n")
	}
	if len(im.c.Referrals) > 0 {
		b.WriteString("referrals:\n")
		for _, r := range im.c.Referrals {
			fmt.Fprintf(&b, "  - {transport: %s, address: %s, port: %d, port_id: %d}\n", r.Transport, q(r.Address), r.Port, r.PortID)
		}
	}
	b.WriteString("subsystems:\n")
	if len(im.c.Subsystems) == 0 {
		b.WriteString("  []\n")
	}
	for _, s := range im.c.Subsystems {
		fmt.Fprintf(&b, "  - nqn: %s\n", q(s.NQN))
		fmt.Fprintf(&b, "    allow_any_host: %t\n", s.AllowAnyHost)
		if len(s.Hosts) > 0 {
			b.WriteString("    hosts:\n")
			for _, h := range s.Hosts {
				fmt.Fprintf(&b, "      - %s\n", hostYAML(h))
			}
		}
		if len(s.DHCHAPHashes) > 0 {
			fmt.Fprintf(&b, "    dhchap_hashes: [%s]\n", quoteAll(s.DHCHAPHashes))
		}
		if len(s.DHCHAPDHGroups) > 0 {
			fmt.Fprintf(&b, "    dhchap_dhgroups: [%s]\n", quoteAll(s.DHCHAPDHGroups))
		}
		if s.Serial != "" {
			fmt.Fprintf(&b, "    serial: %s\n", q(s.Serial))
		}
		if s.Model != "" {
			fmt.Fprintf(&b, "    model: %s\n", q(s.Model))
		}
		if len(s.Ports) > 0 {
			fmt.Fprintf(&b, "    ports: [%s]\n", joinInts(s.Ports))
		}
		if s.CNTLIDMin != 1 || s.CNTLIDMax != cntlidMax {
			fmt.Fprintf(&b, "    cntlid_min: %d\n    cntlid_max: %d\n", s.CNTLIDMin, s.CNTLIDMax)
		}
		if len(s.Namespaces) == 0 {
			continue
		}
		b.WriteString("    namespaces:\n")
		for _, n := range s.Namespaces {
			fmt.Fprintf(&b, "      - nsid: %d\n        backend: %s\n        path: %s\n", n.NSID, n.Backend, q(n.Path))
			if n.BlockSize != 0 {
				fmt.Fprintf(&b, "        block_size: %d\n", n.BlockSize)
			}
			if n.UUID != "" {
				fmt.Fprintf(&b, "        uuid: %s\n", n.UUID)
			}
			if n.NGUID == NGUIDNone {
				fmt.Fprintf(&b, "        nguid: %s\n", n.NGUID)
			} else if n.NGUID != "" {
				fmt.Fprintf(&b, "        nguid: %s\n", q(string(n.NGUID)))
			}
			if n.EUI64 != "" {
				fmt.Fprintf(&b, "        eui64: %s\n", q(string(n.EUI64)))
			}
			if n.ANAGroup != limits.ANAGroup {
				fmt.Fprintf(&b, "        ana_group: %d\n", n.ANAGroup)
			}
		}
	}
	return b.Bytes()
}

// byNumber orders decimal strings by value.
func byNumber(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x - y
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// scalar returns a JSON string, number or boolean as nvmet writes it to
// configfs: nvmetcli saves attributes as strings but IDs as numbers.
func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		if v {
			return "1", true
		}
		return "0", true
	}
	return "", false
}

func describe(v any) string {
	if s, ok := scalar(v); ok {
		return strconv.Quote(s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
