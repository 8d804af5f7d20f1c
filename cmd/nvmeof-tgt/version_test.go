package main

import (
	"bytes"
	"strings"
	"testing"
)

const rev = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"

func TestBuildVersion(t *testing.T) {
	tests := []struct {
		name     string
		b        buildInfo
		want, fr string
	}{
		{name: "release tag", b: buildInfo{Version: "v1.2.3", Revision: rev}, want: "v1.2.3", fr: "1.2.3"},
		{name: "release tag, modified", b: buildInfo{Version: "v1.2.3-dirty", Revision: rev, Modified: true}, want: "v1.2.3-dirty", fr: "1.2.3+"},
		{name: "release too long for FR", b: buildInfo{Version: "v10.20.300", Revision: rev}, want: "v10.20.300", fr: "1a2b3c4d"},
		{name: "after a tag", b: buildInfo{Version: "v1.2.3-4-g1a2b3c4", Revision: rev}, want: "v1.2.3-4-g1a2b3c4", fr: "1a2b3c4d"},
		{name: "after a tag, modified", b: buildInfo{Version: "v1.2.3-4-g1a2b3c4-dirty", Revision: rev, Modified: true}, want: "v1.2.3-4-g1a2b3c4-dirty", fr: "1a2b3c4+"},
		{name: "no tag, describe only", b: buildInfo{Version: "1a2b3c4"}, want: "1a2b3c4", fr: "1a2b3c4"},
		{name: "no tag, describe only, modified", b: buildInfo{Version: "1a2b3c4-dirty"}, want: "1a2b3c4-dirty", fr: "1a2b3c4+"},
		{name: "describe after a tag, no revision", b: buildInfo{Version: "v0.9.0-12-g1a2b3c4d"}, want: "v0.9.0-12-g1a2b3c4d", fr: "1a2b3c4d"},
		{name: "go build: module tag", b: buildInfo{Module: "v1.4.0", Revision: rev}, want: "v1.4.0", fr: "1.4.0"},
		{name: "go build: pseudo-version", b: buildInfo{Module: "v0.0.0-20261123101500-1a2b3c4d5e6f", Revision: rev},
			want: "v0.0.0-20261123101500-1a2b3c4d5e6f", fr: "1a2b3c4d"},
		{name: "go build: pseudo-version, modified", b: buildInfo{Module: "v0.0.0-20261123101500-1a2b3c4d5e6f+dirty", Revision: rev, Modified: true},
			want: "v0.0.0-20261123101500-1a2b3c4d5e6f+dirty", fr: "1a2b3c4+"},
		{name: "go build: pseudo-version without vcs", b: buildInfo{Module: "v0.0.0-20261123101500-1a2b3c4d5e6f"},
			want: "v0.0.0-20261123101500-1a2b3c4d5e6f", fr: "1a2b3c4d"},
		{name: "go build: devel with vcs", b: buildInfo{Module: "(devel)", Revision: rev}, want: "1a2b3c4d5e6f", fr: "1a2b3c4d"},
		{name: "go build: devel with vcs, modified", b: buildInfo{Module: "(devel)", Revision: rev, Modified: true}, want: "1a2b3c4d5e6f-dirty", fr: "1a2b3c4+"},
		{name: "go build: nothing known", b: buildInfo{Module: "(devel)"}, want: "0.0.0", fr: "0.0.0"},
		{name: "nothing at all", b: buildInfo{}, want: "0.0.0", fr: "0.0.0"},
		{name: "a word is no version", b: buildInfo{Version: "dev"}, want: "dev", fr: "0.0.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.String(); got != tc.want {
				t.Errorf("version %q, want %q", got, tc.want)
			}
			fr := tc.b.firmwareRevision()
			if fr != tc.fr {
				t.Errorf("firmware revision %q, want %q", fr, tc.fr)
			}
			if len(fr) > frLen || !isASCIIPrintable(fr) {
				t.Errorf("firmware revision %q: not at most %d printable ASCII bytes", fr, frLen)
			}
		})
	}
}

func TestVersionText(t *testing.T) {
	tests := []struct {
		name string
		b    buildInfo
		want string
	}{
		{name: "make build", b: buildInfo{Version: "v1.2.3-4-g1a2b3c4", Revision: rev, GoVersion: "go1.26.8"},
			want: "nvmeof-tgt v1.2.3-4-g1a2b3c4\ngo: go1.26.8\ncommit: " + rev + "\nfirmware revision: 1a2b3c4d\n"},
		{name: "modified", b: buildInfo{Module: "(devel)", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			want: "nvmeof-tgt 1a2b3c4d5e6f-dirty\ngo: go1.26.8\ncommit: " + rev + " (modified)\nfirmware revision: 1a2b3c4+\n"},
		{name: "no commit", b: buildInfo{Module: "(devel)", GoVersion: "go1.26.8"},
			want: "nvmeof-tgt 0.0.0\ngo: go1.26.8\nfirmware revision: 0.0.0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.text(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestVersionCmd runs the subcommand as built for the test (go test sets
// no -X flags): it must print a version, and never "dev".
func TestVersionCmd(t *testing.T) {
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "nvmeof-tgt ") || !strings.HasPrefix(lines[1], "go: go") {
		t.Errorf("output %q", out.String())
	}
	if fr := firmwareRevision(); fr == "" || strings.Contains(fr, "dev") || len(fr) > frLen {
		t.Errorf("firmware revision %q", fr)
	}
}
