// Package netlab is the network lab of the end-to-end tests: several QEMU guests joined by
// virtual Ethernet links (tests/netlab/cmd/labnet boots them, tests/lab/e2e-net.sh runs the
// suite in them). It holds what the launcher and the tests share: the topology (Lab), the
// command agent that runs in each guest (Agent, Client) and the power requests a test sends the
// launcher (RequestPower, PowerCalls).
package netlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// AgentPort is the TCP port of every guest's agent, on its management address.
const AgentPort = 7070

// Lab is the topology of one lab run, as the launcher built it and as the guests read it
// (lab.json in each guest's control share).
type Lab struct {
	// Driver is the guest that runs the script (the test binary); the others run an agent.
	Driver string  `json:"driver"`
	Guests []Guest `json:"guests"`
	// Links are the data links, on which faults are made, then one management link per guest
	// other than the driver, from the driver to it, which no fault touches.
	Links []Link `json:"links"`
}

// Guest is one QEMU guest.
type Guest struct {
	Name  string `json:"name"`
	Index int    `json:"index"` // 1-based: the last byte of its address on every link
	CPUs  int    `json:"cpus"`
	MemMB int    `json:"mem_mb"`
	// Off guests are not booted with the lab; a power request boots them.
	Off bool `json:"off,omitempty"`
	// Disk is the image of the guest's own disk (/dev/vda, ext4, mounted at /scratch) on the
	// machine: made at the lab's start if missing, kept across the guest's power cuts and boots.
	// Empty: a new image in the run's directory, removed with it.
	Disk     string `json:"disk,omitempty"`
	DiskSize int64  `json:"disk_size"`
	// Agent is host:port of the guest's agent on its management link; empty for the driver.
	Agent string `json:"agent,omitempty"`
}

// Link is a point-to-point Ethernet link between two guests: a virtio-net NIC in each, joined
// by the launcher. Each link is its own /24.
type Link struct {
	Name string `json:"name"`
	// Mgmt marks a management link: the driver's command channel to one guest.
	Mgmt bool   `json:"mgmt,omitempty"`
	Ends [2]End `json:"ends"`
}

// End is one guest's side of a link.
type End struct {
	Guest   string `json:"guest"`
	Addr    string `json:"addr"` // IPv4, without the prefix (always /24)
	Netdev  string `json:"netdev"`
	RDMADev string `json:"rdma_dev,omitempty"` // the Soft-RoCE device on Netdev; none on a management link
	MAC     string `json:"mac"`
}

// GuestSpec and LinkSpec are what the launcher's flags say; Build makes a Lab of them.
type GuestSpec struct {
	Name     string
	CPUs     int  // 0: the default
	MemMB    int  // 0: the default
	Off      bool // not booted at the start
	Disk     string
	DiskSize int64 // 0: the default
}

type LinkSpec struct {
	Name string
	A, B string // guest names
}

// Limits of names: netdev names are at most 15 bytes ("net"+link, "mgmt"+index).
var (
	guestName = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)
	linkName  = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)
)

const maxGuests, maxLinks = 9, 32

// Build assigns indexes, addresses, MACs and device names. Data link L (1-based, in the order
// given) is 10.10.L.0/24 and guest i is 10.10.L.i on it, netdev "net"+name, Soft-RoCE device
// "rxe"+name, MAC 52:54:00:0a:LL:ii. The management link of guest g (index gi) is
// 10.254.gi.0/24, netdev "mgmt"+gi at both ends, MAC 52:54:00:fe:gi:ii.
func Build(guests []GuestSpec, links []LinkSpec, driver string, defCPUs, defMemMB int, defDisk int64) (*Lab, error) {
	if len(guests) < 2 || len(guests) > maxGuests {
		return nil, fmt.Errorf("%d guests: want 2 to %d", len(guests), maxGuests)
	}
	if len(links) == 0 || len(links) > maxLinks {
		return nil, fmt.Errorf("%d links: want 1 to %d", len(links), maxLinks)
	}
	lab := &Lab{Driver: driver}
	idx := map[string]int{}
	for i, gs := range guests {
		if !guestName.MatchString(gs.Name) {
			return nil, fmt.Errorf("guest name %q: want [a-z][a-z0-9]*, at most 12 characters", gs.Name)
		}
		if _, dup := idx[gs.Name]; dup {
			return nil, fmt.Errorf("guest %s given twice", gs.Name)
		}
		idx[gs.Name] = i + 1
		g := Guest{Name: gs.Name, Index: i + 1, CPUs: gs.CPUs, MemMB: gs.MemMB, Off: gs.Off, Disk: gs.Disk, DiskSize: gs.DiskSize}
		if g.CPUs == 0 {
			g.CPUs = defCPUs
		}
		if g.MemMB == 0 {
			g.MemMB = defMemMB
		}
		if g.DiskSize == 0 {
			g.DiskSize = defDisk
		}
		if g.CPUs < 1 || g.MemMB < 256 || g.DiskSize < 64<<20 {
			return nil, fmt.Errorf("guest %s: %d cpus, %d MiB, disk %d bytes: want at least 1, 256 MiB and 64 MiB", g.Name, g.CPUs, g.MemMB, g.DiskSize)
		}
		lab.Guests = append(lab.Guests, g)
	}
	di, ok := idx[driver]
	if !ok {
		return nil, fmt.Errorf("driver %q is not a guest", driver)
	}
	if lab.Guests[di-1].Off {
		return nil, fmt.Errorf("the driver %s cannot be off", driver)
	}
	seen := map[string]bool{}
	for l, ls := range links {
		if !linkName.MatchString(ls.Name) {
			return nil, fmt.Errorf("link name %q: want [a-z][a-z0-9]*, at most 8 characters", ls.Name)
		}
		if seen[ls.Name] {
			return nil, fmt.Errorf("link %s given twice", ls.Name)
		}
		seen[ls.Name] = true
		a, b := idx[ls.A], idx[ls.B]
		if a == 0 || b == 0 || a == b {
			return nil, fmt.Errorf("link %s=%s:%s: want two different guests", ls.Name, ls.A, ls.B)
		}
		link := Link{Name: ls.Name}
		for k, gi := range []int{a, b} {
			link.Ends[k] = End{Guest: lab.Guests[gi-1].Name, Addr: fmt.Sprintf("10.10.%d.%d", l+1, gi),
				Netdev: "net" + ls.Name, RDMADev: "rxe" + ls.Name, MAC: fmt.Sprintf("52:54:00:0a:%02x:%02x", l+1, gi)}
		}
		lab.Links = append(lab.Links, link)
	}
	for i := range lab.Guests {
		g := &lab.Guests[i]
		if g.Index == di {
			continue
		}
		link := Link{Name: "mgmt" + strconv.Itoa(g.Index), Mgmt: true}
		for k, gi := range []int{di, g.Index} {
			link.Ends[k] = End{Guest: lab.Guests[gi-1].Name, Addr: fmt.Sprintf("10.254.%d.%d", g.Index, gi),
				Netdev: link.Name, MAC: fmt.Sprintf("52:54:00:fe:%02x:%02x", g.Index, gi)}
		}
		g.Agent = fmt.Sprintf("%s:%d", link.Ends[1].Addr, AgentPort)
		lab.Links = append(lab.Links, link)
	}
	return lab, nil
}

