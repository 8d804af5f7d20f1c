// Command summarize reads the output of sockab's benchmark rounds (ab.sh)
// on stdin and writes a Markdown table on stdout: per case and variant,
// the median and range of each metric over the rounds; and each variant's
// ratios to the netpoller's, round by round (rounds pair in order): their
// median and range, in how many rounds the variant was better (higher
// throughput, lower CPU), and whether all its samples lie above or below
// all the netpoller's (beyond the spread) or the two overlap.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// baseline is the variant the others are compared with: tcp/'s shape.
const baseline = "netpoller"

// sample is one benchmark line's metrics, by unit.
type sample map[string]float64

// series is one case and variant's samples, a round each, in order.
type series struct {
	cas, variant string
	s            []sample
}

// procSuffix is the -GOMAXPROCS suffix of a benchmark's name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parseLine parses a "BenchmarkSockets/CASE.../VARIANT-N  ITER  V UNIT..."
// line.
func parseLine(line string) (cas, variant string, s sample, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkSockets/") || len(f)%2 != 0 {
		return "", "", nil, false
	}
	name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "BenchmarkSockets/"), "")
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", "", nil, false
	}
	s = sample{}
	for j := 2; j+1 < len(f); j += 2 {
		v, err := strconv.ParseFloat(f[j], 64)
		if err != nil {
			return "", "", nil, false
		}
		s[f[j+1]] = v
	}
	return name[:i], name[i+1:], s, true
}

func read(r io.Reader) ([]*series, error) {
	var all []*series
	byKey := map[string]*series{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		cas, v, s, ok := parseLine(sc.Text())
		if !ok {
			continue
		}
		k := cas + "/" + v
		if byKey[k] == nil {
			byKey[k] = &series{cas: cas, variant: v}
			all = append(all, byKey[k])
		}
		byKey[k].s = append(byKey[k].s, s)
	}
	return all, sc.Err()
}

// stats is the median, lowest and highest of xs.
func stats(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	x := slices.Sorted(slices.Values(xs))
	n := len(x)
	med = x[n/2]
	if n%2 == 0 {
		med = (x[n/2-1] + x[n/2]) / 2
	}
	return med, x[0], x[n-1]
}

func (s *series) values(unit string) []float64 {
	xs := make([]float64, 0, len(s.s))
	for _, v := range s.s {
		xs = append(xs, v[unit])
	}
	return xs
}

// ratios is s's unit over base's, round by round.
func ratios(s, base *series, unit string) []float64 {
	var rs []float64
	for i := range min(len(s.s), len(base.s)) {
		if b := base.s[i][unit]; b != 0 {
			rs = append(rs, s.s[i][unit]/b)
		}
	}
	return rs
}

func rangeOf(xs []float64, scale float64, format string) string {
	med, lo, hi := stats(xs)
	return fmt.Sprintf(format+" ("+format+"–"+format+")", med*scale, lo*scale, hi*scale)
}

// better counts the rounds whose ratio is above 1 (up) or below it.
func better(rs []float64, up bool) string {
	n := 0
	for _, r := range rs {
		if r > 1 == up && r != 1 {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(rs))
}

// beyond says whether a's samples all lie above b's or below them: a
// difference beyond the spread of either.
func beyond(a, b []float64) string {
	_, alo, ahi := stats(a)
	_, blo, bhi := stats(b)
	switch {
	case alo > bhi:
		return "above"
	case ahi < blo:
		return "below"
	}
	return "overlap"
}

func write(w io.Writer, all []*series) {
	base := map[string]*series{}
	for _, s := range all {
		if s.variant == baseline {
			base[s.cas] = s
		}
	}
	fmt.Fprintln(w, "| case | variant | rounds | kops/s | server CPU µs/op | client CPU µs/op | server allocs/op | kops/s ÷ netpoller | server CPU/op ÷ netpoller |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range all {
		tput, cpu := "—", "—"
		if b := base[s.cas]; b != nil && s != b {
			rt, rc := ratios(s, b, "ops/s"), ratios(s, b, "srv-cpu-ns/op")
			tput = rangeOf(rt, 1, "%.2f") + "; " + better(rt, true) + "; " + beyond(s.values("ops/s"), b.values("ops/s"))
			cpu = rangeOf(rc, 1, "%.2f") + "; " + better(rc, false) + "; " + beyond(s.values("srv-cpu-ns/op"), b.values("srv-cpu-ns/op"))
		}
		med, _, _ := stats(s.values("srv-allocs/op"))
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %.2g | %s | %s |\n", s.cas, s.variant, len(s.s),
			rangeOf(s.values("ops/s"), 1e-3, "%.0f"), rangeOf(s.values("srv-cpu-ns/op"), 1e-3, "%.2f"),
			rangeOf(s.values("cli-cpu-ns/op"), 1e-3, "%.2f"), med, tput, cpu)
	}
}

func main() {
	all, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(1)
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "summarize: no BenchmarkSockets lines on stdin")
		os.Exit(1)
	}
	write(os.Stdout, all)
}
