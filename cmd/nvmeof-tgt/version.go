package main

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Set with -ldflags "-X main.version=... -X main.commit=..." (the Makefile:
// git describe and the commit). A plain go build leaves them empty, and the
// Go build information stands in.
var version, commit string

// fallbackVersion is the last resort, when nothing says what was built.
const fallbackVersion = "0.0.0"

// buildInfo is what a binary knows of its origin.
type buildInfo struct {
	Version   string // -X main.version, e.g. v1.2.0-3-g1a2b3c4d-dirty
	Module    string // the main module's version: a tag, a pseudo-version or "(devel)"
	Revision  string // the commit: vcs.revision, else -X main.commit
	Modified  bool   // the tree had uncommitted changes
	GoVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Revision: commit, GoVersion: runtime.Version()}
	b.Modified = strings.HasSuffix(version, "-dirty")
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

// String is the version shown to people: the Makefile's, the module's, the
// commit's, or fallbackVersion.
func (b buildInfo) String() string {
	switch {
	case b.Version != "":
		return b.Version
	case b.Module != "" && b.Module != "(devel)":
		return b.Module
	case b.Revision != "":
		r := b.Revision[:min(12, len(b.Revision))]
		if b.Modified {
			r += "-dirty"
		}
		return r
	}
	return fallbackVersion
}

// frLen is the size of the Firmware Revision of Identify Controller (NVMe
// base specification 2.0, figure 275: FR, 8 ASCII bytes).
const frLen = 8

var (
	// A release: v1.2.3, from git describe or a module tag; -dirty from git
	// describe, +dirty from Go.
	releaseRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)([-+]dirty)?$`)
	// A commit in git describe (v1.2.3-4-g1a2b3c4, or 1a2b3c4 alone) or a
	// pseudo-version (v0.0.0-20261123101500-1a2b3c4d5e6f).
	describeRE = regexp.MustCompile(`(?:^|-g)([0-9a-f]{7,40})(?:-dirty)?$`)
	pseudoRE   = regexp.MustCompile(`-([0-9a-f]{12})(?:\+dirty)?$`)
)

// firmwareRevision is what hosts see as the firmware revision: the release
// (1.2.3, 1.2.3+ when built from a modified tree) when the build is one,
// else the commit's first 8 hex digits (7 and + when modified), else
// fallbackVersion. Never a word like "dev": hosts and inventories compare it.
func (b buildInfo) firmwareRevision() string {
	dirty := b.Modified
	for _, v := range []string{b.Version, b.Module} {
		m := releaseRE.FindStringSubmatch(v)
		if m == nil {
			continue
		}
		fr := m[1]
		if dirty || m[2] != "" {
			fr += "+"
		}
		if len(fr) <= frLen {
			return fr
		}
	}
	rev := b.Revision
	if rev == "" {
		if m := describeRE.FindStringSubmatch(b.Version); m != nil {
			rev = m[1]
		} else if m := pseudoRE.FindStringSubmatch(b.Module); m != nil {
			rev = m[1]
		}
	}
	dirty = dirty || strings.HasSuffix(b.Version, "-dirty") || strings.HasSuffix(b.Module, "+dirty")
	if rev != "" && isASCIIPrintable(rev) {
		if dirty {
			return rev[:min(frLen-1, len(rev))] + "+"
		}
		return rev[:min(frLen, len(rev))]
	}
	return fallbackVersion
}

func isASCIIPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// firmwareRevision is this binary's (fabric.Options.FirmwareRevision).
func firmwareRevision() string { return readBuildInfo().firmwareRevision() }

// text is what `nvmeof-tgt version` prints.
func (b buildInfo) text() string {
	var s strings.Builder
	fmt.Fprintf(&s, "nvmeof-tgt %s\n", b)
	fmt.Fprintf(&s, "go: %s\n", b.GoVersion)
	if b.Revision != "" {
		mod := ""
		if b.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(&s, "commit: %s%s\n", b.Revision, mod)
	}
	fmt.Fprintf(&s, "firmware revision: %s\n", b.firmwareRevision())
	return s.String()
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the Go version, the commit and the firmware revision hosts see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), readBuildInfo().text())
			return err
		},
	}
}
