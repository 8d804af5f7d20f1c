package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// exampleYAML is the example from the design brief.
const exampleYAML = `
ports:
  - {transport: rdma, address: 10.255.0.1, port: 4420}
subsystems:
  - nqn: nqn.2026-11.io.example:disk1
    allow_any_host: true
    namespaces:
      - {nsid: 1, path: /var/lib/nvmeof-tgt/disk1.img, size: 1GiB}
      - {nsid: 2, backend: memory, size: 256MiB, uuid: 4f0e2c1a-0000-4000-8000-000000000002}
`

// minimalYAML is a valid configuration without any scalar section, for
// tests to append one to.
const minimalYAML = `
ports: [{transport: loop, address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:t
    allow_any_host: true
`

var wantDefaults = struct {
	RDMA       RDMA
	TCP        TCP
	Controller Controller
	Metrics    Metrics
	Log        Log
}{
	RDMA: RDMA{
		InCapsuleDataSize:  8 * KiB,
		MaxQueueDepth:      128,
		MaxIOQueues:        16,
		MaxQueues:          0, // by the device: 1024 with a shared receive queue, 64 without
		MDTS:               1 * MiB,
		IOUnitSize:         64 * KiB,
		BufferPoolSize:     64 * MiB,
		Pollers:            1,
		PollIdle:           200 * time.Microsecond,
		PollNap:            20 * time.Microsecond,
		SendWithInvalidate: "auto",
		IOUring:            "auto",
		SRQ:                "auto",
	},
	TCP: TCP{
		InCapsuleDataSize:        8 * KiB,
		MaxQueueDepth:            128,
		MaxIOQueues:              16,
		MDTS:                     1 * MiB,
		MaxH2CData:               128 * KiB,
		IOUnitSize:               16 * KiB,
		BufferPoolSize:           64 * MiB,
		MaxConnections:           1024,
		MaxConnectionsPerAddress: 128,
		ICReqTimeout:             10 * time.Second,
	},
	Controller: Controller{KeepAliveTimeoutMax: 2 * time.Minute, MaxConnectionsPerHost: 36},
	Metrics:    Metrics{Listen: "127.0.0.1:9771"},
	Log:        Log{Level: "info", Format: "text"},
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func assertErrContains(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestLoadExample(t *testing.T) {
	c, err := LoadFile(writeFile(t, exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	wantPorts := []Port{{ID: 1, Transport: "rdma", Address: "10.255.0.1", Port: 4420}}
	if !reflect.DeepEqual(c.Ports, wantPorts) {
		t.Errorf("ports = %+v, want %+v", c.Ports, wantPorts)
	}
	wantSubs := []Subsystem{{
		NQN:          "nqn.2026-11.io.example:disk1",
		AllowAnyHost: true,
		Serial:       limits.Serial("nqn.2026-11.io.example:disk1"),
		Model:        "nvmeof-tgt",
		CNTLIDMin:    1,
		CNTLIDMax:    cntlidMax,
		Namespaces: []Namespace{
			{NSID: 1, Backend: "file", Path: "/var/lib/nvmeof-tgt/disk1.img", Size: 1 * GiB, BlockSize: 512, ANAGroup: 1},
			{NSID: 2, Backend: "memory", Size: 256 * MiB, BlockSize: 512, UUID: "4f0e2c1a-0000-4000-8000-000000000002", ANAGroup: 1},
		},
	}}
	if !reflect.DeepEqual(c.Subsystems, wantSubs) {
		t.Errorf("subsystems = %+v\nwant %+v", c.Subsystems, wantSubs)
	}
	if len(c.Subsystems[0].Serial) != 20 {
		t.Errorf("serial %q is not 20 characters", c.Subsystems[0].Serial)
	}
	if c.RDMA != wantDefaults.RDMA || c.TCP != wantDefaults.TCP || c.Controller != wantDefaults.Controller ||
		c.Metrics != wantDefaults.Metrics || c.Log != wantDefaults.Log {
		t.Errorf("scalar sections = %+v %+v %+v %+v %+v, want defaults %+v", c.RDMA, c.TCP, c.Controller, c.Metrics, c.Log, wantDefaults)
	}
}

func TestLoadScalars(t *testing.T) {
	c, err := loadYAML([]byte(minimalYAML + `
rdma:
  in_capsule_data_size: 0
  max_queue_depth: 256
  max_io_queues: 8
  max_queues: 128
  mdts: 4MiB
  io_unit_size: 128KiB
  buffer_pool_size: 1GiB
  pollers: 2
  poll_idle: 0
  poll_nap: 1ms
  send_with_invalidate: off
  io_uring: off
  srq: off
tcp:
  in_capsule_data_size: 16KiB
  max_queue_depth: 64
  max_io_queues: 4
  mdts: 2MiB
  max_h2c_data: 64KiB
  io_unit_size: 32KiB
  buffer_pool_size: 256MiB
  max_connections: 100
  max_connections_per_address: 10
  icreq_timeout: 3s
controller: {kato_max: 30s}
metrics: {listen: ""}
log: {level: DEBUG, format: json}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := RDMA{
		InCapsuleDataSize:  0,
		MaxQueueDepth:      256,
		MaxIOQueues:        8,
		MaxQueues:          128,
		MDTS:               4 * MiB,
		IOUnitSize:         128 * KiB,
		BufferPoolSize:     1 * GiB,
		Pollers:            2,
		PollIdle:           0,
		PollNap:            time.Millisecond,
		SendWithInvalidate: "off",
		IOUring:            "off",
		SRQ:                "off",
	}
	if c.RDMA != want {
		t.Errorf("rdma = %+v, want %+v", c.RDMA, want)
	}
	wantTCP := TCP{InCapsuleDataSize: 16 * KiB, MaxQueueDepth: 64, MaxIOQueues: 4, MDTS: 2 * MiB, MaxH2CData: 64 * KiB,
		IOUnitSize: 32 * KiB, BufferPoolSize: 256 * MiB, MaxConnections: 100, MaxConnectionsPerAddress: 10, ICReqTimeout: 3 * time.Second}
	if c.TCP != wantTCP {
		t.Errorf("tcp = %+v, want %+v", c.TCP, wantTCP)
	}
	if c.Controller.KeepAliveTimeoutMax != 30*time.Second {
		t.Errorf("kato_max = %s", c.Controller.KeepAliveTimeoutMax)
	}
	if c.Metrics.Listen != "" {
		t.Errorf("metrics.listen = %q, want empty (disabled)", c.Metrics.Listen)
	}
	if c.Log != (Log{Level: "debug", Format: "json"}) {
		t.Errorf("log = %+v", c.Log)
	}
}

func TestEnvOverride(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		yaml  string
		check func(*Config) bool
	}{
		{
			name:  "key absent from file",
			env:   map[string]string{"NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH": "64"},
			yaml:  exampleYAML,
			check: func(c *Config) bool { return c.RDMA.MaxQueueDepth == 64 },
		},
		{
			name:  "key present in file",
			env:   map[string]string{"NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH": "64"},
			yaml:  exampleYAML + "rdma: {max_queue_depth: 32}\n",
			check: func(c *Config) bool { return c.RDMA.MaxQueueDepth == 64 },
		},
		{
			name: "every kind of scalar",
			env: map[string]string{
				"NVMEOF_TGT_RDMA_MDTS":                 "2MiB",
				"NVMEOF_TGT_RDMA_BUFFER_POOL_SIZE":     "134217728",
				"NVMEOF_TGT_RDMA_POLL_IDLE":            "50us",
				"NVMEOF_TGT_RDMA_SEND_WITH_INVALIDATE": "on",
				"NVMEOF_TGT_CONTROLLER_KATO_MAX":       "5m",
				"NVMEOF_TGT_METRICS_LISTEN":            "[::1]:9000",
				"NVMEOF_TGT_LOG_LEVEL":                 "warn",
				"NVMEOF_TGT_LOG_FORMAT":                "JSON",
			},
			yaml: exampleYAML,
			check: func(c *Config) bool {
				return c.RDMA.MDTS == 2*MiB && c.RDMA.BufferPoolSize == 128*MiB &&
					c.RDMA.PollIdle == 50*time.Microsecond && c.RDMA.SendWithInvalidate == "on" &&
					c.Controller.KeepAliveTimeoutMax == 5*time.Minute && c.Metrics.Listen == "[::1]:9000" &&
					c.Log == Log{Level: "warn", Format: "json"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := LoadFile(writeFile(t, tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("env %v not applied: %+v", tt.env, *c)
			}
		})
	}
}

func TestEnvOverrideValidated(t *testing.T) {
	t.Setenv("NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH", "8")
	_, err := LoadFile(writeFile(t, exampleYAML))
	assertErrContains(t, err, "rdma.max_queue_depth")
}

func TestLoadDefault(t *testing.T) {
	c, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ports) != 1 || !reflect.DeepEqual(c.Ports[0], Port{ID: 1, Transport: "rdma", Address: "0.0.0.0", Port: 4420}) {
		t.Errorf("ports = %+v", c.Ports)
	}
	if len(c.Subsystems) != 1 {
		t.Fatalf("subsystems = %+v", c.Subsystems)
	}
	s := c.Subsystems[0]
	if s.NQN != "nqn.2026-11.io.nvmeof-tgt:mem0" || !s.AllowAnyHost || len(s.Hosts) != 0 {
		t.Errorf("subsystem = %+v", s)
	}
	want := []Namespace{{NSID: 1, Backend: "memory", Size: 1 * GiB, BlockSize: 512, ANAGroup: 1}}
	if !reflect.DeepEqual(s.Namespaces, want) {
		t.Errorf("namespaces = %+v, want %+v", s.Namespaces, want)
	}
	if c.RDMA != wantDefaults.RDMA {
		t.Errorf("rdma = %+v", c.RDMA)
	}
	// Default returns a copy.
	d := Default()
	d[0] = 'X'
	if Default()[0] == 'X' {
		t.Error("Default shares its backing array")
	}
}

// TestExampleFile keeps deploy/config.example.yaml, which claims to show
// every key with its default, in step with the code: it loads, it shows
// every key the code knows and none it does not, every scalar key is set
// to the default the code uses, and every "default X" comment agrees.
// TestInstalledFile: the configuration `make install` puts in place when
// there is none starts as it is on any machine: it passes what serve
// checks before it needs an RDMA device (tests/install_test.sh checks the
// installed copy with `config validate`).
func TestInstalledFile(t *testing.T) {
	c, err := LoadFile(filepath.Join("..", "deploy", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckPaths(); err != nil {
		t.Error(err)
	}
	if c.HasInlineSecrets() {
		t.Error("the installed configuration holds secrets")
	}
}

func TestExampleFile(t *testing.T) {
	path := filepath.Join("..", "deploy", "config.example.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("example not found: %v", err)
	}
	c, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range structKeys(reflect.TypeFor[Config]()) {
		if !strings.Contains(string(text), key+":") {
			t.Errorf("example does not show key %q", key)
		}
	}
	if c.RDMA != wantDefaults.RDMA || c.Controller != wantDefaults.Controller ||
		c.Metrics != wantDefaults.Metrics || c.Log != wantDefaults.Log {
		t.Errorf("example's scalar sections = %+v %+v %+v %+v, want defaults %+v", c.RDMA, c.Controller, c.Metrics, c.Log, wantDefaults)
	}

	// The defaults the code applies to a file that sets no scalar key.
	def, err := loadYAML([]byte(minimalYAML))
	if err != nil {
		t.Fatal(err)
	}
	sections := []struct {
		name      string
		got, want any
	}{
		{"rdma", c.RDMA, def.RDMA},
		{"controller", c.Controller, def.Controller},
		{"metrics", c.Metrics, def.Metrics},
		{"log", c.Log, def.Log},
	}
	for _, s := range sections {
		if s.got != s.want {
			t.Errorf("example's %s = %+v, the code's defaults are %+v", s.name, s.got, s.want)
		}
	}

	// Every scalar key is set (not just mentioned in a comment), and the
	// file sets no key the code does not know, at any depth.
	v := newViper()
	if err := v.ReadConfig(bytes.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	for _, d := range scalarDefaults {
		if !v.InConfig(d.key) {
			t.Errorf("example does not set %s", d.key)
		}
	}
	checkKnownKeys(t, "", v.AllSettings(), reflect.TypeFor[Config]())

	// A scalar key's "default X" comment names the value on its line, so
	// neither can drift from the other.
	line := regexp.MustCompile(`^\s*(\w+):\s*(\S+)\s*#\s*default (\S+?)[;,.]?(\s|$)`)
	section := ""
	commented := map[string]bool{}
	for i, l := range strings.Split(string(text), "\n") {
		if m := regexp.MustCompile(`^(\w+):`).FindStringSubmatch(l); m != nil {
			section = m[1]
		}
		m := line.FindStringSubmatch(l)
		if m == nil || section == "ports" || section == "subsystems" || section == "referrals" {
			continue
		}
		key := section + "." + m[1]
		if !strings.HasPrefix(l, " ") {
			key = m[1] // a top-level scalar
		}
		commented[key] = true
		if m[2] != m[3] {
			t.Errorf("example line %d: %s.%s is %s but its comment says default %s", i+1, section, m[1], m[2], m[3])
		}
	}
	for _, d := range scalarDefaults {
		if !commented[d.key] {
			t.Errorf("example does not mark %s's value as the default (\"# default ...\")", d.key)
		}
	}

	// Defaults inside the lists, which the example documents in comments.
	elementDefaults := []struct {
		key  string
		want string
	}{
		{"port", strconv.Itoa(defaultPort)},
		{"model", defaultModel},
		{"block_size", strconv.Itoa(defaultBlockSize)},
	}
	for _, d := range elementDefaults {
		re := regexp.MustCompile(`(?m)^\s*(- )?` + d.key + `:[^#\n]*#[^\n]*\bdefault\b[^\n]*`)
		l := re.FindString(string(text))
		if l == "" {
			t.Errorf("example does not document the default of %s", d.key)
			continue
		}
		if !regexp.MustCompile(`(^|\W)` + regexp.QuoteMeta(d.want) + `(\W|$)`).MatchString(l[strings.Index(l, "#"):]) {
			t.Errorf("example's comment on %s does not name the default %s: %q", d.key, d.want, l)
		}
	}
}

// checkKnownKeys reports keys of the decoded YAML m that no field of t
// (by mapstructure tag) takes, descending into sections and lists.
func checkKnownKeys(t *testing.T, prefix string, m map[string]any, typ reflect.Type) {
	t.Helper()
	fields := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		fields[f.Tag.Get("mapstructure")] = f.Type
	}
	for k, val := range m {
		ft, ok := fields[k]
		if !ok {
			t.Errorf("example sets %s%s, which the code does not know", prefix, k)
			continue
		}
		switch val := val.(type) {
		case map[string]any:
			if ft.Kind() == reflect.Struct {
				checkKnownKeys(t, prefix+k+".", val, ft)
			}
		case []any:
			if ft.Kind() != reflect.Slice || ft.Elem().Kind() != reflect.Struct {
				continue
			}
			for i, e := range val {
				if em, ok := e.(map[string]any); ok {
					checkKnownKeys(t, fmt.Sprintf("%s%s[%d].", prefix, k, i), em, ft.Elem())
				}
			}
		}
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "unknown section", yaml: minimalYAML + "rdam: {max_queues: 8}\n", want: []string{"rdam"}},
		{name: "unknown top-level key", yaml: minimalYAML + "port: 4420\n", want: []string{"port"}},
		{name: "unknown rdma key", yaml: minimalYAML + "rdma: {max_queue_dept: 64}\n", want: []string{"max_queue_dept"}},
		{name: "unknown port key", yaml: strings.Replace(minimalYAML, "address:", "adress: 1.2.3.4, address:", 1), want: []string{"adress"}},
		{name: "unknown namespace key", yaml: minimalYAML + "    namespaces: [{nsid: 1, size: 1MiB, blocksize: 512}]\n", want: []string{"blocksize"}},
		{name: "duration without unit", yaml: minimalYAML + "controller: {kato_max: 120}\n", want: []string{"controller.kato_max", "unit"}},
		{name: "bad duration", yaml: minimalYAML + "rdma: {poll_idle: soon}\n", want: []string{"rdma.poll_idle"}},
		{name: "not an int", yaml: minimalYAML + "rdma: {pollers: many}\n", want: []string{"rdma.pollers"}},
		{name: "not yaml", yaml: "ports: [\n", want: []string{"read config"}},
		// Unquoted, YAML reads digits as a number and drops leading zeros.
		{name: "eui64 unquoted", yaml: minimalYAML + "    namespaces: [{nsid: 1, size: 1MiB, eui64: 0011223344556677}]\n",
			want: []string{"subsystems[0].namespaces[0].eui64", "quote"}},
		{name: "nguid unquoted", yaml: minimalYAML + "    namespaces: [{nsid: 1, size: 1MiB, nguid: 12345678901234567890123456789012}]\n",
			want: []string{"subsystems[0].namespaces[0].nguid", "quote"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML([]byte(tt.yaml))
			assertErrContains(t, err, tt.want...)
		})
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile(missing) = %v, want an error matching os.ErrNotExist", err)
	}
}

// structKeys lists the mapstructure tags of t and the structs it holds.
func structKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); !strings.HasPrefix(tag, ",") {
			keys = append(keys, tag)
		}
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			keys = append(keys, structKeys(ft)...)
		}
	}
	return keys
}

