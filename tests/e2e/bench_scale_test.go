//go:build e2e && bench

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
)

// The scale phase of make bench (BENCH_JOBS names its parts scale/subsystems,
// scale/namespaces, scale/queues-srq and scale/queues-nosrq): the host connecting to 256
// subsystems, and seeing 1,024 namespaces of one, with what each controller and namespace costs
// the target; and what the target registers and holds resident as hosts connect up to 1,000
// queues, with a shared receive queue and without. It runs on nvmeof-tgt alone, before the fio
// phase, on the lab port.

// scaleJobs are the parts of the scale phase, as BENCH_JOBS names them.
var scaleJobs = []string{"scale/subsystems", "scale/namespaces", "scale/queues-srq", "scale/queues-nosrq"}

// runScale runs the selected parts in dir and stops their targets.
func runScale(t *testing.T, dir string, selected func(string) bool) *bench.ScaleRun {
	t.Helper()
	sc := &bench.ScaleRun{}
	if selected("scale/subsystems") {
		r := startSubsystems(t, filepath.Join(dir, "subsystems"), scaleSubsystems)
		r.connectAll(t)
		sc.Subsystems, sc.ConnectSeconds = len(r.nqns), r.Connect.Seconds()
		sc.Idle, sc.Connected = benchMem(r.Idle), benchMem(r.Connected)
		deleteControllersOf(t, r.h.NQN)
		r.p.Stop(t)
	}
	if selected("scale/namespaces") {
		r := seeNamespaces(t, filepath.Join(dir, "namespaces"), nqn("bench-scale-ns"), scaleNamespaces, nil)
		sc.Namespaces, sc.ReloadSeconds, sc.SeeSeconds = scaleNamespaces, r.Reload.Seconds(), r.See.Seconds()
		sc.Empty, sc.Loaded = benchMem(r.Empty), benchMem(r.Loaded)
		deleteControllersOf(t, r.h.NQN)

		// As many file namespaces, never used, in a second subsystem: the target creates them.
		files := Subsystem{NQN: nqn("bench-scale-files"), AllowAnyHost: true}
		for i := 1; i <= scaleNamespaces; i++ {
			path := filepath.Join(scratchDir, fmt.Sprintf("bench-scale-ns%d.img", i))
			t.Cleanup(func() { os.Remove(path) })
			files.Namespaces = append(files.Namespaces, Namespace{NSID: uint32(i), Backend: BackendFile, Path: path, Size: scaleNSSize, BlockSize: 512})
		}
		r.spec.Subsystems = append(r.spec.Subsystems, files)
		sc.FileReloadSeconds = r.reload(t).Seconds()
		fileLoaded := sampleMem(t)
		sc.FileLoaded = benchMem(fileLoaded)
		t.Logf("a reload added %d file namespaces in %.1f s: target %v, %v per namespace",
			scaleNamespaces, sc.FileReloadSeconds, fileLoaded, perItem(r.Loaded, fileLoaded, scaleNamespaces))
		r.p.Stop(t)
	}
	for _, srq := range []bool{true, false} {
		name := map[bool]string{true: "queues-srq", false: "queues-nosrq"}[srq]
		if selected("scale/" + name) {
			sc.Queues = append(sc.Queues, runQueueMem(t, filepath.Join(dir, name), srq))
		}
	}
	return sc
}

// The queues part: hosts connect in turn, each a controller of up to queuesPerHost() queues of
// depth queueDepth to a subsystem of its own, until queueSteps[i] queues are connected; the
// target's registered bytes and memory are sampled at 0 and at each step.
var queueSteps = []int{64, 256, 1000}

// queuesPerHost is the most queues one Linux host controller has here: an admin queue and read,
// write (default) and poll queues, each kind capped by nvme-rdma at the guest's online CPUs
// (nvme_rdma_nr_io_queues); 13 with 4 vCPUs. Within the defaults' rdma.max_io_queues (16) and
// controller.max_connections_per_host (36).
func queuesPerHost() int { return 1 + min(3*runtime.NumCPU(), 15) }

// planQueues is, for each step, the queues of each host that connects to reach it from the
// step before: per each, the rest on a last one, which takes one from the one before it rather
// than be a controller of an admin queue alone.
func planQueues(steps []int, per int) [][]int {
	var plan [][]int
	connected := 0
	for _, step := range steps {
		var todo []int
		for n := connected; n < step; n += per {
			todo = append(todo, min(per, step-n))
		}
		if k := len(todo); k > 1 && todo[k-1] == 1 {
			todo[k-2]--
			todo[k-1] = 2
		}
		plan = append(plan, todo)
		connected = step
	}
	return plan
}

