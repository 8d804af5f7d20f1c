package main

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvmeof-tgt/nvmeof-tgt/control"
)

// groupCollector is a gateway's metrics of its group, read from the
// manager's view at scrape time.
type groupCollector struct {
	status                                    func() *control.GroupStatus
	version, ok, fenced, members, alive       *prometheus.Desc
	unread, degraded                          *prometheus.Desc
	failovers, conflicts, stateErrs, leaseAge *prometheus.Desc
	owner                                     *prometheus.Desc
}

func newGroupCollector(status func() *control.GroupStatus) *groupCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("nvmeof_tgt_group_"+name, help, append([]string{"group"}, labels...), nil)
	}
	return &groupCollector{status: status,
		version:   d("version", "The version of the group's state this gateway last read."),
		ok:        d("state_ok", "1 while the group's state reads and decodes, 0 while it does not (the gateway serves what it served and refuses changes)."),
		fenced:    d("fenced", "1 once another gateway blocklisted this one."),
		degraded:  d("degraded", "How many parts of the group's state (subsystems; or its ports and ANA states) this gateway could not apply at its last try: it serves the rest (status names them and why)."),
		unread:    d("state_unread", "1 while this gateway refuses I/O on the group's namespaces and reports its groups inaccessible: it could not read a change another gateway announced, or cannot reach the cluster."),
		members:   d("members", "Gateways known in the group."),
		alive:     d("members_alive", "Gateways holding their lease, as this one sees them."),
		failovers: d("failovers_total", "Dead gateways this one fenced and took the ANA group of."),
		conflicts: d("conflicts_total", "Changes through this gateway that lost a compare-and-swap to another gateway's and were made again."),
		stateErrs: d("state_errors_total", "Reads of the group's state that failed (unreachable, or corrupt), each distinct failure once."),
		leaseAge:  d("lease_age_seconds", "How long ago each gateway last renewed its lease, as this one sees it.", "gateway"),
		owner:     d("ana_owner", "The gateway whose ports report each ANA group optimized; 0 for none.", "ana_group"),
	}
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.version, c.ok, c.unread, c.degraded, c.fenced, c.members, c.alive, c.failovers, c.conflicts, c.stateErrs, c.leaseAge, c.owner} {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.status()
	if g == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{g.Name}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), g.Name)
	}
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	gauge(c.version, float64(g.Version))
	gauge(c.ok, b(g.Error == ""))
	gauge(c.fenced, b(g.Fenced))
	gauge(c.unread, b(g.Unread != ""))
	gauge(c.degraded, float64(len(g.Degraded)))
	gauge(c.members, float64(len(g.Members)))
	alive := 0
	for _, m := range g.Members {
		if m.Alive {
			alive++
		}
		gauge(c.leaseAge, m.LeaseAge.Seconds(), strconv.Itoa(m.ID))
	}
	gauge(c.alive, float64(alive))
	counter(c.failovers, g.Failovers)
	counter(c.conflicts, g.Conflicts)
	counter(c.stateErrs, g.StateErrors)
	for grp, owner := range g.Owners {
		gauge(c.owner, float64(owner), grp)
	}
}
