package verbs

import (
	"errors"
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
