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
)

// ImportNvmetcli converts the JSON that `nvmetcli save` writes (the
// configuration of Linux's nvmet: top-level hosts, ports and subsystems)
// into this target's YAML, with the ports and subsystems sections only.
// Each setting that cannot be carried is named in the notes, one line
// each, starting with its nvmetcli path. The error is for JSON that cannot
// be read at all, or (ErrKeysNotCarried) for hosts that would lose their
// DH-HMAC-CHAP keys; the YAML may still fail Validate (say, with no RDMA
// port left), which the notes then explain.
//
// What is carried: RDMA ports (address, service); each subsystem's NQN,
// allow_any_host, allowed_hosts with their DH-HMAC-CHAP keys (o says
// where the keys go) and their preferred hash and DH group, serial and
// model; each enabled namespace's NSID, device path (its backend inferred
// on this machine, as blockdev.KindOf does), UUID and NGUID (none when
// nvmet had none). File namespaces get block_size 4096: nvmet gives a file
// the block size of its filesystem capped at 4KiB, which is 4KiB on ext4,
// xfs and tmpfs, and the host's partition table depends on it. A disabled
// namespace (enable 0) is skipped, not served.
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
	im := &importer{o: o, hostKeys: map[string]*hostKeys{}, keyFileNames: map[string]bool{}}
	for _, k := range sortedKeys(root) {
		switch k {
		case "hosts":
			im.hosts(root[k])
		case "ports", "subsystems":
			// Below, subsystems first: the ports' links refer to them.
		default:
			im.note(k, "not carried")
		}
	}
	im.subsystems(root["subsystems"])
	im.unusedKeys()
	if len(im.keyErrs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrKeysNotCarried, strings.Join(im.keyErrs, "; "))
	}
	im.ports(root["ports"])
	return &Import{YAML: im.yaml(), Notes: im.notes, KeyFiles: im.keyFiles, InlineSecrets: im.inline}, nil
}

type importer struct {
	c     Config
	o     ImportOptions
	links [][]string // per carried port, the NQNs nvmetcli links to it
	keys  []string   // per carried port, its nvmetcli path
	where []string   // per carried port, its ID and address
	notes []string

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
	"cntlid_min": {"1"},
	"cntlid_max": {"65519"},
	"pi_enable":  {"0"},
	"qid_max":    {"128"},
	"ieee_oui":   {"0x000000"},
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
		s := Subsystem{NQN: nqn}
		attr := asMap(m["attr"])
		anyHost, _ := scalar(attr["allow_any_host"])
		s.AllowAnyHost = anyHost == "1"
		s.Serial, _ = scalar(attr["serial"])
		s.Model, _ = scalar(attr["model"])
		im.noteRest(path+".attr", attr, map[string]bool{"allow_any_host": true, "serial": true, "model": true}, subsystemDefaults)
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
}

