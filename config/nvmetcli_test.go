package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/golden"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// TestImportNvmetcli converts fixtures in the format `nvmetcli save`
// writes (nvmetcli's nvmet/nvme.py dump: attributes as strings, IDs as
// numbers) and compares the YAML and the notes with golden files. The YAML
// must load and pass Validate, except where a note says why not.
func TestImportNvmetcli(t *testing.T) {
	tests := []struct {
		fixture string
		golden  string // the golden files' name, the fixture's when empty
		opts    ImportOptions
		loadErr string // Validate's complaint, explained by a note
	}{
		// A tcp and an rdma port, a referral, a subsystem with allowed
		// hosts and one open to any host, a namespace with a UUID and an
		// NGUID, a disabled one.
		{fixture: "save"},
		// Two RDMA ports and a TCP one: ANA groups 1 and 2 with
		// different states per port (group 2 not created on port 1),
		// referrals on one port and on both, disabled and TCP ones, a
		// subsystem on both ports with a CNTLID range and namespaces in
		// groups 1 and 2, one linked to port 1 only, one to TCP only.
		{fixture: "multipath"},
		// A TCP port only, an unused DH-HMAC-CHAP key, passthru,
		// allow_any_host with hosts, a subsystem no host may reach.
		{fixture: "tcp-only"},
		// The same with TLS on its port: not carried, so no port is.
		{fixture: "tls-only", loadErr: "ports: at least one port is required"},
		// DH-HMAC-CHAP: hosts with keys in nvmetcli's "dhchap" group and
		// flat, a controller key, preferred hashes and groups that differ
		// between a subsystem's hosts, an invalid key (dropped), a
		// controller key without a key, keys no subsystem asks for.
		{fixture: "auth", golden: "auth-keydir", opts: ImportOptions{KeyDir: "/etc/nvmeof-tgt/keys", DropKeys: true}},
		{fixture: "auth", golden: "auth-inline", opts: ImportOptions{InlineKeys: true, DropKeys: true}},
		{fixture: "auth", golden: "auth-drop", opts: ImportOptions{DropKeys: true}},
	}
	for _, tt := range tests {
		if tt.golden == "" {
			tt.golden = tt.fixture
		}
		t.Run(tt.golden, func(t *testing.T) {
			dir := filepath.Join("testdata", "nvmetcli")
			data, err := os.ReadFile(filepath.Join(dir, tt.fixture+".json"))
			if err != nil {
				t.Fatal(err)
			}
			im, err := ImportNvmetcli(data, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			yaml, notes := im.YAML, im.Notes
			base := filepath.Join(dir, tt.golden)
			golden.Check(t, base+".yaml", string(yaml))
			golden.Check(t, base+".notes", strings.Join(notes, "\n")+"\n")
			for _, n := range notes {
				if strings.Contains(n, "DHHC-1") {
					t.Errorf("note holds a secret: %s", n)
				}
			}
			if strings.Contains(string(yaml), "DHHC-1") != tt.opts.InlineKeys || im.InlineSecrets != tt.opts.InlineKeys {
				t.Errorf("secrets in the YAML: %v (InlineSecrets %v), want them only with InlineKeys", strings.Contains(string(yaml), "DHHC-1"), im.InlineSecrets)
			}
			for _, f := range im.KeyFiles {
				if !strings.HasPrefix(f.Path, tt.opts.KeyDir+"/") || tt.opts.KeyDir == "" {
					t.Errorf("key file %s outside the key directory %q", f.Path, tt.opts.KeyDir)
				}
				if !strings.Contains(string(yaml), strconv.Quote(f.Path)) {
					t.Errorf("the YAML does not name key file %s", f.Path)
				}
			}

			c, err := loadYAML(yaml)
			if tt.loadErr != "" {
				assertErrContains(t, err, tt.loadErr)
				return
			}
			if err != nil {
				t.Fatalf("converted YAML does not load: %v\n%s", err, yaml)
			}
			if len(c.Ports) == 0 || len(c.Subsystems) == 0 {
				t.Errorf("converted config is empty: %+v", c)
			}
		})
	}
}

func TestImportNvmetcliRefuses(t *testing.T) {
	for _, in := range []string{"", "{", "[]", "null", `{"ports": 1`} {
		if _, err := ImportNvmetcli([]byte(in), ImportOptions{}); err == nil {
			t.Errorf("ImportNvmetcli(%q) = nil error", in)
		}
	}
	if _, err := ImportNvmetcli([]byte("{}"), ImportOptions{KeyDir: "keys"}); err == nil {
		t.Error("ImportNvmetcli with a relative key directory = nil error")
	}
}

// TestImportNvmetcliKeys: a host nvmet makes authenticate is never carried
// without its keys. With nowhere to put them, or with a key that is
// invalid, the import fails naming each such host (and never its key),
// unless the hosts are to be dropped.
func TestImportNvmetcliKeys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "nvmetcli", "auth.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      ImportOptions
		named     []string // hosts the error names
		notNamed  []string
		keyFiles  []string // with KeyDir, the files
		wantError bool
	}{
		{name: "nowhere", wantError: true,
			named:    []string{"hosts[0] (nqn.2014-08.org.nvmexpress:uuid:0f01fb42", "hosts[1] (nqn.2026-11.io.example:h2)", "hosts[3]", "hosts[4] (nqn.2026-11.io.example:bad): dhchap key"},
			notNamed: []string{"hosts[2]", "ctrl-only", "unused"}},
		{name: "invalid key", opts: ImportOptions{KeyDir: "/k"}, wantError: true,
			named: []string{"hosts[4] (nqn.2026-11.io.example:bad): dhchap key: invalid DH-HMAC-CHAP secret"}, notNamed: []string{"hosts[0]", "hosts[1]", "hosts[3]"}},
		{name: "dropped", opts: ImportOptions{KeyDir: "/k", DropKeys: true},
			keyFiles: []string{
				"/k/nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349.key",
				"/k/nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349.ctrl.key",
				"/k/nqn.2026-11.io.example:h2.key",
				"/k/nqn.2026-11.io.example:flat-form.key",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, err := ImportNvmetcli(data, tt.opts)
			if !tt.wantError {
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, f := range im.KeyFiles {
					got = append(got, f.Path)
					if _, err := dhchap.ParseSecret(f.Secret); err != nil {
						t.Errorf("%s: %v", f.Path, err)
					}
					if s := fmt.Sprint(f) + fmt.Sprintf("%+v %#v", f, f); strings.Contains(s, "DHHC-1") {
						t.Errorf("a KeyFile prints its secret: %s", s)
					}
				}
				if !slices.Equal(got, tt.keyFiles) {
					t.Errorf("key files %q, want %q", got, tt.keyFiles)
				}
				return
			}
			if !errors.Is(err, ErrKeysNotCarried) || im != nil {
				t.Fatalf("ImportNvmetcli = %v, %v; want ErrKeysNotCarried and nothing", im, err)
			}
			assertErrContains(t, err, tt.named...)
			for _, n := range tt.notNamed {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error names %s: %v", n, err)
				}
			}
			if strings.Contains(err.Error(), "DHHC-1") || strings.Contains(err.Error(), "ERERER") {
				t.Errorf("error holds a secret: %v", err)
			}
		})
	}
}