// queueFlags are the nvme connect flags for a controller of q queues (2..queuesPerHost()).
func queueFlags(q int) []string {
	n, cpus := q-1, runtime.NumCPU()
	read := min(n, cpus)
	write := min(n-read, cpus)
	poll := n - read - write
	return []string{"-i", strconv.Itoa(read), "-W", strconv.Itoa(write), "-P", strconv.Itoa(poll)}
}

const (
	queueDepth = 32
	// queueConnectors is how many nvme connects run at once.
	queueConnectors = 3
)

// queueConfig is the rdma keys of each receive mode: with a shared receive queue, the defaults
// (rdma.srq on, so that a device without one fails instead of measuring the other mode);
// without, room for 1,024 queues of depth 32, which the default pools (64 queues of 128 with
// their own receive buffers, 1 MiB each) do not have.
var queueConfig = map[bool]struct{ yaml, text string }{
	true:  {"rdma:\n  srq: on\n", ""},
	false: {"rdma:\n  srq: off\n  max_queues: 1024\n  max_queue_depth: 32\n", "rdma.max_queues: 1024, rdma.max_queue_depth: 32"},
}

// runQueueMem measures one receive mode in dir; a connection that fails ends it early, with the
// points reached so far and the error.
func runQueueMem(t *testing.T, dir string, srq bool) bench.QueueMem {
	t.Helper()
	per := queuesPerHost()
	plan := planQueues(queueSteps, per)
	hosts := 0
	for _, step := range plan {
		hosts += len(step)
	}
	spec := Spec{Port: rdmaPort()}
	for i := range hosts {
		spec.Subsystems = append(spec.Subsystems, Subsystem{NQN: nqn(fmt.Sprintf("bench-q%02d", i)), AllowAnyHost: true,
			Namespaces: []Namespace{memNS(1, scaleNSSize, 512, "")}})
	}
	cfg := queueConfig[srq]
	p := scaleTarget(t, dir, spec, cfg.yaml)
	raiseFileLimit(t)
	out := bench.QueueMem{SRQ: srq, Config: cfg.text,
		Host: fmt.Sprintf("controllers of up to %d queues (nvme connect %s -Q %d), one host NQN each",
			per, strings.Join(queueFlags(per), " "), queueDepth)}
	sample := func(queues int) error {
		var live float64
		if err := waitFor(time.Minute, func() bool {
			live, _ = metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_queues_live")
			return int(live) == queues
		}); err != nil {
			return fmt.Errorf("%v RDMA queues live, want %d", live, queues)
		}
		mem := sampleMem(t)
		reg, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_rdma_registered_bytes")
		out.Points = append(out.Points, bench.QueuePoint{Queues: queues, Registered: reg, Mem: benchMem(mem)})
		t.Logf("srq %v, %d queues: registered %s, target %v", srq, queues, memText(reg), mem)
		return nil
	}
	var ctrls []*controller
	defer func() {
		work := make(chan *controller)
		done := make(chan struct{})
		for range queueConnectors {
			go func() {
				for c := range work {
					deleteController(t, c)
				}
				done <- struct{}{}
			}()
		}
		for _, c := range ctrls {
			work <- c
		}
		close(work)
		for range queueConnectors {
			<-done
		}
		p.Stop(t)
	}()
	if err := sample(0); err != nil {
		out.Error = err.Error()
		return out
	}
	used := 0 // hosts (subsystems) connected
	for si, step := range queueSteps {
		// Hosts connect a few at a time, each to its own subsystem.
		todo := plan[si] // queues of each host to connect
		hs := make([]host, len(todo))
		for i := range hs {
			hs[i] = newHost(t)
		}
		base := used
		used += len(todo)
		type result struct {
			c   *controller
			err error
		}
		work, results := make(chan int), make(chan result, len(todo))
		for range queueConnectors {
			go func() {
				for i := range work {
					q, host := todo[i], base+i
					c, err := hs[i].connectWith(t, spec.Subsystems[host].NQN, portRDMA,
						append(queueFlags(q), "-Q", strconv.Itoa(queueDepth), "-k", "30")...)
					if err != nil {
						err = fmt.Errorf("host %d (%d queues): %w", host+1, q, err)
					}
					results <- result{c, err}
				}
			}()
		}
		for i := range todo {
			work <- i
		}
		close(work)
		var failed error
		for range todo {
			r := <-results
			if r.err != nil && failed == nil {
				failed = r.err
			}
			if r.c != nil {
				ctrls = append(ctrls, r.c)
			}
		}
		if failed != nil {
			out.Error = failed.Error()
			t.Errorf("srq %v: %v", srq, failed)
			return out
		}
		if err := sample(step); err != nil {
			out.Error = err.Error()
			t.Errorf("srq %v: %v", srq, err)
			return out
		}
	}
	return out
}

func benchMem(m tgtMem) bench.MemSample {
	return bench.MemSample{RSS: m.RSS, Heap: m.Heap, Goroutines: m.Goroutines}
}
