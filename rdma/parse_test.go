package rdma

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func cmReq(recfmt, qid, hrqsize, hsqsize uint16) []byte {
	b := make([]byte, nvme.RDMACMRequestSize)
	r := nvme.RDMACMRequest(b)
	r.SetRECFMT(recfmt)
	r.SetQID(qid)
	r.SetHRQSIZE(hrqsize)
	r.SetHSQSIZE(hsqsize)
	return b
}

func TestParseConnRequest(t *testing.T) {
	tests := []struct {
		name      string
		pd        []byte
		want      nvme.RDMACMRejectStatus
		wantDepth int
	}{
		{"admin as Linux sends it", cmReq(0, 0, 32, 31), 0, 32},
		{"I/O queue", cmReq(0, 1, 128, 127), 0, 128},
		{"padded private data", append(cmReq(0, 2, 64, 63), make([]byte, 24)...), 0, 64},
		{"short", cmReq(0, 0, 32, 31)[:31], nvme.RDMACMRejectInvalidLength, 0},
		{"empty", nil, nvme.RDMACMRejectInvalidLength, 0},
		{"RECFMT", cmReq(1, 0, 32, 31), nvme.RDMACMRejectInvalidRECFMT, 0},
		{"QID too large", cmReq(0, 17, 128, 127), nvme.RDMACMRejectInvalidQID, 0},
		{"admin deeper than 32", cmReq(0, 0, 64, 63), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"I/O deeper than the limit", cmReq(0, 1, 256, 255), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"depth 1", cmReq(0, 1, 1, 0), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"HRQSIZE zero", cmReq(0, 1, 0, 127), nvme.RDMACMRejectInvalidHRQSIZE, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr, sts, why := parseConnRequest(tc.pd, 16, 128)
			if sts != tc.want {
				t.Fatalf("status %v (%s), want %v", sts, why, tc.want)
			}
			if sts == 0 && cr.depth != tc.wantDepth {
				t.Fatalf("depth %d, want %d", cr.depth, tc.wantDepth)
			}
			if sts != 0 && why == "" {
				t.Fatal("a rejection without a reason")
			}
		})
	}
}

func sgl(f func(d nvme.SGLDescriptor)) nvme.SGLDescriptor {
	d := nvme.SGLDescriptor(make([]byte, nvme.SGLDescriptorSize))
	f(d)
	return d
}

func TestMapSGL(t *testing.T) {
	keyed := func(n uint32, inv bool) nvme.SGLDescriptor {
		return sgl(func(d nvme.SGLDescriptor) { d.SetKeyed(0xdead0000, n, 0x1234, inv) })
	}
	offset := func(off uint64, n uint32) nvme.SGLDescriptor {
		return sgl(func(d nvme.SGLDescriptor) { d.SetDataBlockOffset(off, n) })
	}
	tests := []struct {
		name   string
		d      nvme.SGLDescriptor
		dir    fabric.DataDir
		need   uint32
		icdLen int
		want   nvme.Status
		check  func(t *testing.T, m dataMap)
	}{
		{"keyed read", keyed(4096, false), fabric.DirCtrlToHost, 4096, 0, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if m.inCapsule || m.addr != 0xdead0000 || m.key != 0x1234 || m.inv {
				t.Errorf("%+v", m)
			}
		}},
		{"keyed with invalidate", keyed(1<<20, true), fabric.DirHostToCtrl, 1 << 20, 0, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if !m.inv {
				t.Error("invalidate lost")
			}
		}},
		{"keyed longer than the data", keyed(8192, false), fabric.DirCtrlToHost, 4096, 0, nvme.StatusSuccess, nil},
		{"keyed too short", keyed(512, false), fabric.DirHostToCtrl, 4096, 0, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"in-capsule write", offset(0, 4096), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if !m.inCapsule || m.off != 0 {
				t.Errorf("%+v", m)
			}
		}},
		{"in-capsule at an offset", offset(512, 1024), fabric.DirHostToCtrl, 1024, 2048, nvme.StatusSuccess, nil},
		{"in-capsule read", offset(0, 4096), fabric.DirCtrlToHost, 4096, 4096, nvme.StatusInvalidField.WithDNR(), nil},
		{"in-capsule beyond the buffer", offset(4096, 8192), fabric.DirHostToCtrl, 8192, 8192, nvme.StatusSGLOffsetInvalid.WithDNR(), nil},
		{"in-capsule offset overflow", offset(1<<63, 16), fabric.DirHostToCtrl, 16, 8192, nvme.StatusSGLOffsetInvalid.WithDNR(), nil},
		{"in-capsule more than arrived", offset(0, 4096), fabric.DirHostToCtrl, 4096, 1024, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		// The descriptor names 8 KiB of the capsule; 4 KiB came, which is
		// all the command needs: the descriptor still points past the data
		// (found by tests/e2e TestHostile).
		{"in-capsule descriptor past what arrived", offset(0, 8192), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"in-capsule shorter than the command", offset(0, 512), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"last segment", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeLastSegment << 4 }), fabric.DirHostToCtrl, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
		{"bit bucket", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeBitBucket << 4 }), fabric.DirCtrlToHost, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
		{"keyed odd subtype", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeKeyedDataBlock<<4 | 2 }), fabric.DirCtrlToHost, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, st := mapSGL(tc.d, tc.dir, tc.need, 8192, tc.icdLen)
			if st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

func FuzzConnectRequest(f *testing.F) {
	f.Add(cmReq(0, 0, 32, 31))
	f.Add(cmReq(0, 3, 128, 127))
	f.Add(cmReq(1, 0xffff, 0, 0xffff))
	f.Fuzz(func(t *testing.T, pd []byte) {
		cr, sts, _ := parseConnRequest(pd, 128, 128)
		if sts == 0 && (cr.depth < 2 || cr.depth > 128 || cr.qid > 128 || (cr.qid == 0 && cr.depth > fabric.AdminQueueDepth)) {
			t.Fatalf("accepted %+v", cr)
		}
	})
}

func FuzzMapSGL(f *testing.F) {
	f.Add(make([]byte, 16), uint8(1), uint32(4096), 4096)
	k := sgl(func(d nvme.SGLDescriptor) { d.SetKeyed(1, 4096, 2, true) })
	f.Add([]byte(k), uint8(2), uint32(4096), 0)
	o := sgl(func(d nvme.SGLDescriptor) { d.SetDataBlockOffset(16, 4000) })
	f.Add([]byte(o), uint8(1), uint32(4000), 8192)
	f.Fuzz(func(t *testing.T, b []byte, dir uint8, need uint32, icdLen int) {
		if len(b) < nvme.SGLDescriptorSize || icdLen < 0 || icdLen > 8192 {
			return
		}
		m, st := mapSGL(nvme.SGLDescriptor(b), fabric.DataDir(dir%3), need, 8192, icdLen)
		if st.IsSuccess() && m.inCapsule && m.off+uint64(nvme.SGLDescriptor(b).Length()) > uint64(icdLen) {
			t.Fatalf("in-capsule data past what arrived: off %d need %d len %d", m.off, need, icdLen)
		}
	})
}
