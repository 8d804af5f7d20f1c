package netlab

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	guests := []GuestSpec{{Name: "target"}, {Name: "host", CPUs: 2}, {Name: "target2", Off: true}}
	links := []LinkSpec{{"a", "target", "host"}, {"b", "target", "host"}, {"c", "target2", "host"}}
	lab, err := Build(guests, links, "host", 1, 2048, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := lab.Guest("host"); g.CPUs != 2 || g.MemMB != 2048 || g.Agent != "" || g.Index != 2 {
		t.Errorf("host: %+v", g)
	}
	if g, _ := lab.Guest("target2"); !g.Off || g.Agent != "10.254.3.3:7070" || g.CPUs != 1 {
		t.Errorf("target2: %+v", g)
	}
	a, ok := lab.Link("a")
	want := Link{Name: "a", Ends: [2]End{
		{Guest: "target", Addr: "10.10.1.1", Netdev: "neta", RDMADev: "rxea", MAC: "52:54:00:0a:01:01"},
		{Guest: "host", Addr: "10.10.1.2", Netdev: "neta", RDMADev: "rxea", MAC: "52:54:00:0a:01:02"},
	}}
	if !ok || !reflect.DeepEqual(a, want) {
		t.Errorf("link a = %+v, want %+v", a, want)
	}
	if c, _ := lab.Link("c"); c.Ends[0].Addr != "10.10.3.3" || c.Ends[1].Addr != "10.10.3.2" {
		t.Errorf("link c = %+v", c)
	}
	m, ok := lab.Link("mgmt1")
	if !ok || !m.Mgmt || m.Ends[0].Guest != "host" || m.Ends[1].Addr != "10.254.1.1" || m.Ends[1].RDMADev != "" {
		t.Errorf("mgmt1 = %+v", m)
	}
	if _, ok := lab.Link("mgmt2"); ok {
		t.Error("a management link to the driver itself")
	}
	var nics []string
	for _, e := range lab.NICs("host") {
		nics = append(nics, e.Netdev)
	}
	if got := strings.Join(nics, " "); got != "neta netb netc mgmt1 mgmt3" {
		t.Errorf("host's NICs: %s", got)
	}
	if p, _ := a.Peer("host"); p.Guest != "target" {
		t.Errorf("peer of host on a: %+v", p)
	}

	// Every MAC and every address once.
	seen := map[string]bool{}
	for _, k := range lab.Links {
		for _, e := range k.Ends {
			for _, v := range []string{e.MAC, e.Addr} {
				if seen[v] {
					t.Errorf("%s twice", v)
				}
				seen[v] = true
			}
		}
	}

	path := filepath.Join(t.TempDir(), "lab.json")
	if err := lab.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil || !reflect.DeepEqual(back, lab) {
		t.Errorf("Load(Save) = %+v, %v", back, err)
	}
}

func TestBuildRejects(t *testing.T) {
	two := []GuestSpec{{Name: "target"}, {Name: "host"}}
	ab := []LinkSpec{{"a", "target", "host"}}
	for _, c := range []struct {
		name   string
		guests []GuestSpec
		links  []LinkSpec
		driver string
	}{
		{"one guest", two[:1], ab, "target"},
		{"no link", two, nil, "host"},
		{"bad guest name", []GuestSpec{{Name: "Target"}, {Name: "host"}}, ab, "host"},
		{"long guest name", []GuestSpec{{Name: "abcdefghijklm"}, {Name: "host"}}, ab, "host"},
		{"guest twice", []GuestSpec{{Name: "host"}, {Name: "host"}}, ab, "host"},
		{"no such driver", two, ab, "nobody"},
		{"driver off", []GuestSpec{{Name: "target"}, {Name: "host", Off: true}}, ab, "host"},
		{"bad link name", two, []LinkSpec{{"A", "target", "host"}}, "host"},
		{"link twice", two, []LinkSpec{{"a", "target", "host"}, {"a", "host", "target"}}, "host"},
		{"link to itself", two, []LinkSpec{{"a", "host", "host"}}, "host"},
		{"link to nobody", two, []LinkSpec{{"a", "host", "x"}}, "host"},
		{"tiny guest", []GuestSpec{{Name: "target", MemMB: 100}, {Name: "host"}}, ab, "host"},
	} {
		if _, err := Build(c.guests, c.links, c.driver, 1, 2048, 2<<30); err == nil {
			t.Errorf("%s: built", c.name)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want GuestSpec
		ok   bool
	}{
		{"target", GuestSpec{Name: "target"}, true},
		{"target2,off", GuestSpec{Name: "target2", Off: true}, true},
		{"t,cpus=2,mem=3072,disk=/var/tmp/t.img,disk-size=4G", GuestSpec{Name: "t", CPUs: 2, MemMB: 3072, Disk: "/var/tmp/t.img", DiskSize: 4 << 30}, true},
		{"t,cpus=x", GuestSpec{}, false},
		{"t,off=1", GuestSpec{}, false},
		{"t,disk=", GuestSpec{}, false},
		{"t,disk-size=3T", GuestSpec{}, false},
		{"t,colour=red", GuestSpec{}, false},
	} {
		got, err := ParseGuest(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseGuest(%q) = %+v, %v", c.in, got, err)
		}
	}
	for _, c := range []struct {
		in   string
		want LinkSpec
		ok   bool
	}{
		{"a=target:host", LinkSpec{"a", "target", "host"}, true},
		{"a=target", LinkSpec{}, false},
		{"=target:host", LinkSpec{}, false},
		{"a=:host", LinkSpec{}, false},
		{"a:target:host", LinkSpec{}, false},
	} {
		got, err := ParseLink(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseLink(%q) = %+v, %v", c.in, got, err)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"512", 512}, {"64K", 64 << 10}, {"512M", 512 << 20}, {"2G", 2 << 30},
		{"0", -1}, {"-1G", -1}, {"G", -1}, {"1.5G", -1}, {"2000G", -1},
	} {
		got, err := ParseSize(c.in)
		if c.want < 0 && err == nil || c.want >= 0 && (err != nil || got != c.want) {
			t.Errorf("ParseSize(%q) = %d, %v", c.in, got, err)
		}
	}
}