// Guest returns the guest called name.
func (l *Lab) Guest(name string) (Guest, bool) {
	for _, g := range l.Guests {
		if g.Name == name {
			return g, true
		}
	}
	return Guest{}, false
}

// Link returns the link called name.
func (l *Lab) Link(name string) (Link, bool) {
	for _, k := range l.Links {
		if k.Name == name {
			return k, true
		}
	}
	return Link{}, false
}

// End returns guest's side of the link, if it is one of its ends.
func (k Link) End(guest string) (End, bool) {
	for _, e := range k.Ends {
		if e.Guest == guest {
			return e, true
		}
	}
	return End{}, false
}

// Peer returns the side of the link that is not guest's.
func (k Link) Peer(guest string) (End, bool) {
	switch guest {
	case k.Ends[0].Guest:
		return k.Ends[1], true
	case k.Ends[1].Guest:
		return k.Ends[0], true
	}
	return End{}, false
}

// NICs lists guest's ends of every link, in the order of the links: the order of its NICs.
func (l *Lab) NICs(guest string) []End {
	var out []End
	for _, k := range l.Links {
		if e, ok := k.End(guest); ok {
			out = append(out, e)
		}
	}
	return out
}

// Save writes the lab as JSON to path.
func (l *Lab) Save(path string) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a lab that Save wrote.
func Load(path string) (*Lab, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l Lab
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := l.Guest(l.Driver); !ok {
		return nil, fmt.Errorf("%s: driver %q is not a guest", path, l.Driver)
	}
	return &l, nil
}

// ParseGuest parses the launcher's --guest NAME[,off][,cpus=N][,mem=MB][,disk=PATH][,disk-size=SIZE].
func ParseGuest(s string) (GuestSpec, error) {
	parts := strings.Split(s, ",")
	g := GuestSpec{Name: parts[0]}
	for _, p := range parts[1:] {
		k, v, hasV := strings.Cut(p, "=")
		var err error
		switch {
		case k == "off" && !hasV:
			g.Off = true
		case k == "cpus" && hasV:
			g.CPUs, err = strconv.Atoi(v)
		case k == "mem" && hasV:
			g.MemMB, err = strconv.Atoi(v)
		case k == "disk" && hasV && v != "":
			g.Disk = v
		case k == "disk-size" && hasV:
			g.DiskSize, err = ParseSize(v)
		default:
			return GuestSpec{}, fmt.Errorf("guest %q: unknown option %q", s, p)
		}
		if err != nil {
			return GuestSpec{}, fmt.Errorf("guest %q: %s: %w", s, k, err)
		}
	}
	return g, nil
}

// ParseLink parses the launcher's --link NAME=GUEST:GUEST.
func ParseLink(s string) (LinkSpec, error) {
	name, ends, ok := strings.Cut(s, "=")
	a, b, ok2 := strings.Cut(ends, ":")
	if !ok || !ok2 || name == "" || a == "" || b == "" {
		return LinkSpec{}, fmt.Errorf("link %q: want NAME=GUEST:GUEST", s)
	}
	return LinkSpec{Name: name, A: a, B: b}, nil
}

var errSize = errors.New("want a size such as 512M or 2G")

// ParseSize parses a byte count with an optional K, M or G suffix (powers of 1024).
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, errSize
	}
	return n * mult, nil
}
