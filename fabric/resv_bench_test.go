package fabric

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// BenchmarkResvCheck is the reservation check every I/O command makes
// (Namespace.resvAllows), under a registrants-only reservation, with few
// registrants and with many: the host asking is the last registered (the
// farthest a scan goes) or no registrant at all (a scan goes through all).
func BenchmarkResvCheck(b *testing.B) {
	for _, n := range []int{2, 8, 16, 1000} {
		for _, who := range []string{"last", "none"} {
			b.Run(fmt.Sprintf("registrants=%d/host=%s", n, who), func(b *testing.B) {
				st := &resvState{Type: nvme.ResvWriteExclusiveRegOnly}
				var host HostID
				for i := range n {
					binary.BigEndian.PutUint32(host[12:], uint32(i+1))
					st.Regs = append(st.Regs, resvReg{host, uint64(i + 1)})
				}
				st.Holder = st.Regs[0].Host
				want := true
				if who == "none" {
					binary.BigEndian.PutUint32(host[12:], uint32(n+1))
					want = false
				}
				ns := &Namespace{}
				ns.resv.state.Store(st.sealed())
				q := &Queue{}
				q.ctrl.Store(&Controller{hostID: host})
				r := &Request{Cmd: ioCmd(nvme.OpWrite, 1, 0, 1), q: q}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if ns.resvAllows(r) != want {
						b.Fatal("the check's answer is wrong")
					}
				}
			})
		}
	}
}
