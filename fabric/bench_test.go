package fabric

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// BenchmarkLoopIO drives the core through the loop transport with the
// memory backend: the cost of the target itself per I/O, with no network.
// Besides ns/op and allocs/op it reports io/s in all and per core (queues
// are driven by a goroutine each, so at most GOMAXPROCS of them run at once).
func BenchmarkLoopIO(b *testing.B) {
	for _, tc := range []struct {
		name string
		op   uint8
		size int
		qs   int
	}{
		{"read-4k", nvme.OpRead, 4 << 10, 1},
		{"write-4k", nvme.OpWrite, 4 << 10, 1},
		{"read-128k", nvme.OpRead, 128 << 10, 1},
		{"write-128k", nvme.OpWrite, 128 << 10, 1},
		{"read-4k-2queues", nvme.OpRead, 4 << 10, 2},
		{"read-4k-4queues", nvme.OpRead, 4 << 10, 4},
		// A limit that never holds (the QoS bookkeeping alone), and a
		// mask naming the host (its lookup alone).
		{"read-4k-qos-room", nvme.OpRead, 4 << 10, 1},
		{"read-4k-masked", nvme.OpRead, 4 << 10, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tgt := NewTarget(Options{})
			defer tgt.Close()
			lt := NewLoopTransport(TransportLimits{MDTS: 1 << 20, MaxQueueDepth: 128, MaxIOQueues: 8})
			sub, _ := tgt.AddSubsystem(SubsystemConfig{NQN: testNQN, AllowAnyHost: true})
			dev, err := blockdev.NewMemory(64<<20, 512)
			if err != nil {
				b.Fatal(err)
			}
			nc := NamespaceConfig{NSID: 1, Device: dev}
			switch tc.name {
			case "read-4k-qos-room":
				nc.QoS = QoSConfig{Limits: QoSLimits{IOPS: 1 << 40, BW: 1 << 60}, PerHost: QoSLimits{IOPS: 1 << 40}}
			case "read-4k-masked":
				nc.Hosts = []string{"nqn.2026-11.io.example:other", testHostNQN}
			}
			if _, err := sub.AddNamespace(nc); err != nil {
				b.Fatal(err)
			}
			if err := tgt.AddPort(lt, &Port{Address: "bench", Service: "1"}); err != nil {
				b.Fatal(err)
			}
			adminQ, _ := lt.Dial("bench", 0, 32)
			rsp := nvme.Completion(make([]byte, 16))
			must := func(q *LoopQueue, c nvme.Command, data []byte) {
				if err := q.Submit(c, data, rsp); err != nil || !rsp.Status().IsSuccess() {
					b.Fatalf("setup: %v %v", err, rsp.Status())
				}
			}
			must(adminQ, connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			cntlid := nvme.CNTLID(rsp.DW0())
			cc := newCmd(nvme.OpFabrics, 2)
			cc.SetFCType(nvme.FCTypePropertySet)
			cc.SetProperty(0, nvme.PropCC, ccEnable)
			must(adminQ, cc, nil)
			queues := make([]*LoopQueue, tc.qs)
			for i := range queues {
				q, _ := lt.Dial("bench", i+1, 128)
				must(q, connectCmd(nvme.QID(i+1), 127, 0), connectData(testNQN, testHostNQN, testHostID, cntlid))
				queues[i] = q
			}
			nlb := uint32(tc.size / 512)
			b.ReportAllocs()
			b.SetBytes(int64(tc.size))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := b.N / tc.qs
			for qi, q := range queues {
				wg.Add(1)
				go func(q *LoopQueue, qi int) {
					defer wg.Done()
					cmd := ioCmd(tc.op, 1, 0, nlb)
					buf := make([]byte, tc.size)
					rsp := nvme.Completion(make([]byte, 16))
					span := uint64(64<<20/512) - uint64(nlb)
					for i := 0; i < per; i++ {
						cmd.SetCID(uint16(i))
						cmd.SetSLBA(uint64(i*int(nlb)+qi*977) % span)
						if err := q.Submit(cmd, buf, rsp); err != nil || !rsp.Status().IsSuccess() {
							panic(fmt.Sprint(err, rsp.Status()))
						}
					}
				}(q, qi)
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if el > 0 {
				iops := float64(per*tc.qs) / el.Seconds()
				b.ReportMetric(iops, "io/s")
				b.ReportMetric(iops/float64(min(runtime.GOMAXPROCS(0), tc.qs)), "io/s/core")
			}
		})
	}
}
