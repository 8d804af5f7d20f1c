package fabric

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// plainTransport is a loop transport that states no limits.
type plainTransport struct{ lt *LoopTransport }

func (p plainTransport) Name() string                                   { return "plain" }
func (p plainTransport) Listen(t *Target, port *Port) (Listener, error) { return p.lt.Listen(t, port) }

// TestTransportLimits checks that a port's controllers take MDTS, queue
// sizes and IOCCSZ from the port's transport.
func TestTransportLimits(t *testing.T) {
	defaults := TransportLimits{MDTS: DefaultMDTS, MaxQueueDepth: DefaultMaxQueueDepth, MaxIOQueues: DefaultMaxIOQueues}
	tests := []struct {
		name    string
		limits  *TransportLimits // nil: the transport has no Limits method
		want    TransportLimits
		wantErr bool
	}{
		{name: "no Limits method", want: defaults},
		{name: "zero limits take defaults", limits: &TransportLimits{}, want: defaults},
		{name: "explicit", limits: &TransportLimits{MDTS: 256 << 10, MaxQueueDepth: 32, MaxIOQueues: 3, InCapsuleDataSize: 8192},
			want: TransportLimits{MDTS: 256 << 10, MaxQueueDepth: 32, MaxIOQueues: 3, InCapsuleDataSize: 8192}},
		{name: "MDTS not a power of two", limits: &TransportLimits{MDTS: 12 << 10}, wantErr: true},
		{name: "MDTS below 4KiB", limits: &TransportLimits{MDTS: 2048}, wantErr: true},
		{name: "queue depth of one", limits: &TransportLimits{MaxQueueDepth: 1}, wantErr: true},
		{name: "queue depth above CAP.MQES", limits: &TransportLimits{MaxQueueDepth: 1<<16 + 1}, wantErr: true},
		{name: "in-capsule data not in 16-byte units", limits: &TransportLimits{InCapsuleDataSize: 100}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := NewTarget(Options{})
			t.Cleanup(func() { tgt.Close() })
			if _, err := tgt.AddSubsystem(SubsystemConfig{NQN: testNQN, AllowAnyHost: true}); err != nil {
				t.Fatal(err)
			}
			var lt *LoopTransport
			var tr Transport
			if tt.limits == nil {
				lt = NewLoopTransport(TransportLimits{MDTS: 8 << 10}) // hidden by plainTransport
				tr = plainTransport{lt}
			} else {
				lt = NewLoopTransport(*tt.limits)
				tr = lt
			}
			p := &Port{Address: "loop0", Service: "1"}
			err := tgt.AddPort(tr, p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("AddPort: %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if p.TransportLimits != tt.want {
				t.Errorf("port limits = %+v, want %+v", p.TransportLimits, tt.want)
			}

			r := &rig{t: t, tgt: tgt, lt: lt}
			h, _ := r.adminConnect(testNQN, testHostNQN, 0)
			b, st := identify(h, nvme.CNSController, 0)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			id := nvme.IdentifyController(b)
			capReg := nvme.CAP(h.propGet(nvme.PropCAP, true))
			getNQ := newCmd(nvme.OpAdminGetFeatures, 11)
			getNQ.SetCDW(10, uint32(nvme.FeatNumberOfQueues))
			nq := h.mustOK(getNQ, nil).DW0()
			checks := []struct {
				name      string
				got, want any
			}{
				{"Identify MDTS", 4096 << id.MDTS(), int(tt.want.MDTS)},
				{"Identify MAXCMD", uint32(id.MAXCMD()), tt.want.MaxQueueDepth},
				{"Identify IOCCSZ", id.IOCCSZ(), (nvme.CommandSize + tt.want.InCapsuleDataSize) / 16},
				{"CAP.MQES", uint32(capReg.MQES()) + 1, tt.want.MaxQueueDepth},
				{"Number of Queues", nq&0xffff + 1, uint32(tt.want.MaxIOQueues)},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}
