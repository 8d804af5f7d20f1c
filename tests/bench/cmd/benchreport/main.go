// Command benchreport turns the raw results of make bench into
// bench/results/<date>.{json,md,png} and prints the Markdown report.
//
//	benchreport -in tests/out/bench-raw.json -out bench/results
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
)

func main() {
	in := flag.String("in", "tests/out/bench-raw.json", "raw results written by the guest")
	out := flag.String("out", "bench/results", "directory for the report")
	flag.Parse()
	r, err := bench.Load(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
	paths, err := bench.Write(*out, r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
	md, err := os.ReadFile(paths[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(string(md))
	fmt.Printf("\nwrote %s\n", strings.Join(paths, ", "))
}
