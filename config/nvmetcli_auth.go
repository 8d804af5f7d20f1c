package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// ImportOptions says what ImportNvmetcli does with the DH-HMAC-CHAP keys
// of hosts that nvmet makes authenticate: those with a key on the allowed
// list of a subsystem closed to other hosts (nvmet's nvmet_setup_auth).
// Such a host is never carried without its key, which would let it in
// unauthenticated.
type ImportOptions struct {
	// KeyDir, an absolute path, is where the keys go, one file per key
	// (Import.KeyFiles), named by dhchap_key_file and
	// dhchap_ctrl_key_file in the YAML.
	KeyDir string
	// InlineKeys writes the keys into the YAML instead (dhchap_key,
	// dhchap_ctrl_key), which then holds secrets.
	InlineKeys bool
	// DropKeys leaves a host whose key cannot be carried (invalid, or
	// neither KeyDir nor InlineKeys given) out of every allowed list, with
	// a note, rather than fail with ErrKeysNotCarried. Out of the list it
	// cannot connect at all: safer than in the list without its key.
	DropKeys bool
}

// Import is what ImportNvmetcli made.
type Import struct {
	// YAML is the configuration: ports and subsystems.
	YAML []byte
	// Notes name what was not carried, one line each; never a secret.
	Notes []string
	// KeyFiles are the key files the YAML names (ImportOptions.KeyDir),
	// to be written, readable by their owner only, before the YAML is
	// used.
	KeyFiles []KeyFile
	// InlineSecrets says the YAML holds keys (ImportOptions.InlineKeys):
	// it must be kept mode 0600, as serve requires.
	InlineSecrets bool
}

// KeyFile is one DH-HMAC-CHAP key and the file to hold it. It prints as
// its path only.
type KeyFile struct {
	Path   string
	Secret string // the DHHC-1 representation, as nvmet had it
}

func (k KeyFile) String() string   { return k.Path }
func (k KeyFile) GoString() string { return "config.KeyFile{Path: " + strconv.Quote(k.Path) + "}" }

// ErrKeysNotCarried means some hosts that nvmet makes authenticate would
// lose their DH-HMAC-CHAP keys: they are invalid, or ImportOptions gave
// them nowhere to go. The error names each host and why, never a secret.
var ErrKeysNotCarried = errors.New("DH-HMAC-CHAP keys not carried")

// nvmet's defaults for a host (nvmet_host_make): preferences nobody set,
// which this target's own defaults (fabric.DefaultAuthPolicy) replace.
const (
	nvmetDefaultHash    = "hmac(sha256)"
	nvmetDefaultDHGroup = "null"
)

// hostKeys is a host of nvmet's hosts list and its DH-HMAC-CHAP settings.
type hostKeys struct {
	path, nqn     string
	key, ctrlKey  string
	hash, dhgroup string

	used     bool // some subsystem makes it authenticate
	skipped  bool // a subsystem skipped for its ports would
	resolved bool
	why      string // why its keys cannot be carried, once resolved
	host     Host   // the entry with its keys, once resolved
	reported bool   // its problem is in keyErrs or its note made
}

// hosts reads nvmet's hosts list. nvmetcli saves a host's dhchap_*
// attributes as the group "dhchap" ({"dhchap": {"key": ...}}); the flat
// form ("dhchap_key": ...) is read too.
func (im *importer) hosts(v any) {
	for i, h := range asList(v) {
		path := fmt.Sprintf("hosts[%d]", i)
		m := asMap(h)
		dh := asMap(m["dhchap"])
		get := func(k string) string {
			if s, _ := scalar(dh[k]); s != "" {
				return strings.TrimSpace(s)
			}
			s, _ := scalar(m["dhchap_"+k])
			return strings.TrimSpace(s)
		}
		hk := &hostKeys{path: path, key: get("key"), ctrlKey: get("ctrl_key"), hash: get("hash"), dhgroup: get("dhgroup")}
		hk.nqn, _ = scalar(m["nqn"])
		if hk.nqn != "" {
			im.hostKeys[hk.nqn] = hk
		}
		im.hostOrder = append(im.hostOrder, hk)
		im.noteRest(path+".dhchap", dh, map[string]bool{"key": true, "ctrl_key": true, "hash": true, "dhgroup": true}, nil)
		im.noteRest(path, m, map[string]bool{"nqn": true, "dhchap": true,
			"dhchap_key": true, "dhchap_ctrl_key": true, "dhchap_hash": true, "dhchap_dhgroup": true}, nil)
	}
}

