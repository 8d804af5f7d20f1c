package group

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

const (
	sub1  = "nqn.2026-11.io.example:a"
	sub2  = "nqn.2026-11.io.example:b"
	hostX = "nqn.2026-11.io.example:hx"
	idX   = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	idY   = "00000000-0000-0000-0000-0000000000ff"
)

// sample is a state with one of everything.
func sample() *State {
	s := Empty()
	s.Version = 7
	s.Epoch = "00112233445566778899aabbccddeeff"
	s.Subsystems = []config.Subsystem{
		{NQN: sub1, AllowAnyHost: true, Serial: "abc", Model: "nvmeof-tgt", Namespaces: []config.Namespace{
			{NSID: 1, Backend: "rbd", Pool: "rbd", Image: "i1", BlockSize: 512, ANAGroup: 1},
			{NSID: 10, Backend: "memory", Size: 1 << 20, BlockSize: 4096, ANAGroup: 2, NGUID: "none",
				Hosts: []string{hostX}, QoS: config.QoS{IOPS: 1000, ReadBW: 100 << 20},
				QoSPerHost: config.QoSPerHost{Default: config.QoS{WriteIOPS: 10},
					Hosts: []config.HostQoS{{NQN: hostX, QoS: config.QoS{BW: 1 << 20}}, {NQN: hostX + "2"}}}},
		}},
		{NQN: sub2, Serial: "def", Model: "m", Ports: []int{1}, Hosts: []config.Host{{NQN: hostX, DHCHAPKeyFile: "/etc/k"}},
			DHCHAPHashes: []string{"sha256"}},
	}
	s.Listeners[1] = []Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420}}
	s.Listeners[2] = []Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.2", Port: 4421}}
	s.Reservations[NSRef{sub1, 1}] = Reservation{Generation: 3, Type: 1, Holder: idX, Registrants: []Registrant{{idX, 5}, {idY, 6}},
		Seq: 4, Notices: []ResvNotice{{HostID: idY, Kind: 3}}, Aborted: []string{idY}}
	return s
}

func object(s *State) Object { return Object{Data: []byte(Header), Omap: s.Omap(), Version: 3} }

