// Package config loads the target's configuration from YAML and the
// environment into plain structs and validates it.
//
// Load, LoadFile and LoadDefault fill in defaults and return a Config that
// has passed Validate. Unknown keys are errors, since a mistyped key would
// otherwise silently fall back to its default.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// Config is the whole target configuration.
type Config struct {
	Ports []Port `mapstructure:"ports"`
	// Referrals are other targets' discovery services, listed in the
	// discovery log of every port.
	Referrals  []Referral  `mapstructure:"referrals"`
	Subsystems []Subsystem `mapstructure:"subsystems"`
	Discovery  Discovery   `mapstructure:"discovery"`
	// StateDir is where state that outlives the process is kept:
	// reservations that persist through power loss. Default
	// limits.StateDir; "" keeps none (hosts cannot set PTPL).
	StateDir string `mapstructure:"state_dir"`
	// ANATransitionTime is ANATT, reported to hosts: how long a group
	// may stay in change. Default limits.ANATransitionTime.
	ANATransitionTime time.Duration `mapstructure:"ana_transition_time"`
	// GatewayGroup makes the target one gateway of a group that shares
	// its subsystems through RADOS; unset (no name): a target on its own.
	GatewayGroup GatewayGroup `mapstructure:"gateway_group"`
	RDMA         RDMA         `mapstructure:"rdma"`
	TCP          TCP          `mapstructure:"tcp"`
	Controller   Controller   `mapstructure:"controller"`
	Metrics      Metrics      `mapstructure:"metrics"`
	API          API          `mapstructure:"api"`
	Log          Log          `mapstructure:"log"`
}

// Port is one listening address.
type Port struct {
	// ID is the NVMe port ID (PORTID in the discovery log), 1..65519,
	// unique; 0 (unset) takes the port's 1-based position in the list.
	ID int `mapstructure:"id"`
	// Transport is "rdma" or "tcp", or "loop" for tests.
	Transport string `mapstructure:"transport"`
	// Address is an IPv4 or IPv6 literal; "0.0.0.0" or "::" listens on all.
	Address string `mapstructure:"address"`
	// Port is the service port, 4420 (the IANA NVMe-oF port) when unset.
	Port int `mapstructure:"port"`
	// ANAGroups is the ANA state, through this port, of each group ID
	// ("1".."128"): optimized, non-optimized, inaccessible,
	// persistent-loss or change (nvmet's names). A group left out is
	// optimized.
	ANAGroups map[string]string `mapstructure:"ana_groups"`
}

// Referral is another target's discovery service.
type Referral struct {
	Transport string `mapstructure:"transport"`
	Address   string `mapstructure:"address"`
	// Port is its service port, 4420 when unset.
	Port int `mapstructure:"port"`
	// PortID is the PORTID the discovery log shows for it; default 0.
	PortID int `mapstructure:"port_id"`
}

// Subsystem is one NVM subsystem and the hosts allowed to connect to it.
type Subsystem struct {
	NQN          string `mapstructure:"nqn"`
	AllowAnyHost bool   `mapstructure:"allow_any_host"`
	Hosts        []Host `mapstructure:"hosts"`
	// DHCHAPHashes and DHCHAPDHGroups are what in-band authentication may
	// use, most preferred first; empty: every one (fabric.DefaultAuthPolicy).
	DHCHAPHashes   []string `mapstructure:"dhchap_hashes"`
	DHCHAPDHGroups []string `mapstructure:"dhchap_dhgroups"`
	// Serial defaults to limits.Serial(NQN): the first 20 hex
	// digits of sha256(NQN), stable across restarts and distinct between
	// subsystems.
	Serial string `mapstructure:"serial"`
	// Model defaults to limits.Model, "nvmeof-tgt".
	Model string `mapstructure:"model"`
	// Ports are the IDs of the ports that serve the subsystem; empty:
	// every port.
	Ports []int `mapstructure:"ports"`
	// CNTLIDMin and CNTLIDMax bound the controller IDs this target hands
	// out: default 1..65519 (FFEFh). Two targets serving one subsystem
	// get disjoint ranges.
	CNTLIDMin  int         `mapstructure:"cntlid_min"`
	CNTLIDMax  int         `mapstructure:"cntlid_max"`
	Namespaces []Namespace `mapstructure:"namespaces"`
}

