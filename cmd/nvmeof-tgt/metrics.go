package main

import (
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

// sysInfiniband is where the kernel lists RDMA devices and their ports.
const sysInfiniband = "/sys/class/infiniband"

// newRegistry is everything /metrics serves: the Go runtime, the process,
// the target and transport, and the RDMA ports' hardware counters under
// ibRoot (sysInfiniband, or a fake tree in tests).
//
// rt returns the RDMA transport, or nil before there is one: it is made
// with the first rdma port, which the management API may add later; tt the
// TCP transport likewise.
func newRegistry(tgt *fabric.Target, rt func() *rdma.Transport, tt func() *tcp.Transport, ibRoot string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCollector(tgt, rt, tt), newPortCollector(ibRoot))
	return reg
}

// metricsHandler serves reg at /metrics; tests scrape it the same way.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// latencyBounds are the histogram's upper bounds in seconds, fabric's
// fixed buckets.
var latencyBounds = func() []float64 {
	b := make([]float64, fabric.LatencyBuckets)
	for i := range b {
		b[i] = fabric.LatencyBound(i).Seconds()
	}
	return b
}()

// latencyOps names fabric's latency histograms by their index.
var latencyOps = [fabric.LatOps]string{fabric.LatRead: "read", fabric.LatWrite: "write", fabric.LatFlush: "flush"}

// buildLabels are build_info's labels, from readBuildInfo (version.go):
// the version shown to people, the Go version, and the commit ("-dirty" when
// the tree had changes; "unknown" when nothing recorded it).
func buildLabels() (ver, goVer, commit string) {
	b := readBuildInfo()
	commit = b.Revision
	switch {
	case commit == "":
		commit = "unknown"
	case b.Modified:
		commit += "-dirty"
	}
	return b.String(), b.GoVersion, commit
}

// collector reads the target's atomic counters at scrape time, so the I/O
// path only ever increments integers.
type collector struct {
	tgt *fabric.Target
	rt  func() *rdma.Transport
	tt  func() *tcp.Transport

	buildInfo                                  *prometheus.Desc
	version, goVersion, commit                 string
	queues, controllers, ctrlStates            *prometheus.Desc
	portUp                                     *prometheus.Desc
	nsLatency, nsCapacity, nsBlockSize         *prometheus.Desc
	connects, rejects, cmdErrors, kaExpired    *prometheus.Desc
	auth                                       *prometheus.Desc
	hostLimit                                  *prometheus.Desc
	nsOps, nsBytes, nsErrors                   *prometheus.Desc
	nsBusy                                     *prometheus.Desc
	nsQoSLimit, nsQoSHeld, nsQoSHeldTotal      *prometheus.Desc
	nsQoSWait, nsQoSHostWait                   *prometheus.Desc
	rdmaConns, rdmaQueues, rdmaWaits, rdmaPoll *prometheus.Desc
	rdmaWakeups                                *prometheus.Desc
	rdmaCompErrors, rdmaSendInv, rdmaIOUring   *prometheus.Desc
	rdmaPostCalls, rdmaWRs                     *prometheus.Desc
	rdmaAsyncEvents, rdmaBuffersInUse          *prometheus.Desc
	rdmaDeviceRemovals                         *prometheus.Desc
	rdmaRegistered, rdmaSRQLimit               *prometheus.Desc
	rdmaSRQErrors, rdmaSRQPosted, rdmaSRQHeld  *prometheus.Desc
	rdmaSRQEmpty, rdmaSRQLastWQETimeouts       *prometheus.Desc
	rdmaSRQOverflow, rdmaSRQMoved              *prometheus.Desc
	rdmaSRQOverflowFull                        *prometheus.Desc
	tcpConns, tcpLive, tcpICReqTimeouts        *prometheus.Desc
	tcpTermReqs, tcpDigestErrors               *prometheus.Desc
	tcpBufferWaits, tcpBufferBytes             *prometheus.Desc
	tcpSendTimeouts, tcpDataTimeouts           *prometheus.Desc
	tcpDataOnlyReads                           *prometheus.Desc
	tcpSends                                   *prometheus.Desc
}

