package rdma

import (
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := fabric.TransportLimits{MDTS: fabric.DefaultMDTS, MaxQueueDepth: fabric.DefaultMaxQueueDepth, MaxIOQueues: fabric.DefaultMaxIOQueues}
	if got := c.Limits(); got != want {
		t.Errorf("default limits = %+v, want %+v", got, want)
	}
}

func TestConfigLimits(t *testing.T) {
	c := Config{InCapsuleDataSize: 4096, MaxQueueDepth: 256, MaxIOQueueID: 8, MDTS: 2 << 20}
	tr := &Transport{cfg: c}
	want := fabric.TransportLimits{MDTS: 2 << 20, MaxQueueDepth: 256, MaxIOQueues: 8, InCapsuleDataSize: 4096}
	if got := tr.Limits(); got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"in-capsule data at the bound", func(c *Config) { c.InCapsuleDataSize = InCapsuleDataSizeMax }, ""},
		{"in-capsule data above the bound", func(c *Config) { c.InCapsuleDataSize = InCapsuleDataSizeMax + 16 }, "in-capsule"},
		{"in-capsule data not in 16-byte units", func(c *Config) { c.InCapsuleDataSize = 100 }, "in-capsule"},
		{"queue depth at the minimum", func(c *Config) { c.MaxQueueDepth = QueueDepthMin }, ""},
		{"queue depth below the minimum", func(c *Config) { c.MaxQueueDepth = QueueDepthMin - 1 }, "max queue depth"},
		{"queue depth above the maximum", func(c *Config) { c.MaxQueueDepth = QueueDepthMax + 1 }, "max queue depth"},
		{"I/O queue ID above the maximum", func(c *Config) { c.MaxIOQueueID = IOQueuesMax + 1 }, "max I/O queue ID"},
		{"io unit below the minimum", func(c *Config) { c.IOUnitSize = IOUnitSizeMin / 2 }, "io unit"},
		{"mdts below the io unit", func(c *Config) { c.MDTS = DefaultIOUnitSize / 2 }, "mdts"},
		{"pool below mdts", func(c *Config) { c.BufferPoolSize = fabric.DefaultMDTS / 2 }, "buffer pool"},
		{"bad mode", func(c *Config) { c.IOUring = "sometimes" }, "io_uring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			tt.mod(&c)
			c.setDefaults()
			err := c.validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate: %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// TestSRQStatsSkipsRemoved: a removed device still being released is not
// reported: a device of the same name added back would give duplicate
// {device, poller} series, which the metrics endpoint answers with a 500.
func TestSRQStatsSkipsRemoved(t *testing.T) {
	mk := func(removed bool, posted int64) *device {
		d := &device{attr: verbs.DeviceAttr{Name: "rxe0"}}
		e := &engine{srq: newSharedRecv(srqConfig{n: 8})}
		e.srq.gPosted.Store(posted)
		d.pollers = []*poller{{idx: 0, e: e}}
		if removed {
			d.removed = true
			d.gone.Store(true)
		}
		return d
	}
	tr := &Transport{devices: map[uintptr]*device{1: mk(true, 3), 2: mk(false, 8)}}
	got := tr.SRQStats()
	if want := []SRQStat{{Device: "rxe0", Poller: 0, Posted: 8}}; !slices.Equal(got, want) {
		t.Fatalf("SRQStats = %+v, want %+v", got, want)
	}
}
