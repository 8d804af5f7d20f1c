package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

const testSubNQN = "nqn.2026-11.io.example:metrics"

// fakeIB writes a sysfs-like tree of RDMA port counters under a temporary
// directory: files maps "dev/port/group/name" to contents.
func fakeIB(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, v := range files {
		dev, rest, _ := strings.Cut(rel, "/")
		p := filepath.Join(root, dev, "ports", rest)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadPortCounters(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []portCounter
	}{
		{"no rdma", nil, nil},
		{"rxe: hw_counters only", map[string]string{
			"rxe0/1/hw_counters/sent_pkts": "12\n",
			"rxe0/1/hw_counters/rcvd_pkts": "34\n",
			"rxe0/1/hw_counters/lifespan":  "10\n", // a setting, not a counter
		}, []portCounter{
			{"rxe0", "1", "hw_counters", "rcvd_pkts", 34},
			{"rxe0", "1", "hw_counters", "sent_pkts", 12},
		}},
		{"ib: both groups, two ports, one name in both", map[string]string{
			"mlx5_0/1/counters/port_xmit_data":  "1000\n",
			"mlx5_0/1/counters/link_downed":     "0\n",
			"mlx5_0/1/hw_counters/link_downed":  "1\n",
			"mlx5_0/2/counters/port_rcv_data":   "18446744073709551615\n",
			"mlx5_0/2/hw_counters/out_of_range": "N/A\n", // unreadable values are skipped
		}, []portCounter{
			{"mlx5_0", "1", "counters", "link_downed", 0},
			{"mlx5_0", "1", "counters", "port_xmit_data", 1000},
			{"mlx5_0", "1", "hw_counters", "link_downed", 1},
			{"mlx5_0", "2", "counters", "port_rcv_data", math.MaxUint64},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readPortCounters(fakeIB(t, tc.files))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := readPortCounters(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Errorf("missing root: %+v, want nothing", got)
	}
}

// oneMetric collects a single prebuilt metric.
type oneMetric struct{ m prometheus.Metric }

func (o oneMetric) Describe(ch chan<- *prometheus.Desc) { ch <- o.m.Desc() }
func (o oneMetric) Collect(ch chan<- prometheus.Metric) { ch <- o.m }

func TestLatencyHistogramMetric(t *testing.T) {
	var h fabric.LatencyHistogram
	h.Buckets[0] = 2
	h.Buckets[3] = 1
	h.Buckets[fabric.LatencyBuckets] = 4 // overflow: only in the count
	h.Sum = 3 * time.Second
	reg := prometheus.NewRegistry()
	reg.MustRegister(oneMetric{latencyHistogram(prometheus.NewDesc("x", "x", nil, nil), &h)})
	got := gather(t, reg)
	want := map[string]float64{"x_count": 7, "x_sum": 3, `x_bucket{le="+Inf"}`: 7}
	for i := range fabric.LatencyBuckets {
		n := 2.0
		if i >= 3 {
			n = 3
		}
		want[fmt.Sprintf(`x_bucket{le="%s"}`, strconv.FormatFloat(fabric.LatencyBound(i).Seconds(), 'g', -1, 64))] = n
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// testTarget is a target with one memory namespace on a loop port, with a
// connected, enabled controller that ran reads and writes.
func testTarget(t *testing.T, reads, writes int) *fabric.Target {
	t.Helper()
	tgt := fabric.NewTarget(fabric.Options{})
	t.Cleanup(func() { tgt.Close() })
	sub, err := tgt.AddSubsystem(fabric.SubsystemConfig{NQN: testSubNQN, AllowAnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := blockdev.NewMemory(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.AddNamespace(fabric.NamespaceConfig{NSID: 3, Device: dev, QoS: fabric.QoSConfig{
		Limits: fabric.QoSLimits{IOPS: 100000, ReadBW: 1 << 30}, PerHost: fabric.QoSLimits{WriteIOPS: 50000},
		Hosts: map[string]fabric.QoSLimits{"nqn.2026-11.io.example:h9": {BW: 1 << 20}}}}); err != nil {
		t.Fatal(err)
	}
	lt := fabric.NewLoopTransport(fabric.TransportLimits{})
	if err := tgt.AddPort(lt, &fabric.Port{Address: "m", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
	submit := func(q *fabric.LoopQueue, c nvme.Command, data []byte) {
		t.Helper()
		if err := q.Submit(c, data, rsp); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("opcode %#x: %v %v", c.Opcode(), err, rsp.Status())
		}
	}
	cmd := func(op uint8, n int) nvme.Command {
		c := nvme.Command(make([]byte, nvme.CommandSize))
		c.SetOpcode(op)
		c.SetFlags(nvme.PSDTSGLContig << 6)
		c.SGL1().SetKeyed(0x1000, uint32(n), 1, false)
		return c
	}
	connect := func(qid int, cntlid nvme.CNTLID) *fabric.LoopQueue {
		q, err := lt.Dial("m", qid, 32)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Close)
		c := cmd(nvme.OpFabrics, nvme.ConnectDataSize)
		c.SetFCType(nvme.FCTypeConnect)
		c.SetConnect(0, nvme.QID(qid), 31, 0, 0)
		d := nvme.ConnectData(make([]byte, nvme.ConnectDataSize))
		d.SetHostID([16]byte{1, 2, 3})
		d.SetCNTLID(cntlid)
		d.SetSubNQN(testSubNQN)
		d.SetHostNQN("nqn.2026-11.io.example:host")
		submit(q, c, d)
		return q
	}
	admin := connect(0, 0xffff)
	cntlid := nvme.CNTLID(rsp.DW0())
	cc := cmd(nvme.OpFabrics, 0)
	cc.SetFCType(nvme.FCTypePropertySet)
	cc.SetProperty(0, nvme.PropCC, 1|6<<16|4<<20)
	submit(admin, cc, nil)
	io := connect(1, cntlid)
	buf := make([]byte, 4096)
	for i := 0; i < reads+writes; i++ {
		op := uint8(nvme.OpRead)
		if i >= reads {
			op = nvme.OpWrite
		}
		c := cmd(op, len(buf))
		c.SetNSID(3)
		c.SetSLBA(uint64(i % 256))
		c.SetNumBlocks(1)
		submit(io, c, buf)
	}
	return tgt
}

// gather collects reg into series as the text format shows them, labels
// sorted by name: name{a="x",b="y"} to value; a histogram gives its
// _bucket (with le), _sum and _count series.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			key := func(suffix string, extra ...string) string {
				all := append(append([]string{}, l...), extra...)
				sort.Strings(all)
				if len(all) == 0 {
					return mf.GetName() + suffix
				}
				return mf.GetName() + suffix + "{" + strings.Join(all, ",") + "}"
			}
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out[key("_count")] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%q", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))] = float64(b.GetCumulativeCount())
				}
				out[key("_bucket", `le="+Inf"`)] = float64(h.GetSampleCount())
			case m.GetCounter() != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key("")] = m.GetGauge().GetValue()
			default:
				out[key("")] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// testRegistry is the registry /metrics serves, over a target that ran
// I/O, an RDMA transport with no port, a TCP transport with no port (two
// connections refused, one header digest error) and a fake sysfs with one
// rxe port.
func testRegistry(t *testing.T, reads, writes int) *prometheus.Registry {
	t.Helper()
	rt, err := rdma.New(rdma.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tt, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tt.Stats().Refused.Add(2)
	tt.Stats().HeaderDigestErrors.Add(1)
	ib := fakeIB(t, map[string]string{"rxe0/1/hw_counters/sent_pkts": "5\n"})
	return newRegistry(testTarget(t, reads, writes), func() *rdma.Transport { return rt }, func() *tcp.Transport { return tt }, ib)
}

func TestRegistry(t *testing.T) {
	got := gather(t, testRegistry(t, 5, 3))
	ns := `nsid="3",`
	sub := `subnqn="` + testSubNQN + `"`
	ver, gover, commit := buildLabels()
	tests := []struct {
		series string
		want   float64
	}{
		{`nvmeof_tgt_namespace_latency_seconds_count{` + ns + `op="read",` + sub + `}`, 5},
		{`nvmeof_tgt_namespace_latency_seconds_count{` + ns + `op="write",` + sub + `}`, 3},
		{`nvmeof_tgt_namespace_latency_seconds_count{` + ns + `op="flush",` + sub + `}`, 0},
		{`nvmeof_tgt_namespace_latency_seconds_bucket{le="+Inf",` + ns + `op="read",` + sub + `}`, 5},
		{`nvmeof_tgt_namespace_ops_total{` + ns + `op="read",` + sub + `}`, 5},
		{`nvmeof_tgt_namespace_capacity_bytes{` + ns + sub + `}`, 1 << 20},
		{`nvmeof_tgt_namespace_block_size_bytes{` + ns + sub + `}`, 4096},
		{`nvmeof_tgt_namespace_qos_limit{hostnqn="",limit="iops",` + ns + `scope="namespace",` + sub + `}`, 100000},
		{`nvmeof_tgt_namespace_qos_limit{hostnqn="",limit="read_bw",` + ns + `scope="namespace",` + sub + `}`, 1 << 30},
		{`nvmeof_tgt_namespace_qos_limit{hostnqn="",limit="write_iops",` + ns + `scope="per_host",` + sub + `}`, 50000},
		{`nvmeof_tgt_namespace_qos_limit{hostnqn="nqn.2026-11.io.example:h9",limit="bw",` + ns + `scope="host",` + sub + `}`, 1 << 20},
		{`nvmeof_tgt_namespace_qos_held{` + ns + sub + `}`, 0},
		{`nvmeof_tgt_namespace_qos_held_total{` + ns + sub + `}`, 0},
		{`nvmeof_tgt_namespace_qos_wait_seconds_total{` + ns + sub + `}`, 0},
		{`nvmeof_tgt_controllers_by_state{state="ready",` + sub + `}`, 1},
		{`nvmeof_tgt_controllers_by_state{state="disabled",` + sub + `}`, 0},
		{`nvmeof_tgt_controllers_by_state{state="ready",subnqn="` + nvme.DiscoveryNQN + `"}`, 0},
		{`nvmeof_tgt_rdma_port_stat_total{counter="sent_pkts",device="rxe0",group="hw_counters",port="1"}`, 5},
		{fmt.Sprintf(`nvmeof_tgt_build_info{commit=%q,goversion=%q,version=%q}`, commit, gover, ver), 1},
		{`nvmeof_tgt_rdma_poller_wakeups_total`, 0},
		{`nvmeof_tgt_rdma_device_removals_total`, 0},
		{`nvmeof_tgt_rdma_registered_bytes`, 0}, // no device open
		{`nvmeof_tgt_rdma_srq_limit_events_total`, 0},
		{`nvmeof_tgt_rdma_srq_errors_total`, 0},
		{`nvmeof_tgt_rdma_srq_last_wqe_timeouts_total`, 0},
		{`nvmeof_tgt_port_up{address="m",port="1",transport="loop"}`, 1},
		{`nvmeof_tgt_tcp_connections_total{event="refused"}`, 2},
		{`nvmeof_tgt_tcp_connections_total{event="accepted"}`, 0},
		{`nvmeof_tgt_tcp_connections_live`, 0},
		{`nvmeof_tgt_tcp_digest_errors_total{digest="header"}`, 1},
		{`nvmeof_tgt_tcp_digest_errors_total{digest="data"}`, 0},
		{`nvmeof_tgt_tcp_termination_requests_total{direction="sent"}`, 0},
		{`nvmeof_tgt_tcp_buffer_bytes`, 0},
	}
	for _, tc := range tests {
		v, ok := got[tc.series]
		if !ok {
			t.Errorf("%s: not gathered", tc.series)
		} else if v != tc.want {
			t.Errorf("%s = %v, want %v", tc.series, v, tc.want)
		}
	}
	if t.Failed() {
		for k := range got {
			if strings.HasPrefix(k, "nvmeof_tgt_") {
				t.Log(k)
			}
		}
	}
}

// scrape is what /metrics serves for reg: the text format.
func scrape(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	metricsHandler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// TestMetricsLint runs promtool's checks (`promtool check metrics`, the
// same linter) over what /metrics serves, and one of ours: "_total" ends a
// counter's name exactly once and appears nowhere else.
func TestMetricsLint(t *testing.T) {
	text := scrape(t, testRegistry(t, 2, 2))
	l := promlint.New(bytes.NewReader(text))
	l.AddCustomValidations(func(mf *dto.MetricFamily) []error {
		if n := strings.Count(mf.GetName(), "_total"); n > 1 || n == 1 && !strings.HasSuffix(mf.GetName(), "_total") {
			return []error{errors.New(`"_total" only once, at the end`)}
		}
		return nil
	})
	problems, err := l.Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if n := bytes.Count(text, []byte("\n# TYPE ")); n < 20 {
		t.Errorf("linted only %d metric families", n)
	}
}
