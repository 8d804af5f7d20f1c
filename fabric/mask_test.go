package fabric

import (
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	maskHostA = "nqn.2026-11.io.example:host-a"
	maskHostB = "nqn.2026-11.io.example:host-b"
	maskHostC = "nqn.2026-11.io.example:host-c"
)

// maskedHost is one host's controller: its admin queue and an I/O queue.
type maskedHost struct {
	nqn   string
	admin *host
	io    *host
}

func (r *rig) connectAs(hostnqn string, hostID byte) maskedHost {
	r.t.Helper()
	id := testHostID
	id[0] = hostID
	h := r.dial(0, 32)
	rsp := h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, hostnqn, id, 0xffff))
	h.propSet(nvme.PropCC, ccEnable)
	io := r.dial(1, 64)
	io.mustOK(connectCmd(1, 63, 0), connectData(testNQN, hostnqn, id, nvme.CNTLID(rsp.DW0())))
	return maskedHost{nqn: hostnqn, admin: h, io: io}
}

// view is what a host's controller shows of namespace nsid.
type view struct {
	active    bool        // in the Active Namespace ID list
	nsze      uint64      // Identify Namespace's NSZE: 0 for an inactive NSID
	descs     nvme.Status // Identify CNS 03h
	read      nvme.Status // a Read
	feature   nvme.Status // Get Features Reservation Notification Mask
	anaListed bool        // in the ANA log's descriptors
}

func (m maskedHost) view(t *testing.T, nsid nvme.NSID) view {
	t.Helper()
	var v view
	v.active = slices.Contains(activeNS(t, m.admin), nsid)
	v.nsze = nsze(t, m.admin, nsid)
	_, v.descs = identify(m.admin, nvme.CNSNSDescriptorList, nsid)
	c := ioCmd(nvme.OpRead, 7, 0, 8)
	c.SetNSID(nsid)
	v.read = m.io.submit(c, make([]byte, 8*512)).Status()
	g := newCmd(nvme.OpAdminGetFeatures, 8)
	g.SetNSID(nsid)
	g.SetCDW(10, nvme.FeatReservationMask)
	v.feature = m.admin.submit(g, nil).Status()
	for _, d := range anaLog(t, m.admin, 0, false) {
		v.anaListed = v.anaListed || slices.Contains(d.NSIDs, nsid)
	}
	return v
}

var (
	seen   = view{active: true, nsze: 4 << 20 / 512, descs: nvme.StatusSuccess, read: nvme.StatusSuccess, feature: nvme.StatusSuccess, anaListed: true}
	hidden = view{descs: nvme.StatusInvalidNamespace.WithDNR(), read: nvme.StatusInvalidNamespace.WithDNR(),
		feature: nvme.StatusInvalidNamespace.WithDNR()}
)

// TestNamespaceMask: a masked namespace is attached to the controllers of
// the hosts its mask names only; to the others it is an inactive NSID in
// every command that names it.
func TestNamespaceMask(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mask  []string
		wantA view
		wantB view
	}{
		{"no mask", nil, seen, seen},
		{"A only", []string{maskHostA}, seen, hidden},
		{"B only", []string{maskHostB}, hidden, seen},
		{"both", []string{maskHostB, maskHostA}, seen, seen},
		{"another host", []string{maskHostC}, hidden, hidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Hosts = tc.mask })
			a, b := r.connectAs(maskHostA, 0xa), r.connectAs(maskHostB, 0xb)
			if got := a.view(t, 1); got != tc.wantA {
				t.Errorf("host A sees %+v, want %+v", got, tc.wantA)
			}
			if got := b.view(t, 1); got != tc.wantB {
				t.Errorf("host B sees %+v, want %+v", got, tc.wantB)
			}
			want := slices.Sorted(slices.Values(tc.mask))
			if got := r.ns.Hosts(); !slices.Equal(got, want) {
				t.Errorf("Hosts() %v, want %v", got, want)
			}
		})
	}
}