// allowHosts sets the hosts of a subsystem closed to others, each with
// the keys nvmet makes it authenticate with, and the subsystem's preferred
// hash and DH group from theirs.
func (im *importer) allowHosts(path string, s *Subsystem, allowed []string) {
	var keyed []*hostKeys
	for _, nqn := range allowed {
		hk := im.hostKeys[nqn]
		if hk == nil || hk.key == "" && hk.ctrlKey == "" {
			s.Hosts = append(s.Hosts, Host{NQN: nqn})
			continue
		}
		hk.used = true
		if hk.key == "" {
			// nvmet authenticates a host only when it has a key of its
			// own; a controller key alone is never used.
			if !hk.reported {
				im.note(hk.path+".dhchap.ctrl_key", "set without a key, so nvmet does not authenticate %s: not carried", nqn)
				hk.reported = true
			}
			s.Hosts = append(s.Hosts, Host{NQN: nqn})
			continue
		}
		if why := im.resolveKeys(hk); why != "" {
			if im.o.DropKeys {
				im.note(path+".allowed_hosts", "%s: left out, since it may connect only with its DH-HMAC-CHAP key, which is not carried: %s", nqn, why)
			} else if !hk.reported {
				im.keyErrs = append(im.keyErrs, fmt.Sprintf("%s (%s): %s", hk.path, nqn, why))
				hk.reported = true
			}
			continue
		}
		s.Hosts = append(s.Hosts, hk.host)
		keyed = append(keyed, hk)
	}
	s.DHCHAPHashes = im.preference(path, "hash", keyed, nvmetDefaultHash, func(hk *hostKeys) string { return hk.hash }, parseHashName)
	s.DHCHAPDHGroups = im.preference(path, "dhgroup", keyed, nvmetDefaultDHGroup, func(hk *hostKeys) string { return hk.dhgroup }, parseGroupName)
}

// resolveKeys checks a host's keys and gives them their place, once; it
// returns why they cannot be carried, or "". Reasons never hold a secret
// (dhchap.ParseSecret's errors do not).
func (im *importer) resolveKeys(hk *hostKeys) string {
	if hk.resolved {
		return hk.why
	}
	hk.resolved = true
	if _, err := dhchap.ParseSecret(hk.key); err != nil {
		hk.why = fmt.Sprintf("dhchap key: %v", err)
		return hk.why
	}
	if hk.ctrlKey != "" {
		if _, err := dhchap.ParseSecret(hk.ctrlKey); err != nil {
			hk.why = fmt.Sprintf("dhchap ctrl_key: %v", err)
			return hk.why
		}
	}
	switch {
	case im.o.InlineKeys:
		hk.host = Host{NQN: hk.nqn, DHCHAPKey: hk.key, DHCHAPCtrlKey: hk.ctrlKey}
		im.inline = true
	case im.o.KeyDir != "":
		base := im.keyFileBase(hk.nqn)
		hk.host = Host{NQN: hk.nqn, DHCHAPKeyFile: filepath.Join(im.o.KeyDir, base+".key")}
		im.keyFiles = append(im.keyFiles, KeyFile{Path: hk.host.DHCHAPKeyFile, Secret: hk.key})
		if hk.ctrlKey != "" {
			hk.host.DHCHAPCtrlKeyFile = filepath.Join(im.o.KeyDir, base+".ctrl.key")
			im.keyFiles = append(im.keyFiles, KeyFile{Path: hk.host.DHCHAPCtrlKeyFile, Secret: hk.ctrlKey})
		}
	default:
		hk.why = "no place was given for its keys (a key directory, or inline)"
	}
	return hk.why
}

// keyFileBase names a host's key files after its NQN, with what is not
// safe in a file name replaced, distinct from the names already taken.
func (im *importer) keyFileBase(nqn string) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == ':':
			return r
		}
		return '_'
	}, nqn)
	name := base
	for i := 2; im.keyFileNames[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	im.keyFileNames[name] = true
	return name
}

