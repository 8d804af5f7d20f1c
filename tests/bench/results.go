// Package bench holds the results of the lab benchmark (make bench): what the guest measured,
// and how it is summarised into bench/results/<date>.{json,md,png}. It is pure Go: the guest
// side that runs fio and perftest lives in tests/e2e (build tags e2e and bench).
package bench

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Target names in Run.Target.
const (
	TargetOurs   = "nvmeof-tgt"
	TargetKernel = "kernel-nvmet"
	// TargetSPDK is SPDK's nvmf_tgt (make bench PEERS="kernel spdk"): one reactor, a malloc
	// bdev. It runs the memory jobs only.
	TargetSPDK = "spdk"
	// TargetLibRBD is fio's rbd engine (librbd in fio's process, no target, no fabric) on the
	// image the rbd namespace serves: the reference of the rbd backend's jobs, which the
	// kernel target does not run.
	TargetLibRBD = "librbd"
	// TargetPrev is another build of nvmeof-tgt, the previous commit's, in an A/B run of the
	// two-machine bench (BENCH_AB_BIN): ours is the build under test.
	TargetPrev = "nvmeof-tgt-prev"
)

// BackendRBD is the backend of the jobs on an RBD image, compared with TargetLibRBD.
const BackendRBD = "rbd"

// Transports of Run.Transport: how the host reached the target.
const (
	TransportRDMA = "rdma"
	// TransportTCP is NVMe/TCP over the same link (two machines: ours with a TCP port, the
	// kernel's nvmet-tcp, SPDK's TCP transport; the host's nvme-tcp).
	TransportTCP = "tcp"
)

// Topologies of Results.Topology.
const (
	// TopologyOne is the one-guest benchmark: targets and host in one guest, on rxe's loopback
	// path. Results from before the two-machine mode have no topology: they are this one.
	TopologyOne = "one"
	// TopologyTwo is the two-machine benchmark: every target in a guest of its own vCPU, the
	// kernel host in another, one rxe link between them. Its report is <date>-2m.*.
	TopologyTwo = "two"
)

// Results is everything one guest boot measured.
type Results struct {
	Date   string `json:"date"`    // UTC, RFC 3339
	Commit string `json:"commit"`  // git describe of the tree under test
	Kernel string `json:"kernel"`  // guest kernel release
	CPUs   int    `json:"cpus"`    // guest vCPUs (two machines: the target guest's)
	MemMiB int    `json:"mem_mib"` // guest memory (two machines: the target guest's)
	// Topology is TopologyOne ("" before it was recorded) or TopologyTwo.
	Topology string `json:"topology,omitempty"`
	// Label names a run apart from the benchmark proper (an A/B run): it is added to the
	// report's file names.
	Label string `json:"label,omitempty"`
	// HostCPUs and HostMemMiB are the host guest's, with two machines.
	HostCPUs   int `json:"host_cpus,omitempty"`
	HostMemMiB int `json:"host_mem_mib,omitempty"`
	Runtime    int `json:"runtime_s"`
	Ramp       int `json:"ramp_s"`
	// Peers are the targets nvmeof-tgt was compared with (TargetKernel, TargetSPDK), in the
	// order they ran after it in each rep; empty in results from before SPDK was a peer.
	Peers []string `json:"peers,omitempty"`
	SPDK  string   `json:"spdk_version,omitempty"` // spdk_get_version, when SPDK was a peer
	Ceph  string   `json:"ceph_version,omitempty"` // ceph --version, when the rbd jobs ran
	// Transports are those the memory and file jobs ran over (two machines), in the order run;
	// empty in results from before TCP was measured: RDMA alone.
	Transports []string `json:"transports,omitempty"`

	Runs []Run     `json:"runs"` // every fio run, in the order run (A B A B …, or A B C A B C …)
	Link []LinkRun `json:"link"` // perftest on the same rxe device

	// Idle: nvmeof-tgt with hosts connected and no I/O.
	IdleSeconds    float64 `json:"idle_s"`
	IdleCPUPercent float64 `json:"idle_cpu_percent"` // of one core
	// IdleGuest is the target guest's own busy time over the idle span (two machines): the
	// baseline under every CPU per I/O.
	IdleGuest *CPUSample `json:"idle_guest,omitempty"`

	// Heap allocations on the RDMA path: the target's runtime.MemStats.Mallocs across fio runs,
	// minus what the same time idle allocated.
	Allocs *AllocRun `json:"allocs,omitempty"`

	// Scale is the scale phase (jobs scale/subsystems and scale/namespaces): how long the
	// host takes to reach many subsystems and namespaces, and what each costs nvmeof-tgt.
	Scale *ScaleRun `json:"scale,omitempty"`

	Notes []string `json:"notes,omitempty"`
}