func newCollector(tgt *fabric.Target, rt func() *rdma.Transport, tt func() *tcp.Transport) *collector {
	share := strconv.Itoa(limits.RDMASRQQueueShare)
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("nvmeof_tgt_"+name, help, labels, nil)
	}
	c := &collector{
		tgt: tgt, rt: rt, tt: tt,
		buildInfo:   d("build_info", "Always 1: the target's version, the Go version it was built with and its VCS commit.", "version", "goversion", "commit"),
		queues:      d("queues", "Host queues connected."),
		controllers: d("controllers", "Controllers (admin queues) live."),
		ctrlStates:  d("controllers_by_state", "Live controllers by subsystem and CC/CSTS state.", "subnqn", "state"),
		portUp:      d("port_up", "1 while the port accepts connections, 0 while it is down (its RDMA device was removed; it listens again once the address is usable).", "transport", "address", "port"),
		nsLatency:   d("namespace_latency_seconds", "Read, write and flush latency in the target: from the command's parse (before buffer waits and a write's RDMA READ) to its response being queued.", "subnqn", "nsid", "op"),
		nsCapacity:  d("namespace_capacity_bytes", "Namespace size.", "subnqn", "nsid"),
		nsBlockSize: d("namespace_block_size_bytes", "Namespace logical block size.", "subnqn", "nsid"),
		connects:    d("connects_total", "Successful Fabrics Connect commands."),
		hostLimit:   d("connect_host_limit_total", "Fabrics Connect commands refused because the host had controller.max_connections_per_host queues (also in connect_rejects_total)."),
		rejects:     d("connect_rejects_total", "Refused Fabrics Connect commands."),
		cmdErrors:   d("command_errors_total", "Commands completed with an error status."),
		kaExpired:   d("keepalive_expired_total", "Controllers deleted by keep-alive expiry."),
		auth:        d("auth_total", "In-band authentication (DH-HMAC-CHAP) outcomes: queues authenticated, transactions failed, queues disconnected for not authenticating in time.", "result"),
		nsOps:       d("namespace_ops_total", "Namespace commands by operation.", "subnqn", "nsid", "op"),
		nsBytes:     d("namespace_bytes_total", "Namespace data moved by direction.", "subnqn", "nsid", "op"),
		nsErrors:    d("namespace_errors_total", "Backend errors.", "subnqn", "nsid"),
		nsBusy:      d("namespace_busy_total", "Commands refused for the host to retry: too many waiting for the namespace's workers.", "subnqn", "nsid"),
		nsQoSLimit: d("namespace_qos_limit", "A namespace's QoS limit, per second (bytes for the bandwidths): scope namespace (all hosts), per_host (the default) or host (hostnqn's own).",
			"subnqn", "nsid", "scope", "hostnqn", "limit"),
		nsQoSHeld:              d("namespace_qos_held", "Commands a namespace's QoS holds now.", "subnqn", "nsid"),
		nsQoSHeldTotal:         d("namespace_qos_held_total", "Commands a namespace's QoS held.", "subnqn", "nsid"),
		nsQoSWait:              d("namespace_qos_wait_seconds_total", "Time commands were held by a namespace's QoS.", "subnqn", "nsid"),
		nsQoSHostWait:          d("namespace_qos_host_wait_seconds_total", "Time a host's commands were held by a namespace's QoS.", "subnqn", "nsid", "hostnqn"),
		rdmaConns:              d("rdma_connections_total", "RDMA connection events.", "event"),
		rdmaQueues:             d("rdma_queues_live", "RDMA queue pairs live."),
		rdmaWaits:              d("rdma_resource_waits_total", "Requests that queued for a resource.", "resource"),
		rdmaPoll:               d("rdma_poller_sleeps_total", "Times a poller slept on its completion channel."),
		rdmaWakeups:            d("rdma_poller_wakeups_total", "Times a poller woke from a sleep on its completion channel."),
		rdmaCompErrors:         d("rdma_completion_errors_total", "Work completions with an error other than flush."),
		rdmaSendInv:            d("rdma_send_with_invalidate_total", "Responses sent with remote invalidation."),
		rdmaIOUring:            d("rdma_io_uring_requests_total", "File, block-device and RBD requests run on a poller's ring (io_uring, librbd's completion queue)."),
		rdmaPostCalls:          d("rdma_post_calls_total", "Calls that posted a poller round's work requests, for all its queues at once."),
		rdmaWRs:                d("rdma_work_requests_total", "Work requests (sends and receives) posted."),
		rdmaAsyncEvents:        d("rdma_async_events_total", "Asynchronous events of the RDMA devices (QP and port errors, ...)."),
		rdmaBuffersInUse:       d("rdma_buffers_in_use", "Data buffers (rdma.io_unit_size each) out of the pools: held by requests, or by queues until their QP is destroyed."),
		rdmaDeviceRemovals:     d("rdma_device_removals_total", "RDMA devices removed under the target (rdma_cm DEVICE_REMOVAL, IBV_EVENT_DEVICE_FATAL, or their user-verbs node gone): their queues torn down and the devices released."),
		rdmaRegistered:         d("rdma_registered_bytes", "Memory the open RDMA devices registered at start: receive buffers, responses and data buffers. With a shared receive queue per poller (rdma.srq) it does not grow with the connections."),
		rdmaSRQLimit:           d("rdma_srq_limit_events_total", "Times a poller's shared receive queue ran low (IBV_EVENT_SRQ_LIMIT_REACHED) and was given the receive buffers it had spare."),
		rdmaSRQErrors:          d("rdma_srq_errors_total", "Times a poller's shared receive queue failed (IBV_EVENT_SRQ_ERR): every queue on the poller was torn down, for its host to reconnect."),
		rdmaSRQPosted:          d("rdma_srq_posted", "Receive buffers posted to a poller's shared receive queue (or taken by a QP and not yet reported).", "device", "poller"),
		rdmaSRQEmpty:           d("rdma_srq_empty_total", "Receives that left a poller's shared receive queue with none posted: the next command capsule on the poller meets an RNR NAK, and rxe flushes a QP whose retries run out. If it grows, the hosts' queues at full depth outnumber the buffers: add pollers (rdma.pollers) or lower the hosts' queue depth.", "device", "poller"),
		rdmaSRQLastWQETimeouts: d("rdma_srq_last_wqe_timeouts_total", "QPs of torn-down queues on a shared receive queue destroyed without IBV_EVENT_QP_LAST_WQE_REACHED, after waiting 5 s for it."),
		rdmaSRQHeld:            d("rdma_srq_held", "Receive buffers of a poller's shared receive queue bound to queues: command capsules their requests or parked capsules hold. 0 once every host has left.", "device", "poller"),
		rdmaSRQOverflow:        d("rdma_srq_overflow_held", "Overflow buffers of a poller's shared receive queue holding command capsules: those that landed on a queue holding its share of the SRQ's buffers ("+share+") were copied there, their SRQ buffers posted again. 0 once every host has left.", "device", "poller"),
		rdmaSRQMoved:           d("rdma_srq_moved_total", "Command capsules copied from a poller's shared receive queue to its overflow: their queue held its share of the SRQ's buffers ("+share+"): commands running long, or more than that out.", "device", "poller"),
		rdmaSRQOverflowFull:    d("rdma_srq_overflow_full_total", "Command capsules that kept their SRQ buffer past their queue's share because the poller's overflow was full: the hosts' commands out outnumber the SRQ's buffers twice. If it grows, add pollers (rdma.pollers) or lower the hosts' queue depth.", "device", "poller"),
		tcpConns:               d("tcp_connections_total", "NVMe/TCP connections: accepted, refused at once for tcp.max_connections or tcp.max_connections_per_address, closed.", "event"),
		tcpLive:                d("tcp_connections_live", "NVMe/TCP connections open (each one queue once initialized), or closed with commands still in the backends."),
		tcpICReqTimeouts:       d("tcp_icreq_timeouts_total", "NVMe/TCP connections closed for sending no ICReq within tcp.icreq_timeout."),
		tcpTermReqs:            d("tcp_termination_requests_total", "NVMe/TCP termination requests: sent to hosts for a fatal error of theirs (C2HTermReq), received from hosts (H2CTermReq).", "direction"),
		tcpDigestErrors:        d("tcp_digest_errors_total", "NVMe/TCP PDUs whose CRC32C did not match: a header digest error ends the connection, a data digest error fails its command.", "digest"),
		tcpBufferWaits:         d("tcp_buffer_waits_total", "NVMe/TCP commands that waited for data buffers (tcp.buffer_pool_size reached)."),
		tcpBufferBytes:         d("tcp_buffer_bytes", "NVMe/TCP data buffer bytes held by commands."),
		tcpSendTimeouts:        d("tcp_send_timeouts_total", "NVMe/TCP connections closed because their host took nothing sent for 30 s."),
		tcpDataOnlyReads:       d("tcp_data_only_reads_total", "NVMe/TCP reads answered by their data alone (C2HData with the SUCCESS flag, no response capsule), for hosts that disabled SQ flow control."),
		tcpSends:               d("tcp_sends_total", "NVMe/TCP vectored writes of PDUs, by who sent them: a connection's reader, before its next read (no hand-off), or its writer (what completed while the reader waited).", "by"),
		tcpDataTimeouts:        d("tcp_data_timeouts_total", "NVMe/TCP connections closed because their host sent no data for its R2Ts for 30 s (holding their buffers)."),
	}
	c.version, c.goVersion, c.commit = buildLabels()
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ct := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	g(c.buildInfo, 1, c.version, c.goVersion, c.commit)
	st := c.tgt.Stats()
	g(c.queues, float64(st.Queues))
	g(c.controllers, float64(st.Controllers))
	subs := c.tgt.Subsystems()
	// The full slice expression keeps the append off subs' array.
	for _, s := range append(subs[:len(subs):len(subs)], c.tgt.Subsystem(nvme.DiscoveryNQN)) {
		// Every state, zeros too: the label set is fixed and graphs need
		// no absent() juggling.
		n := s.ControllerStates()
		for state, v := range n {
			g(c.ctrlStates, float64(v), s.NQN(), fabric.ControllerState(state).String())
		}
	}
	for _, p := range c.tgt.Ports() {
		up := 1.0
		if ps, ok := c.tgt.PortState(p.ID); ok && ps.Down {
			up = 0
		}
		g(c.portUp, up, p.Transport, p.Address, p.Service)
	}
	ct(c.connects, st.Connects)
	ct(c.rejects, st.ConnectRejects)
	ct(c.hostLimit, st.HostLimitRejects)
	ct(c.cmdErrors, st.Errors)
	ct(c.kaExpired, st.KAExpired)
	ct(c.auth, st.AuthSucceeded, "success")
	ct(c.auth, st.AuthFailed, "failure")
	ct(c.auth, st.AuthTimeouts, "timeout")
	for _, s := range subs {
		for _, ns := range s.Namespaces() {
			n := ns.Stats()
			id := strconv.FormatUint(uint64(ns.NSID()), 10)
			size, bs := ns.Capacity()
			g(c.nsCapacity, float64(size), s.NQN(), id)
			g(c.nsBlockSize, float64(bs), s.NQN(), id)
			for op, h := range n.Latency {
				ch <- latencyHistogram(c.nsLatency, &h, s.NQN(), id, latencyOps[op])
			}
			ct(c.nsOps, n.ReadOps, s.NQN(), id, "read")
			ct(c.nsOps, n.WriteOps, s.NQN(), id, "write")
			ct(c.nsOps, n.FlushOps, s.NQN(), id, "flush")
			ct(c.nsOps, n.ZeroOps, s.NQN(), id, "write_zeroes")
			ct(c.nsOps, n.DiscardOps, s.NQN(), id, "deallocate")
			ct(c.nsBytes, n.ReadBytes, s.NQN(), id, "read")
			ct(c.nsBytes, n.WriteBytes, s.NQN(), id, "write")
			ct(c.nsErrors, n.Errors, s.NQN(), id)
			ct(c.nsBusy, n.WorkersFull, s.NQN(), id)
			c.collectQoS(ch, s.NQN(), id, ns)
		}
	}
	if tt := c.tt(); tt != nil {
		c.collectTCP(ch, tt.Stats())
	}
	rt := c.rt()
	if rt == nil {
		return
	}
	r := rt.Stats()
	ct(c.rdmaConns, r.Accepted.Load(), "accepted")
	ct(c.rdmaConns, r.Rejected.Load(), "rejected")
	ct(c.rdmaConns, r.Disconnected.Load(), "disconnected")
	g(c.rdmaQueues, float64(r.QueuesLive.Load()))
	ct(c.rdmaWaits, r.BufferWaits.Load(), "buffer")
	ct(c.rdmaWaits, r.ShareWaits.Load(), "buffer_share")
	ct(c.rdmaWaits, r.SendWaits.Load(), "send_credit")
	ct(c.rdmaWaits, r.ReadWaits.Load(), "read_credit")
	ct(c.rdmaPoll, r.PollSleeps.Load())
	ct(c.rdmaWakeups, r.PollWakeups.Load())
	ct(c.rdmaCompErrors, r.CompletionErrors.Load())
	ct(c.rdmaSendInv, r.SendWithInvalidate.Load())
	ct(c.rdmaIOUring, r.IOUringRequests.Load())
	ct(c.rdmaPostCalls, r.PostCalls.Load())
	ct(c.rdmaWRs, r.WorkRequests.Load())
	ct(c.rdmaAsyncEvents, r.AsyncEvents.Load())
	g(c.rdmaBuffersInUse, float64(r.BuffersInUse.Load()))
	ct(c.rdmaDeviceRemovals, r.DeviceRemovals.Load())
	g(c.rdmaRegistered, float64(r.RegisteredBytes.Load()))
	ct(c.rdmaSRQLimit, r.SRQLimitEvents.Load())
	ct(c.rdmaSRQErrors, r.SRQErrors.Load())
	ct(c.rdmaSRQLastWQETimeouts, r.SRQLastWQETimeouts.Load())
	for _, s := range rt.SRQStats() {
		p := strconv.Itoa(s.Poller)
		g(c.rdmaSRQPosted, float64(s.Posted), s.Device, p)
		g(c.rdmaSRQHeld, float64(s.Held), s.Device, p)
		ct(c.rdmaSRQEmpty, s.Empty, s.Device, p)
		g(c.rdmaSRQOverflow, float64(s.Overflow), s.Device, p)
		ct(c.rdmaSRQMoved, s.Moved, s.Device, p)
		ct(c.rdmaSRQOverflowFull, s.OverflowFull, s.Device, p)
	}
}