// preference carries the hash or DH group the subsystem's authenticating
// hosts prefer. nvmet keeps one per host, which it uses when the host
// offers it and otherwise takes the first usable one the host offers
// (nvmet_auth_negotiate); this target keeps a list per subsystem, which it
// tries in order. So the preferred value goes first and every other value
// follows, in this target's default order: any host may still use any. A
// value at nvmet's default is left to this target's default (which
// prefers a DH exchange to none). Hosts that differ get a note.
func (im *importer) preference(path, attr string, keyed []*hostKeys, nvmetDefault string, get func(*hostKeys) string, parse func(string) (string, error)) []string {
	var chosen, first string
	var seen []string // each host's, for the note
	differ := false
	for _, hk := range keyed {
		v := get(hk)
		if v == "" {
			v = nvmetDefault
		}
		name, err := parse(v)
		if err != nil {
			im.note(hk.path+".dhchap."+attr, "%q: not carried: %v", v, err)
			continue
		}
		if first == "" {
			first = name
		}
		differ = differ || name != first
		seen = append(seen, hk.nqn+" "+v)
		if chosen == "" && v != nvmetDefault {
			chosen = name
		}
	}
	var list []string
	if chosen != "" {
		list = []string{chosen}
		for _, n := range defaultNames(attr) {
			if n != chosen {
				list = append(list, n)
			}
		}
	}
	if differ {
		key, what := "dhchap_hashes", "hash"
		if attr == "dhgroup" {
			key, what = "dhchap_dhgroups", "DH group"
		}
		val := "this target's default"
		if list != nil {
			val = "[" + strings.Join(list, ", ") + "]"
		}
		im.note(path+".allowed_hosts", "nvmet prefers a DH-HMAC-CHAP %s per host (%s); this target has one preference list per subsystem, for all its hosts: %s %s",
			what, strings.Join(seen, ", "), key, val)
	}
	return list
}

func parseHashName(s string) (string, error) {
	h, err := dhchap.ParseHash(s)
	return h.String(), err
}

func parseGroupName(s string) (string, error) {
	g, err := dhchap.ParseGroup(s)
	return g.String(), err
}

// defaultNames lists the hashes or DH groups in the order the target
// prefers them by default (dhchap.Preferred*).
func defaultNames(attr string) []string {
	var out []string
	if attr == "hash" {
		for _, h := range dhchap.PreferredHashes {
			out = append(out, h.String())
		}
		return out
	}
	for _, g := range dhchap.PreferredGroups {
		out = append(out, g.String())
	}
	return out
}

// skipKeys marks the hosts with keys that a subsystem skipped for its
// ports would make authenticate: their keys are not carried either.
func (im *importer) skipKeys(m map[string]any) {
	if s, _ := scalar(asMap(m["attr"])["allow_any_host"]); s == "1" {
		return
	}
	for _, h := range asList(m["allowed_hosts"]) {
		nqn, _ := scalar(h)
		if hk := im.hostKeys[nqn]; hk != nil {
			hk.skipped = true
		}
	}
}

// unusedKeys notes the keys of hosts that no carried subsystem makes
// authenticate: nvmet never asked for them here, so nothing is lost.
func (im *importer) unusedKeys() {
	for _, hk := range im.hostOrder {
		switch {
		case (hk.key == "" && hk.ctrlKey == "") || hk.used:
		case hk.skipped:
			im.note(hk.path+".dhchap", "keys of %s not carried: only subsystems skipped for their ports (above) make it authenticate", hk.nqn)
		default:
			im.note(hk.path+".dhchap", "keys of %s not carried: no subsystem closed to other hosts allows it, so nvmet never asked it to authenticate", hk.nqn)
		}
	}
}

// hostYAML writes a hosts entry: a bare NQN, or a mapping with its keys.
func hostYAML(h Host) string {
	if !h.HasSecret() {
		return strconv.Quote(h.NQN)
	}
	f := []string{"nqn: " + strconv.Quote(h.NQN)}
	for _, kv := range [][2]string{
		{"dhchap_key", h.DHCHAPKey}, {"dhchap_key_file", h.DHCHAPKeyFile},
		{"dhchap_ctrl_key", h.DHCHAPCtrlKey}, {"dhchap_ctrl_key_file", h.DHCHAPCtrlKeyFile},
	} {
		if kv[1] != "" {
			f = append(f, kv[0]+": "+strconv.Quote(kv[1]))
		}
	}
	return "{" + strings.Join(f, ", ") + "}"
}

func quoteAll(l []string) string {
	q := slices.Clone(l)
	for i, s := range q {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