func TestStateRoundTrip(t *testing.T) {
	s := sample()
	got, err := Decode(object(s))
	if err != nil {
		t.Fatal(err)
	}
	got.object, s.object = 0, 0
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, s)
	}
	// No object: the empty state.
	if e, err := Decode(Object{}); err != nil || e.Version != 0 || len(e.Subsystems) != 0 {
		t.Fatalf("no object: %+v, %v", e, err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	tests := []struct {
		name string
		edit func(o *Object)
		want string
	}{
		{"garbage data", func(o *Object) { o.Data = []byte("\x00\x01garbage") }, "not the header"},
		{"empty data", func(o *Object) { o.Data = nil }, "not the header"},
		{"no version", func(o *Object) { delete(o.Omap, "version") }, `no "version" key`},
		{"version not a number", func(o *Object) { o.Omap["version"] = []byte("x7") }, `key "version"`},
		{"version with a sign", func(o *Object) { o.Omap["version"] = []byte("+7") }, `key "version"`},
		{"unknown key", func(o *Object) { o.Omap["what"] = []byte("{}") }, "not a key of the group's state"},
		{"a value too long", func(o *Object) { o.Omap["subsystem/"+sub1] = make([]byte, limits.GroupStateValueBytes+1) }, "more than"},
		{"epoch not hex", func(o *Object) { o.Omap["epoch"] = []byte("zz") }, "not an epoch"},
		{"epoch upper-case", func(o *Object) { o.Omap["epoch"] = []byte(strings.ToUpper("00112233445566778899aabbccddeeff")) }, "not an epoch"},
		{"epoch too long", func(o *Object) { o.Omap["epoch"] = []byte(NewEpoch() + "00") }, "not an epoch"},
		{"bad JSON", func(o *Object) { o.Omap["subsystem/"+sub1] = []byte("{") }, "subsystem/" + sub1},
		{"unknown field", func(o *Object) { o.Omap["subsystem/"+sub1] = []byte(`{"serial":"a","model":"b","x":1}`) }, "unknown field"},
		{"two values", func(o *Object) { o.Omap["subsystem/"+sub1] = []byte(`{"serial":"a","model":"b"}{}`) }, "more than one"},
		{"bad subsystem NQN", func(o *Object) { o.Omap["subsystem/"] = []byte(`{"serial":"a","model":"b"}`) }, `"subsystem/"`},
		{"namespace of no subsystem", func(o *Object) { o.Omap["namespace/nqn.x:y/1"] = []byte(`{"backend":"memory","ana_group":1}`) }, "no such subsystem"},
		{"NSID 0", func(o *Object) { o.Omap["namespace/"+sub1+"/0"] = []byte(`{"backend":"memory","ana_group":1}`) }, "NSID"},
		{"NSID with a leading zero", func(o *Object) { o.Omap["namespace/"+sub1+"/01"] = []byte(`{"backend":"memory","ana_group":1}`) }, "NSID"},
		// A file or device is one machine's: another gateway would serve its own file of that
		// name (or one an attacker with write access to the pool names) under the same NSID.
		{"file namespace", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"file","path":"/etc/shadow","ana_group":1}`)
		}, "local to one machine"},
		{"block namespace", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"block","path":"/dev/sda","ana_group":1}`)
		}, "local to one machine"},
		{"path on an rbd namespace", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"rbd","pool":"rbd","image":"x","path":"/etc/shadow","ana_group":1}`)
		}, "local to one machine"},
		// Each gateway reaches the cluster through its own file and user: a record naming
		// them (a file on the gateway's machine) is not this code's.
		{"ceph_conf on an rbd namespace", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"rbd","pool":"rbd","image":"x","ceph_conf":"/etc/shadow","ana_group":1}`)
		}, "unknown field"},
		{"client on an rbd namespace", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"rbd","pool":"rbd","image":"x","client":"other","ana_group":1}`)
		}, "unknown field"},
		// A namespace's mask and QoS hosts are checked as a subsystem's hosts.
		{"mask host with a slash", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"hosts":["nqn.x:a/b"]}`)
		}, "hosts"},
		{"mask host empty", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"hosts":[""]}`)
		}, "empty"},
		{"mask host twice", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"hosts":["nqn.x:a","nqn.x:a"]}`)
		}, "twice"},
		{"mask too long", func(o *Object) {
			hosts := strings.Repeat(`"nqn.x:a",`, limits.NamespaceHosts) + `"nqn.x:b"`
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"hosts":[` + hosts + `]}`)
		}, "more than"},
		{"QoS unknown field", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"qos":{"burst":1}}`)
		}, "unknown field"},
		{"QoS negative", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"qos":{"iops":-1}}`)
		}, "namespace/"},
		{"QoS host twice", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"qos_per_host":{"default":{},"hosts":[{"nqn":"nqn.x:a"},{"nqn":"nqn.x:a","iops":1}]}}`)
		}, "twice"},
		{"QoS host not an NQN", func(o *Object) {
			o.Omap["namespace/"+sub1+"/2"] = []byte(`{"backend":"memory","size":4096,"ana_group":1,"qos_per_host":{"default":{},"hosts":[{"nqn":""}]}}`)
		}, "qos_per_host"},
		{"host without subsystem", func(o *Object) { o.Omap["host/"+hostX] = []byte(`{}`) }, "want host/"},
		{"host with inline secret", func(o *Object) {
			o.Omap["host/"+sub2+"/"+hostX] = []byte(`{"dhchap_key":"DHHC-1:00:x:"}`)
		}, "unknown field"},
		{"listener gateway 0", func(o *Object) { o.Omap["listener/0/1"] = []byte(`{}`) }, "listener/"},
		{"listener gateway 33", func(o *Object) { o.Omap["listener/33/1"] = []byte(`{}`) }, "listener/"},
		{"reservation of no namespace", func(o *Object) { o.Omap["resv/"+sub1+"/5"] = []byte(`{"generation":0,"type":0,"registrants":[]}`) }, "no such namespace"},
		{"reservation holder not registered", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":1,"holder":"` + idY + `","registrants":[{"host_id":"` + idX + `","key":1}]}`)
		}, "not registered"},
		{"reservation type 7", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":7,"registrants":[]}`)
		}, "type 7"},
		{"reservation upper-case host ID", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":0,"registrants":[{"host_id":"` + strings.ToUpper(idX) + `","key":1}]}`)
		}, "lower-case UUID"},
		{"reservation notice of kind 4", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":0,"registrants":[],"seq":2,"notices":[{"host_id":"` + idX + `","kind":4}]}`)
		}, "kind 4"},
		{"reservation notice to an upper-case host ID", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":0,"registrants":[],"seq":2,"notices":[{"host_id":"` + strings.ToUpper(idX) + `","kind":1}]}`)
		}, "lower-case UUID"},
		{"reservation aborting a malformed host ID", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":0,"registrants":[],"seq":2,"aborted":["x"]}`)
		}, "aborted"},
		{"reservation registered twice", func(o *Object) {
			o.Omap["resv/"+sub1+"/1"] = []byte(`{"generation":0,"type":0,"registrants":[{"host_id":"` + idX + `","key":1},{"host_id":"` + idX + `","key":2}]}`)
		}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := object(sample())
			tt.edit(&o)
			_, err := Decode(o)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrCorrupt with %q", err, tt.want)
			}
		})
	}
}

