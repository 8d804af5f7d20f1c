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
	enomem, einval := -int32(syscall.ENOMEM), -int32(syscall.EINVAL)
	// res is one group's counts and results: staged before the post, seen
	// by C during it, or reported after it.
	type res struct {
		sends, recvs        uint32
		sendRC, sendsPosted int32
		recvRC, recvsPosted int32
	}
	type post struct {
		staged []res // sends and recvs
		inC    []res // sends and recvs C is asked to post
		// real, when set, is what C reports for group 0 (a real failure);
		// otherwise C posts everything it is asked to.
		real *res
		want []res // results after apply
	}
	ok := func(s, r uint32) res { return res{sends: s, recvs: r, sendsPosted: int32(s), recvsPosted: int32(r)} }
	tests := []struct {
		name  string
		plan  string
		posts []post
	}{
		{
			name: "every second post, twice: sends then receives",
			plan: "2:2",
			posts: []post{
				{staged: []res{ok(4, 4)}, inC: []res{ok(4, 4)}, want: []res{ok(4, 4)}},
				{staged: []res{ok(0, 2), ok(5, 3)}, inC: []res{ok(0, 2), ok(2, 3)},
					want: []res{ok(0, 2), {sends: 5, recvs: 3, sendRC: enomem, sendsPosted: 2, recvsPosted: 3}}},
				{staged: []res{ok(1, 1)}, inC: []res{ok(1, 1)}, want: []res{ok(1, 1)}},
				{staged: []res{ok(3, 3)}, inC: []res{ok(3, 1)},
					want: []res{{sends: 3, recvs: 3, sendsPosted: 3, recvRC: enomem, recvsPosted: 1}}},
				// Spent: nothing more fails.
				{staged: []res{ok(3, 3)}, inC: []res{ok(3, 3)}, want: []res{ok(3, 3)}},
				{staged: []res{ok(3, 3)}, inC: []res{ok(3, 3)}, want: []res{ok(3, 3)}},
			},
		},
		{
			name: "a due receive fault waits for a post with receives",
			plan: "1:2",
			posts: []post{
				{staged: []res{ok(1, 0)}, inC: []res{ok(0, 0)},
					want: []res{{sends: 1, sendRC: enomem}}},
				{staged: []res{ok(2, 0)}, inC: []res{ok(2, 0)}, want: []res{ok(2, 0)}},
				{staged: []res{ok(2, 5)}, inC: []res{ok(2, 2)},
					want: []res{{sends: 2, recvs: 5, sendsPosted: 2, recvRC: enomem, recvsPosted: 2}}},
			},
		},
		{
			name: "a real failure before the cut is what Post reports",
			plan: "1",
			posts: []post{
				{staged: []res{ok(6, 0)}, inC: []res{ok(3, 0)},
					real: &res{sendRC: einval, sendsPosted: 1},
					want: []res{{sends: 6, sendRC: einval, sendsPosted: 1}}},
			},
		},
		{
			name:  "no plan",
			plan:  "",
			posts: []post{{staged: []res{ok(2, 2)}, inC: []res{ok(2, 2)}, want: []res{ok(2, 2)}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFaultPlan(tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			posts := 0 // the Batch's own count
			for n, p := range tc.posts {
				gs := make([]postGroup, len(p.staged))
				for i, r := range p.staged {
					gs[i] = postGroup{sends: r.sends, recvs: r.recvs}
				}
				c := f.cut(gs, nil, &posts)
				for i := range gs { // what C sees, then what it writes back
					if gs[i].sends != p.inC[i].sends || gs[i].recvs != p.inC[i].recvs {
						t.Fatalf("post %d group %d: C posts %d sends %d recvs, want %d %d",
							n, i, gs[i].sends, gs[i].recvs, p.inC[i].sends, p.inC[i].recvs)
					}
					gs[i].sendRC, gs[i].sendsPosted = 0, int32(gs[i].sends)
					gs[i].recvRC, gs[i].recvsPosted = 0, int32(gs[i].recvs)
				}
				if p.real != nil {
					gs[0].sendRC, gs[0].sendsPosted = p.real.sendRC, p.real.sendsPosted
					gs[0].recvRC, gs[0].recvsPosted = p.real.recvRC, p.real.recvsPosted
				}
				c.apply(gs, nil)
				for i, g := range gs {
					got := res{g.sends, g.recvs, g.sendRC, g.sendsPosted, g.recvRC, g.recvsPosted}
					if got != p.want[i] {
						t.Errorf("post %d group %d: got %+v, want %+v", n, i, got, p.want[i])
					}
				}
			}
		})
	}
}

// TestFaultPlanShared: pollers share the budget; each counts its own posts.
func TestFaultPlanShared(t *testing.T) {
	f, _ := parseFaultPlan("2:3")
	var a, b int
	fired := 0
	for i := 0; i < 20; i++ {
		for _, posts := range []*int{&a, &b} {
			if f.cut([]postGroup{{sends: 2, recvs: 2}}, nil, posts).on {
				fired++
			}
		}
	}
	if fired != 3 {
		t.Fatalf("%d failures injected, want the 3 planned", fired)
	}
}

// TestFaultPlanSRQ: with a shared receive queue the batch's QPs have no
// receives, and a receive fault cuts the SRQ's: half go in, the rest fail.
func TestFaultPlanSRQ(t *testing.T) {
	f, _ := parseFaultPlan("1:2")
	posts := 0
	g := []postGroup{{sends: 4}}
	sp := srqPost{n: 6}
	if c := f.cut(g, &sp, &posts); !c.on || c.srq || g[0].sends != 2 {
		t.Fatalf("first fault %+v, %d sends to post: want the QP's sends cut to 2", c, g[0].sends)
	}
	g[0].sends = 4
	c := f.cut(g, &sp, &posts)
	if !c.on || !c.srq || sp.n != 3 || g[0].sends != 4 {
		t.Fatalf("second fault %+v, SRQ %d, sends %d: want the SRQ's 6 receives cut to 3", c, sp.n, g[0].sends)
	}
	sp.rc, sp.posted = 0, 3 // C posts what it is asked to
	c.apply(g, &sp)
	if sp.n != 6 || sp.rc != -int32(syscall.ENOMEM) || sp.posted != 3 {
		t.Fatalf("after the post: %+v, want 6 staged, 3 posted, ENOMEM", sp)
	}
}

// TestFaultPlanSRQOnly: posts of SRQ receives alone (a poller filling its
// SRQ at start) neither count towards the plan nor fail.
func TestFaultPlanSRQOnly(t *testing.T) {
	f, _ := parseFaultPlan("2:1")
	posts := 0
	for range 8 {
		sp := srqPost{n: 256}
		if c := f.cut(nil, &sp, &posts); c.on || sp.n != 256 {
			t.Fatalf("an SRQ-only post was cut: %+v", c)
		}
	}
	if posts != 0 {
		t.Fatalf("%d posts counted, want none", posts)
	}
	g := []postGroup{{sends: 4}}
	if c := f.cut(g, &srqPost{}, &posts); c.on {
		t.Fatal("the first post with a QP's work was cut, want the second")
	}
	if c := f.cut(g, &srqPost{}, &posts); !c.on {
		t.Fatal("the second post with a QP's work was not cut")
	}
}
