package group

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Header is the data of the state object: what it is and the format's
// version. An object with other data is not a state this code can read.
const Header = "nvmeof-tgt group state 1\n"

// Sentinel errors.
var (
	// ErrCorrupt is a state object that does not decode: its gateways go
	// on serving what they served, and refuse changes, until it is
	// repaired.
	ErrCorrupt = errors.New("group state is corrupt")
	// ErrConflict is a change that lost to another gateway's, made
	// between its read and its write.
	ErrConflict = errors.New("group state changed meanwhile")
	// ErrSecret refuses a host whose secret is inline: RADOS never holds
	// one; each gateway reads it from a file of its own.
	ErrSecret = errors.New("a gateway group keeps no secret")
	// ErrLocal refuses a namespace on a file or device: those are local to
	// one machine, so each gateway would serve a different one under the
	// same NSID (and a state object could name any path on every gateway).
	ErrLocal = errors.New("a gateway group shares no file or device: those are local to one machine; use an rbd image")
)

// State is the group's shared configuration.
type State struct {
	// Version is one more at each change; 0 before the first.
	Version uint64
	// Epoch names the object: random, written when it is created and
	// never changed. An object removed and made anew (the repair of a
	// corrupt one) starts its versions again under a new epoch, which a
	// gateway follows whatever its version. "" for none (no object, or
	// one written before epochs).
	Epoch string
	// Subsystems, by NQN, with their namespaces (by NSID) and hosts (by
	// NQN). Their controller-ID ranges are each gateway's own: unset here.
	Subsystems []config.Subsystem
	// Listeners are each gateway's ports, by gateway ID.
	Listeners map[int][]Listener
	// Reservations are the namespaces' persistent reservations.
	Reservations map[NSRef]Reservation

	// object is the version of the object it was read from (0: none),
	// which Commit requires still.
	object uint64
}

// NSRef names a namespace.
type NSRef struct {
	NQN  string
	NSID uint32
}

// Listener is a gateway's port.
type Listener struct {
	PortID    int    `json:"-"`
	Transport string `json:"transport"`
	Address   string `json:"address"`
	Port      int    `json:"port"`
}

// Reservation is a namespace's reservations, as fabric keeps them; host
// IDs as UUIDs.
type Reservation struct {
	Generation  uint32       `json:"generation"`
	Type        uint8        `json:"type"`             // 0: none; 1..6
	Holder      string       `json:"holder,omitempty"` // types 1..4
	Registrants []Registrant `json:"registrants"`
	PTPL        bool         `json:"ptpl,omitempty"`
	// Seq counts the changes to this record; Notices are the Reservation
	// Notification log entries its last change owes hosts, which every
	// gateway that did not run it queues on its own controllers.
	Seq     uint64       `json:"seq,omitempty"`
	Notices []ResvNotice `json:"notices,omitempty"`
	// Aborted are the hosts a Preempt and Abort (the last change) took
	// out: every gateway waits until none of their commands runs on it
	// before it acknowledges the change.
	Aborted []string `json:"aborted,omitempty"`
}

// ResvNotice is a Reservation Notification log entry owed to a host: Kind 1
// registration preempted, 2 reservation released, 3 reservation preempted.
type ResvNotice struct {
	HostID string `json:"host_id"`
	Kind   uint8  `json:"kind"`
}

// Registrant is a registered host and its key.
type Registrant struct {
	HostID string `json:"host_id"`
	Key    uint64 `json:"key"`
}

// Clone is a deep copy.
func (s *State) Clone() *State {
	c := *s
	cfg := config.Config{Subsystems: s.Subsystems}
	c.Subsystems = cfg.Clone().Subsystems
	c.Listeners = make(map[int][]Listener, len(s.Listeners))
	for id, ls := range s.Listeners {
		c.Listeners[id] = slices.Clone(ls)
	}
	c.Reservations = make(map[NSRef]Reservation, len(s.Reservations))
	for k, r := range s.Reservations {
		r.Registrants = slices.Clone(r.Registrants)
		r.Notices = slices.Clone(r.Notices)
		r.Aborted = slices.Clone(r.Aborted)
		c.Reservations[k] = r
	}
	return &c
}

