package group

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lease := 10 * time.Second
	tr := NewTracker(lease)
	const b1, b2 = "10.0.0.2:0/1", "10.0.0.2:0/2"
	// held is a record read while its incarnation holds the lock from its
	// own client; forged one that does not count.
	held := func(inc, addr string, seq uint64, more ...string) map[int]Observed {
		return map[int]Observed{2: {Rec: LeaseRecord{Incarnation: inc, Seq: seq, Addrs: append([]string{addr}, more...)}, Holder: &Holder{Cookie: inc, Addr: addr}}}
	}
	rec := func(r LeaseRecord, h *Holder) map[int]Observed { return map[int]Observed{2: {Rec: r, Holder: h}} }
	tr.Observe(t0, held("b1", b1, 5))
	steps := []struct {
		name          string
		at            time.Duration
		recs          map[int]Observed
		fence         bool // SetFenced(2) before checking
		alive, fenced bool
		idle          bool
		trusted, owed []string
	}{
		{name: "first seen counts as fresh", at: 9 * time.Second, alive: true, trusted: []string{b1}},
		{name: "a lease later, unchanged: dead", at: 10 * time.Second, trusted: []string{b1}},
		{name: "a heartbeat: alive again", at: 11 * time.Second, recs: held("b1", b1, 6), alive: true, trusted: []string{b1}},
		// 9 s after the last renewal: alive, and none of these renews it (the next step's does).
		{name: "a record whose incarnation holds no lock renews nothing, names no address", at: 20 * time.Second,
			recs: rec(LeaseRecord{Incarnation: "b1", Seq: 99, Addrs: []string{"10.0.0.3:0/7"}}, nil), alive: true, trusted: []string{b1}},
		{name: "another incarnation than the lock's: the same", at: 20 * time.Second,
			recs: rec(LeaseRecord{Incarnation: "x", Seq: 1, Addrs: []string{b1}}, &Holder{Cookie: "b1", Addr: b1}), alive: true, trusted: []string{b1}},
		{name: "the incarnation's lock taken by another client: not its record", at: 20 * time.Second,
			recs: rec(LeaseRecord{Incarnation: "b1", Seq: 100, Addrs: []string{"10.0.0.3:0/7"}, Stopped: true}, &Holder{Cookie: "b1", Addr: "10.0.0.3:0/7"}), alive: true, trusted: []string{b1}},
		{name: "addresses of another machine than the holder's: renews, but only its machine's are to fence", at: 21 * time.Second,
			recs: held("b1", b1, 101, "10.0.0.3:0/8"), alive: true, trusted: []string{b1}},
		{name: "idle, from the holder seen: believed", at: 22 * time.Second,
			recs: rec(LeaseRecord{Incarnation: "b1", Seq: 102, Addrs: []string{b1}, Idle: true}, &Holder{Cookie: "b1", Addr: b1}), alive: true, idle: true, trusted: []string{b1}},
		{name: "expired again", at: 32 * time.Second, trusted: []string{b1}},
		{name: "fenced", at: 32 * time.Second, fence: true, fenced: true, trusted: []string{b1}},
		{name: "the fenced incarnation writes: still dead", at: 33 * time.Second, recs: held("b1", b1, 103), fenced: true, trusted: []string{b1}},
		{name: "restarted: a new incarnation, alive; the fenced one owes nothing", at: 34 * time.Second, recs: held("b2", b2, 0), alive: true, trusted: []string{b2}},
		{name: "a clean stop from the holder seen: dead and fenced at once", at: 35 * time.Second,
			recs: rec(LeaseRecord{Incarnation: "b2", Seq: 1, Stopped: true, Addrs: []string{b2}}, &Holder{Cookie: "b2", Addr: b2}), fenced: true, trusted: []string{b2}},
		{name: "a new incarnation after a clean stop owes nothing", at: 36 * time.Second, recs: held("b3", "10.0.0.2:0/3", 0), alive: true, trusted: []string{"10.0.0.2:0/3"}},
		{name: "another, with the one before neither stopped nor fenced: its clients owed a fence", at: 37 * time.Second,
			recs: held("b4", "10.0.0.2:0/4", 0), alive: true, trusted: []string{"10.0.0.2:0/4"}, owed: []string{"10.0.0.2:0/3"}},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.recs != nil {
			tr.Observe(now, s.recs)
		}
		if s.fence {
			tr.SetFenced(2)
		}
		if a, f, i := tr.Alive(2, now), tr.Fenced(2), tr.Idle(2, now); a != s.alive || f != s.fenced || i != s.idle {
			t.Errorf("%s: alive %v fenced %v idle %v, want %v %v %v", s.name, a, f, i, s.alive, s.fenced, s.idle)
		}
		if got := tr.Trusted(2); !reflect.DeepEqual(got, s.trusted) {
			t.Errorf("%s: trusted addresses %v, want %v", s.name, got, s.trusted)
		}
		if got := tr.Owed(2); !reflect.DeepEqual(got, s.owed) {
			t.Errorf("%s: owed %v, want %v", s.name, got, s.owed)
		}
	}
	tr.SetOwedFenced(2, []string{"10.0.0.2:0/3"})
	if got := tr.Owed(2); len(got) != 0 {
		t.Errorf("owed once fenced: %v", got)
	}
	if m := tr.Members(); !reflect.DeepEqual(m, []int{2}) {
		t.Errorf("members %v", m)
	}
	// A gateway first seen through a record that does not count: a member,
	// dead a lease later, with no address to blocklist, stop or not; and a
	// stop first seen from a holder never seen before is not believed.
	tr2 := NewTracker(lease)
	tr2.Observe(t0, map[int]Observed{3: {Rec: LeaseRecord{Incarnation: "c", Stopped: true, Addrs: []string{"10.0.0.3:0/1"}}}})
	tr2.Observe(t0, map[int]Observed{4: {Rec: LeaseRecord{Incarnation: "d", Stopped: true, Idle: true, Addrs: []string{"10.0.0.4:0/1"}}, Holder: &Holder{Cookie: "d", Addr: "10.0.0.4:0/1"}}})
	if tr2.Alive(3, t0.Add(lease)) || tr2.Fenced(3) || tr2.Trusted(3) != nil {
		t.Errorf("a gateway never seen holding its lease: alive %v fenced %v trusted %v", tr2.Alive(3, t0.Add(lease)), tr2.Fenced(3), tr2.Trusted(3))
	}
	if tr2.Fenced(4) || tr2.Idle(4, t0) || !tr2.Alive(4, t0) {
		t.Errorf("a stop and idle first seen: fenced %v idle %v alive %v, want neither believed", tr2.Fenced(4), tr2.Idle(4, t0), tr2.Alive(4, t0))
	}
}

