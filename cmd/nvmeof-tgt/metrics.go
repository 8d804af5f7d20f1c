package main

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
)

// collector reads the target's atomic counters at scrape time, so the I/O
// path only ever increments integers.
type collector struct {
	tgt *fabric.Target
	rt  *rdma.Transport

	queues, controllers                        *prometheus.Desc
	connects, rejects, cmdErrors, kaExpired    *prometheus.Desc
	nsOps, nsBytes, nsErrors                   *prometheus.Desc
	rdmaConns, rdmaQueues, rdmaWaits, rdmaPoll *prometheus.Desc
	rdmaCompErrors, rdmaSendInv, rdmaIOUring   *prometheus.Desc
	rdmaPostCalls, rdmaWRs                     *prometheus.Desc
	rdmaAsyncEvents                            *prometheus.Desc
}

func newCollector(tgt *fabric.Target, rt *rdma.Transport) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("nvmeof_tgt_"+name, help, labels, nil)
	}
	return &collector{
		tgt: tgt, rt: rt,
		queues:          d("queues", "Host queues connected."),
		controllers:     d("controllers", "Controllers (admin queues) live."),
		connects:        d("connects_total", "Successful Fabrics Connect commands."),
		rejects:         d("connect_rejects_total", "Refused Fabrics Connect commands."),
		cmdErrors:       d("command_errors_total", "Commands completed with an error status."),
		kaExpired:       d("keepalive_expired_total", "Controllers deleted by keep-alive expiry."),
		nsOps:           d("namespace_ops_total", "Namespace commands by operation.", "subnqn", "nsid", "op"),
		nsBytes:         d("namespace_bytes_total", "Namespace data moved by direction.", "subnqn", "nsid", "op"),
		nsErrors:        d("namespace_errors_total", "Backend errors.", "subnqn", "nsid"),
		rdmaConns:       d("rdma_connections_total", "RDMA connection events.", "event"),
		rdmaQueues:      d("rdma_queues_live", "RDMA queue pairs live."),
		rdmaWaits:       d("rdma_resource_waits_total", "Requests that queued for a resource.", "resource"),
		rdmaPoll:        d("rdma_poller_sleeps_total", "Times a poller slept on its completion channel."),
		rdmaCompErrors:  d("rdma_completion_errors_total", "Work completions with an error other than flush."),
		rdmaSendInv:     d("rdma_send_with_invalidate_total", "Responses sent with remote invalidation."),
		rdmaIOUring:     d("rdma_io_uring_requests_total", "File and block-device requests run on a poller's io_uring."),
		rdmaPostCalls:   d("rdma_post_calls_total", "Calls that posted a poller round's work requests, for all its queues at once."),
		rdmaWRs:         d("rdma_work_requests_total", "Work requests (sends and receives) posted."),
		rdmaAsyncEvents: d("rdma_async_events_total", "Asynchronous events of the RDMA devices (QP and port errors, ...)."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ct := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	st := c.tgt.Stats()
	g(c.queues, float64(st.Queues))
	g(c.controllers, float64(st.Controllers))
	ct(c.connects, st.Connects)
	ct(c.rejects, st.ConnectRejects)
	ct(c.cmdErrors, st.Errors)
	ct(c.kaExpired, st.KAExpired)
	for _, s := range c.tgt.Subsystems() {
		for _, ns := range s.Namespaces() {
			n := ns.Stats()
			id := strconv.FormatUint(uint64(ns.NSID()), 10)
			ct(c.nsOps, n.ReadOps, s.NQN(), id, "read")
			ct(c.nsOps, n.WriteOps, s.NQN(), id, "write")
			ct(c.nsOps, n.FlushOps, s.NQN(), id, "flush")
			ct(c.nsOps, n.ZeroOps, s.NQN(), id, "write_zeroes")
			ct(c.nsOps, n.DiscardOps, s.NQN(), id, "deallocate")
			ct(c.nsBytes, n.ReadBytes, s.NQN(), id, "read")
			ct(c.nsBytes, n.WriteBytes, s.NQN(), id, "write")
			ct(c.nsErrors, n.Errors, s.NQN(), id)
		}
	}
	if c.rt == nil {
		return
	}
	r := c.rt.Stats()
	ct(c.rdmaConns, r.Accepted.Load(), "accepted")
	ct(c.rdmaConns, r.Rejected.Load(), "rejected")
	ct(c.rdmaConns, r.Disconnected.Load(), "disconnected")
	g(c.rdmaQueues, float64(r.QueuesLive.Load()))
	ct(c.rdmaWaits, r.BufferWaits.Load(), "buffer")
	ct(c.rdmaWaits, r.SendWaits.Load(), "send_credit")
	ct(c.rdmaWaits, r.ReadWaits.Load(), "read_credit")
	ct(c.rdmaPoll, r.PollSleeps.Load())
	ct(c.rdmaCompErrors, r.CompletionErrors.Load())
	ct(c.rdmaSendInv, r.SendWithInvalidate.Load())
	ct(c.rdmaIOUring, r.IOUringRequests.Load())
	ct(c.rdmaPostCalls, r.PostCalls.Load())
	ct(c.rdmaWRs, r.WorkRequests.Load())
	ct(c.rdmaAsyncEvents, r.AsyncEvents.Load())
}