// Namespace settings at nvmet's defaults, which need no note.
var namespaceDefaults = map[string][]string{
	"ana_grpid": {"1"},
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
	n := Namespace{NSID: uint32(nsid)}
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
	im.noteRest(path+".ana", asMap(m["ana"]), nil, map[string][]string{"grpid": {"1"}})
	im.noteRest(path+".resv", asMap(m["resv"]), nil, map[string][]string{"enable": {"0"}})
	im.noteRest(path, m, map[string]bool{"nsid": true, "enable": true, "device": true, "ana": true, "resv": true}, namespaceDefaults)
	return n, true
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
	for i, pv := range asList(v) {
		m := asMap(pv)
		id, _ := scalar(m["portid"])
		path := fmt.Sprintf("ports[%d]", i)
		addr := asMap(m["addr"])
		get := func(k string) string { s, _ := scalar(addr[k]); return s }
		for j, r := range asList(m["referrals"]) {
			ra := asMap(asMap(r)["addr"])
			name, _ := scalar(asMap(r)["name"])
			tr, _ := scalar(ra["trtype"])
			ta, _ := scalar(ra["traddr"])
			ts, _ := scalar(ra["trsvcid"])
			im.note(fmt.Sprintf("%s.referrals[%d]", path, j), "%s (%s %s:%s): not carried: this target has no referrals", name, tr, ta, ts)
		}
		where := fmt.Sprintf("portid %s, %s %s:%s", id, get("trtype"), get("traddr"), get("trsvcid"))
		if get("trtype") != "rdma" {
			im.note(path, "%s: not carried: this target serves RDMA only", where)
			continue
		}
		if f := get("adrfam"); f != "ipv4" && f != "ipv6" {
			im.note(path, "%s: not carried: address family %q (want ipv4 or ipv6)", where, f)
			continue
		}
		a, err := netip.ParseAddr(get("traddr"))
		if err != nil {
			im.note(path, "%s: not carried: %q is not an IP address", where, get("traddr"))
			continue
		}
		port := defaultPort
		if s := get("trsvcid"); s != "" {
			if port, err = strconv.Atoi(s); err != nil {
				im.note(path, "%s: not carried: service %q is not a port number", where, s)
				continue
			}
		}
		im.noteRest(path+".addr", addr, map[string]bool{"trtype": true, "adrfam": true, "traddr": true, "trsvcid": true},
			map[string][]string{"treq": {"not specified", "not required"}, "tsas": {"none", "not specified"}})
		param := asMap(m["param"])
		if s, ok := scalar(param["inline_data_size"]); ok {
			im.note(path+".param.inline_data_size", "%s: not carried: rdma.in_capsule_data_size (default %s) is one setting for every port", s, Bytes(limits.RDMAInCapsuleDataSize))
		}
		im.noteRest(path+".param", param, map[string]bool{"inline_data_size": true}, map[string][]string{"pi_enable": {"0"}})
		for j, g := range asList(m["ana_groups"]) {
			gm := asMap(g)
			gid, _ := scalar(gm["grpid"])
			st, _ := scalar(asMap(gm["ana"])["state"])
			if gid != "1" || st != "optimized" {
				im.note(fmt.Sprintf("%s.ana_groups[%d]", path, j), "group %s %s: not carried: this target has no ANA", gid, st)
			}
		}
		var links []string
		for _, s := range asList(m["subsystems"]) {
			if nqn, ok := scalar(s); ok {
				links = append(links, nqn)
			}
		}
		im.noteRest(path, m, map[string]bool{"portid": true, "addr": true, "param": true, "referrals": true, "subsystems": true, "ana_groups": true}, nil)
		im.c.Ports = append(im.c.Ports, Port{Transport: "rdma", Address: a.String(), Port: port})
		im.links = append(im.links, links)
		im.keys = append(im.keys, path)
		im.where = append(im.where, where)
	}
	// This target serves every subsystem on every port.
	for i, links := range im.links {
		var more []string
		for _, s := range im.c.Subsystems {
			if !slices.Contains(links, s.NQN) {
				more = append(more, s.NQN)
			}
		}
		if len(more) > 0 {
			im.note(im.keys[i]+".subsystems", "%s: nvmetcli serves [%s] here; this target serves every subsystem on every port, so also %s",
				im.where[i], strings.Join(links, ", "), strings.Join(more, ", "))
		}
	}
}

// yaml writes the ports and subsystems. Strings are double-quoted with Go
// escapes, which YAML's double-quoted style shares.
func (im *importer) yaml() []byte {
	var b bytes.Buffer
	q := strconv.Quote
	b.WriteString("# Converted from nvmetcli's saved configuration by `nvmeof-tgt config import-nvmetcli`.\n")
	b.WriteString("ports:\n")
	if len(im.c.Ports) == 0 {
		b.WriteString("  [] # no RDMA port could be carried: add one\n")
	}
	for _, p := range im.c.Ports {
		fmt.Fprintf(&b, "  - {transport: %s, address: %s, port: %d}\n", p.Transport, q(p.Address), p.Port)
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
		}
	}
	return b.Bytes()
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