// ScaleRun is what the scale phase measured, on nvmeof-tgt alone. A part not run is zero.
type ScaleRun struct {
	// Subsystems (one 1 MiB memory namespace each) the host connected to with nvme connect-all,
	// one I/O queue per controller; ConnectSeconds from its start until the host had a live
	// controller and the disk of every one. Memory before and with the controllers.
	Subsystems     int       `json:"subsystems,omitempty"`
	ConnectSeconds float64   `json:"connect_s,omitempty"`
	Idle           MemSample `json:"subsystems_idle,omitzero"`
	Connected      MemSample `json:"subsystems_connected,omitzero"`

	// Namespaces (1 MiB, memory) one reload added to a subsystem (ReloadSeconds), and
	// SeeSeconds from the start of nvme connect until the host listed every one. Memory with
	// the subsystem empty and with its namespaces; then with as many file namespaces added
	// by a second reload (FileReloadSeconds).
	Namespaces        int       `json:"namespaces,omitempty"`
	ReloadSeconds     float64   `json:"reload_s,omitempty"`
	SeeSeconds        float64   `json:"see_s,omitempty"`
	Empty             MemSample `json:"namespaces_empty,omitzero"`
	Loaded            MemSample `json:"namespaces_loaded,omitzero"`
	FileReloadSeconds float64   `json:"file_reload_s,omitempty"`
	FileLoaded        MemSample `json:"file_namespaces_loaded,omitzero"`

	// Queues is what connected queues cost, with a shared receive queue per poller and
	// without (jobs scale/queues-srq and scale/queues-nosrq), in the order run.
	Queues []QueueMem `json:"queues,omitempty"`
}

// QueueMem is nvmeof-tgt's memory as hosts connect more and more queues, in one receive mode.
type QueueMem struct {
	SRQ bool `json:"srq"` // a shared receive queue per poller (rdma.srq)
	// Config is the rdma keys the target ran with beyond rdma.srq, "" for the defaults.
	Config string `json:"config,omitempty"`
	// Host is how the hosts connected: queues per controller, their depth.
	Host   string       `json:"host,omitempty"`
	Points []QueuePoint `json:"points"`
	Error  string       `json:"error,omitempty"` // why it stopped short of its last point
}

// QueuePoint is one sample of a QueueMem: the target with Queues queues connected (admin and
// I/O, nvmeof_tgt_rdma_queues_live).
type QueuePoint struct {
	Queues     int       `json:"queues"`
	Registered float64   `json:"registered_bytes"` // nvmeof_tgt_rdma_registered_bytes
	Mem        MemSample `json:"mem"`
}

// Slope is what each queue added between the first and the last point: registered bytes and
// memory per queue. ok is false with fewer than two points.
func (q QueueMem) Slope() (registered float64, mem MemSample, ok bool) {
	if len(q.Points) < 2 {
		return 0, MemSample{}, false
	}
	a, b := q.Points[0], q.Points[len(q.Points)-1]
	n := b.Queues - a.Queues
	if n <= 0 {
		return 0, MemSample{}, false
	}
	return (b.Registered - a.Registered) / float64(n), PerItem(a.Mem, b.Mem, n), true
}