// TestNamespaceMaskLive: a mask changed while hosts are connected tells
// the controllers whose view changed, and only those, with the NSID in
// their Changed Namespace List; their commands follow at once.
func TestNamespaceMaskLive(t *testing.T) {
	r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.Hosts = []string{maskHostA} })
	hs := []maskedHost{r.connectAs(maskHostA, 0xa), r.connectAs(maskHostB, 0xb), r.connectAs(maskHostC, 0xc)}
	for _, h := range hs {
		setAEC(h.admin, nvme.AECNSAttrNotices)
	}
	evs := make([]<-chan nvme.Completion, len(hs))
	for _, step := range []struct {
		mask    []string
		changed []bool // of A, B, C
		sees    []bool
	}{
		{[]string{maskHostB}, []bool{true, true, false}, []bool{false, true, false}},
		{[]string{maskHostA, maskHostB}, []bool{true, false, false}, []bool{true, true, false}},
		{[]string{maskHostA, maskHostB}, []bool{false, false, false}, []bool{true, true, false}},
		{nil, []bool{false, false, true}, []bool{true, true, true}},
		{[]string{maskHostC}, []bool{true, true, false}, []bool{false, false, true}},
	} {
		// An AER not completed by the last step is still held.
		for i, h := range hs {
			if evs[i] == nil {
				evs[i] = aer(h.admin, uint16(100+i))
			}
		}
		if err := r.sub.SetNamespaceHosts(1, step.mask); err != nil {
			t.Fatal(err)
		}
		for i, h := range hs {
			if step.changed[i] {
				wantEvent(t, evs[i], nsChangedEvent)
				evs[i] = nil
				if got := changedNS(t, h.admin, false); !slices.Equal(got, []nvme.NSID{1}) {
					t.Errorf("mask %v: %s's changed namespaces %v, want [1]", step.mask, h.nqn, got)
				}
			} else {
				wantNoEvent(t, evs[i])
				if got := changedNS(t, h.admin, false); len(got) != 0 {
					t.Errorf("mask %v: %s's changed namespaces %v, want none", step.mask, h.nqn, got)
				}
			}
			want := hidden
			if step.sees[i] {
				want = seen
			}
			if got := h.view(t, 1); got != want {
				t.Errorf("mask %v: %s sees %+v, want %+v", step.mask, h.nqn, got, want)
			}
		}
	}
}

// TestNamespaceMaskNotices: namespaces added, resized and removed, and ANA
// groups moved, are announced to the controllers that see them only.
func TestNamespaceMaskNotices(t *testing.T) {
	r := newRig(t)
	a, b := r.connectAs(maskHostA, 0xa), r.connectAs(maskHostB, 0xb)
	setAEC(a.admin, nvme.AECNSAttrNotices|nvme.AECANAChange)
	setAEC(b.admin, nvme.AECNSAttrNotices|nvme.AECANAChange)
	evA, evB := aer(a.admin, 100), aer(b.admin, 100)
	nc := memNS(t, 2, 1<<20)
	nc.Hosts = []string{maskHostA}
	if _, err := r.sub.AddNamespace(nc); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, evA, nsChangedEvent)
	wantNoEvent(t, evB)
	if got := changedNS(t, a.admin, false); !slices.Equal(got, []nvme.NSID{2}) {
		t.Fatalf("A's changed namespaces %v, want [2]", got)
	}
	evA = aer(a.admin, 101)
	if err := r.sub.SetNamespaceANAGroup(2, 2); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, evA, nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoANAChange, nvme.LogANA))
	wantNoEvent(t, evB)
	evA = aer(a.admin, 102)
	if err := r.sub.RemoveNamespace(2); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, evA, nsChangedEvent)
	wantNoEvent(t, evB)
	if got := changedNS(t, b.admin, false); len(got) != 0 {
		t.Fatalf("B's changed namespaces %v, want none", got)
	}
}

func TestNamespaceMaskRefused(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		name  string
		hosts []string
	}{
		{"empty", []string{""}},
		{"a slash", []string{maskHostA, "nqn.2026-11.io.example:a/b"}},
		{"too long", []string{"nqn.2026-11.io.example:" + strings.Repeat("x", nvme.MaxNQNLength)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.sub.SetNamespaceHosts(1, tc.hosts); err == nil {
				t.Fatalf("mask %q taken", tc.hosts)
			}
			if got := r.ns.Hosts(); got != nil {
				t.Fatalf("mask %v after a refused change", got)
			}
		})
	}
	if err := r.sub.SetNamespaceHosts(9, []string{maskHostA}); err == nil {
		t.Fatal("a mask on a namespace that is not there was taken")
	}
}