// TestImportNvmetcliIDs: a namespace keeps the NGUID nvmet reported,
// none included, and an EUI64 if the JSON has one; only what cannot be
// carried is noted.
func TestImportNvmetcliIDs(t *testing.T) {
	tests := []struct {
		name   string
		device string // JSON members of the namespace's device, besides its path
		nguid  HexID
		eui64  HexID
		note   string // the one note expected, if any
	}{
		{name: "configfs form", device: `"nguid": "6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"`, nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"},
		{name: "hex digits", device: `"nguid": "6E3F1A2B4C5D4E6F8A9B0C1D2E3F4A5B"`, nguid: "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"},
		// nvmet's default: it reports no NGUID, and so does the import.
		{name: "zero", device: `"nguid": "00000000-0000-0000-0000-000000000000"`, nguid: NGUIDNone},
		{name: "absent", device: `"uuid": "8c6a3f0e-1b2d-4e5f-9a7b-3c4d5e6f7a8b"`, nguid: NGUIDNone},
		{name: "not an nguid", device: `"nguid": "6e3f"`, note: `device.nguid: "6e3f": not carried`},
		{name: "eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "0011223344556677"`,
			nguid: NGUIDNone, eui64: "0011223344556677"},
		{name: "zero eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "0000000000000000"`, nguid: NGUIDNone},
		{name: "not an eui64", device: `"nguid": "00000000-0000-0000-0000-000000000000", "eui64": "00:11"`,
			nguid: NGUIDNone, note: `device.eui64: "00:11": not carried`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `{"ports": [{"portid": 1, "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.1", "trsvcid": "4420"}, "subsystems": ["nqn.2026-11.io.example:s"]}],
"subsystems": [{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"},
  "namespaces": [{"nsid": 1, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture", ` + tt.device + `}}]}]}`
			im, err := ImportNvmetcli([]byte(data), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			yaml, allNotes := im.YAML, im.Notes
			var notes []string
			for _, n := range allNotes {
				if !strings.Contains(n, "does not exist on this machine") {
					notes = append(notes, n)
				}
			}
			switch {
			case tt.note == "" && len(notes) > 0:
				t.Errorf("notes %q, want none", notes)
			case tt.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tt.note)):
				t.Errorf("notes %q, want one with %q", notes, tt.note)
			}
			c, err := loadYAML(yaml)
			if err != nil {
				t.Fatalf("%v\n%s", err, yaml)
			}
			n := c.Subsystems[0].Namespaces[0]
			if n.NGUID != tt.nguid || n.EUI64 != tt.eui64 {
				t.Errorf("nguid %q eui64 %q, want %q %q\n%s", n.NGUID, n.EUI64, tt.nguid, tt.eui64, yaml)
			}
		})
	}
}