func TestSetSubsystems(t *testing.T) {
	s := sample()
	subs := (&config.Config{Subsystems: s.Subsystems}).Clone().Subsystems
	subs[0].CNTLIDMin, subs[0].CNTLIDMax = 1, 99
	// A gateway's composed configuration names its own way to the cluster: not the group's.
	subs[0].Namespaces[0].CephConf, subs[0].Namespaces[0].Client = "/etc/ceph/gw1.conf", "gw1"
	if err := s.SetSubsystems(subs); err != nil {
		t.Fatal(err)
	}
	if n := s.Subsystems[0].Namespaces[0]; n.CephConf != "" || n.Client != "" {
		t.Errorf("the group's state keeps a gateway's ceph_conf %q and client %q", n.CephConf, n.Client)
	}
	subs[0].Namespaces = subs[0].Namespaces[1:] // namespace 1 goes, and its reservation
	if err := s.SetSubsystems(subs); err != nil {
		t.Fatal(err)
	}
	if s.Subsystems[0].CNTLIDMin != 0 || len(s.Reservations) != 0 {
		t.Fatalf("after SetSubsystems: %+v %+v", s.Subsystems[0], s.Reservations)
	}
	subs[1].Hosts[0].DHCHAPKey = "DHHC-1:00:secret:"
	if err := s.SetSubsystems(subs); !errors.Is(err, ErrSecret) {
		t.Fatalf("an inline secret: %v, want ErrSecret", err)
	}
	subs[1].Hosts[0].DHCHAPKey = ""
	for _, n := range []config.Namespace{
		{NSID: 3, Backend: "file", Path: "/srv/a.img", ANAGroup: 1},
		{NSID: 3, Backend: "block", Path: "/dev/nvme0n1", ANAGroup: 1},
	} {
		v := s.Version
		subs[1].Namespaces = []config.Namespace{n}
		if err := s.SetSubsystems(subs); !errors.Is(err, ErrLocal) || s.Version != v || slices.ContainsFunc(s.Subsystems, func(sub config.Subsystem) bool { return len(sub.Namespaces) > 0 && sub.Namespaces[0].Path != "" }) {
			t.Errorf("a %s namespace: %v, want ErrLocal and the state unchanged", n.Backend, err)
		}
	}
}

func TestCompose(t *testing.T) {
	s := sample()
	local := &config.Config{Ports: []config.Port{{ID: 1, Transport: "rdma", Address: "10.0.0.2", Port: 4421}},
		GatewayGroup: config.GatewayGroup{Name: "g", Pool: "p", ID: 2, CephConf: "/etc/ceph/gw2.conf", Client: "gw2"}}
	c := s.Compose(local, map[string]string{"1": "inaccessible", "2": "optimized"})
	// The rbd namespace is opened through this gateway's own file and user; the memory one has neither.
	if n := c.Subsystems[0].Namespaces[0]; n.CephConf != "/etc/ceph/gw2.conf" || n.Client != "gw2" {
		t.Errorf("rbd namespace composed with ceph_conf %q, client %q; want the gateway's", n.CephConf, n.Client)
	}
	if n := c.Subsystems[0].Namespaces[1]; n.CephConf != "" || n.Client != "" {
		t.Errorf("memory namespace composed with ceph_conf %q, client %q", n.CephConf, n.Client)
	}
	if n := s.Subsystems[0].Namespaces[0]; n.CephConf != "" {
		t.Error("Compose changed the state")
	}
	if c.Subsystems[0].CNTLIDMin != 2041 || c.Subsystems[1].CNTLIDMax != 4080 {
		t.Errorf("controller IDs %d..%d", c.Subsystems[0].CNTLIDMin, c.Subsystems[1].CNTLIDMax)
	}
	if c.Ports[0].ANAGroups["2"] != "optimized" || c.Ports[0].ANAGroups["1"] != "inaccessible" {
		t.Errorf("ANA %v", c.Ports[0].ANAGroups)
	}
	// Gateway 1's listener is a referral; its own is not.
	want := []config.Referral{{Transport: "rdma", Address: "10.0.0.1", Port: 4420, PortID: 1}}
	if !reflect.DeepEqual(c.Referrals, want) {
		t.Errorf("referrals %+v, want %+v", c.Referrals, want)
	}
	if len(local.Subsystems) != 0 || local.Ports[0].ANAGroups != nil {
		t.Error("Compose changed the local configuration")
	}
}

