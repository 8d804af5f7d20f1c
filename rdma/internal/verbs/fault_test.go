package verbs

import (
	"syscall"
	"testing"
)

func TestParseFaultPlan(t *testing.T) {
	tests := []struct {
		in           string
		nil_, bad    bool
		every, times int
	}{
		{in: "", nil_: true},
		{in: "7", every: 7, times: 1},
		{in: "200:3", every: 200, times: 3},
		{in: "1:1", every: 1, times: 1},
		{in: "0", bad: true},
		{in: "-1", bad: true},
		{in: "5:0", bad: true},
		{in: "5:", bad: true},
		{in: "x", bad: true},
		{in: "5:2:1", bad: true},
	}
	for _, tc := range tests {
		f, err := parseFaultPlan(tc.in)
		switch {
		case tc.bad:
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.nil_:
			if f != nil {
				t.Errorf("%q: plan %+v, want none", tc.in, f)
			}
		case f == nil || f.every != tc.every || f.times != tc.times:
			t.Errorf("%q: plan %+v, want every %d times %d", tc.in, f, tc.every, tc.times)
		}
	}
}

// TestFaultPlanCuts drives a plan through a sequence of posts and checks
// which post fails, in which group, of which kind, and what Post reports.
func TestFaultPlanCuts(t *testing.T) {
	enomem := -int32(syscall.ENOMEM)
	type post struct {
		groups []postGroup // sends and recvs staged
		// want after the post: per group, the count passed to C during it,
		// and the result fields after apply.
		cSends, cRecvs []uint32
		sendRC, recvRC []int32
		sendsPosted    []int32
		recvsPosted    []int32
	}
	g := func(sends, recvs uint32) postGroup { return postGroup{sends: sends, recvs: recvs} }
	tests := []struct {
		name  string
		plan  string
		posts []post
	}{
		{
			name: "every second post, twice: sends then receives",
			plan: "2:2",
			posts: []post{
				{groups: []postGroup{g(4, 4)}, cSends: []uint32{4}, cRecvs: []uint32{4},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{4}, recvsPosted: []int32{4}},
				{groups: []postGroup{g(0, 2), g(5, 3)}, cSends: []uint32{0, 2}, cRecvs: []uint32{2, 3},
					sendRC: []int32{0, enomem}, recvRC: []int32{0, 0}, sendsPosted: []int32{0, 2}, recvsPosted: []int32{2, 3}},
				{groups: []postGroup{g(1, 1)}, cSends: []uint32{1}, cRecvs: []uint32{1},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{1}, recvsPosted: []int32{1}},
				{groups: []postGroup{g(3, 3)}, cSends: []uint32{3}, cRecvs: []uint32{1},
					sendRC: []int32{0}, recvRC: []int32{enomem}, sendsPosted: []int32{3}, recvsPosted: []int32{1}},
				// Spent: nothing more fails.
				{groups: []postGroup{g(3, 3)}, cSends: []uint32{3}, cRecvs: []uint32{3},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{3}, recvsPosted: []int32{3}},
				{groups: []postGroup{g(3, 3)}, cSends: []uint32{3}, cRecvs: []uint32{3},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{3}, recvsPosted: []int32{3}},
			},
		},
		{
			name: "a due receive fault waits for a post with receives",
			plan: "1:2",
			posts: []post{
				{groups: []postGroup{g(1, 0)}, cSends: []uint32{0}, cRecvs: []uint32{0},
					sendRC: []int32{enomem}, recvRC: []int32{0}, sendsPosted: []int32{0}, recvsPosted: []int32{0}},
				{groups: []postGroup{g(2, 0)}, cSends: []uint32{2}, cRecvs: []uint32{0},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{2}, recvsPosted: []int32{0}},
				{groups: []postGroup{g(2, 5)}, cSends: []uint32{2}, cRecvs: []uint32{2},
					sendRC: []int32{0}, recvRC: []int32{enomem}, sendsPosted: []int32{2}, recvsPosted: []int32{2}},
			},
		},
		{
			name: "no plan",
			plan: "",
			posts: []post{
				{groups: []postGroup{g(2, 2)}, cSends: []uint32{2}, cRecvs: []uint32{2},
					sendRC: []int32{0}, recvRC: []int32{0}, sendsPosted: []int32{2}, recvsPosted: []int32{2}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFaultPlan(tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			for n, p := range tc.posts {
				gs := append([]postGroup(nil), p.groups...)
				c := f.cut(gs)
				// What C sees, then what a successful C post writes back.
				for i := range gs {
					if gs[i].sends != p.cSends[i] || gs[i].recvs != p.cRecvs[i] {
						t.Fatalf("post %d group %d: C posts %d sends %d recvs, want %d %d",
							n, i, gs[i].sends, gs[i].recvs, p.cSends[i], p.cRecvs[i])
					}
					gs[i].sendRC, gs[i].sendsPosted = 0, int32(gs[i].sends)
					gs[i].recvRC, gs[i].recvsPosted = 0, int32(gs[i].recvs)
				}
				c.apply(gs)
				for i := range gs {
					if gs[i].sends != p.groups[i].sends || gs[i].recvs != p.groups[i].recvs {
						t.Errorf("post %d group %d: counts not restored: %+v", n, i, gs[i])
					}
					if gs[i].sendRC != p.sendRC[i] || gs[i].recvRC != p.recvRC[i] ||
						gs[i].sendsPosted != p.sendsPosted[i] || gs[i].recvsPosted != p.recvsPosted[i] {
						t.Errorf("post %d group %d: got %+v, want send rc %d posted %d, recv rc %d posted %d",
							n, i, gs[i], p.sendRC[i], p.sendsPosted[i], p.recvRC[i], p.recvsPosted[i])
					}
				}
			}
		})
	}
}

// TestFaultApplyKeepsRealFailure: when the real post failed earlier in the
// group than the cut, that failure is what Post reports.
func TestFaultApplyKeepsRealFailure(t *testing.T) {
	f, _ := parseFaultPlan("1")
	gs := []postGroup{{sends: 6}}
	c := f.cut(gs)
	if gs[0].sends != 3 {
		t.Fatalf("C posts %d sends, want 3", gs[0].sends)
	}
	gs[0].sendRC, gs[0].sendsPosted = -int32(syscall.EINVAL), 1
	c.apply(gs)
	if gs[0].sends != 6 || gs[0].sendRC != -int32(syscall.EINVAL) || gs[0].sendsPosted != 1 {
		t.Fatalf("got %+v, want the real failure (EINVAL after 1) and 6 sends", gs[0])
	}
}
