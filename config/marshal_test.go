package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMarshalRoundTrip: what Marshal writes loads back to the same
// configuration, zero-valued settings included.
func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"example", exampleYAML},
		{"default", string(Default())},
		{"every kind of value", `
ports:
  - {transport: rdma, address: "::", port: 4421}
  - {transport: rdma, address: 10.0.0.2}
subsystems:
  - nqn: "nqn.2026-11.io.example:a"
    hosts: ["nqn.2014-08.org.nvmexpress:uuid:4f0e2c1a-0000-4000-8000-000000000001", "nqn.2026-11.io.example:h2"]
    serial: "true"
    model: "0123"
    namespaces:
      - {nsid: 7, backend: memory, size: 3MiB, block_size: 4096, read_only: true}
      - {nsid: 8, path: /tmp/x.img, size: 1024, buffered_io: true, uuid: 4f0e2c1a-0000-4000-8000-000000000009}
      - {nsid: 9, backend: memory, size: 1MiB, nguid: "00112233445566778899001122334455", eui64: "0011223344556677"}
      - {nsid: 10, backend: memory, size: 1MiB, nguid: none}
      - nsid: 11
        backend: memory
        size: 1MiB
        hosts: ["nqn.2014-08.org.nvmexpress:uuid:4f0e2c1a-0000-4000-8000-000000000001"]
        qos: {iops: 10000, read_bw: 100MB, write_bw: 1GiB}
        qos_per_host:
          default: {write_iops: 500, bw: 10MiB}
          hosts:
            - {nqn: "nqn.2026-11.io.example:h2", read_iops: 7}
            - {nqn: "nqn.2026-11.io.example:h3"}
  - {nqn: "nqn.2026-11.io.example:b", allow_any_host: true}
rdma:
  poll_nap: 0s
  poll_idle: 0s
  io_uring: "off"
controller: {kato_max: 90s}
metrics: {listen: "", pprof: true}
log: {level: debug, format: json}
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := loadYAML([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := loadYAML(out)
			if err != nil {
				t.Fatalf("load what Marshal wrote: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the configuration\nwrote:\n%s\ngot  %+v\nwant %+v", out, got, want)
			}
		})
	}
}

// TestMarshalZeroSettings: a zero in a scalar section is written, since
// leaving it out would bring back the default.
func TestMarshalZeroSettings(t *testing.T) {
	c, err := loadYAML([]byte(exampleYAML + "\nrdma: {poll_nap: 0s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RDMA.PollNap != 0 {
		t.Fatalf("poll_nap %v", c.RDMA.PollNap)
	}
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "poll_nap: 0s") {
		t.Fatalf("poll_nap: 0s not written:\n%s", out)
	}
}

// TestClone: changing a clone leaves the original alone.
func TestClone(t *testing.T) {
	c, err := loadYAML([]byte(exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := Marshal(c)
	d := c.Clone()
	d.Ports[0].Port = 1
	d.Subsystems[0].Hosts = append(d.Subsystems[0].Hosts, Host{NQN: "h"})
	d.Subsystems[0].Namespaces[0].Size = 1
	d.Controller.KeepAliveTimeoutMax = time.Second
	if after, _ := Marshal(c); string(after) != string(orig) {
		t.Fatalf("the original changed:\n%s", after)
	}
}
