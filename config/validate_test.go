package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// validConfig returns the brief's example, loaded and valid.
func validConfig(t *testing.T) *Config {
	t.Helper()
	c, err := loadYAML([]byte(exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ns(c *Config, i int) *Namespace { return &c.Subsystems[0].Namespaces[i] }

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		key    string // must appear in the error
		msg    string // must also appear, if set
	}{
		// Ports.
		{"no ports", func(c *Config) { c.Ports = nil }, "ports", "at least one port"},
		{"transport", func(c *Config) { c.Ports[0].Transport = "fc" }, "ports[0].transport", `"fc"`},
		{"empty transport", func(c *Config) { c.Ports[0].Transport = "" }, "ports[0].transport", ""},
		{"address hostname", func(c *Config) { c.Ports[0].Address = "target.example" }, "ports[0].address", ""},
		{"address empty", func(c *Config) { c.Ports[0].Address = "" }, "ports[0].address", ""},
		{"port zero", func(c *Config) { c.Ports[0].Port = 0 }, "ports[0].port", "1..65535"},
		{"port too big", func(c *Config) { c.Ports[0].Port = 65536 }, "ports[0].port", ""},
		{"port negative", func(c *Config) { c.Ports[0].Port = -1 }, "ports[0].port", ""},
		// Namespace masks and QoS hosts.
		{"mask host not an NQN", func(c *Config) { ns(c, 0).Hosts = []string{""} }, "subsystems[0].namespaces[0].hosts[0]", "empty"},
		{"mask host twice", func(c *Config) {
			ns(c, 0).Hosts = []string{"nqn.2026-11.io.example:h1", "nqn.2026-11.io.example:h1"}
		}, "subsystems[0].namespaces[0].hosts[1]", "also subsystems[0].namespaces[0].hosts[0]"},
		{"mask too long", func(c *Config) {
			for i := range 1025 {
				ns(c, 0).Hosts = append(ns(c, 0).Hosts, fmt.Sprintf("nqn.2026-11.io.example:h%d", i))
			}
		}, "subsystems[0].namespaces[0].hosts", "more than 1024"},
		{"QoS host twice", func(c *Config) {
			ns(c, 0).QoSPerHost.Hosts = []HostQoS{{NQN: "nqn.2026-11.io.example:h1"}, {NQN: "nqn.2026-11.io.example:h1"}}
		}, "subsystems[0].namespaces[0].qos_per_host.hosts[1]", "also"},
		{"QoS host a/b", func(c *Config) {
			ns(c, 0).QoSPerHost.Hosts = []HostQoS{{NQN: "nqn.2026-11.io.example:a/b"}}
		}, "subsystems[0].namespaces[0].qos_per_host.hosts[0]", "'/'"},
		{"duplicate port", func(c *Config) { c.Ports = append(c.Ports, c.Ports[0]) }, "ports[1]", "ports[0]"},
		{"port ID zero", func(c *Config) { c.Ports[0].ID = 0 }, "ports[0].id", "1..65519"},
		{"port ID reserved", func(c *Config) { c.Ports[0].ID = 0xfff0 }, "ports[0].id", "1..65519"},
		{"duplicate port ID", func(c *Config) {
			c.Ports = append(c.Ports, Port{ID: 1, Transport: "rdma", Address: "10.255.0.1", Port: 4421})
		}, "ports[1].id", "also the ID of ports[0]"},
		{"ANA group 0", func(c *Config) { c.Ports[0].ANAGroups = map[string]string{"0": "optimized"} }, "ports[0].ana_groups.0", "1..128"},
		{"ANA group 129", func(c *Config) { c.Ports[0].ANAGroups = map[string]string{"129": "optimized"} }, "ports[0].ana_groups.129", ""},
		{"ANA group not a number", func(c *Config) { c.Ports[0].ANAGroups = map[string]string{"one": "optimized"} }, "ports[0].ana_groups.one", ""},
		{"ANA state", func(c *Config) { c.Ports[0].ANAGroups = map[string]string{"2": "fast"} }, "ports[0].ana_groups.2", `"fast"`},
		{"referral transport", func(c *Config) {
			c.Referrals = []Referral{{Transport: "fc", Address: "10.0.0.2", Port: 4420}}
		}, "referrals[0].transport", ""},
		{"referral address", func(c *Config) {
			c.Referrals = []Referral{{Transport: "rdma", Address: "target2", Port: 4420}}
		}, "referrals[0].address", ""},
		{"referral port ID", func(c *Config) {
			c.Referrals = []Referral{{Transport: "rdma", Address: "10.0.0.2", Port: 4420, PortID: 70000}}
		}, "referrals[0].port_id", ""},
		{"state_dir relative", func(c *Config) { c.StateDir = "state" }, "state_dir", "absolute"},
		{"ana_transition_time zero", func(c *Config) { c.ANATransitionTime = 0 }, "ana_transition_time", "1s..255s"},
		{"ana_transition_time long", func(c *Config) { c.ANATransitionTime = 256 * time.Second }, "ana_transition_time", ""},
		{"subsystem port unknown", func(c *Config) { c.Subsystems[0].Ports = []int{7} }, "subsystems[0].ports[0]", "no port"},
		{"subsystem port twice", func(c *Config) { c.Subsystems[0].Ports = []int{1, 1} }, "subsystems[0].ports[1]", "also ports[0]"},
		{"cntlid_min zero", func(c *Config) { c.Subsystems[0].CNTLIDMin = 0 }, "subsystems[0].cntlid_min", ""},
		{"cntlid_max reserved", func(c *Config) { c.Subsystems[0].CNTLIDMax = 0xfff0 }, "subsystems[0].cntlid_max", ""},
		{"cntlid range reversed", func(c *Config) { c.Subsystems[0].CNTLIDMin, c.Subsystems[0].CNTLIDMax = 100, 10 }, "subsystems[0].cntlid_max", "below"},
		{"ana_group 0", func(c *Config) { ns(c, 0).ANAGroup = 0 }, "subsystems[0].namespaces[0].ana_group", ""},
		{"ana_group 129", func(c *Config) { ns(c, 0).ANAGroup = 129 }, "subsystems[0].namespaces[0].ana_group", "1..128"},
		{"duplicate mapped address", func(c *Config) {
			c.Ports = append(c.Ports, Port{Transport: "rdma", Address: "::ffff:10.255.0.1", Port: 4420})
		}, "ports[1]", "ports[0]"},

		// Subsystems and NQNs.
		{"no subsystems", func(c *Config) { c.Subsystems = nil }, "subsystems", "at least one subsystem"},
		{"nqn empty", func(c *Config) { c.Subsystems[0].NQN = "" }, "subsystems[0].nqn", ""},
		{"nqn NUL", func(c *Config) { c.Subsystems[0].NQN = "nqn.2026-11.io.example:a\x00b" }, "subsystems[0].nqn", "NUL"},
		{"nqn too long", func(c *Config) {
			c.Subsystems[0].NQN = "nqn.2026-11.io.example:" + strings.Repeat("x", 201)
		}, "subsystems[0].nqn", "224 bytes"},
		{"nqn discovery", func(c *Config) { c.Subsystems[0].NQN = "nqn.2014-08.org.nvmexpress.discovery" }, "subsystems[0].nqn", "discovery"},
		{"duplicate nqn", func(c *Config) {
			s := c.Subsystems[0]
			s.Namespaces = nil
			c.Subsystems = append(c.Subsystems, s)
		}, "subsystems[1].nqn", "subsystems[0]"},

		// Hosts.
		{"host invalid", func(c *Config) {
			c.Subsystems[0].AllowAnyHost = false
			c.Subsystems[0].Hosts = hostsOf("nqn.2026-11.io.example:h1", "")
		}, "subsystems[0].hosts[1]", "empty"},
		{"host duplicate", func(c *Config) {
			c.Subsystems[0].AllowAnyHost = false
			c.Subsystems[0].Hosts = hostsOf("nqn.2026-11.io.example:h1", "nqn.2026-11.io.example:h1")
		}, "subsystems[0].hosts[1]", "hosts[0]"},
		{"no host could connect", func(c *Config) { c.Subsystems[0].AllowAnyHost = false }, "subsystems[0].hosts", "no host could connect"},
		{"any host and hosts", func(c *Config) {
			c.Subsystems[0].Hosts = hostsOf("nqn.2026-11.io.example:h1")
		}, "subsystems[0].allow_any_host", ""},

		// Serial and model.
		{"serial too long", func(c *Config) { c.Subsystems[0].Serial = strings.Repeat("1", 21) }, "subsystems[0].serial", ""},
		{"serial not ascii", func(c *Config) { c.Subsystems[0].Serial = "sérial" }, "subsystems[0].serial", ""},
		{"serial control", func(c *Config) { c.Subsystems[0].Serial = "a\tb" }, "subsystems[0].serial", ""},
		{"serial empty", func(c *Config) { c.Subsystems[0].Serial = "" }, "subsystems[0].serial", ""},
		{"model too long", func(c *Config) { c.Subsystems[0].Model = strings.Repeat("m", 41) }, "subsystems[0].model", ""},

		// Namespaces.
		{"nsid zero", func(c *Config) { ns(c, 1).NSID = 0 }, "subsystems[0].namespaces[1].nsid", "0 is not a valid NSID"},
		{"nsid broadcast", func(c *Config) { ns(c, 1).NSID = 0xFFFFFFFF }, "subsystems[0].namespaces[1].nsid", ""},
		{"nsid FFFFFFFEh", func(c *Config) { ns(c, 1).NSID = 0xFFFFFFFE }, "subsystems[0].namespaces[1].nsid", "not a valid NSID"},
		{"nsid duplicate", func(c *Config) { ns(c, 1).NSID = 1 }, "subsystems[0].namespaces[1].nsid", "namespaces[0]"},
		{"backend unknown", func(c *Config) { ns(c, 1).Backend = "nbd" }, "subsystems[0].namespaces[1].backend", ""},
		{"memory without size", func(c *Config) { ns(c, 1).Size = 0 }, "subsystems[0].namespaces[1].size", "memory"},
		{"memory with path", func(c *Config) { ns(c, 1).Path = "/tmp/x" }, "subsystems[0].namespaces[1].path", ""},
		{"file without path", func(c *Config) { ns(c, 0).Path = "" }, "subsystems[0].namespaces[0].path", ""},
		{"file relative path", func(c *Config) { ns(c, 0).Path = "disk1.img" }, "subsystems[0].namespaces[0].path", "absolute"},
		{"block without path", func(c *Config) {
			*ns(c, 0) = Namespace{NSID: 1, Backend: "block"}
		}, "subsystems[0].namespaces[0].path", ""},
		{"block relative path", func(c *Config) {
			*ns(c, 0) = Namespace{NSID: 1, Backend: "block", Path: "nvme0n1"}
		}, "subsystems[0].namespaces[0].path", ""},
		{"block size 1024", func(c *Config) { ns(c, 1).BlockSize = 1024 }, "subsystems[0].namespaces[1].block_size", ""},
		{"block size 0 for memory", func(c *Config) { ns(c, 1).BlockSize = 0 }, "subsystems[0].namespaces[1].block_size", ""},
		{"size not a multiple of 512", func(c *Config) { ns(c, 1).Size = 1000 }, "subsystems[0].namespaces[1].size", "multiple"},
		{"size not a multiple of 4096", func(c *Config) {
			ns(c, 1).BlockSize = 4096
			ns(c, 1).Size = 6 * KiB
		}, "subsystems[0].namespaces[1].size", "4096"},
		{"block size not a multiple", func(c *Config) {
			*ns(c, 0) = Namespace{NSID: 1, Backend: "block", Path: "/dev/nvme0n1", Size: 1000}
		}, "subsystems[0].namespaces[0].size", ""},
		{"uuid unparsable", func(c *Config) { ns(c, 1).UUID = "4f0e2c1a-0000" }, "subsystems[0].namespaces[1].uuid", ""},
		{"uuid nil", func(c *Config) { ns(c, 1).UUID = "00000000-0000-0000-0000-000000000000" }, "subsystems[0].namespaces[1].uuid", "nil"},
		{"uuid duplicate in subsystem", func(c *Config) { ns(c, 0).UUID = ns(c, 1).UUID }, "subsystems[0].namespaces[1].uuid", "namespaces[0]"},
		{"uuid duplicate across subsystems", func(c *Config) {
			c.Subsystems = append(c.Subsystems, Subsystem{
				NQN: "nqn.2026-11.io.example:disk2", AllowAnyHost: true, Serial: "2", Model: "m",
				Namespaces: []Namespace{{NSID: 1, Backend: "memory", Size: MiB, BlockSize: 512, UUID: ns(c, 1).UUID}},
			})
		}, "subsystems[1].namespaces[0].uuid", "subsystems[0].namespaces[1]"},
		{"uuid duplicates a derived one", func(c *Config) {
			ns(c, 1).UUID = ns(c, 0).ResolvedUUID(c.Subsystems[0].NQN).String()
		}, "subsystems[0].namespaces[1].uuid", ""},
		{"nguid short", func(c *Config) { ns(c, 1).NGUID = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5" }, "subsystems[0].namespaces[1].nguid", "32 hex digits"},
		{"nguid not hex", func(c *Config) { ns(c, 1).NGUID = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5x" }, "subsystems[0].namespaces[1].nguid", ""},
		{"nguid zero", func(c *Config) { ns(c, 1).NGUID = "00000000-0000-0000-0000-000000000000" }, "subsystems[0].namespaces[1].nguid", "none"},
		{"nguid duplicate in subsystem", func(c *Config) {
			ns(c, 0).NGUID = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"
			ns(c, 1).NGUID = "6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
		}, "subsystems[0].namespaces[1].nguid", "namespaces[0]"},
		{"nguid duplicate across subsystems", func(c *Config) {
			ns(c, 1).NGUID = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"
			c.Subsystems = append(c.Subsystems, Subsystem{
				NQN: "nqn.2026-11.io.example:disk2", AllowAnyHost: true, Serial: "2", Model: "m",
				Namespaces: []Namespace{{NSID: 1, Backend: "memory", Size: MiB, BlockSize: 512, NGUID: ns(c, 1).NGUID}},
			})
		}, "subsystems[1].namespaces[0].nguid", "subsystems[0].namespaces[1]"},
		{"nguid duplicates a derived one", func(c *Config) {
			g := ns(c, 0).ResolvedNGUID(c.Subsystems[0].NQN)
			ns(c, 1).NGUID = HexID(hex.EncodeToString(g[:]))
		}, "subsystems[0].namespaces[1].nguid", "namespaces[0]"},
		{"eui64 short", func(c *Config) { ns(c, 1).EUI64 = "00112233445566" }, "subsystems[0].namespaces[1].eui64", "16 hex digits"},
		{"eui64 dashes", func(c *Config) { ns(c, 1).EUI64 = "00-11-22-33-44-55-66-77" }, "subsystems[0].namespaces[1].eui64", ""},
		{"eui64 zero", func(c *Config) { ns(c, 1).EUI64 = "0000000000000000" }, "subsystems[0].namespaces[1].eui64", "all zero"},
		{"eui64 duplicate in subsystem", func(c *Config) {
			ns(c, 0).EUI64 = "0011223344556677"
			ns(c, 1).EUI64 = "0011223344556677"
		}, "subsystems[0].namespaces[1].eui64", "namespaces[0]"},
		{"eui64 duplicate across subsystems", func(c *Config) {
			ns(c, 1).EUI64 = "0011223344556677"
			c.Subsystems = append(c.Subsystems, Subsystem{
				NQN: "nqn.2026-11.io.example:disk2", AllowAnyHost: true, Serial: "2", Model: "m",
				Namespaces: []Namespace{{NSID: 1, Backend: "memory", Size: MiB, BlockSize: 512, EUI64: "0011223344556677"}},
			})
		}, "subsystems[1].namespaces[0].eui64", "subsystems[0].namespaces[1]"},

		// RBD.
		{"rbd without pool", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Pool = "" }, "subsystems[0].namespaces[0].pool", "required"},
		{"rbd without image", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Image = "" }, "subsystems[0].namespaces[0].image", "required"},
		{"rbd image with slash", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Image = "a/b" }, "subsystems[0].namespaces[0].image", "separates"},
		{"rbd pool with at", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Pool = "rbd@x" }, "subsystems[0].namespaces[0].pool", "separates"},
		{"rbd image control character", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Image = "a\nb" }, "subsystems[0].namespaces[0].image", "control"},
		{"rbd with path", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Path = "/srv/a.img" }, "subsystems[0].namespaces[0].path", "must be empty"},
		{"rbd ceph_conf relative", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).CephConf = "ceph.conf" }, "subsystems[0].namespaces[0].ceph_conf", "absolute"},
		{"rbd client empty id", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Client = "client." }, "subsystems[0].namespaces[0].client", "client name"},
		{"rbd client with space", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Client = "ad min" }, "subsystems[0].namespaces[0].client", "client name"},
		{"rbd buffered", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).BufferedIO = true }, "subsystems[0].namespaces[0].buffered_io", "file and block"},
		{"rbd size unaligned", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Size = 1000 }, "subsystems[0].namespaces[0].size", "multiple"},
		{"pool on a file", func(c *Config) { ns(c, 0).Pool = "rbd" }, "subsystems[0].namespaces[0].pool", "only for the rbd backend"},
		{"ceph_conf on memory", func(c *Config) { ns(c, 1).CephConf = "/etc/ceph/ceph.conf" }, "subsystems[0].namespaces[1].ceph_conf", "only for the rbd backend"},

		// RDMA.
		{"icd too big", func(c *Config) { c.RDMA.InCapsuleDataSize = 16*KiB + 16 }, "rdma.in_capsule_data_size", ""},
		{"icd not a multiple of 16", func(c *Config) { c.RDMA.InCapsuleDataSize = 100 }, "rdma.in_capsule_data_size", ""},
		{"queue depth low", func(c *Config) { c.RDMA.MaxQueueDepth = 15 }, "rdma.max_queue_depth", "16..1024"},
		{"queue depth high", func(c *Config) { c.RDMA.MaxQueueDepth = 1025 }, "rdma.max_queue_depth", ""},
		{"io queues zero", func(c *Config) { c.RDMA.MaxIOQueues = 0 }, "rdma.max_io_queues", ""},
		{"io queues high", func(c *Config) { c.RDMA.MaxIOQueues = 129 }, "rdma.max_io_queues", ""},
		{"max queues low", func(c *Config) { c.RDMA.MaxQueues = 1 }, "rdma.max_queues", "0 (by the device) or 2..4096"},
		{"srq mode", func(c *Config) { c.RDMA.SRQ = "yes" }, "rdma.srq", ""},
		{"max queues high", func(c *Config) { c.RDMA.MaxQueues = 4097 }, "rdma.max_queues", ""},
		{"mdts not power of two", func(c *Config) { c.RDMA.MDTS = 3 * MiB }, "rdma.mdts", ""},
		{"mdts small", func(c *Config) { c.RDMA.MDTS = 2 * KiB }, "rdma.mdts", ""},
		{"mdts large", func(c *Config) { c.RDMA.MDTS = 32 * MiB }, "rdma.mdts", ""},
		{"io unit not power of two", func(c *Config) { c.RDMA.IOUnitSize = 48 * KiB }, "rdma.io_unit_size", ""},
		{"io unit small", func(c *Config) { c.RDMA.IOUnitSize = 2 * KiB }, "rdma.io_unit_size", ""},
		{"io unit above mdts", func(c *Config) { c.RDMA.IOUnitSize = 2 * MiB }, "rdma.io_unit_size", "rdma.mdts"},
		{"buffer pool below mdts", func(c *Config) { c.RDMA.BufferPoolSize = 512 * KiB }, "rdma.buffer_pool_size", "rdma.mdts"},
		{"pollers zero", func(c *Config) { c.RDMA.Pollers = 0 }, "rdma.pollers", ""},
		{"pollers high", func(c *Config) { c.RDMA.Pollers = 65 }, "rdma.pollers", ""},
		{"poll idle negative", func(c *Config) { c.RDMA.PollIdle = -time.Microsecond }, "rdma.poll_idle", ""},
		{"poll idle long", func(c *Config) { c.RDMA.PollIdle = 2 * time.Second }, "rdma.poll_idle", ""},
		{"poll nap negative", func(c *Config) { c.RDMA.PollNap = -time.Microsecond }, "rdma.poll_nap", ""},
		{"poll nap long", func(c *Config) { c.RDMA.PollNap = 2 * time.Millisecond }, "rdma.poll_nap", ""},
		{"send with invalidate", func(c *Config) { c.RDMA.SendWithInvalidate = "yes" }, "rdma.send_with_invalidate", ""},
		{"io_uring", func(c *Config) { c.RDMA.IOUring = "maybe" }, "rdma.io_uring", ""},

		// TCP.
		{"tcp icd below 8KiB", func(c *Config) { c.TCP.InCapsuleDataSize = 4 * KiB }, "tcp.in_capsule_data_size", "8KiB..64KiB"},
		{"tcp icd too big", func(c *Config) { c.TCP.InCapsuleDataSize = 64*KiB + 16 }, "tcp.in_capsule_data_size", ""},
		{"tcp icd not a multiple of 16", func(c *Config) { c.TCP.InCapsuleDataSize = 8*KiB + 8 }, "tcp.in_capsule_data_size", ""},
		{"tcp queue depth low", func(c *Config) { c.TCP.MaxQueueDepth = 15 }, "tcp.max_queue_depth", "16..1024"},
		{"tcp io queues zero", func(c *Config) { c.TCP.MaxIOQueues = 0 }, "tcp.max_io_queues", ""},
		{"tcp mdts not power of two", func(c *Config) { c.TCP.MDTS = 3 * MiB }, "tcp.mdts", ""},
		{"tcp maxh2cdata small", func(c *Config) { c.TCP.MaxH2CData = 2 * KiB }, "tcp.max_h2c_data", ""},
		{"tcp maxh2cdata not a dword", func(c *Config) { c.TCP.MaxH2CData = 4*KiB + 2 }, "tcp.max_h2c_data", ""},
		{"tcp io unit above mdts", func(c *Config) { c.TCP.IOUnitSize = 2 * MiB }, "tcp.io_unit_size", "tcp.mdts"},
		{"tcp io unit small", func(c *Config) { c.TCP.IOUnitSize = 2 * KiB }, "tcp.io_unit_size", ""},
		{"tcp buffer pool below mdts", func(c *Config) { c.TCP.BufferPoolSize = 512 * KiB }, "tcp.buffer_pool_size", "tcp.mdts"},
		{"tcp max connections one", func(c *Config) { c.TCP.MaxConnections = 1 }, "tcp.max_connections", ""},
		{"tcp per address above total", func(c *Config) { c.TCP.MaxConnectionsPerAddress = 2000 }, "tcp.max_connections_per_address", ""},
		{"tcp per address zero", func(c *Config) { c.TCP.MaxConnectionsPerAddress = 0 }, "tcp.max_connections_per_address", ""},
		{"tcp icreq timeout zero", func(c *Config) { c.TCP.ICReqTimeout = 0 }, "tcp.icreq_timeout", "100ms..5m"},
		{"tcp icreq timeout long", func(c *Config) { c.TCP.ICReqTimeout = time.Hour }, "tcp.icreq_timeout", ""},

		// Controller, metrics, log.
		{"kato_max short", func(c *Config) { c.Controller.KeepAliveTimeoutMax = 500 * time.Millisecond }, "controller.kato_max", ""},
		{"kato_max long", func(c *Config) { c.Controller.KeepAliveTimeoutMax = 50 * 24 * time.Hour }, "controller.kato_max", ""},
		{"max_connections_per_host zero", func(c *Config) { c.Controller.MaxConnectionsPerHost = 0 }, "controller.max_connections_per_host", ""},
		{"max_connections_per_host huge", func(c *Config) { c.Controller.MaxConnectionsPerHost = 1 << 20 }, "controller.max_connections_per_host", ""},
		{"metrics no port", func(c *Config) { c.Metrics.Listen = "127.0.0.1" }, "metrics.listen", ""},
		{"metrics bad port", func(c *Config) { c.Metrics.Listen = ":99999" }, "metrics.listen", ""},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, "log.level", ""},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, "log.format", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mutate(c)
			err := c.Validate()
			want := []string{tt.key + ": "}
			if tt.msg != "" {
				want = append(want, tt.msg)
			}
			assertErrContains(t, err, want...)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v holds no *FieldError", err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "existing.img")
	if err := os.WriteFile(existing, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"as loaded", func(c *Config) {}},
		{"max queues by the device", func(c *Config) { c.RDMA.MaxQueues = 0 }},
		{"srq off", func(c *Config) { c.RDMA.SRQ = ModeOff }},
		{"no namespaces", func(c *Config) { c.Subsystems[0].Namespaces = nil }},
		{"hosts only", func(c *Config) {
			c.Subsystems[0].AllowAnyHost = false
			c.Subsystems[0].Hosts = hostsOf(
				"nqn.2014-08.org.nvmexpress:uuid:2110ba8b-b7eb-465e-b011-9b16af900e7f",
				"nqn.2026-11.io.example:host-1")
		}},
		{"uuid-form subsystem nqn", func(c *Config) {
			c.Subsystems[0].NQN = "nqn.2014-08.org.nvmexpress:uuid:2110ba8b-b7eb-465e-b011-9b16af900e7f"
		}},
		{"ipv6 any", func(c *Config) { c.Ports[0].Address = "::" }},
		{"ipv6 link-local with zone", func(c *Config) { c.Ports[0].Address = "fe80::1%eth0" }},
		{"two ports", func(c *Config) {
			c.Ports = append(c.Ports, Port{ID: 2, Transport: "rdma", Address: "10.255.0.1", Port: 4421},
				Port{ID: 3, Transport: "loop", Address: "10.255.0.1", Port: 4420})
		}},
		{"existing file without size", func(c *Config) { ns(c, 0).Path, ns(c, 0).Size = existing, 0 }},
		// Validate leaves the machine to CheckPaths.
		{"missing file without size", func(c *Config) { ns(c, 0).Size = 0 }},
		{"file is a directory", func(c *Config) { ns(c, 0).Path = t.TempDir() }},
		{"block with device block size", func(c *Config) {
			*ns(c, 0) = Namespace{NSID: 1, Backend: "block", Path: "/dev/nvme0n1", ANAGroup: 1}
		}},
		{"block size 4096", func(c *Config) { ns(c, 1).BlockSize = 4096 }},
		{"nguid and eui64", func(c *Config) {
			ns(c, 0).NGUID = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b"
			ns(c, 0).EUI64 = "0011223344556677"
			ns(c, 1).NGUID = "6E3F1A2B-4C5D-4E6F-8A9B-0C1D2E3F4A5C"
		}},
		{"nguid none twice", func(c *Config) { ns(c, 0).NGUID, ns(c, 1).NGUID = NGUIDNone, NGUIDNone }},
		{"icd zero", func(c *Config) { c.RDMA.InCapsuleDataSize = 0 }},
		{"icd max", func(c *Config) { c.RDMA.InCapsuleDataSize = 16 * KiB }},
		{"mdts bounds", func(c *Config) { c.RDMA.MDTS, c.RDMA.IOUnitSize = 4*KiB, 4*KiB }},
		{"mdts 16MiB", func(c *Config) { c.RDMA.MDTS, c.RDMA.IOUnitSize = 16*MiB, 16*MiB }},
		{"metrics disabled", func(c *Config) { c.Metrics.Listen = "" }},
		{"tcp port", func(c *Config) { c.Ports[0].Transport = "tcp" }},
		{"rdma and tcp on one address and port", func(c *Config) {
			c.Ports = append(c.Ports, Port{ID: 2, Transport: "tcp", Address: "10.255.0.1", Port: 4420})
			c.Referrals = []Referral{{Transport: "tcp", Address: "10.0.0.2", Port: 8009}}
		}},
		{"tcp bounds", func(c *Config) {
			c.TCP = TCP{InCapsuleDataSize: 64 * KiB, MaxQueueDepth: 1024, MaxIOQueues: 128, MDTS: 4 * KiB, MaxH2CData: 4 * KiB,
				IOUnitSize: 4 * KiB, BufferPoolSize: 4 * KiB, MaxConnections: 2, MaxConnectionsPerAddress: 2, ICReqTimeout: 100 * time.Millisecond}
		}},
		{"multipath", func(c *Config) {
			c.Ports = append(c.Ports, Port{ID: 2, Transport: "rdma", Address: "10.255.0.1", Port: 4421,
				ANAGroups: map[string]string{"1": "inaccessible", "2": "optimized", "128": "change"}})
			c.Ports[0].ANAGroups = map[string]string{"2": "non-optimized", "3": "persistent-loss"}
			c.Referrals = []Referral{{Transport: "rdma", Address: "10.0.0.2", Port: 4420, PortID: 1}}
			c.Subsystems[0].Ports = []int{2, 1}
			c.Subsystems[0].CNTLIDMin, c.Subsystems[0].CNTLIDMax = 1, 1000
			ns(c, 1).ANAGroup = 128
			c.StateDir, c.ANATransitionTime = "", 255*time.Second
		}},
		{"metrics any", func(c *Config) { c.Metrics.Listen = ":9771" }},
		{"rbd", func(c *Config) { *ns(c, 0) = rbdNS() }},
		{"rbd to create", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Size = GiB }},
		{"rbd client.name", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).Client = "client.gw1" }},
		{"rbd read-only", func(c *Config) { *ns(c, 0) = rbdNS(); ns(c, 0).ReadOnly = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mutate(c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestValidateNQNs checks config against the one NQN rule (nvme.CheckNQN):
// what Linux takes is accepted, with a warning when not in the spec's form.
func TestValidateNQNs(t *testing.T) {
	const host = "nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349"
	tests := []struct {
		name  string
		nqn   string
		hosts []string
		err   string // in Validate's error, or none
		warn  string // key of the one warning, or none
	}{
		{name: "spec form", nqn: "nqn.2026-11.io.example:disk1"},
		{name: "spdk", nqn: "nqn.2016-06.io.spdk:cnode1"},
		{name: "uuid form", nqn: "nqn.2014-08.org.nvmexpress:uuid:2110ba8b-b7eb-465e-b011-9b16af900e7f"},
		{name: "blktests", nqn: "blktests-subsystem-1", hosts: []string{host}, warn: "subsystems[0].nqn"},
		{name: "tutorial", nqn: "testnqn", warn: "subsystems[0].nqn"},
		{name: "other prefix", nqn: "iqn.2026-11.io.example:disk1", warn: "subsystems[0].nqn"},
		{name: "month 13", nqn: "nqn.2026-13.io.example:disk1", warn: "subsystems[0].nqn"},
		{name: "bad uuid form", nqn: "nqn.2014-08.org.nvmexpress:uuid:not-a-uuid", warn: "subsystems[0].nqn"},
		{name: "223 bytes", nqn: strings.Repeat("x", 223), warn: "subsystems[0].nqn"},
		{name: "224 bytes", nqn: strings.Repeat("x", 224), err: "subsystems[0].nqn: invalid NQN: 224 bytes, more than 223"},
		{name: "NUL", nqn: "testnqn\x00", err: "subsystems[0].nqn: invalid NQN"},
		{name: "empty", nqn: "", err: "subsystems[0].nqn: invalid NQN: empty"},
		{name: "discovery", nqn: "nqn.2014-08.org.nvmexpress.discovery", err: "subsystems[0].nqn: reserved NQN"},
		{name: "host not in spec form", nqn: "nqn.2026-11.io.example:x", hosts: []string{"hostnqn"}, warn: "subsystems[0].hosts[0]"},
		{name: "host 224 bytes", nqn: "nqn.2026-11.io.example:x", hosts: []string{strings.Repeat("h", 224)}, err: "subsystems[0].hosts[0]: invalid NQN"},
		{name: "host NUL", nqn: "nqn.2026-11.io.example:x", hosts: []string{"a\x00"}, err: "subsystems[0].hosts[0]: invalid NQN"},
		// The discovery NQN is only reserved for subsystems.
		{name: "host is the discovery NQN", nqn: "nqn.2026-11.io.example:x", hosts: []string{"nqn.2014-08.org.nvmexpress.discovery"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			s := &c.Subsystems[0]
			s.NQN = tt.nqn
			if tt.hosts != nil {
				s.AllowAnyHost, s.Hosts = false, hostsOf(tt.hosts...)
			}
			err := c.Validate()
			if tt.err != "" {
				assertErrContains(t, err, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := c.Warnings()
			switch {
			case tt.warn == "" && len(w) != 0:
				t.Errorf("warnings %v, want none", w)
			case tt.warn != "" && (len(w) != 1 || w[0].Key != tt.warn):
				t.Errorf("warnings %v, want one for %s", w, tt.warn)
			}
		})
	}
}

// TestValidateReportsAll checks that problems are joined, not just the
// first.
func TestValidateReportsAll(t *testing.T) {
	c := validConfig(t)
	c.Ports[0].Port = 0
	ns(c, 1).NSID = 0
	c.RDMA.Pollers = 0
	c.Log.Format = "xml"
	err := c.Validate()
	assertErrContains(t, err,
		"ports[0].port: ",
		"subsystems[0].namespaces[1].nsid: 0 is not a valid NSID",
		"rdma.pollers: ",
		"log.format: ")
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 4 {
		t.Errorf("got %d problems, want 4: %v", n, err)
	}
}

// TestLoadValidates checks that Load runs Validate and that defaults fill
// in list elements.
func TestLoadValidates(t *testing.T) {
	_, err := loadYAML([]byte(`
ports: [{transport: rdma, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:x
    namespaces: [{nsid: 0, size: 1MiB}]
`))
	assertErrContains(t, err, "subsystems[0].hosts: ", "subsystems[0].namespaces[0].nsid: ")
	if strings.Contains(err.Error(), "ports[0].port") {
		t.Errorf("port was not defaulted: %v", err)
	}
}

func TestApplyDefaults(t *testing.T) {
	regular := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{
		Ports: []Port{{Transport: "rdma", Address: "::"}, {Transport: "rdma", Address: "::", Port: 4421}},
		Subsystems: []Subsystem{{
			NQN: "nqn.2026-11.io.example:x", Serial: "keep", Model: "keep too",
			Namespaces: []Namespace{
				{NSID: 1, Size: MiB},
				{NSID: 2, Path: regular},
				{NSID: 3, Path: "/nonexistent/disk.img"},
				{NSID: 4, Backend: "block", Path: "/dev/nvme0n1"},
				{NSID: 5, BlockSize: 4096},
			},
		}, {NQN: "nqn.2026-11.io.example:y"}},
		Log: Log{Level: "WARN", Format: "Json"},
	}
	c.ApplyDefaults()
	if c.Ports[0].Port != 4420 || c.Ports[1].Port != 4421 {
		t.Errorf("ports = %+v", c.Ports)
	}
	s := c.Subsystems[0]
	if s.Serial != "keep" || s.Model != "keep too" {
		t.Errorf("configured serial/model overwritten: %q %q", s.Serial, s.Model)
	}
	y := c.Subsystems[1]
	if y.Serial != fabric.DefaultSerial(y.NQN) || len(y.Serial) != 20 || y.Model != "nvmeof-tgt" {
		t.Errorf("defaults not applied: %q %q", y.Serial, y.Model)
	}
	if fabric.DefaultSerial("a") == fabric.DefaultSerial("b") {
		t.Error("serials of different NQNs collide")
	}
	wantBackend := []string{"memory", "file", "file", "block", "memory"}
	wantBS := []uint32{512, 512, 512, 0, 4096}
	for i, n := range s.Namespaces {
		if n.Backend != wantBackend[i] || n.BlockSize != wantBS[i] {
			t.Errorf("namespace %d: backend %q block size %d, want %q %d", n.NSID, n.Backend, n.BlockSize, wantBackend[i], wantBS[i])
		}
	}
	if c.Log != (Log{Level: "warn", Format: "json"}) {
		t.Errorf("log = %+v", c.Log)
	}
}

func TestInferBlockDevice(t *testing.T) {
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		dev := "/dev/" + e.Name()
		st, err := os.Stat(dev)
		if err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
			continue
		}
		if got := inferBackend(Namespace{Path: dev}); got != BackendBlock {
			t.Errorf("inferBackend(%s) = %q, want block", dev, got)
		}
		return
	}
	t.Skip("no block device node found")
}

// rbdNS is a valid rbd namespace with its defaults applied.
func rbdNS() Namespace {
	return Namespace{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "disk1", CephConf: "/etc/ceph/ceph.conf",
		Client: "admin", BlockSize: 512, ANAGroup: 1}
}

func TestApplyDefaultsRBD(t *testing.T) {
	c, err := loadYAML([]byte(`
ports: [{transport: rdma, address: 10.255.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:rbd
    allow_any_host: true
    namespaces:
      - {nsid: 1, pool: rbd, image: disk1}
      - {nsid: 2, backend: rbd, pool: rbd, image: disk2, size: 1GiB, ceph_conf: /srv/ceph.conf, client: client.gw}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Namespace{
		{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "disk1", CephConf: "/etc/ceph/ceph.conf", Client: "admin", BlockSize: 512, ANAGroup: 1},
		{NSID: 2, Backend: BackendRBD, Pool: "rbd", Image: "disk2", Size: GiB, CephConf: "/srv/ceph.conf", Client: "client.gw", BlockSize: 512, ANAGroup: 1},
	}
	for i, w := range want {
		if got := c.Subsystems[0].Namespaces[i]; !reflect.DeepEqual(got, w) {
			t.Errorf("namespace %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
}

func hostsOf(nqns ...string) []Host {
	h := make([]Host, len(nqns))
	for i, n := range nqns {
		h[i] = Host{NQN: n}
	}
	return h
}
