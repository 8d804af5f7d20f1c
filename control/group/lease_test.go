package group

import (
	"reflect"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lease := 10 * time.Second
	tr := NewTracker(lease)
	rec := func(inc string, seq uint64) LeaseRecord {
		return LeaseRecord{Incarnation: inc, Seq: seq, Addrs: []string{inc}}
	}
	tr.Observe(t0, map[int]LeaseRecord{2: rec("b1", 5)})
	steps := []struct {
		name   string
		at     time.Duration
		recs   map[int]LeaseRecord
		fence  bool // SetFenced(2) before checking
		alive  bool
		fenced bool
	}{
		{"first seen counts as fresh", 9 * time.Second, nil, false, true, false},
		{"a lease later, unchanged: dead", 10 * time.Second, nil, false, false, false},
		{"a heartbeat: alive again", 11 * time.Second, map[int]LeaseRecord{2: rec("b1", 6)}, false, true, false},
		{"expired again", 22 * time.Second, nil, false, false, false},
		{"fenced", 22 * time.Second, nil, true, false, true},
		{"the fenced incarnation writes: still dead", 23 * time.Second, map[int]LeaseRecord{2: rec("b1", 7)}, false, false, true},
		{"restarted: a new incarnation, alive", 24 * time.Second, map[int]LeaseRecord{2: rec("b2", 0)}, false, true, false},
		{"stopped cleanly: dead and fenced at once", 25 * time.Second, map[int]LeaseRecord{2: {Incarnation: "b2", Seq: 1, Stopped: true}}, false, false, true},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.recs != nil {
			tr.Observe(now, s.recs)
		}
		if s.fence {
			tr.SetFenced(2)
		}
		if a, f := tr.Alive(2, now), tr.Fenced(2); a != s.alive || f != s.fenced {
			t.Errorf("%s: alive %v fenced %v, want %v %v", s.name, a, f, s.alive, s.fenced)
		}
	}
	if m := tr.Members(); !reflect.DeepEqual(m, []int{2}) {
		t.Errorf("members %v", m)
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