func TestDecodeLease(t *testing.T) {
	many := make([]string, limits.GroupLeaseAddrs+1)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.0.1:0/%d", i)
	}
	for _, tt := range []struct {
		name, rec, want string
	}{
		{"good", `{"incarnation":"a","seq":1,"addrs":["10.0.0.1:0/123","[fd00::1]:6800/9"]}`, ""},
		{"nonce 0: every client of the address", `{"incarnation":"a","seq":1,"addrs":["10.0.0.1:0/0"]}`, "not a client address"},
		{"no incarnation", `{"incarnation":"","seq":1,"addrs":[]}`, "incarnation"},
		{"not an address", `{"incarnation":"a","seq":1,"addrs":["client.admin"]}`, "not a client address"},
		{"a host name", `{"incarnation":"a","seq":1,"addrs":["ceph1:0/1"]}`, "not a client address"},
		{"too many addresses", fmt.Sprintf(`{"incarnation":"a","seq":1,"addrs":%s}`, mustJSON(many)), "addresses, more than"},
		{"too long", `{"incarnation":"a","seq":1,"addrs":[],"x":"` + strings.Repeat("x", limits.GroupLeaseBytes) + `"}`, "bytes, more than"},
	} {
		_, err := DecodeLease([]byte(tt.rec))
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestView(t *testing.T) {
	tests := []struct {
		name   string
		v      View
		ana    map[string]string
		fence  []int
		owners map[uint32]int
	}{
		{
			name: "both alive: each its own group",
			v:    View{Self: 1, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{2: true}, Groups: []uint32{1, 2}},
			ana:  map[string]string{"1": "optimized", "2": "inaccessible"}, owners: map[uint32]int{1: 1, 2: 2},
		},
		{
			name: "gateway 2 sees the same",
			v:    View{Self: 2, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{1: true}, Groups: []uint32{1, 2}},
			ana:  map[string]string{"1": "inaccessible", "2": "optimized"}, owners: map[uint32]int{1: 1, 2: 2},
		},
		{
			name: "2 dead, not fenced: 1 must fence it and serves group 2 nowhere yet",
			v:    View{Self: 1, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{}, Groups: []uint32{1, 2}},
			ana:  map[string]string{"1": "optimized", "2": "inaccessible"}, fence: []int{2}, owners: map[uint32]int{1: 1, 2: 0},
		},
		{
			name: "2 dead and fenced: 1 takes group 2 over",
			v:    View{Self: 1, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{}, Fenced: map[int]bool{2: true}, Groups: []uint32{1, 2}},
			ana:  map[string]string{"1": "optimized", "2": "optimized"}, owners: map[uint32]int{1: 1, 2: 1},
		},
		{
			name: "2 alive but idle (it cannot read the state): 1 serves group 2, nothing to fence",
			v:    View{Self: 1, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{2: true}, Idle: map[int]bool{2: true}, Groups: []uint32{1, 2}},
			ana:  map[string]string{"1": "optimized", "2": "optimized"}, owners: map[uint32]int{1: 1, 2: 1},
		},
		{
			name: "1 idle: 2 is the taker of a dead 3",
			v:    View{Self: 2, SelfOK: true, Members: []int{1, 2, 3}, Alive: map[int]bool{1: true}, Idle: map[int]bool{1: true}},
			ana:  map[string]string{"1": "optimized", "2": "optimized", "3": "inaccessible"}, fence: []int{3}, owners: map[uint32]int{1: 2, 2: 2, 3: 0},
		},
		{
			name: "1 dead: 2 is the taker, 3 is not",
			v:    View{Self: 3, SelfOK: true, Members: []int{1, 2, 3}, Alive: map[int]bool{2: true}, Fenced: map[int]bool{1: true}},
			ana:  map[string]string{"1": "inaccessible", "2": "inaccessible", "3": "optimized"}, owners: map[uint32]int{1: 2, 2: 2, 3: 3},
		},
		{
			name: "the taker fences",
			v:    View{Self: 2, SelfOK: true, Members: []int{1, 2, 3}, Alive: map[int]bool{3: true}},
			ana:  map[string]string{"1": "inaccessible", "2": "optimized", "3": "inaccessible"}, fence: []int{1}, owners: map[uint32]int{1: 0, 2: 2, 3: 3},
		},
		{
			name: "own lease lost: every group inaccessible here, nothing fenced",
			v:    View{Self: 1, SelfOK: false, Members: []int{1, 2}, Alive: map[int]bool{}, Groups: []uint32{1}},
			ana:  map[string]string{"1": "inaccessible", "2": "inaccessible"}, owners: map[uint32]int{1: 0, 2: 0},
		},
		{
			name: "a group of no gateway: the taker's",
			v:    View{Self: 1, SelfOK: true, Members: []int{1, 2}, Alive: map[int]bool{2: true}, Groups: []uint32{7}},
			ana:  map[string]string{"1": "optimized", "2": "inaccessible", "7": "optimized"}, owners: map[uint32]int{1: 1, 2: 2, 7: 1},
		},
		{
			name: "alone",
			v:    View{Self: 1, SelfOK: true, Members: []int{1}, Groups: []uint32{1}},
			ana:  map[string]string{"1": "optimized"}, owners: map[uint32]int{1: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.ANAStates(); !reflect.DeepEqual(got, tt.ana) {
				t.Errorf("ANA %v, want %v", got, tt.ana)
			}
			if got := tt.v.ToFence(); !reflect.DeepEqual(got, tt.fence) {
				t.Errorf("fence %v, want %v", got, tt.fence)
			}
			if got := tt.v.Owners(); !reflect.DeepEqual(got, tt.owners) {
				t.Errorf("owners %v, want %v", got, tt.owners)
			}
		})
	}
}

func TestPickGroup(t *testing.T) {
	tests := []struct {
		members []int
		counts  map[uint32]int
		want    uint32
	}{
		{nil, nil, 1},
		{[]int{2, 1}, nil, 1},
		{[]int{1, 2}, map[uint32]int{1: 1}, 2},
		{[]int{1, 2}, map[uint32]int{1: 1, 2: 1}, 1},
		{[]int{1, 2, 3}, map[uint32]int{1: 3, 2: 1, 3: 1}, 2},
	}
	for _, tt := range tests {
		if got := PickGroup(tt.members, tt.counts); got != tt.want {
			t.Errorf("PickGroup(%v, %v) = %d, want %d", tt.members, tt.counts, got, tt.want)
		}
	}
}

func TestLeaseRecord(t *testing.T) {
	r := LeaseRecord{Incarnation: "x", Seq: 3, Addrs: []string{"10.0.0.1:0/1"}}
	got, err := DecodeLease(r.Encode())
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"", "{}", `{"incarnation":"x","zz":1}`, "[]"} {
		if _, err := DecodeLease([]byte(bad)); err == nil {
			t.Errorf("DecodeLease(%q) took it", bad)
		}
	}
}