// Recreate is s as the content of an object made anew: committed, it
// creates the object (under a new epoch) with s's configuration and
// reservations.
func (s *State) Recreate() *State {
	c := s.Clone()
	c.Version, c.Epoch, c.object = 0, "", 0
	return c
}

// Empty is the state of a group with none yet.
func Empty() *State {
	return &State{Listeners: map[int][]Listener{}, Reservations: map[NSRef]Reservation{}}
}

// The records the omap's values hold. Their keys are the configuration
// file's.

type subsystemRecord struct {
	AllowAnyHost   bool     `json:"allow_any_host,omitempty"`
	Serial         string   `json:"serial"`
	Model          string   `json:"model"`
	Ports          []int    `json:"ports,omitempty"`
	DHCHAPHashes   []string `json:"dhchap_hashes,omitempty"`
	DHCHAPDHGroups []string `json:"dhchap_dhgroups,omitempty"`
}

type namespaceRecord struct {
	Backend    string `json:"backend"`
	Path       string `json:"path,omitempty"`
	Size       uint64 `json:"size,omitempty"`
	BlockSize  uint32 `json:"block_size,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	NGUID      string `json:"nguid,omitempty"`
	EUI64      string `json:"eui64,omitempty"`
	ANAGroup   uint32 `json:"ana_group"`
	ReadOnly   bool   `json:"read_only,omitempty"`
	BufferedIO bool   `json:"buffered_io,omitempty"`
	Pool       string `json:"pool,omitempty"`
	Image      string `json:"image,omitempty"`
	// Hosts is the namespace's mask, applied on every gateway: a host
	// outside it sees the namespace through none (decoded as strictly as
	// a subsystem's hosts: a mask only narrows what the subsystem
	// allows).
	Hosts []string `json:"hosts,omitempty"`
	// QoS and QoSPerHost are its limits, each gateway's own: a host with
	// paths through two gateways may get twice them.
	QoS        *qosRecord        `json:"qos,omitempty"`
	QoSPerHost *qosPerHostRecord `json:"qos_per_host,omitempty"`
	// No ceph_conf or client: each gateway reaches the group's cluster
	// through its own (Compose), and a record naming either is refused.
}

// qosRecord is a set of QoS limits, in the configuration's keys.
type qosRecord struct {
	IOPS      uint64 `json:"iops,omitempty"`
	ReadIOPS  uint64 `json:"read_iops,omitempty"`
	WriteIOPS uint64 `json:"write_iops,omitempty"`
	BW        uint64 `json:"bw,omitempty"`
	ReadBW    uint64 `json:"read_bw,omitempty"`
	WriteBW   uint64 `json:"write_bw,omitempty"`
}

type hostQoSRecord struct {
	NQN string `json:"nqn"`
	qosRecord
}

type qosPerHostRecord struct {
	Default qosRecord       `json:"default"`
	Hosts   []hostQoSRecord `json:"hosts,omitempty"`
}

func qosRecordOf(q config.QoS) qosRecord {
	return qosRecord{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		BW: uint64(q.BW), ReadBW: uint64(q.ReadBW), WriteBW: uint64(q.WriteBW)}
}

func (r qosRecord) config() config.QoS {
	return config.QoS{IOPS: r.IOPS, ReadIOPS: r.ReadIOPS, WriteIOPS: r.WriteIOPS,
		BW: config.Bytes(r.BW), ReadBW: config.Bytes(r.ReadBW), WriteBW: config.Bytes(r.WriteBW)}
}

// namespaceRecordOf is n's record.
func namespaceRecordOf(n config.Namespace) namespaceRecord {
	r := namespaceRecord{Backend: n.Backend, Path: n.Path, Size: uint64(n.Size),
		BlockSize: n.BlockSize, UUID: n.UUID, NGUID: string(n.NGUID), EUI64: string(n.EUI64), ANAGroup: n.ANAGroup,
		ReadOnly: n.ReadOnly, BufferedIO: n.BufferedIO, Pool: n.Pool, Image: n.Image, Hosts: n.Hosts}
	if !n.QoS.IsZero() {
		q := qosRecordOf(n.QoS)
		r.QoS = &q
	}
	if !n.QoSPerHost.IsZero() {
		p := &qosPerHostRecord{Default: qosRecordOf(n.QoSPerHost.Default)}
		for _, h := range n.QoSPerHost.Hosts {
			p.Hosts = append(p.Hosts, hostQoSRecord{NQN: h.NQN, qosRecord: qosRecordOf(h.QoS)})
		}
		r.QoSPerHost = p
	}
	return r
}

// config is the namespace nsid the record describes; its hosts and QoS
// hosts checked as a subsystem's hosts are.
func (r namespaceRecord) config(nsid uint32) (config.Namespace, error) {
	n := config.Namespace{NSID: nsid, Backend: r.Backend, Path: r.Path, Size: config.Bytes(r.Size),
		BlockSize: r.BlockSize, UUID: r.UUID, NGUID: config.HexID(r.NGUID), EUI64: config.HexID(r.EUI64), ANAGroup: r.ANAGroup,
		ReadOnly: r.ReadOnly, BufferedIO: r.BufferedIO, Pool: r.Pool, Image: r.Image}
	n.Hosts = nilIfEmpty(r.Hosts)
	if err := checkHostList("hosts", r.Hosts); err != nil {
		return n, err
	}
	if r.QoS != nil {
		n.QoS = r.QoS.config()
	}
	if p := r.QoSPerHost; p != nil {
		n.QoSPerHost.Default = p.Default.config()
		nqns := make([]string, len(p.Hosts))
		for i, h := range p.Hosts {
			nqns[i] = h.NQN
			n.QoSPerHost.Hosts = append(n.QoSPerHost.Hosts, config.HostQoS{NQN: h.NQN, QoS: h.qosRecord.config()})
		}
		if err := checkHostList("qos_per_host.hosts", nqns); err != nil {
			return n, err
		}
	}
	return n, nil
}

// checkHostList refuses a list of hosts this code would not have
// written: more than limits.NamespaceHosts, a name that is no NQN, one
// named twice.
func checkHostList(what string, nqns []string) error {
	if len(nqns) > limits.NamespaceHosts {
		return fmt.Errorf("%s: %d hosts, more than %d", what, len(nqns), limits.NamespaceHosts)
	}
	seen := make(map[string]bool, len(nqns))
	for _, h := range nqns {
		if err := nvme.CheckNQN(h); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if seen[h] {
			return fmt.Errorf("%s: %q twice", what, h)
		}
		seen[h] = true
	}
	return nil
}

// hostRecord names a host's key files; a secret itself has no field, so
// none decodes.
type hostRecord struct {
	DHCHAPKeyFile     string `json:"dhchap_key_file,omitempty"`
	DHCHAPCtrlKeyFile string `json:"dhchap_ctrl_key_file,omitempty"`
}

// Key prefixes.
const (
	keyVersion   = "version"
	keyEpoch     = "epoch"
	keySubsystem = "subsystem/"
	keyNamespace = "namespace/"
	keyHost      = "host/"
	keyListener  = "listener/"
	keyResv      = "resv/"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and numbers
	}
	return b
}

// Omap is the state as the object's omap keys.
func (s *State) Omap() map[string][]byte {
	m := map[string][]byte{keyVersion: []byte(strconv.FormatUint(s.Version, 10))}
	if s.Epoch != "" {
		m[keyEpoch] = []byte(s.Epoch)
	}
	for _, sub := range s.Subsystems {
		m[keySubsystem+sub.NQN] = mustJSON(subsystemRecord{AllowAnyHost: sub.AllowAnyHost, Serial: sub.Serial, Model: sub.Model,
			Ports: sub.Ports, DHCHAPHashes: sub.DHCHAPHashes, DHCHAPDHGroups: sub.DHCHAPDHGroups})
		for _, n := range sub.Namespaces {
			m[nsKey(keyNamespace, sub.NQN, n.NSID)] = mustJSON(namespaceRecordOf(n))
		}
		for _, h := range sub.Hosts {
			m[keyHost+sub.NQN+"/"+h.NQN] = mustJSON(hostRecord{DHCHAPKeyFile: h.DHCHAPKeyFile, DHCHAPCtrlKeyFile: h.DHCHAPCtrlKeyFile})
		}
	}
	for id, ls := range s.Listeners {
		for _, l := range ls {
			m[keyListener+strconv.Itoa(id)+"/"+strconv.Itoa(l.PortID)] = mustJSON(l)
		}
	}
	for ref, r := range s.Reservations {
		m[nsKey(keyResv, ref.NQN, ref.NSID)] = mustJSON(r)
	}
	return m
}

func nsKey(prefix, nqn string, nsid uint32) string {
	return prefix + nqn + "/" + strconv.FormatUint(uint64(nsid), 10)
}

// Decode reads the state from its object. A missing object (version 0) is
// the empty state. Anything this code would not have written is
// ErrCorrupt, naming the key: unknown keys or fields, malformed names,
// a namespace, host or reservation of no subsystem.
func Decode(o Object) (*State, error) {
	s := Empty()
	s.object = o.Version
	if o.Version == 0 {
		return s, nil
	}
	if err := checkSize(o); err != nil {
		return nil, err
	}
	if !bytes.Equal(o.Data, []byte(Header)) {
		return nil, fmt.Errorf("%w: its data is not the header %q but %d bytes beginning %q", ErrCorrupt, strings.TrimSpace(Header), len(o.Data), prefix(o.Data))
	}
	v, ok := o.Omap[keyVersion]
	if !ok {
		return nil, fmt.Errorf("%w: no %q key", ErrCorrupt, keyVersion)
	}
	ver, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || strconv.FormatUint(ver, 10) != string(v) {
		return nil, fmt.Errorf("%w: key %q: %q is not a version", ErrCorrupt, keyVersion, prefix(v))
	}
	s.Version = ver
	subs := map[string]*config.Subsystem{}
	// Subsystems first: the other keys refer to them.
	keys := slices.Sorted(maps.Keys(o.Omap))
	for _, k := range keys {
		nqn, ok := strings.CutPrefix(k, keySubsystem)
		if !ok {
			continue
		}
		if err := nvme.CheckSubsystemNQN(nqn); err != nil {
			return nil, badKey(k, err)
		}
		var r subsystemRecord
		if err := strictJSON(o.Omap[k], &r); err != nil {
			return nil, badKey(k, err)
		}
		// An empty list is none, as the record leaves it out: what
		// decodes encodes back the same.
		subs[nqn] = &config.Subsystem{NQN: nqn, AllowAnyHost: r.AllowAnyHost, Serial: r.Serial, Model: r.Model,
			Ports: nilIfEmpty(r.Ports), DHCHAPHashes: nilIfEmpty(r.DHCHAPHashes), DHCHAPDHGroups: nilIfEmpty(r.DHCHAPDHGroups)}
	}
	for _, k := range keys {
		val := o.Omap[k]
		switch {
		case k == keyVersion, strings.HasPrefix(k, keySubsystem):
		case k == keyEpoch:
			if err := checkEpoch(string(val)); err != nil {
				return nil, badKey(k, err)
			}
			s.Epoch = string(val)
		case strings.HasPrefix(k, keyNamespace):
			sub, nsid, err := nsOf(k, keyNamespace, subs)
			if err != nil {
				return nil, err
			}
			var r namespaceRecord
			if err := strictJSON(val, &r); err != nil {
				return nil, badKey(k, err)
			}
			n, err := r.config(nsid)
			if err != nil {
				return nil, badKey(k, err)
			}
			if err := checkShared(n); err != nil {
				return nil, badKey(k, err)
			}
			sub.Namespaces = append(sub.Namespaces, n)
		case strings.HasPrefix(k, keyHost):
			nqn, host, ok := strings.Cut(strings.TrimPrefix(k, keyHost), "/")
			sub := subs[nqn]
			switch {
			case !ok:
				return nil, badKey(k, errors.New("want host/<subsystem NQN>/<host NQN>"))
			case sub == nil:
				return nil, badKey(k, errors.New("no such subsystem"))
			}
			if err := nvme.CheckNQN(host); err != nil {
				return nil, badKey(k, err)
			}
			var r hostRecord
			if err := strictJSON(val, &r); err != nil {
				return nil, badKey(k, err)
			}
			sub.Hosts = append(sub.Hosts, config.Host{NQN: host, DHCHAPKeyFile: r.DHCHAPKeyFile, DHCHAPCtrlKeyFile: r.DHCHAPCtrlKeyFile})
		case strings.HasPrefix(k, keyListener):
			gw, port, ok := strings.Cut(strings.TrimPrefix(k, keyListener), "/")
			id, err1 := canonicalInt(gw, 1, limits.GroupGateways)
			pid, err2 := canonicalInt(port, 1, nvme.PortIDMax)
			if !ok || err1 != nil || err2 != nil {
				return nil, badKey(k, fmt.Errorf("want listener/<gateway 1..%d>/<port ID 1..%d>", limits.GroupGateways, nvme.PortIDMax))
			}
			var l Listener
			if err := strictJSON(val, &l); err != nil {
				return nil, badKey(k, err)
			}
			l.PortID = pid
			s.Listeners[id] = append(s.Listeners[id], l)
		case strings.HasPrefix(k, keyResv):
			sub, nsid, err := nsOf(k, keyResv, subs)
			if err != nil {
				return nil, err
			}
			var r Reservation
			if err := strictJSON(val, &r); err != nil {
				return nil, badKey(k, err)
			}
			if err := r.Check(); err != nil {
				return nil, badKey(k, err)
			}
			s.Reservations[NSRef{sub.NQN, nsid}] = r
		default:
			return nil, badKey(k, errors.New("not a key of the group's state"))
		}
	}
	for _, nqn := range slices.Sorted(maps.Keys(subs)) {
		sub := subs[nqn]
		slices.SortFunc(sub.Namespaces, func(a, b config.Namespace) int { return cmpU32(a.NSID, b.NSID) })
		s.Subsystems = append(s.Subsystems, *sub)
	}
	for ref := range s.Reservations {
		if sub := subs[ref.NQN]; !slices.ContainsFunc(sub.Namespaces, func(n config.Namespace) bool { return n.NSID == ref.NSID }) {
			return nil, badKey(nsKey(keyResv, ref.NQN, ref.NSID), errors.New("no such namespace"))
		}
	}
	for _, ls := range s.Listeners {
		slices.SortFunc(ls, func(a, b Listener) int { return a.PortID - b.PortID })
	}
	return s, nil
}

// checkSize refuses a state object beyond what a gateway reads
// (limits.GroupStateKeys, GroupStateBytes, GroupStateValueBytes): whoever
// can write the pool could otherwise make every gateway's memory the
// bound.
func checkSize(o Object) error {
	if len(o.Omap) > limits.GroupStateKeys {
		return fmt.Errorf("%w: %d omap keys, more than %d", ErrCorrupt, len(o.Omap), limits.GroupStateKeys)
	}
	total := 0
	for k, v := range o.Omap {
		if len(v) > limits.GroupStateValueBytes {
			return badKey(k, fmt.Errorf("a value of %d bytes, more than %d", len(v), limits.GroupStateValueBytes))
		}
		total += len(k) + len(v)
	}
	if total > limits.GroupStateBytes {
		return fmt.Errorf("%w: %d bytes of omap, more than %d", ErrCorrupt, total, limits.GroupStateBytes)
	}
	return nil
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nsOf parses prefix<nqn>/<nsid>, of a subsystem in subs.
func nsOf(k, prefix string, subs map[string]*config.Subsystem) (*config.Subsystem, uint32, error) {
	rest := strings.TrimPrefix(k, prefix)
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return nil, 0, badKey(k, fmt.Errorf("want %s<subsystem NQN>/<NSID>", prefix))
	}
	sub := subs[rest[:i]]
	if sub == nil {
		return nil, 0, badKey(k, errors.New("no such subsystem"))
	}
	n, err := canonicalInt(rest[i+1:], 1, int(nvme.MaxNSID))
	if err != nil {
		return nil, 0, badKey(k, fmt.Errorf("NSID: %w", err))
	}
	if prefix == keyNamespace && slices.ContainsFunc(sub.Namespaces, func(ns config.Namespace) bool { return ns.NSID == uint32(n) }) {
		return nil, 0, badKey(k, errors.New("a second key for one namespace"))
	}
	return sub, uint32(n), nil
}

// canonicalInt parses a decimal in lo..hi written as FormatInt writes it,
// so that every key has one spelling.
func canonicalInt(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s || n < lo || n > hi {
		return 0, fmt.Errorf("%q is not a number in %d..%d", prefix([]byte(s)), lo, hi)
	}
	return n, nil
}

func badKey(k string, err error) error {
	return fmt.Errorf("%w: omap key %q: %w", ErrCorrupt, prefix([]byte(k)), err)
}

// prefix is the start of b, for an error message.
func prefix(b []byte) string {
	if len(b) > 48 {
		return string(b[:48]) + "..."
	}
	return string(b)
}

// strictJSON decodes one JSON object, refusing unknown fields and
// anything after it.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// Check reports what is wrong with a reservation record. Its lists are
// bounded as fabric bounds a namespace's registrants: a change owes no
// more notices, nor aborts more hosts, than there were registrants.
func (r Reservation) Check() error {
	for _, l := range []struct {
		what string
		n    int
	}{{"registrants", len(r.Registrants)}, {"notices", len(r.Notices)}, {"aborted", len(r.Aborted)}} {
		if l.n > limits.ResvRegistrants {
			return fmt.Errorf("%d %s, more than the %d registrants a namespace may have", l.n, l.what, limits.ResvRegistrants)
		}
	}
	seen := map[string]bool{}
	for _, reg := range r.Registrants {
		id, err := canonicalHostID(reg.HostID)
		if err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("host %s registered twice", id)
		}
		seen[id] = true
	}
	for _, h := range r.Aborted {
		if _, err := canonicalHostID(h); err != nil {
			return fmt.Errorf("aborted: %w", err)
		}
	}
	for _, n := range r.Notices {
		if _, err := canonicalHostID(n.HostID); err != nil {
			return fmt.Errorf("notice: %w", err)
		}
		if n.Kind < 1 || n.Kind > 3 {
			return fmt.Errorf("notice of kind %d", n.Kind)
		}
	}
	switch {
	case r.Type > 6:
		return fmt.Errorf("reservation type %d", r.Type)
	case r.Type == 0 && r.Holder != "":
		return errors.New("a holder with no reservation")
	case r.Type >= 5 && len(r.Registrants) == 0:
		return errors.New("a reservation with no registrant")
	case r.Type >= 5 && r.Holder != "":
		return errors.New("a holder of an all-registrants reservation")
	case r.Type >= 1 && r.Type <= 4:
		id, err := canonicalHostID(r.Holder)
		if err != nil {
			return fmt.Errorf("holder: %w", err)
		}
		if !seen[id] {
			return fmt.Errorf("the holder %s is not registered", id)
		}
	}
	return nil
}

// epochLen is an epoch's length: 16 random bytes in lower-case hex.
const epochLen = 32

// NewEpoch is a new object's epoch.
func NewEpoch() string {
	b := make([]byte, epochLen/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func checkEpoch(e string) error {
	if b, err := hex.DecodeString(e); err != nil || len(b) != epochLen/2 || strings.ToLower(e) != e {
		return fmt.Errorf("%q is not an epoch (%d lower-case hex digits)", prefix([]byte(e)), epochLen)
	}
	return nil
}

// canonicalHostID checks a host ID written as a lower-case UUID.
func canonicalHostID(s string) (string, error) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 || len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' || strings.ToLower(s) != s {
		return "", fmt.Errorf("host ID %q: not a lower-case UUID", prefix([]byte(s)))
	}
	return s, nil
}

// SetSubsystems makes subs (a validated configuration's) the group's
// subsystems. Their controller-ID ranges are dropped (each gateway has its
// own), and so are its rbd namespaces' ceph_conf and client (each gateway
// reaches the group's cluster through its own: Compose); a host with an
// inline secret is refused (ErrSecret), a namespace on a file or device too
// (ErrLocal). Reservations of namespaces no longer there go with them.
func (s *State) SetSubsystems(subs []config.Subsystem) error {
	c := (&config.Config{Subsystems: subs}).Clone()
	for i := range c.Subsystems {
		sub := &c.Subsystems[i]
		sub.CNTLIDMin, sub.CNTLIDMax = 0, 0
		for j := range sub.Namespaces {
			n := &sub.Namespaces[j]
			if err := checkShared(*n); err != nil {
				return fmt.Errorf("subsystem %s namespace %d: %w", sub.NQN, n.NSID, err)
			}
			n.CephConf, n.Client = "", ""
		}
		for _, h := range sub.Hosts {
			if h.DHCHAPKey != "" || h.DHCHAPCtrlKey != "" {
				return fmt.Errorf("host %s of %s: %w: give its secrets as files (dhchap_key_file, dhchap_ctrl_key_file) present on every gateway", h.NQN, sub.NQN, ErrSecret)
			}
		}
		slices.SortFunc(sub.Hosts, func(a, b config.Host) int { return strings.Compare(a.NQN, b.NQN) })
		slices.SortFunc(sub.Namespaces, func(a, b config.Namespace) int { return cmpU32(a.NSID, b.NSID) })
	}
	slices.SortFunc(c.Subsystems, func(a, b config.Subsystem) int { return strings.Compare(a.NQN, b.NQN) })
	s.Subsystems = c.Subsystems
	for ref := range s.Reservations {
		if !s.HasNamespace(ref) {
			delete(s.Reservations, ref)
		}
	}
	return nil
}

// checkShared refuses a namespace the group cannot share: one on a path
// of the machine that serves it (ErrLocal).
func checkShared(n config.Namespace) error {
	if n.Path != "" || n.Backend == config.BackendFile || n.Backend == config.BackendBlock {
		return fmt.Errorf("backend %q, path %q: %w", n.Backend, n.Path, ErrLocal)
	}
	return nil
}

// HasNamespace reports whether the group has the namespace.
func (s *State) HasNamespace(ref NSRef) bool {
	for _, sub := range s.Subsystems {
		if sub.NQN == ref.NQN {
			return slices.ContainsFunc(sub.Namespaces, func(n config.Namespace) bool { return n.NSID == ref.NSID })
		}
	}
	return false
}

// SetListeners records gateway id's ports.
func (s *State) SetListeners(id int, ports []config.Port) {
	var ls []Listener
	for _, p := range ports {
		ls = append(ls, Listener{PortID: p.ID, Transport: p.Transport, Address: p.Address, Port: p.Port})
	}
	slices.SortFunc(ls, func(a, b Listener) int { return a.PortID - b.PortID })
	if len(ls) == 0 {
		delete(s.Listeners, id)
		return
	}
	s.Listeners[id] = ls
}

// Compose is the configuration gateway self serves: its own file's
// (local: ports, transports, metrics...) with the group's subsystems, its
// own controller-ID range, its own way to the cluster for the rbd
// namespaces (gateway_group's ceph_conf and client), the ANA states ana
// gives its ports, and the other gateways' listeners as referrals after its own, so that a host
// discovering through one gateway finds them all.
func (s *State) Compose(local *config.Config, ana map[string]string) *config.Config {
	c := local.Clone()
	lo, hi := c.GatewayGroup.CNTLIDRange()
	c.Subsystems = (&config.Config{Subsystems: s.Subsystems}).Clone().Subsystems
	for i := range c.Subsystems {
		sub := &c.Subsystems[i]
		sub.CNTLIDMin, sub.CNTLIDMax = lo, hi
		for j := range sub.Namespaces {
			if n := &sub.Namespaces[j]; n.Backend == config.BackendRBD {
				n.CephConf, n.Client = c.GatewayGroup.CephConf, c.GatewayGroup.Client
			}
		}
	}
	for i := range c.Ports {
		c.Ports[i].ANAGroups = maps.Clone(ana)
	}
	for _, id := range slices.Sorted(maps.Keys(s.Listeners)) {
		if id == c.GatewayGroup.ID {
			continue
		}
		for _, l := range s.Listeners[id] {
			r := config.Referral{Transport: l.Transport, Address: l.Address, Port: l.Port, PortID: l.PortID}
			if !slices.Contains(c.Referrals, r) {
				c.Referrals = append(c.Referrals, r)
			}
		}
	}
	return c
}

// Diff is what turns the object holding cur into one holding next: the
// keys to set and those to remove.
func Diff(cur, next *State) (set map[string][]byte, rm []string) {
	a, b := cur.Omap(), next.Omap()
	set = map[string][]byte{}
	for k, v := range b {
		if w, ok := a[k]; !ok || !bytes.Equal(v, w) {
			set[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			rm = append(rm, k)
		}
	}
	slices.Sort(rm)
	return set, rm
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
