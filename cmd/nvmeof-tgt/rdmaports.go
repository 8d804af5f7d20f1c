package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// portCounter is one file of a port's counters/ or hw_counters/ directory.
type portCounter struct {
	device, port, group, name string
	value                     uint64
}

// portCounterGroups are the sysfs directories of a port read at scrape:
// counters/ holds the InfiniBand PMA counters perfquery shows (absent on
// rxe), hw_counters/ the driver's own (what `ethtool -S` and rdma statistic
// show; rxe's sent_pkts, rcvd_pkts, ...).
var portCounterGroups = []string{"counters", "hw_counters"}

// readPortCounters reads every port counter of every RDMA device under root
// (/sys/class/infiniband). What cannot be read or parsed is skipped: some
// drivers fail reads of counters their hardware lacks, and a machine without
// RDMA has no root at all.
func readPortCounters(root string) []portCounter {
	var out []portCounter
	devs, _ := os.ReadDir(root)
	for _, dev := range devs {
		portsDir := filepath.Join(root, dev.Name(), "ports")
		ports, _ := os.ReadDir(portsDir)
		for _, port := range ports {
			for _, group := range portCounterGroups {
				dir := filepath.Join(portsDir, port.Name(), group)
				files, _ := os.ReadDir(dir)
				for _, f := range files {
					// lifespan is how long hw_counters values are cached (ms), not a counter.
					if f.IsDir() || f.Name() == "lifespan" {
						continue
					}
					b, err := os.ReadFile(filepath.Join(dir, f.Name()))
					if err != nil {
						continue
					}
					v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
					if err != nil {
						continue
					}
					out = append(out, portCounter{device: dev.Name(), port: port.Name(), group: group, name: f.Name(), value: v})
				}
			}
		}
	}
	return out
}

// portCollector exports the RDMA ports' hardware counters, read from sysfs
// at scrape time.
//
// They are one metric with the file as a label, not a metric per file: the
// files are the driver's, so names made from them would pass or fail
// promtool's naming checks by hardware. The name avoids the word "counter",
// which promtool rejects in a metric's name (it is the type).
type portCollector struct {
	root string
	desc *prometheus.Desc
}

func newPortCollector(root string) *portCollector {
	return &portCollector{root: root, desc: prometheus.NewDesc("nvmeof_tgt_rdma_port_stat_total",
		"RDMA port hardware counters as sysfs shows them (ports/<port>/<group>/<counter>); "+
			"counters/port_xmit_data and port_rcv_data are in units of 4 octets, as in perfquery.",
		[]string{"device", "port", "group", "counter"}, nil)}
}

func (c *portCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *portCollector) Collect(ch chan<- prometheus.Metric) {
	for _, pc := range readPortCounters(c.root) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(pc.value), pc.device, pc.port, pc.group, pc.name)
	}
}