// MemSample is nvmeof-tgt's memory after a garbage collection.
type MemSample struct {
	RSS        float64 `json:"rss_bytes"`  // resident set
	Heap       float64 `json:"heap_bytes"` // Go heap in use (live objects)
	Goroutines float64 `json:"goroutines"`
}

// PerItem is (after - before) / n, field by field; zero for n <= 0.
func PerItem(before, after MemSample, n int) MemSample {
	if n <= 0 {
		return MemSample{}
	}
	d := float64(n)
	return MemSample{RSS: (after.RSS - before.RSS) / d, Heap: (after.Heap - before.Heap) / d, Goroutines: (after.Goroutines - before.Goroutines) / d}
}

// Run is one fio job against one target.
type Run struct {
	Target  string  `json:"target"`  // TargetOurs, TargetKernel, TargetSPDK or TargetLibRBD
	Backend string  `json:"backend"` // "memory" (kernel: null_blk), "file" or BackendRBD
	Job     string  `json:"job"`     // deploy/fio job name without .fio, e.g. "randread-4k-qd1"
	Rep     int     `json:"rep"`     // 1, 2, 3 …
	IOPS    float64 `json:"iops"`    // read+write
	BW      float64 `json:"bw_bytes_per_s"`
	ClatP50 float64 `json:"clat_p50_ns"` // completion latency percentiles (0 if not reported)
	ClatP99 float64 `json:"clat_p99_ns"`
	IOs     uint64  `json:"ios"`
	Errors  int     `json:"errors"`
	// Transport is TransportRDMA or TransportTCP; "" (results from before TCP was measured,
	// fio's rbd engine, which has no fabric) counts as RDMA: see Fabric.
	Transport string `json:"transport,omitempty"`
	// CPU is the target guest's CPU time over the middle of the run (two machines).
	CPU *CPUSample `json:"cpu,omitempty"`
}

// CPUSample is what /proc/stat in the target guest counted over a span of a run: every
// vCPU's time in clock ticks. Busy is all but idle and iowait: the target's process, the
// kernel's softirq (rxe, the block layer's completions) and anything else the guest ran.
type CPUSample struct {
	CPUs    int    `json:"cpus"`
	Total   uint64 `json:"total_ticks"`
	Busy    uint64 `json:"busy_ticks"`
	Softirq uint64 `json:"softirq_ticks"`
	// Process is the target process's user and system time over the span (nvmeof-tgt,
	// nvmf_tgt, fio's rbd engine); -1 for the kernel's nvmet, which has none.
	Process int64 `json:"process_ticks"`
}

// Fabric is the run's transport, TransportRDMA when none was recorded.
func (r Run) Fabric() string {
	if r.Transport == "" {
		return TransportRDMA
	}
	return r.Transport
}

// BusyCores is how many of the guest's vCPUs were busy on average: 0.5 is half of one.
func (c CPUSample) BusyCores() float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Busy) / float64(c.Total) * float64(max(c.CPUs, 1))
}

// CPUPerIO is the busy CPU time per I/O completed, in microseconds: the guest's busy cores
// divided by the run's I/O rate. 0 when there is no sample or no I/O.
func (r Run) CPUPerIO() float64 {
	if r.CPU == nil || r.CPU.Total == 0 || !(r.IOPS > 0) {
		return 0
	}
	return r.CPU.BusyCores() / r.IOPS * 1e6
}

// ParseProcStatCPU reads the aggregate "cpu" line of /proc/stat: the total of its first eight
// fields (user nice system idle iowait irq softirq steal), the busy part (all but idle and
// iowait) and softirq, in clock ticks.
func ParseProcStatCPU(stat string) (total, busy, softirq uint64, err error) {
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, 0, 0, fmt.Errorf("/proc/stat: short cpu line %q", line)
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
				return 0, 0, 0, fmt.Errorf("/proc/stat: cpu line %q: %w", line, err)
			}
			total += v[i]
		}
		return total, total - v[3] - v[4], v[6], nil
	}
	return 0, 0, 0, errors.New("/proc/stat: no cpu line")
}