// nvmetSave is what the view test reads of an `nvmetcli save` file,
// decoded apart from the importer.
type nvmetSave struct {
	Ports      []nvmetPort      `json:"ports"`
	Subsystems []nvmetSubsystem `json:"subsystems"`
}

type nvmetPort struct {
	PortID int       `json:"portid"`
	Addr   nvmetAddr `json:"addr"`
	// ANAGroups are the groups created on the port.
	ANAGroups []struct {
		GrpID int `json:"grpid"`
		ANA   struct {
			State string `json:"state"`
		} `json:"ana"`
	} `json:"ana_groups"`
	Referrals []struct {
		Addr   nvmetAddr `json:"addr"`
		Enable int       `json:"enable"`
	} `json:"referrals"`
	Subsystems []string `json:"subsystems"` // the links
}

type nvmetAddr struct {
	PortID  string `json:"portid"` // a referral's
	TrType  string `json:"trtype"`
	TrAddr  string `json:"traddr"`
	TrSvcID string `json:"trsvcid"`
	TSAS    string `json:"tsas"`
	TReq    string `json:"treq"`
}

// carried reports whether the importer carries a port or referral of a:
// RDMA, and TCP without TLS.
func (a nvmetAddr) carried() bool {
	return a.TrType == "rdma" || a.TrType == "tcp" && !strings.HasPrefix(a.TSAS, "tls") && a.TReq != "required"
}

type nvmetSubsystem struct {
	NQN        string            `json:"nqn"`
	Attr       map[string]string `json:"attr"`
	Namespaces []nvmetNamespace  `json:"namespaces"`
}

type nvmetNamespace struct {
	NSID     uint32 `json:"nsid"`
	ANAGrpID uint32 `json:"ana_grpid"`
}

// anaState is the state of group g through the port: as its ana_groups
// say, else optimized for group 1, which every port has, and inaccessible
// for a group not created on the port (nvmet_ports_make).
func (p nvmetPort) anaState(g int) string {
	state := "inaccessible"
	if g == 1 {
		state = "optimized"
	}
	for _, ag := range p.ANAGroups {
		if ag.GrpID == g {
			state = ag.ANA.State
		}
	}
	return state
}

