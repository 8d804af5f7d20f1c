package sockab

import (
	"bufio"
	"fmt"
	"io"
	"runtime/metrics"

	"golang.org/x/sys/unix"
)

// Usage is what a server process has used so far.
type Usage struct {
	UserNS, SysNS int64  // getrusage(RUSAGE_SELF): every thread of the process
	Allocs        uint64 // heap objects allocated
}

// CPU is user and system time together.
func (u Usage) CPU() int64 { return u.UserNS + u.SysNS }

// Sub is u less an earlier reading.
func (u Usage) Sub(v Usage) Usage {
	return Usage{UserNS: u.UserNS - v.UserNS, SysNS: u.SysNS - v.SysNS, Allocs: u.Allocs - v.Allocs}
}

// SelfUsage reads this process's usage.
func SelfUsage() (Usage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, fmt.Errorf("getrusage: %w", err)
	}
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return Usage{UserNS: ru.Utime.Nano(), SysNS: ru.Stime.Nano(), Allocs: s[0].Value.Uint64()}, nil
}

// Serve runs the server of variant v for a parent process: it writes
// "addr ADDR DESCRIPTION" on out, then answers each "usage" line read from
// in with "usage USER_NS SYS_NS ALLOCS", until in ends.
func Serve(v string, in io.Reader, out io.Writer) error {
	srv, err := Start(v)
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintf(out, "addr %s %s\n", srv.Addr(), srv.Describe()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "usage" {
			return fmt.Errorf("sockab: unknown request %q", sc.Text())
		}
		u, err := SelfUsage()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "usage %d %d %d\n", u.UserNS, u.SysNS, u.Allocs); err != nil {
			return err
		}
	}
	return sc.Err()
}