// collectQoS reports a namespace's QoS: its limits, and what they held.
// A namespace that never had any has no series.
func (c *collector) collectQoS(ch chan<- prometheus.Metric, sub, id string, ns *fabric.Namespace) {
	cfg, st := ns.QoS(), ns.QoSStats()
	if cfg.IsZero() && st.HeldTotal == 0 {
		return
	}
	limits := func(scope, host string, l fabric.QoSLimits) {
		for _, kv := range []struct {
			name string
			v    uint64
		}{{"iops", l.IOPS}, {"read_iops", l.ReadIOPS}, {"write_iops", l.WriteIOPS}, {"bw", l.BW}, {"read_bw", l.ReadBW}, {"write_bw", l.WriteBW}} {
			if kv.v != 0 {
				ch <- prometheus.MustNewConstMetric(c.nsQoSLimit, prometheus.GaugeValue, float64(kv.v), sub, id, scope, host, kv.name)
			}
		}
	}
	limits("namespace", "", cfg.Limits)
	limits("per_host", "", cfg.PerHost)
	for _, h := range slices.Sorted(maps.Keys(cfg.Hosts)) {
		limits("host", h, cfg.Hosts[h])
	}
	ch <- prometheus.MustNewConstMetric(c.nsQoSHeld, prometheus.GaugeValue, float64(st.Held), sub, id)
	ch <- prometheus.MustNewConstMetric(c.nsQoSHeldTotal, prometheus.CounterValue, float64(st.HeldTotal), sub, id)
	ch <- prometheus.MustNewConstMetric(c.nsQoSWait, prometheus.CounterValue, st.Waited.Seconds(), sub, id)
	for h, hs := range st.Hosts {
		ch <- prometheus.MustNewConstMetric(c.nsQoSHostWait, prometheus.CounterValue, hs.Waited.Seconds(), sub, id, h)
	}
}