func TestDiffCommit(t *testing.T) {
	ctx := context.Background()
	st := NewCluster().Client("a")
	cur, err := Read(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	next := sample()
	if err := Commit(ctx, st, cur, next); err != nil {
		t.Fatal(err)
	}
	got, err := Read(ctx, st)
	if err != nil || got.Version != 1 || len(got.Subsystems) != 2 {
		t.Fatalf("after the first commit: %+v %v", got, err)
	}
	// The object's epoch: new when it was created, kept by every change after.
	if checkEpoch(got.Epoch) != nil {
		t.Fatalf("the new object's epoch %q", got.Epoch)
	}
	epoch := got.Epoch
	// A change made on a stale read loses.
	stale := got.Clone()
	n2 := got.Clone()
	n2.Subsystems = n2.Subsystems[:1]
	if err := Commit(ctx, st, got, n2); err != nil {
		t.Fatal(err)
	}
	n3 := stale.Clone()
	n3.Listeners = nil
	if err := Commit(ctx, st, stale, n3); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale commit: %v, want ErrConflict", err)
	}
	final, _ := Read(ctx, st)
	if final.Version != 2 || len(final.Subsystems) != 1 || len(final.Listeners) != 2 {
		t.Fatalf("the stale commit changed something: %+v", final)
	}
	if final.Epoch != epoch {
		t.Errorf("a change moved the epoch from %s to %s", epoch, final.Epoch)
	}
	// Only the keys that changed are written.
	same := final.Clone()
	same.Version++
	set, rm := Diff(final, same)
	if len(set) != 1 || len(rm) != 0 {
		t.Errorf("Diff of equal states: set %v rm %v, want the version alone", maps.Collect(maps.All(set)), rm)
	}
}

// conflictStore loses every write to a change made meanwhile.
type conflictStore struct {
	Store
	writes atomic.Int32
}

func (c *conflictStore) Write(ctx context.Context, ver uint64, data []byte, set map[string][]byte, rm []string) error {
	c.writes.Add(1)
	return ErrConflict
}

func TestUpdateRetries(t *testing.T) {
	ctx := context.Background()
	cs := &conflictStore{Store: NewCluster().Client("a")}
	_, err := Update(ctx, cs, 4, func(s *State) (bool, error) { s.Listeners[1] = []Listener{{PortID: 1}}; return true, nil })
	if !errors.Is(err, ErrConflict) || cs.writes.Load() != 4 || !strings.Contains(err.Error(), "4 times") {
		t.Fatalf("err %v after %d writes, want ErrConflict after 4", err, cs.writes.Load())
	}
	// Concurrent updates through two clients all land, one after another.
	cl := NewCluster()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := cl.Client(string(rune('a' + i)))
			if _, err := Update(ctx, st, 100, func(s *State) (bool, error) {
				s.Listeners[i+1] = []Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420 + i}}
				return true, nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s, err := Read(ctx, cl.Client("z"))
	if err != nil || s.Version != 8 || len(s.Listeners) != 8 {
		t.Fatalf("after 8 concurrent updates: version %d, %d listeners, %v", s.Version, len(s.Listeners), err)
	}
}

func TestMemNotify(t *testing.T) {
	cl := NewCluster()
	a, b := cl.Client("a"), cl.Client("b")
	got := make(chan Notice, 2)
	stopA, _ := a.Watch(func(n Notice) { got <- n; n.Ack() })
	defer stopA()
	stopB, _ := b.Watch(func(n Notice) {}) // never acks
	acked, missed, err := a.Notify(context.Background(), []byte("x"), 50*time.Millisecond)
	if err != nil || acked != 1 || missed != 1 {
		t.Fatalf("acked %d missed %d %v", acked, missed, err)
	}
	if n := <-got; !n.Self || string(n.Payload) != "x" {
		t.Fatalf("notice %+v", n)
	}
	stopB()
}