// LinkRun is one perftest measurement of the raw rxe link.
type LinkRun struct {
	Tool   string  `json:"tool"` // ib_read_bw, ib_write_bw, ib_send_lat
	Size   int     `json:"size_bytes"`
	BW     float64 `json:"bw_bytes_per_s,omitempty"` // _bw tools: average bandwidth
	LatP50 float64 `json:"lat_p50_ns,omitempty"`     // ib_send_lat: typical (median) latency
	LatP99 float64 `json:"lat_p99_ns,omitempty"`
}

// AllocRun is the allocation count across fio runs on nvmeof-tgt: runtime.MemStats.Mallocs,
// exact (read through /debug/pprof/heap?debug=1, whose own allocations fall in both spans), at
// the start and end of the runs and of as long a span idle.
type AllocRun struct {
	Job        string `json:"job"`
	IOs        uint64 `json:"ios"`
	Allocs     uint64 `json:"allocs"`      // during the runs
	IdleAllocs uint64 `json:"idle_allocs"` // the same time idle, for the baseline
	// AllocsPerIO is (Allocs - IdleAllocs) / IOs. It is negative when the idle span allocated
	// more than the runs (Noise): the difference is then noise, and is reported as such.
	AllocsPerIO float64 `json:"allocs_per_io"`
	// Transport is the path measured (two machines); "" is RDMA.
	Transport string `json:"transport,omitempty"`
}

// NewAllocRun computes AllocsPerIO from the counts; 0 when there was no I/O.
func NewAllocRun(job string, ios, allocs, idle uint64) *AllocRun {
	a := &AllocRun{Job: job, IOs: ios, Allocs: allocs, IdleAllocs: idle}
	if ios > 0 {
		a.AllocsPerIO = (float64(allocs) - float64(idle)) / float64(ios)
	}
	return a
}

// Noise reports that the runs allocated fewer objects than the idle span: the difference
// measures nothing but what varies between two spans (timers, scrapes, the GC).
func (a *AllocRun) Noise() bool { return a.Allocs < a.IdleAllocs }

// ParseMallocs reads runtime.MemStats.Mallocs from the text of /debug/pprof/heap?debug=1
// (its "# Mallocs = N" line): every heap allocation so far, counted exactly, unlike
// go_memstats_mallocs_total, which books small allocations only when a span is refilled.
func ParseMallocs(profile string) (uint64, error) {
	for _, line := range strings.Split(profile, "\n") {
		if v, ok := strings.CutPrefix(line, "# Mallocs = "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("heap profile: Mallocs %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, errors.New("heap profile: no \"# Mallocs = \" line (not debug=1?)")
}

// peerNames are the words of make bench's PEERS and the targets they name.
var peerNames = map[string]string{"kernel": TargetKernel, "spdk": TargetSPDK}

// ParsePeers reads make bench's PEERS ("kernel", "spdk", "kernel spdk" …): the targets to run
// after nvmeof-tgt in each rep, in that order. Each must be known and named once.
func ParsePeers(s string) ([]string, error) { return parseNames(s, "peer", peerNames) }

// transportNames are the words of BENCH_TRANSPORTS.
var transportNames = map[string]string{"rdma": TransportRDMA, "tcp": TransportTCP}

// ParseTransports reads BENCH_TRANSPORTS ("rdma,tcp", "tcp" …): the transports the two-machine
// bench runs its memory and file jobs over, in that order. Each must be known and named once.
func ParseTransports(s string) ([]string, error) { return parseNames(s, "transport", transportNames) }

// parseNames reads a list of words (separated by commas or white space), each one of names'
// keys and named once, into the values they name, in order.
func parseNames(s, kind string, names map[string]string) ([]string, error) {
	words := slices.Sorted(maps.Keys(names))
	want := strings.Join(words, " or ")
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		v, ok := names[w]
		if !ok {
			return nil, fmt.Errorf("unknown %s %q: want %s", kind, w, want)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%s %q named twice", kind, w)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s: want %s, or more of them", kind, want)
	}
	return out, nil
}