// Backend names, those of blockdev.KindOf.
const (
	BackendFile   = limits.BackendFile
	BackendBlock  = limits.BackendBlock
	BackendMemory = limits.BackendMemory
	BackendRBD    = limits.BackendRBD
)

// Namespace is one namespace of a subsystem and its backing store.
type Namespace struct {
	NSID uint32 `mapstructure:"nsid"`
	// Backend is "file", "block", "memory" or "rbd". Left empty it is
	// inferred by ApplyDefaults: a pool or image (and no path) means rbd,
	// no path means memory, a block special file means block, any other
	// path means file.
	Backend string `mapstructure:"backend"`
	Path    string `mapstructure:"path"`
	// Size is required for memory. For a file it is the size to create or
	// grow to, and 0 means the existing file's size. For a block device 0
	// means the whole device. For rbd it is the size to create a missing
	// image with (0: the image must exist); an existing image is served at
	// its own size, which a change of Size resizes.
	Size Bytes `mapstructure:"size"`
	// BlockSize is 512 or 4096, 512 when unset. A block device uses its own
	// logical block size, so for block it stays 0 unless configured.
	BlockSize uint32 `mapstructure:"block_size"`
	// UUID defaults to one derived from the subsystem NQN and NSID.
	UUID string `mapstructure:"uuid"`
	// NGUID is 32 hex digits (as nvme id-ns prints it) or the 8-4-4-4-12
	// form nvmet's configfs prints; NGUIDNone reports none, as nvmet does
	// by default. Left empty it is derived from the UUID (ResolvedNGUID).
	NGUID HexID `mapstructure:"nguid"`
	// EUI64 is 16 hex digits; left empty the namespace has none.
	EUI64 HexID `mapstructure:"eui64"`
	// ANAGroup is the namespace's ANA group, 1..128; default 1.
	ANAGroup   uint32 `mapstructure:"ana_group"`
	ReadOnly   bool   `mapstructure:"read_only"`
	BufferedIO bool   `mapstructure:"buffered_io"`
	// Pool and Image name an RBD image (backend rbd). CephConf is the
	// cluster's configuration file, default limits.RBDCephConf; Client the
	// Ceph client name, "admin" or "client.admin", default limits.RBDClient.
	// Namespaces with the same CephConf and Client share one connection.
	Pool     string `mapstructure:"pool"`
	Image    string `mapstructure:"image"`
	CephConf string `mapstructure:"ceph_conf"`
	Client   string `mapstructure:"client"`
	// Hosts masks the namespace: only these hosts see it (and only if
	// the subsystem lets them connect). Empty: every host the subsystem
	// allows sees it. Changed live.
	Hosts []string `mapstructure:"hosts"`
	// QoS limits the namespace's I/O, all hosts together; QoSPerHost
	// each host's. Changed live.
	QoS        QoS        `mapstructure:"qos"`
	QoSPerHost QoSPerHost `mapstructure:"qos_per_host"`
}

// QoS is a set of limits: commands per second (IOPS counts reads,
// writes, Write Zeroes and Dataset Management; read_iops the reads,
// write_iops the others) and bytes of data per second (bw, read_bw,
// write_bw, with units: 100MB, 1GiB). 0 or absent: no limit.
type QoS struct {
	IOPS      uint64 `mapstructure:"iops"`
	ReadIOPS  uint64 `mapstructure:"read_iops"`
	WriteIOPS uint64 `mapstructure:"write_iops"`
	BW        Bytes  `mapstructure:"bw"`
	ReadBW    Bytes  `mapstructure:"read_bw"`
	WriteBW   Bytes  `mapstructure:"write_bw"`
}

// IsZero reports whether q limits nothing.
func (q QoS) IsZero() bool { return q == QoS{} }

// QoSPerHost is the limits of each host's I/O on a namespace: Default
// for any host, and the hosts listed their own instead.
type QoSPerHost struct {
	Default QoS       `mapstructure:"default"`
	Hosts   []HostQoS `mapstructure:"hosts"`
}

// IsZero reports whether p limits nothing and lists no host.
func (p QoSPerHost) IsZero() bool { return p.Default.IsZero() && len(p.Hosts) == 0 }

// HostQoS is one host's limits on a namespace, instead of the default: a
// limit it leaves out is none for that host.
type HostQoS struct {
	NQN string `mapstructure:"nqn"`
	QoS `mapstructure:",squash"`
}