// TestLoadMultipath loads the multipath keys as the documentation writes
// them: ANA group states keyed by number, in block and flow style.
func TestLoadMultipath(t *testing.T) {
	c, err := loadYAML([]byte(`
ports:
  - id: 1
    transport: rdma
    address: 10.0.0.1
    port: 4420
    ana_groups:
      2: non-optimized
  - id: 2
    transport: rdma
    address: 10.0.0.1
    port: 4421
    ana_groups: {1: inaccessible, 2: optimized}
referrals:
  - {transport: rdma, address: 10.0.0.2, port: 4420, port_id: 1}
state_dir: /var/lib/nvmeof-tgt
ana_transition_time: 10s
subsystems:
  - nqn: nqn.2026-11.io.example:shared
    allow_any_host: true
    ports: [1, 2]
    cntlid_min: 1
    cntlid_max: 1000
    namespaces:
      - {nsid: 1, backend: memory, size: 1MiB, ana_group: 1}
      - {nsid: 2, backend: memory, size: 1MiB, ana_group: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Ports[0].ANAGroups, map[string]string{"2": "non-optimized"}) ||
		!reflect.DeepEqual(c.Ports[1].ANAGroups, map[string]string{"1": "inaccessible", "2": "optimized"}) ||
		c.Ports[1].ID != 2 {
		t.Errorf("ports %+v", c.Ports)
	}
	if len(c.Referrals) != 1 || c.Referrals[0] != (Referral{Transport: "rdma", Address: "10.0.0.2", Port: 4420, PortID: 1}) {
		t.Errorf("referrals %+v", c.Referrals)
	}
	s := c.Subsystems[0]
	if !slices.Equal(s.Ports, []int{1, 2}) || s.CNTLIDMin != 1 || s.CNTLIDMax != 1000 || s.Namespaces[1].ANAGroup != 2 {
		t.Errorf("subsystem %+v", s)
	}
	if c.StateDir != "/var/lib/nvmeof-tgt" || c.ANATransitionTime != 10*time.Second {
		t.Errorf("state_dir %q ana_transition_time %v", c.StateDir, c.ANATransitionTime)
	}
	// And it writes back to the same.
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := loadYAML(out); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
}
