package rados

import (
	"slices"
	"strings"
)

// ParseAddrs splits what rados_getaddrs gives ("[v2:10.0.0.1:0/123,
// v1:10.0.0.1:0/123]", or one address alone) into addresses without their
// protocol, each once: what `ceph osd blocklist add` takes.
func ParseAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(strings.Trim(strings.TrimSpace(s), "[]"), ",") {
		a = strings.TrimSpace(a)
		for _, p := range []string{"v1:", "v2:", "any:"} {
			a = strings.TrimPrefix(a, p)
		}
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// ParseAddr is one address as rados_list_lockers gives it, without its
// protocol: as ParseAddrs gives it.
func ParseAddr(s string) string {
	if a := ParseAddrs(s); len(a) > 0 {
		return a[0]
	}
	return ""
}

// StateObject is the name of group name's state object; LeasesObject that
// of its gateways' leases.
func StateObject(name string) string { return "nvmeof-tgt." + name + ".state" }

// LeasesObject: see StateObject.
func LeasesObject(name string) string { return "nvmeof-tgt." + name + ".leases" }