// TestImportNvmetcliView: the imported configuration serves what nvmet
// served. Each RDMA and TCP port keeps its port ID and transport; through
// each port, every ANA group a namespace uses or nvmet names has nvmet's
// state, the implicit inaccessible of a group not created there included;
// each namespace keeps its group; a subsystem is served on the ports nvmet
// links it to, and one linked to no such port is not served; the CNTLID
// range is nvmet's; the enabled RDMA and TCP referrals are listed.
func TestImportNvmetcliView(t *testing.T) {
	for _, fixture := range []string{"multipath", "save", "tcp-only"} {
		t.Run(fixture, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "nvmetcli", fixture+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var nv nvmetSave
			if err := json.Unmarshal(data, &nv); err != nil {
				t.Fatal(err)
			}
			im, err := ImportNvmetcli(data, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := loadYAML(im.YAML)
			if err != nil {
				t.Fatalf("%v\n%s", err, im.YAML)
			}

			// The groups that matter: those of nvmet's namespaces, and
			// those it names.
			groups := map[int]bool{}
			for _, s := range nv.Subsystems {
				for _, n := range s.Namespaces {
					groups[int(n.ANAGrpID)] = true
				}
			}
			links := map[string][]int{} // by NQN, the carried ports nvmet links it to
			type ref struct {
				transport, addr string
				port, portID    int
			}
			wantRefs := map[ref]bool{}
			var carried []int
			for _, p := range nv.Ports {
				for _, g := range p.ANAGroups {
					groups[g.GrpID] = true
				}
				if !p.Addr.carried() {
					continue
				}
				carried = append(carried, p.PortID)
				for _, nqn := range p.Subsystems {
					links[nqn] = append(links[nqn], p.PortID)
				}
				for _, r := range p.Referrals {
					if r.Enable == 1 && r.Addr.carried() {
						port, _ := strconv.Atoi(r.Addr.TrSvcID)
						id, _ := strconv.Atoi(r.Addr.PortID)
						wantRefs[ref{r.Addr.TrType, r.Addr.TrAddr, port, id}] = true
					}
				}
			}

			var ids []int
			for _, p := range c.Ports {
				ids = append(ids, p.ID)
				i := slices.IndexFunc(nv.Ports, func(np nvmetPort) bool { return np.PortID == p.ID })
				if i < 0 {
					t.Errorf("port %d (%s:%d): nvmet has no port of that ID", p.ID, p.Address, p.Port)
					continue
				}
				np := nv.Ports[i]
				if np.Addr.TrType != p.Transport || np.Addr.TrAddr != p.Address || np.Addr.TrSvcID != strconv.Itoa(p.Port) {
					t.Errorf("port %d is %s %s:%d, nvmet's is %s %s:%s", p.ID, p.Transport, p.Address, p.Port, np.Addr.TrType, np.Addr.TrAddr, np.Addr.TrSvcID)
				}
				for g := range groups {
					got, ok := p.ANAGroups[strconv.Itoa(g)]
					if !ok {
						got = "optimized" // left out
					}
					if want := np.anaState(g); got != want {
						t.Errorf("port %d, ANA group %d: %s, nvmet's is %s", p.ID, g, got, want)
					}
				}
			}
			slices.Sort(ids)
			slices.Sort(carried)
			if !slices.Equal(ids, carried) {
				t.Errorf("port IDs %v, nvmet's RDMA and TCP ports %v", ids, carried)
			}

			for _, ns := range nv.Subsystems {
				j := slices.IndexFunc(c.Subsystems, func(s Subsystem) bool { return s.NQN == ns.NQN })
				want := links[ns.NQN]
				if j < 0 {
					if len(want) > 0 {
						t.Errorf("%s: not served, nvmet serves it on ports %v", ns.NQN, want)
					}
					continue
				}
				s := c.Subsystems[j]
				if len(want) == 0 {
					t.Errorf("%s: served on ports %v, nvmet links it to no RDMA or TCP port", s.NQN, s.Ports)
				}
				got := slices.Clone(s.Ports)
				if len(got) == 0 {
					got = ids // every port
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s: served on ports %v, nvmet on %v", s.NQN, got, want)
				}
				wantMin, wantMax := 1, 65519
				if v, ok := ns.Attr["cntlid_min"]; ok {
					wantMin, _ = strconv.Atoi(v)
				}
				if v, ok := ns.Attr["cntlid_max"]; ok {
					wantMax, _ = strconv.Atoi(v)
				}
				if s.CNTLIDMin != wantMin || s.CNTLIDMax != wantMax {
					t.Errorf("%s: CNTLIDs %d..%d, nvmet's %d..%d", s.NQN, s.CNTLIDMin, s.CNTLIDMax, wantMin, wantMax)
				}
				for _, n := range s.Namespaces {
					k := slices.IndexFunc(ns.Namespaces, func(x nvmetNamespace) bool { return x.NSID == n.NSID })
					if k < 0 {
						t.Errorf("%s nsid %d: nvmet has no such namespace", s.NQN, n.NSID)
						continue
					}
					if want := ns.Namespaces[k].ANAGrpID; n.ANAGroup != want {
						t.Errorf("%s nsid %d: ANA group %d, nvmet's %d", s.NQN, n.NSID, n.ANAGroup, want)
					}
				}
			}

			gotRefs := map[ref]bool{}
			for _, r := range c.Referrals {
				gotRefs[ref{r.Transport, r.Address, r.Port, r.PortID}] = true
			}
			if !maps.Equal(gotRefs, wantRefs) {
				t.Errorf("referrals %v, nvmet's enabled RDMA and TCP ones %v", gotRefs, wantRefs)
			}
		})
	}
}

