// Command benchreport turns the raw results of make bench into <date>.{json,md,png} in a
// directory (bench/results), prints the paths it wrote and the Markdown report. A second
// report on the same day gets <date>-2 and so on; nothing is overwritten.
//
//	benchreport -in tests/out/bench-raw.json -out bench/results
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/bench"
)

func main() {
	in := flag.String("in", "tests/out/bench-raw.json", "raw results JSON written by the guest")
	out := flag.String("out", "bench/results", "directory for the report")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: benchreport -in RAW.json -out DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "benchreport: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out); err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	r, err := bench.Load(in)
	if err != nil {
		return err
	}
	paths, err := bench.Write(out, r)
	if err != nil {
		return err
	}
	if r.Topology == bench.TopologyTwo {
		fmt.Print(bench.MarkdownTwo(r, bench.SummarizeTwo(r), filepath.Base(paths[2])))
	} else {
		fmt.Print(bench.Markdown(r, bench.Summarize(r), filepath.Base(paths[2])))
	}
	fmt.Println()
	for _, p := range paths {
		fmt.Printf("wrote %s\n", p)
	}
	return nil
}