// FindHostQoS finds host's entry in qs.
func FindHostQoS(qs []HostQoS, host string) *HostQoS {
	for i := range qs {
		if qs[i].NQN == host {
			return &qs[i]
		}
	}
	return nil
}

// HexID is an identifier written in hex (a namespace's nguid, eui64). It
// must be a string in the file: YAML reads unquoted digits as a number,
// dropping leading zeros, so the decoder refuses anything else.
type HexID string

// Values of the auto/on/off keys (rdma.send_with_invalidate, rdma.io_uring,
// rdma.srq).
const (
	ModeAuto = limits.ModeAuto
	ModeOn   = limits.ModeOn
	ModeOff  = limits.ModeOff
)

// RDMA sizes the RDMA transport. Defaults and bounds are the rdma
// package's (rdma.Default*, rdma.*Min, rdma.*Max) and fabric's
// (limits.MDTS, DefaultMaxQueueDepth, DefaultMaxIOQueues);
// deploy/config.example.yaml lists their values.
type RDMA struct {
	InCapsuleDataSize  Bytes         `mapstructure:"in_capsule_data_size"` // multiple of 16
	MaxQueueDepth      int           `mapstructure:"max_queue_depth"`      // I/O queue entries
	MaxIOQueues        int           `mapstructure:"max_io_queues"`        // per controller
	MaxQueues          int           `mapstructure:"max_queues"`           // admin+I/O queues of all hosts per device, sizes the registered pools; 0: by the device (limits.RDMAMaxQueuesSRQ with a shared receive queue, limits.RDMAMaxQueues without)
	MDTS               Bytes         `mapstructure:"mdts"`                 // maximum data transfer, a power of two
	IOUnitSize         Bytes         `mapstructure:"io_unit_size"`         // data buffer chunk, a power of two up to MDTS
	BufferPoolSize     Bytes         `mapstructure:"buffer_pool_size"`     // registered data buffer memory per device, >= MDTS
	Pollers            int           `mapstructure:"pollers"`              // completion pollers per device
	PollIdle           time.Duration `mapstructure:"poll_idle"`            // busy-poll at least this long before sleeping (adapts up to 2ms)
	PollNap            time.Duration `mapstructure:"poll_nap"`             // pause between empty polls, 0 spins
	SendWithInvalidate string        `mapstructure:"send_with_invalidate"` // ModeAuto, ModeOn or ModeOff
	IOUring            string        `mapstructure:"io_uring"`             // file/block I/O on the pollers' io_uring: ModeAuto, ModeOn or ModeOff
	SRQ                string        `mapstructure:"srq"`                  // a shared receive queue per poller: ModeAuto (where the device has them), ModeOn or ModeOff
}

// TCP sizes the NVMe/TCP transport. Defaults and bounds are package
// limits' (limits.TCP*) and fabric's (limits.MDTS, MaxQueueDepth,
// MaxIOQueues); deploy/config.example.yaml lists their values.
type TCP struct {
	InCapsuleDataSize        Bytes         `mapstructure:"in_capsule_data_size"`        // IOCCSZ on every queue, a multiple of 16, at least 8KiB (the Linux host's fabrics commands)
	MaxQueueDepth            int           `mapstructure:"max_queue_depth"`             // I/O queue entries
	MaxIOQueues              int           `mapstructure:"max_io_queues"`               // per controller
	MDTS                     Bytes         `mapstructure:"mdts"`                        // maximum data transfer, a power of two
	MaxH2CData               Bytes         `mapstructure:"max_h2c_data"`                // MAXH2CDATA: most data of one H2CData PDU, a multiple of 4, at least 4KiB
	IOUnitSize               Bytes         `mapstructure:"io_unit_size"`                // data buffer unit, a power of two up to MDTS
	BufferPoolSize           Bytes         `mapstructure:"buffer_pool_size"`            // data buffers out at once for reads and R2T writes, all connections, >= MDTS; allocated as used
	MaxConnections           int           `mapstructure:"max_connections"`             // connections of all tcp ports together
	MaxConnectionsPerAddress int           `mapstructure:"max_connections_per_address"` // connections from one host address
	ICReqTimeout             time.Duration `mapstructure:"icreq_timeout"`               // a new connection's wait for its ICReq
}