// TestImportNvmetcliMultipath: the edges of carrying port IDs, ANA
// groups, referrals, CNTLID ranges and port links. Each case names the
// notes it must make (and no other, besides the one for the fixture's
// missing device), and what the YAML must and must not say.
func TestImportNvmetcliMultipath(t *testing.T) {
	const (
		rdma1 = `"addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.1", "trsvcid": "4420"}`
		rdma2 = `"addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.2", "trsvcid": "4420"}`
		ns    = `"namespaces": [{"nsid": 1, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture"}}]`
		sub   = `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"}, ` + ns + `}`
		link  = `"subsystems": ["nqn.2026-11.io.example:s"]`
		ref   = `{"name": "r", "enable": 1, "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.9", "trsvcid": "4420", "portid": "5"}}`
	)
	tests := []struct {
		name       string
		ports      string // the ports list's members
		subsystems string // the subsystems list's members, sub when empty
		notes      []string
		yaml       []string
		notYAML    []string
	}{
		{name: "port IDs kept",
			ports: `{"portid": 7, ` + rdma1 + `, ` + link + `}, {"portid": 3, ` + rdma2 + `, ` + link + `}`,
			yaml:  []string{`{id: 7, transport: rdma, address: "10.0.0.1"`, `{id: 3, transport: rdma, address: "10.0.0.2"`, "ports: [3, 7]"}},
		{name: "port ID out of range",
			ports: `{"portid": 0, ` + rdma1 + `, ` + link + `}, {"portid": 1, ` + rdma2 + `, ` + link + `}`,
			notes: []string{`ports[0].portid: "0": not carried: want a port ID in 1..65519 not taken by another port; id 2 instead`},
			yaml:  []string{"{id: 2, ", "{id: 1, ", "ports: [1, 2]"}},
		{name: "port ID twice",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `}, {"portid": 1, ` + rdma2 + `}`,
			notes: []string{`ports[1].portid: "1": not carried: want a port ID in 1..65519 not taken by another port; id 2 instead`},
			yaml:  []string{"{id: 1, ", "{id: 2, ", "ports: [1]\n"}},
		// nvmetcli before ANA saves no groups: group 1 is optimized,
		// any other inaccessible.
		{name: "no ana_groups",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"}, "namespaces": [{"nsid": 1, "ana_grpid": 3, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture"}}]}`,
			yaml:       []string{"ana_groups: {3: inaccessible}}", "ana_group: 3"}},
		{name: "group named, none used",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `, "ana_groups": [{"grpid": 1, "ana": {"state": "change"}}, {"grpid": 9, "ana": {"state": "persistent-loss"}}]}`,
			yaml:  []string{"ana_groups: {1: change, 9: persistent-loss}}"}, notYAML: []string{"ana_group:"}},
		{name: "v0.8 ana.grpid alone",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"}, "namespaces": [{"nsid": 1, "ana": {"grpid": "4"}, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture"}}]}`,
			yaml:       []string{"ana_groups: {4: inaccessible}}", "ana_group: 4"}},
		{name: "bad groups",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `, "ana_groups": [{"grpid": 1, "ana": {"state": "sleepy"}}, {"grpid": 200, "ana": {"state": "optimized"}}]}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1"}, "namespaces": [` +
				`{"nsid": 1, "ana_grpid": 129, "enable": 1, "device": {"path": "/dev/nonexistent-nvmetcli-fixture"}}]}`,
			notes: []string{
				`ports[0].ana_groups[0]: group 1 state "sleepy": not carried: not an ANA state; optimized, as nvmet leaves it`,
				`ports[0].ana_groups[1]: group 200 optimized: not carried: ANA groups are 1..128 (nvmet's too)`,
				`subsystems[0].namespaces[0].ana_grpid: "129": not carried: ANA groups are 1..128 (nvmet's too); in group 1 instead`,
			},
			yaml: []string{"ana_groups: {1: optimized}}"}, notYAML: []string{"ana_group:", "200", "129"}},
		{name: "referral on every port",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `, "referrals": [` + ref + `]}, {"portid": 2, ` + rdma2 + `, ` + link + `, "referrals": [` + ref + `]}`,
			yaml:  []string{"referrals:\n  - {transport: rdma, address: \"10.0.0.9\", port: 4420, port_id: 5}\nsubsystems:"}},
		{name: "referral on one port",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `}, {"portid": 2, ` + rdma2 + `, ` + link + `, "referrals": [` + ref + `]}`,
			notes: []string{"ports[1].referrals[0]: r (rdma 10.0.0.9:4420): nvmet lists it in the discovery log of portid 2 only; here every port lists it"},
			yaml:  []string{"port_id: 5}"}},
		// nvmetcli restores enable only when saved; a referral starts
		// disabled.
		{name: "referral without enable",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `, "referrals": [{"name": "r", "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.9", "trsvcid": "4420", "portid": "5"}}]}`,
			notes: []string{"ports[0].referrals[0]: r (rdma 10.0.0.9:4420): not enabled, so nvmet does not list it: skipped"}, notYAML: []string{"referrals:"}},
		{name: "referral port ID out of range",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link + `, "referrals": [{"name": "r", "enable": 1, "addr": {"trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.9", "trsvcid": "4420", "portid": "65535", "treq": "required"}}]}`,
			notes: []string{
				`ports[0].referrals[0].addr.portid: "65535": not carried: want 0..65519; listed with port_id 0`,
				`ports[0].referrals[0].addr.treq: "required": not carried`,
			},
			yaml: []string{"port_id: 0}"}},
		{name: "cntlid range",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1", "cntlid_min": "32768", "cntlid_max": "65519"}, ` + ns + `}`,
			yaml:       []string{"cntlid_min: 32768\n    cntlid_max: 65519\n"}},
		{name: "cntlid range nvmet refuses",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1", "cntlid_min": "0", "cntlid_max": "65535"}, ` + ns + `}`,
			notes: []string{
				`subsystems[0].attr.cntlid_min: "0": not carried: want 1..65519; 1 instead`,
				`subsystems[0].attr.cntlid_max: "65535": not carried: want 1..65519; 65519 instead`,
			},
			notYAML: []string{"cntlid"}},
		{name: "cntlid min above max",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: `{"nqn": "nqn.2026-11.io.example:s", "attr": {"allow_any_host": "1", "cntlid_min": "100", "cntlid_max": "10"}, ` + ns + `}`,
			notes:      []string{"subsystems[0].attr: cntlid_min 100 is above cntlid_max 10: not carried; 1..65519 instead"},
			notYAML:    []string{"cntlid"}},
		{name: "subsystem linked nowhere",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}`,
			subsystems: sub + `, {"nqn": "nqn.2026-11.io.example:idle", "attr": {"allow_any_host": "1"}}`,
			notes:      []string{"subsystems[1]: nqn.2026-11.io.example:idle: skipped: no port links it, so nvmet serves it nowhere; add it with ports: [...] to serve it here"},
			notYAML:    []string{"idle"}},
		// A host nvmet makes authenticate only in a subsystem not
		// carried: neither its keys nor an error for them.
		{name: "keys of a skipped subsystem",
			ports:      `{"portid": 1, ` + rdma1 + `, ` + link + `}, {"portid": 2, "addr": {"trtype": "tcp", "adrfam": "ipv4", "traddr": "10.0.0.3", "trsvcid": "4420", "tsas": "tls1.3", "treq": "required"}, "subsystems": ["nqn.2026-11.io.example:tls"]}`,
			subsystems: sub + `, {"nqn": "nqn.2026-11.io.example:tls", "attr": {"allow_any_host": "0"}, "allowed_hosts": ["nqn.2026-11.io.example:h"]}`,
			notes: []string{
				"ports[1]: portid 2, tcp 10.0.0.3:4420: not carried: nvmet serves it with TLS (tsas \"tls1.3\", treq \"required\"), which this target has not",
				"subsystems[1]: nqn.2026-11.io.example:tls: skipped: nvmet serves it only on portid 2 (tcp), not carried; add it with ports: [...] to serve it here",
				"hosts[0].dhchap: keys of nqn.2026-11.io.example:h not carried: only subsystems skipped for their ports (above) make it authenticate",
			},
			notYAML: []string{"nqn.2026-11.io.example:h\"", "nqn.2026-11.io.example:tls"}},
		{name: "a port of another transport",
			ports:   `{"portid": 1, ` + rdma1 + `, ` + link + `}, {"portid": 2, "addr": {"trtype": "fc", "adrfam": "fc", "traddr": "nn-0x1000000044001123:pn-0x2000000055001123", "trsvcid": "none"}}`,
			notes:   []string{"ports[1]: portid 2, fc nn-0x1000000044001123:pn-0x2000000055001123:none: not carried: this target serves RDMA and TCP only"},
			notYAML: []string{"fc", "nn-0x"}},
		{name: "a tcp port and referral",
			ports: `{"portid": 1, "addr": {"trtype": "tcp", "adrfam": "ipv6", "traddr": "fd00::1", "trsvcid": "4420", "tsas": "none", "treq": "not specified"}, ` + link +
				`, "referrals": [{"name": "r", "enable": 1, "addr": {"trtype": "tcp", "adrfam": "ipv4", "traddr": "10.0.0.9", "trsvcid": "8009", "portid": "4", "tsas": "none"}}]}`,
			yaml: []string{`{id: 1, transport: tcp, address: "fd00::1", port: 4420`, `{transport: tcp, address: "10.0.0.9", port: 8009, port_id: 4}`}},
		{name: "a tls referral",
			ports: `{"portid": 1, ` + rdma1 + `, ` + link +
				`, "referrals": [{"name": "r", "enable": 1, "addr": {"trtype": "tcp", "adrfam": "ipv4", "traddr": "10.0.0.9", "trsvcid": "8009", "portid": "4", "tsas": "tls1.3"}}]}`,
			notes:   []string{`ports[0].referrals[0]: r (tcp 10.0.0.9:8009): not carried: a TLS referral (tsas "tls1.3", treq ""), which this target cannot list`},
			notYAML: []string{"referrals", "10.0.0.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subs := tt.subsystems
			if subs == "" {
				subs = sub
			}
			data := `{"hosts": [{"nqn": "nqn.2026-11.io.example:h", "dhchap": {"key": "DHHC-1:00:ERERERERERERERERERERERERERERERERERERERERERHYIEm8:"}}],
"ports": [` + tt.ports + `], "subsystems": [` + subs + `]}`
			im, err := ImportNvmetcli([]byte(data), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var notes []string
			for _, n := range im.Notes {
				if !strings.Contains(n, "does not exist on this machine") && !strings.Contains(n, "hosts[0].dhchap: keys of nqn.2026-11.io.example:h not carried: no subsystem") {
					notes = append(notes, n)
				}
			}
			if !slices.Equal(notes, tt.notes) {
				t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(tt.notes, "\n"))
			}
			yaml := string(im.YAML)
			for _, w := range tt.yaml {
				if !strings.Contains(yaml, w) {
					t.Errorf("YAML does not say %q:\n%s", w, yaml)
				}
			}
			for _, w := range tt.notYAML {
				if strings.Contains(yaml, w) {
					t.Errorf("YAML says %q:\n%s", w, yaml)
				}
			}
			if _, err := loadYAML(im.YAML); err != nil {
				t.Errorf("converted YAML does not load: %v\n%s", err, yaml)
			}
		})
	}
}