// collectTCP reports the TCP transport's counters.
func (c *collector) collectTCP(ch chan<- prometheus.Metric, s *tcp.Stats) {
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ct := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	ct(c.tcpConns, s.Accepted.Load(), "accepted")
	ct(c.tcpConns, s.Refused.Load(), "refused")
	ct(c.tcpConns, s.Closed.Load(), "closed")
	g(c.tcpLive, float64(s.Live.Load()))
	ct(c.tcpICReqTimeouts, s.ICReqTimeouts.Load())
	ct(c.tcpTermReqs, s.TermReqsSent.Load(), "sent")
	ct(c.tcpTermReqs, s.TermReqsReceived.Load(), "received")
	ct(c.tcpDigestErrors, s.HeaderDigestErrors.Load(), "header")
	ct(c.tcpDigestErrors, s.DataDigestErrors.Load(), "data")
	ct(c.tcpBufferWaits, s.BufferWaits.Load())
	g(c.tcpBufferBytes, float64(s.BufferBytes.Load()))
	ct(c.tcpSendTimeouts, s.SendTimeouts.Load())
	ct(c.tcpDataTimeouts, s.DataTimeouts.Load())
	ct(c.tcpDataOnlyReads, s.DataOnlyReads.Load())
	ct(c.tcpSends, s.ReaderSends.Load(), "reader")
	ct(c.tcpSends, s.WriterSends.Load(), "writer")
}

// latencyHistogram turns fabric's per-bucket counts into Prometheus's
// cumulative ones.
func latencyHistogram(d *prometheus.Desc, h *fabric.LatencyHistogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(latencyBounds))
	var n uint64
	for i, le := range latencyBounds {
		n += h.Buckets[i]
		buckets[le] = n
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), h.Sum.Seconds(), buckets, labels...)
}
