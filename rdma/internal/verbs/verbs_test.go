package verbs

import (
	"errors"
	"syscall"
	"testing"
	"unsafe"
)

// TestLayouts pins the wire-visible Go mirrors of the C structures; the cgo
// build also checks them against the C sizes at compile time.
func TestLayouts(t *testing.T) {
	tests := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"SGE", unsafe.Sizeof(SGE{}), 16},
		{"SendWR", unsafe.Sizeof(SendWR{}), 40 + MaxSendSGE*16},
		{"RecvWR", unsafe.Sizeof(RecvWR{}), 16 + MaxRecvSGE*16},
		{"WC", unsafe.Sizeof(WC{}), 40},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s is %d bytes, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestNoDevice: without an RDMA device (this host, CI outside the guest)
// the library reports "no device", not a crash or an unexplained error.
func TestNoDevice(t *testing.T) {
	n, err := DeviceCount()
	if errors.Is(err, ErrNotSupported) {
		t.Skip("built without cgo")
	}
	if err != nil {
		t.Fatalf("DeviceCount: %v", err)
	}
	ec, err := NewEventChannel()
	if n > 0 {
		// With devices (the lab guest) the channel must open.
		if err != nil {
			t.Fatalf("%d devices but NewEventChannel: %v", n, err)
		}
		ec.Close()
		return
	}
	if err != nil {
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("NewEventChannel without devices: %v, want ErrNoDevice", err)
		}
		return
	}
	defer ec.Close()
	id, err := ec.CreateID()
	if err != nil {
		return
	}
	defer id.Destroy()
	if err := id.Bind([]byte{127, 0, 0, 1}, 4420); err == nil {
		t.Fatal("bind succeeded without an RDMA device")
	}
}

func TestEventNames(t *testing.T) {
	if EventConnectRequest.String() != "CONNECT_REQUEST" || EventTimewaitExit.String() != "TIMEWAIT_EXIT" || EventType(99).String() != "EVENT_99" {
		t.Fatal("event names drifted from librdmacm's order")
	}
}

// TestBatchGroups: each QP's work stays contiguous and in order, a QP
// staged again after another starts a new group, and Room counts groups.
func TestBatchGroups(t *testing.T) {
	a, b := new(QP), new(QP)
	type op struct {
		qp   *QP
		send bool
	}
	tests := []struct {
		name       string
		ops        []op
		wantGroups int
		wantSends  []uint32 // per group
		wantRecvs  []uint32
	}{
		{"one QP, sends and receives", []op{{a, false}, {a, true}, {a, true}}, 1, []uint32{2}, []uint32{1}},
		{"two QPs", []op{{a, true}, {b, true}, {b, false}}, 2, []uint32{1, 1}, []uint32{0, 1}},
		{"back to the first QP", []op{{a, true}, {b, true}, {a, true}}, 3, []uint32{1, 1, 1}, []uint32{0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bt := NewBatch(4, 4, 3)
			for i, o := range tc.ops {
				if !bt.Room(1, 1) {
					t.Fatalf("no room before op %d", i)
				}
				if o.send {
					bt.Send(o.qp).WRID = uint64(i)
				} else {
					bt.Recv(o.qp).WRID = uint64(i)
				}
			}
			if bt.Groups() != tc.wantGroups {
				t.Fatalf("%d groups, want %d", bt.Groups(), tc.wantGroups)
			}
			for g := 0; g < tc.wantGroups; g++ {
				gr := bt.groups[g]
				if gr.sends != tc.wantSends[g] || gr.recvs != tc.wantRecvs[g] {
					t.Errorf("group %d: %d sends %d recvs, want %d %d", g, gr.sends, gr.recvs, tc.wantSends[g], tc.wantRecvs[g])
				}
			}
			// Staging order is posting order within each group.
			last := -1
			for _, w := range bt.send[:bt.ns] {
				if int(w.WRID) <= last {
					t.Errorf("sends out of order: %d after %d", w.WRID, last)
				}
				last = int(w.WRID)
			}
			bt.Reset()
			if bt.Groups() != 0 || !bt.Room(4, 4) {
				t.Fatal("Reset left work staged")
			}
		})
	}
}

func TestBatchRoom(t *testing.T) {
	a, b := new(QP), new(QP)
	bt := NewBatch(2, 1, 2)
	bt.Send(a)
	if !bt.Room(1, 1) || bt.Room(2, 0) || bt.Room(0, 2) {
		t.Fatal("Room miscounts work requests")
	}
	bt.Send(b)
	if bt.Room(0, 0) {
		t.Fatal("Room ignores the group limit")
	}
}

// TestBatchResult: a failed post reports the sends that did not go in, from
// the failed one on, and the receives that did.
func TestBatchResult(t *testing.T) {
	a := new(QP)
	bt := NewBatch(4, 4, 1)
	for i := 0; i < 3; i++ {
		bt.Send(a).WRID = uint64(i)
	}
	bt.Recv(a)
	bt.Recv(a)
	g := &bt.groups[0]
	g.sendRC, g.sendsPosted, g.recvRC, g.recvsPosted = 0, 3, 0, 2
	if n, un, err := bt.Result(0); n != 2 || len(un) != 0 || err != nil {
		t.Fatalf("clean post: %d receives, %d unposted, %v", n, len(un), err)
	}
	g.sendRC, g.sendsPosted, g.recvRC, g.recvsPosted = -int32(syscall.ENOMEM), 1, -int32(syscall.EINVAL), 1
	n, un, err := bt.Result(0)
	if n != 1 || len(un) != 2 || un[0].WRID != 1 || un[1].WRID != 2 {
		t.Fatalf("failed post: %d receives, unposted %v", n, un)
	}
	if !errors.Is(err, syscall.ENOMEM) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("error %v lost an errno", err)
	}
}

// TestBatchSRQ: SRQ receives count in Len, have their own room, need no QP
// group, and a failed post reports those that did not go in.
func TestBatchSRQ(t *testing.T) {
	a, srq := new(QP), new(SRQ)
	bt := NewBatch(2, 3, 2)
	bt.Send(a)
	for i := 0; i < 3; i++ {
		if !bt.SRQRoom(1) {
			t.Fatalf("no SRQ room before receive %d", i)
		}
		bt.SRQRecv(srq).WRID = uint64(10 + i)
	}
	if bt.SRQRoom(1) || !bt.Room(1, 3) || bt.Groups() != 1 || bt.Len() != 4 {
		t.Fatalf("SRQ room %v, QP room %v, %d groups, %d staged: want none, some, 1, 4",
			bt.SRQRoom(1), bt.Room(1, 3), bt.Groups(), bt.Len())
	}
	bt.sp = srqPost{n: 3, posted: 3}
	if n, un, err := bt.SRQResult(); n != 3 || len(un) != 0 || err != nil {
		t.Fatalf("clean post: %d posted, %d unposted, %v", n, len(un), err)
	}
	bt.sp = srqPost{n: 3, posted: 1, rc: -int32(syscall.ENOMEM)}
	n, un, err := bt.SRQResult()
	if n != 1 || len(un) != 2 || un[0].WRID != 11 || !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("failed post: %d posted, unposted %v, %v", n, un, err)
	}
	bt.Reset()
	if bt.Len() != 0 || !bt.SRQRoom(3) || bt.srq != nil {
		t.Fatal("Reset left SRQ receives staged")
	}
}
