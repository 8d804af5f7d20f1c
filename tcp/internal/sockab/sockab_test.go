//go:build sockab

package sockab

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// serverEnv names the variant a re-executed test binary serves (Serve).
const serverEnv = "SOCKAB_SERVER"

var first = flag.String("sockab.first", "netpoller", "the variant that runs first in each case, the others following in turn; ab.sh rotates it between rounds")

func TestMain(m *testing.M) {
	if v := os.Getenv(serverEnv); v != "" {
		if err := Serve(v, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "sockab server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	for _, c := range children {
		c.stop()
	}
	os.Exit(code)
}

// child is a server in a process of its own (this test binary again), so
// that getrusage there counts the server alone: every thread of it (the Go
// runtime's, the garbage collector's, io_uring's workers) and the kernel's
// work in its system calls, and nothing of the client's.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

// children are the servers, one per variant, started at first use and
// kept for every case of the run.
var children = map[string]*child{}

func server(b *testing.B, v string) *child {
	if c := children[v]; c != nil {
		return c
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"="+v)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	children[v] = c
	if !c.out.Scan() {
		b.Fatalf("%s server: no address (%v)", v, c.out.Err())
	}
	f := strings.SplitN(c.out.Text(), " ", 3)
	if len(f) < 3 || f[0] != "addr" {
		b.Fatalf("%s server: %q", v, c.out.Text())
	}
	c.addr = f[1]
	// Once per variant and run, into the raw results.
	fmt.Fprintf(os.Stderr, "sockab server %s\n", f[2])
	return c
}

func (c *child) usage(b *testing.B) Usage {
	if _, err := io.WriteString(c.in, "usage\n"); err != nil {
		b.Fatal(err)
	}
	if !c.out.Scan() {
		b.Fatalf("server usage: %v", c.out.Err())
	}
	var u Usage
	if _, err := fmt.Sscanf(c.out.Text(), "usage %d %d %d", &u.UserNS, &u.SysNS, &u.Allocs); err != nil {
		b.Fatalf("server usage %q: %v", c.out.Text(), err)
	}
	return u
}

func (c *child) stop() {
	c.in.Close()
	c.cmd.Wait()
}

// BenchmarkSockets is issue 30's A/B: for each kind of command, depth and
// number of connections, every variant in turn. Metrics: ops/s; srv-cpu-ns/op, the server process's user
// and system time per command; srv-allocs/op, its heap allocations per
// command; cli-cpu-ns/op, this process's (the clients'). B/op and
// allocs/op are the clients'.
func BenchmarkSockets(b *testing.B) {
	// The variants in turn from -sockab.first, so that rounds that start
	// from each put background load on every variant alike.
	i := slices.Index(Variants, *first)
	if i < 0 {
		b.Fatalf("-sockab.first %q: not one of %v", *first, Variants)
	}
	order := append(slices.Clone(Variants[i:]), Variants[:i]...)
	ops := []struct {
		name string
		op   uint8
	}{{"read", nvme.OpRead}, {"write", nvme.OpWrite}}
	for _, op := range ops {
		for _, qd := range []int{1, MaxDepth} {
			for _, conns := range []int{1, 4} {
				for _, v := range order {
					b.Run(fmt.Sprintf("%s/qd%d/conns%d/%s", op.name, qd, conns, v), func(b *testing.B) {
						benchSockets(b, server(b, v), op.op, qd, conns)
					})
				}
			}
		}
	}
}

func benchSockets(b *testing.B, srv *child, op uint8, qd, conns int) {
	cs := make([]*client, conns)
	for i := range cs {
		c, err := dial(srv.addr, op, qd)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		// Warm: the server's requests made, both sides' buffers grown.
		if err := c.run(4 * qd); err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	errs := make([]error, conns)
	b.ReportAllocs()
	srv0 := srv.usage(b)
	cli0, err := SelfUsage()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range cs {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Go(func() { errs[i] = c.run(n) })
	}
	wg.Wait()
	b.StopTimer()
	cli1, err := SelfUsage()
	if err != nil {
		b.Fatal(err)
	}
	srvU, cliU := srv.usage(b).Sub(srv0), cli1.Sub(cli0)
	for i, err := range errs {
		if err != nil {
			b.Fatalf("connection %d: %v", i, err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(srvU.CPU())/n, "srv-cpu-ns/op")
	b.ReportMetric(float64(srvU.Allocs)/n, "srv-allocs/op")
	b.ReportMetric(float64(cliU.CPU())/n, "cli-cpu-ns/op")
}