// Controller bounds per-controller behaviour.
type Controller struct {
	// KeepAliveTimeoutMax caps the KATO a host may ask for in Connect.
	// Default limits.KATOMax, at least 1s.
	KeepAliveTimeoutMax time.Duration `mapstructure:"kato_max"`
	// MaxConnectionsPerHost caps the queues (connections, admin and I/O,
	// over all its controllers) one host NQN may have; a Connect past it
	// is refused. Default limits.MaxConnectionsPerHost.
	MaxConnectionsPerHost int `mapstructure:"max_connections_per_host"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is host:port, default "127.0.0.1:9771"; "" disables metrics.
	Listen string `mapstructure:"listen"`
	// Pprof also serves Go's profiler at /debug/pprof/ on the same address. Off by default:
	// profiles show internals, so enable it only on a trusted address.
	Pprof bool `mapstructure:"pprof"`
}

// API is the local management API (docs/api.md), which the CLI uses.
type API struct {
	// Socket is the Unix socket it listens on, mode 0600; "" turns the
	// API off.
	Socket string `mapstructure:"socket"`
}

// DefaultAPISocket is where the API listens and the CLI connects.
const DefaultAPISocket = "/run/nvmeof-tgt/nvmeof-tgt.sock"

// Log configures logging.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info (default), warn or error
	Format string `mapstructure:"format"` // text (default) or json
}

// Per-element defaults that viper cannot express, since they live inside
// lists.
const (
	defaultPort      = 4420
	defaultModel     = limits.Model
	defaultBlockSize = limits.BlockSize
)

// scalarDefaults holds every key outside the ports and subsystems lists.
// Registering each one with SetDefault also makes viper consult the
// environment for it, so NVMEOF_TGT_<SECTION>_<KEY> works even for keys the
// file leaves out.
var scalarDefaults = []struct {
	key string
	val any
}{
	{"rdma.in_capsule_data_size", Bytes(limits.RDMAInCapsuleDataSize)},
	{"rdma.max_queue_depth", limits.MaxQueueDepth},
	{"rdma.max_io_queues", limits.MaxIOQueues},
	{"rdma.max_queues", 0}, // by the device: limits.RDMAMaxQueuesSRQ or limits.RDMAMaxQueues
	{"rdma.mdts", Bytes(limits.MDTS)},
	{"rdma.io_unit_size", Bytes(limits.RDMAIOUnitSize)},
	{"rdma.buffer_pool_size", Bytes(limits.RDMABufferPoolSize)},
	{"rdma.pollers", limits.RDMAPollers},
	{"rdma.poll_idle", limits.RDMAPollIdle},
	{"rdma.poll_nap", limits.RDMAPollNap},
	{"rdma.send_with_invalidate", limits.RDMAMode},
	{"rdma.io_uring", limits.RDMAMode},
	{"rdma.srq", limits.RDMAMode},
	{"tcp.in_capsule_data_size", Bytes(limits.TCPInCapsuleDataSize)},
	{"tcp.max_queue_depth", limits.MaxQueueDepth},
	{"tcp.max_io_queues", limits.MaxIOQueues},
	{"tcp.mdts", Bytes(limits.MDTS)},
	{"tcp.max_h2c_data", Bytes(limits.TCPMaxH2CData)},
	{"tcp.io_unit_size", Bytes(limits.TCPIOUnitSize)},
	{"tcp.buffer_pool_size", Bytes(limits.TCPBufferPoolSize)},
	{"tcp.max_connections", limits.TCPMaxConnections},
	{"tcp.max_connections_per_address", limits.TCPMaxConnectionsPerAddress},
	{"tcp.icreq_timeout", limits.TCPICReqTimeout},
	{"controller.kato_max", limits.KATOMax},
	{"controller.max_connections_per_host", limits.MaxConnectionsPerHost},
	{"metrics.listen", "127.0.0.1:9771"},
	{"metrics.pprof", false},
	{"api.socket", DefaultAPISocket},
	{"state_dir", limits.StateDir},
	{"ana_transition_time", limits.ANATransitionTime},
	{"gateway_group.name", ""},
	{"gateway_group.pool", ""},
	{"gateway_group.id", 0},
	{"gateway_group.ceph_conf", limits.RBDCephConf},
	{"gateway_group.client", limits.RBDClient},
	{"gateway_group.lease", limits.GroupLease},
	{"gateway_group.key_dir", limits.GroupKeyDir},
	{"log.level", "info"},
	{"log.format", "text"},
}

// EnvPrefix prefixes the environment variables that override keys: the
// key rdma.max_queue_depth is read from NVMEOF_TGT_RDMA_MAX_QUEUE_DEPTH.
const EnvPrefix = "NVMEOF_TGT"

//go:embed default.yaml
var defaultYAML []byte

// Default returns the embedded default configuration as YAML: one RDMA port
// on 0.0.0.0:4420 and one subsystem, open to any host, with a 1GiB memory
// namespace.
func Default() []byte {
	return bytes.Clone(defaultYAML)
}

// Load registers the defaults with v, decodes it, applies the per-element
// defaults and validates the result. Keys that match no field are errors.
// The error joins every problem, decoding and Validate's alike, each a
// *FieldError naming its key (see Problems); a value taken from an
// NVMEOF_TGT_ variable is named by the variable.
func Load(v *viper.Viper) (*Config, error) {
	c, decode, semantic := load(v)
	if errs := blameEnv(dropShadowed(decode, semantic)); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// load is Load returning the configuration even when it has problems (as
// much as could be decoded, with defaults applied), with the decoding
// problems apart from Validate's.
func load(v *viper.Viper) (c *Config, decode, semantic []error) {
	for _, d := range scalarDefaults {
		v.SetDefault(d.key, d.val)
	}
	c = new(Config)
	if err := v.UnmarshalExact(c, viper.DecodeHook(decodeHook)); err != nil {
		decode = decodeProblems(err)
	}
	c.ApplyDefaults()
	return c, decode, append(Problems(c.Validate()), c.gatewayFileProblems()...)
}

// LoadFile loads a YAML file, whatever its extension, with environment
// overrides (see EnvPrefix).
func LoadFile(path string) (*Config, error) {
	c, _, err := LoadFileContent(path)
	return c, err
}

// LoadFileContent is LoadFile that also returns the content it loaded, read
// once: a caller that rewrites the file can tell whether it changed since.
func LoadFileContent(path string) (*Config, []byte, error) {
	v, data, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := Load(v)
	return c, data, err
}

// CheckFile is what `nvmeof-tgt config validate` runs: LoadFile and
// CheckPaths at once. It returns every problem of both, joined, and the
// warnings (see Warnings) of what could be read.
func CheckFile(path string) ([]*FieldError, error) {
	return CheckFileWith(path, nil)
}

// CheckFileWith is CheckFile with the problems extra finds in what could be
// read added to the others: checks of what the caller knows and the file
// format does not (the binary's build).
func CheckFileWith(path string, extra func(*Config) []error) ([]*FieldError, error) {
	v, _, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, decode, semantic := load(v)
	semantic = append(semantic, Problems(c.CheckPaths())...)
	if extra != nil {
		semantic = append(semantic, extra(c)...)
	}
	return c.Warnings(), errors.Join(blameEnv(dropShadowed(decode, semantic))...)
}

func readFile(path string) (*viper.Viper, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	v := newViper()
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return v, data, nil
}

// LoadDefault loads the embedded default configuration with environment
// overrides (see EnvPrefix).
func LoadDefault() (*Config, error) {
	return loadYAML(defaultYAML)
}

func loadYAML(data []byte) (*Config, error) {
	v := newViper()
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Load(v)
}

func newViper() *viper.Viper {
	v := viper.New()
	v.SetConfigType("yaml")
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	return v
}

var (
	bytesType    = reflect.TypeFor[Bytes]()
	durationType = reflect.TypeFor[time.Duration]()
	hexIDType    = reflect.TypeFor[HexID]()
)

// decodeHook converts YAML and environment values: sizes from strings or
// integers, durations from strings, and comma-separated strings to slices
// (viper's default hook, which this one replaces, does the last two).
func decodeHook(from, to reflect.Type, data any) (any, error) {
	switch {
	case to == bytesType:
		return toBytes(data)
	case to == durationType:
		return toDuration(data)
	case to == hexIDType && from.Kind() != reflect.String:
		return nil, fmt.Errorf("%v: write it in quotes, as a string of hex digits (YAML reads unquoted digits as a number)", data)
	case to == hostType && from.Kind() == reflect.String:
		return Host{NQN: reflect.ValueOf(data).String()}, nil
	case from.Kind() == reflect.String && to.Kind() == reflect.Slice:
		s := reflect.ValueOf(data).String()
		if s == "" {
			return []string{}, nil
		}
		return strings.Split(s, ","), nil
	}
	return data, nil
}

func toBytes(data any) (any, error) {
	if b, ok := data.(Bytes); ok {
		return b, nil
	}
	rv := reflect.ValueOf(data)
	switch rv.Kind() {
	case reflect.String:
		return ParseBytes(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if rv.Int() < 0 {
			return nil, fmt.Errorf("%d: a size cannot be negative: %w", rv.Int(), ErrBadSize)
		}
		return Bytes(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Bytes(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		// 1<<64 is exactly representable; anything at or above it overflows.
		if f < 0 || f >= 1<<64 || f != float64(uint64(f)) {
			return nil, fmt.Errorf("%v: want a whole number of bytes: %w", f, ErrBadSize)
		}
		return Bytes(uint64(f)), nil
	}
	return nil, fmt.Errorf("%v (%T): want a size such as 4096 or 1GiB: %w", data, data, ErrBadSize)
}

func toDuration(data any) (any, error) {
	if d, ok := data.(time.Duration); ok {
		return d, nil
	}
	rv := reflect.ValueOf(data)
	switch rv.Kind() {
	case reflect.String:
		return time.ParseDuration(strings.TrimSpace(rv.String()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// A bare number would be nanoseconds, which is never what the
		// operator meant by "kato_max: 120".
		if rv.IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("%v: a duration needs a unit, e.g. 200us or 2m", data)
	}
	return nil, fmt.Errorf("%v (%T): want a duration such as 200us or 2m", data, data)
}

// ApplyDefaults fills in the defaults that live inside the ports and
// subsystems lists, infers each namespace's backend (which may stat its
// path), and lower-cases the log settings. Load calls it; the scalar
// defaults of the other sections come from Load itself.
func (c *Config) ApplyDefaults() {
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Port == 0 {
			p.Port = defaultPort
		}
		if p.ID == 0 {
			p.ID = i + 1
		}
	}
	for i := range c.Referrals {
		if r := &c.Referrals[i]; r.Port == 0 {
			r.Port = defaultPort
		}
	}
	for i := range c.Subsystems {
		s := &c.Subsystems[i]
		if s.Serial == "" {
			s.Serial = limits.Serial(s.NQN)
		}
		if s.Model == "" {
			s.Model = defaultModel
		}
		if s.CNTLIDMin == 0 {
			s.CNTLIDMin = 1
		}
		if s.CNTLIDMax == 0 {
			s.CNTLIDMax = cntlidMax
		}
		for j := range s.Namespaces {
			n := &s.Namespaces[j]
			if n.Backend == "" {
				n.Backend = inferBackend(*n)
			}
			if n.Backend == BackendRBD {
				// A gateway's images are in its group's cluster, reached
				// as the gateway reaches it (validateGroupImages).
				conf, client := limits.RBDCephConf, limits.RBDClient
				if g := c.GatewayGroup; g.Enabled() {
					if g.CephConf != "" {
						conf = g.CephConf
					}
					if g.Client != "" {
						client = g.Client
					}
				}
				if n.CephConf == "" {
					n.CephConf = conf
				}
				if n.Client == "" {
					n.Client = client
				}
			}
			if n.BlockSize == 0 && n.Backend != BackendBlock {
				n.BlockSize = defaultBlockSize
			}
			if n.ANAGroup == 0 {
				n.ANAGroup = limits.ANAGroup
			}
		}
	}
	c.Log.Level = strings.ToLower(c.Log.Level)
	c.Log.Format = strings.ToLower(c.Log.Format)
}

// inferBackend picks a backend for a namespace that names none: rbd for
// one with a pool or image and no path, else limits.BackendOf its path,
// as the backends infer it too. A path that cannot be stated yet is a
// file: Validate reports why it cannot be used.
func inferBackend(n Namespace) string {
	if n.Path == "" && (n.Pool != "" || n.Image != "") {
		return BackendRBD
	}
	k, _ := limits.BackendOf(n.Path)
	return k
}
