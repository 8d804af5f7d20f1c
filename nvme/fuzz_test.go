package nvme

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/golden"
)

// Every parser of bytes from the network has a fuzz target; the seeds live
// in testdata/fuzz/<FuzzName>.

func FuzzCommand(f *testing.F) {
	f.Add(make([]byte, CommandSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Transports check the capsule length before taking the view.
		if len(data) < CommandSize {
			return
		}
		c := Command(data)
		checkCommandRef(t, c)
		_ = OpcodeDataDirection(c.Opcode())
		sgl := c.SGL1()
		_, _, _, _, _ = sgl.Type(), sgl.Subtype(), sgl.Address(), sgl.Length(), sgl.Key()

		// Setters write back what the accessors read.
		d := make(Command, CommandSize)
		d.SetCDW(12, c.CDW(12))
		d.SetNumBlocks(c.NumBlocks())
		d.SetSLBA(c.SLBA())
		d.SetCID(c.CID())
		d.SetNSID(c.NSID())
		if d.CDW(12) != c.CDW(12) || d.SLBA() != c.SLBA() || d.CID() != c.CID() || d.NSID() != c.NSID() {
			t.Fatalf("setters do not round trip: %x vs %x", []byte(d), data[:CommandSize])
		}
		d.SetGetLogPage(c.LogPageID(), c.LogPageNumDwords(), c.LogPageOffset())
		if d.LogPageID() != c.LogPageID() || d.LogPageNumDwords() != c.LogPageNumDwords() || d.LogPageOffset() != c.LogPageOffset() {
			t.Fatal("SetGetLogPage does not round trip")
		}
	})
}

func FuzzCompletion(f *testing.F) {
	f.Add(make([]byte, CompletionSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < CompletionSize {
			return
		}
		c := Completion(data)
		s := c.Status()
		_ = s.String()
		d := make(Completion, CompletionSize)
		d.SetDW0(c.DW0())
		d.SetDW1(c.DW1())
		d.SetSQHD(c.SQHD())
		d.SetSQID(c.SQID())
		d.SetCID(c.CID())
		d.SetStatus(s)
		want := bytes.Clone(data[:CompletionSize])
		want[14] &^= 1 // the phase tag is not kept
		if !bytes.Equal(d, want) {
			t.Fatalf("completion round trip = %x, want %x", []byte(d), want)
		}
	})
}

func FuzzSGLDescriptor(f *testing.F) {
	f.Add(make([]byte, SGLDescriptorSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < SGLDescriptorSize {
			return
		}
		d := SGLDescriptor(data)
		typ, sub, addr, length, key := d.Type(), d.Subtype(), d.Address(), d.Length(), d.Key()
		if typ > 0xf || sub > 0xf {
			t.Fatalf("type %d subtype %d", typ, sub)
		}
		if typ == SGLTypeKeyedDataBlock && length > keyedLenMax {
			t.Fatalf("keyed length %#x exceeds 24 bits", length)
		}
		e := make(SGLDescriptor, SGLDescriptorSize)
		e.SetKeyed(addr, length, key, sub == SGLSubtypeInvalidateKey)
		if e.Address() != addr || e.Length() != length&keyedLenMax || e.Key() != key || e.Type() != SGLTypeKeyedDataBlock {
			t.Fatalf("SetKeyed round trip: %x", []byte(e))
		}
		e.SetDataBlockOffset(addr, length)
		if e.Address() != addr || e.Length() != length || e.Type() != SGLTypeDataBlock || e.Subtype() != SGLSubtypeOffset {
			t.Fatalf("SetDataBlockOffset round trip: %x", []byte(e))
		}
	})
}

func FuzzConnectData(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The transport copies the capsule's data into a zeroed 1024-byte
		// buffer; short data leaves zeroes.
		buf := make([]byte, ConnectDataSize)
		copy(buf, data)
		d := ConnectData(buf)
		hostID, cntlid, sub, host := d.HostID(), d.CNTLID(), d.SubNQN(), d.HostNQN()
		if len(sub) > NQNFieldSize || len(host) > NQNFieldSize || strings.IndexByte(sub, 0) >= 0 || strings.IndexByte(host, 0) >= 0 {
			t.Fatalf("NQNs %q %q", sub, host)
		}
		e := ConnectData(make([]byte, ConnectDataSize))
		e.SetHostID(hostID)
		e.SetCNTLID(cntlid)
		e.SetSubNQN(sub)
		e.SetHostNQN(host)
		if e.HostID() != hostID || e.CNTLID() != cntlid || e.SubNQN() != sub || e.HostNQN() != host {
			t.Fatal("connect data does not round trip")
		}
	})
}

func FuzzRDMACMRequest(f *testing.F) {
	f.Add(make([]byte, RDMACMRequestSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The transport rejects private data shorter than the request with
		// RDMACMRejectInvalidLength before taking the view.
		if len(data) < RDMACMRequestSize {
			return
		}
		r := RDMACMRequest(data)
		w := RDMACMRequest(make([]byte, RDMACMRequestSize))
		w.SetRECFMT(r.RECFMT())
		w.SetQID(r.QID())
		w.SetHRQSIZE(r.HRQSIZE())
		w.SetHSQSIZE(r.HSQSIZE())
		w.SetCNTLID(r.CNTLID())
		if !bytes.Equal(w[:10], data[:10]) {
			t.Fatalf("request round trip = %x, want %x", []byte(w[:10]), data[:10])
		}
		_ = RDMACMRejectStatus(r.QID()).String()
	})
}

func FuzzDSMRange(f *testing.F) {
	f.Add(make([]byte, DSMRangeSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		for ; len(data) >= DSMRangeSize; data = data[DSMRangeSize:] {
			r := DSMRange(data)
			w := DSMRange(make([]byte, DSMRangeSize))
			w.SetAttributes(r.Attributes())
			w.SetNumBlocks(r.NumBlocks())
			w.SetSLBA(r.SLBA())
			if !bytes.Equal(w, data[:DSMRangeSize]) {
				t.Fatalf("range round trip = %x, want %x", []byte(w), data[:DSMRangeSize])
			}
		}
	})
}

func FuzzNSDescriptors(f *testing.F) {
	f.Add([]byte{0x0f, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Arbitrary lists must parse or fail cleanly, and a parsed list
		// re-encodes to itself.
		if d, err := ParseNSDescriptors(data); err == nil {
			checkNSRoundTrip(t, d)
		}
		// Descriptors built from the input: byte 0 selects which are
		// present, the rest fills them.
		if len(data) == 0 {
			return
		}
		src := make([]byte, 1+8+16+16+1)
		copy(src, data)
		var d NSDescriptors
		if src[0]&1 != 0 {
			v := [8]byte(src[1:9])
			d.EUI64 = &v
		}
		if src[0]&2 != 0 {
			v := [16]byte(src[9:25])
			d.NGUID = &v
		}
		if src[0]&4 != 0 {
			v := [16]byte(src[25:41])
			d.UUID = &v
		}
		if src[0]&8 != 0 {
			v := src[41]
			d.CSI = &v
		}
		checkNSRoundTrip(t, d)
	})
}

func checkNSRoundTrip(t *testing.T, d NSDescriptors) {
	t.Helper()
	b := make([]byte, IdentifyDataSize)
	PutNSDescriptors(b, d)
	got, err := ParseNSDescriptors(b)
	if err != nil {
		t.Fatalf("parse after put: %v", err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip = %+v, want %+v", got, d)
	}
}

func FuzzDiscoveryLogEntry(f *testing.F) {
	f.Add("4420", DiscoveryNQN, "192.168.1.10", []byte{1, 1, 3, 0, 1, 0, 0xff, 0xff, 32, 0})
	f.Fuzz(func(t *testing.T, trsvcid, subnqn, traddr string, fixed []byte) {
		// Whatever the fields hold, decoding must not panic.
		raw := make([]byte, DiscoveryLogEntrySize)
		copy(raw, fixed)
		copy(raw[dleTRSVCID:], trsvcid)
		_ = UnmarshalDiscoveryLogEntry(raw)

		for _, s := range []string{trsvcid, subnqn, traddr} {
			if !printableASCII(s) {
				return
			}
		}
		fx := make([]byte, 12)
		copy(fx, fixed)
		e := DiscoveryLogEntry{
			TRTYPE: fx[0], ADRFAM: fx[1], SUBTYPE: fx[2], TREQ: fx[3],
			PORTID: uint16(fx[4]) | uint16(fx[5])<<8, CNTLID: CNTLID(fx[6]) | CNTLID(fx[7])<<8,
			ASQSZ: uint16(fx[8]) | uint16(fx[9])<<8, EFLAGS: uint16(fx[10]) | uint16(fx[11])<<8,
			TRSVCID: trsvcid, SubNQN: subnqn, TRADDR: traddr,
			TSAS: RDMATSAS(fx[0], fx[1], fx[2], uint16(fx[3])),
		}
		b := make([]byte, DiscoveryLogEntrySize)
		e.MarshalTo(b)
		got := UnmarshalDiscoveryLogEntry(b)
		want := e
		// Fields are truncated to their size; space padding hides
		// trailing spaces.
		want.TRSVCID = strings.TrimRight(trunc(trsvcid, trsvcidLen), " ")
		want.SubNQN = trunc(subnqn, NQNFieldSize)
		want.TRADDR = strings.TrimRight(trunc(traddr, traddrLen), " ")
		if got != want {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func FuzzIdentify(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, namespace := range []bool{false, true} {
			checkIdentifyCopy(t, data, namespace)
			checkIdentifySet(t, data, namespace)
		}
	})
}

// checkIdentifyCopy reads every field of data as Identify data (short input
// leaves zeroes), which must not panic, and copies each into a fresh buffer
// through its setter: the copy reads back the same values, and copying the
// copy gives the same bytes.
func checkIdentifyCopy(t *testing.T, data []byte, namespace bool) {
	src := make([]byte, IdentifyDataSize)
	copy(src, data)
	from := identifyFields(src, namespace)
	dst := make([]byte, IdentifyDataSize)
	to := identifyFields(dst, namespace)
	for i, f := range from {
		to[i].set.Call(f.get.Call(nil))
	}
	for i, f := range from {
		if want, got := f.get.Call(nil)[0].Interface(), to[i].get.Call(nil)[0].Interface(); got != want {
			t.Fatalf("%s: wrote %#v, reads back %#v", f.name, want, got)
		}
	}
	again := make([]byte, IdentifyDataSize)
	for i, f := range identifyFields(again, namespace) {
		f.set.Call(to[i].get.Call(nil))
	}
	if !bytes.Equal(again, dst) {
		t.Fatalf("a second copy differs:\n%s\nvs\n%s", golden.HexRows(again), golden.HexRows(dst))
	}
}

// checkIdentifySet gives every field a value drawn from data, strings of
// any length included, and checks that each reads back, with all the others
// set, what it reads when set alone: no setter writes over another field.
func checkIdentifySet(t *testing.T, data []byte, namespace bool) {
	pos := 0
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		pos++
		return data[(pos-1)%len(data)]
	}
	b := make([]byte, IdentifyDataSize)
	fields := identifyFields(b, namespace)
	alone := make([]any, len(fields))
	vals := make([]reflect.Value, len(fields))
	for i, f := range fields {
		typ := f.get.Type().Out(0)
		v := reflect.New(typ).Elem()
		switch typ.Kind() {
		case reflect.String:
			s := make([]byte, int(next())*2) // up to 510 bytes, longer than any field
			for j := range s {
				s[j] = next()
			}
			v.SetString(string(s))
		case reflect.Array:
			for j := range v.Len() {
				v.Index(j).SetUint(uint64(next()))
			}
		default:
			var u uint64
			for range typ.Size() {
				u = u<<8 | uint64(next())
			}
			v.SetUint(u)
		}
		vals[i] = v
		clear(b)
		f.set.Call([]reflect.Value{v})
		alone[i] = f.get.Call(nil)[0].Interface()
	}
	clear(b)
	for i, f := range fields {
		f.set.Call([]reflect.Value{vals[i]})
	}
	for i, f := range fields {
		if got := f.get.Call(nil)[0].Interface(); got != alone[i] {
			t.Fatalf("%s reads %#v with the other fields set, %#v alone", f.name, got, alone[i])
		}
	}
}

// FuzzANALog: the ANA log parser never panics, and what it reads writes back
// to the same bytes (groups only, or with NSIDs).
func FuzzANALog(f *testing.F) {
	seed := []ANAGroupDesc{{GroupID: 1, ChangeCount: 3, State: ANAOptimized, NSIDs: []NSID{1, 4}}, {GroupID: 2, State: ANAChange}}
	b := make([]byte, ANALogSize(seed, false))
	PutANALog(b, 7, seed, false)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		count, groups, ok := ParseANALog(data)
		if !ok {
			return
		}
		out := make([]byte, ANALogSize(groups, false))
		PutANALog(out, count, groups, false)
		c2, g2, ok := ParseANALog(out)
		if !ok || c2 != count || !reflect.DeepEqual(g2, groups) {
			t.Fatalf("round trip: %d %+v, want %d %+v", c2, g2, count, groups)
		}
	})
}

// FuzzANALogWindow: a window of any ANA log page the parser reads, at any
// offset (up to the 16 GiB a page sized for NSID FFFFFFFDh reaches, and
// past it), holds the page's bytes there and zeros after them.
func FuzzANALogWindow(f *testing.F) {
	seed := []ANAGroupDesc{{GroupID: 1, ChangeCount: 3, State: ANAOptimized, NSIDs: []NSID{1, MaxNSID}}, {GroupID: 128, State: ANAChange}}
	b := make([]byte, ANALogSize(seed, false))
	PutANALog(b, 7, seed, false)
	for _, off := range []uint64{0, 20, 52, ANALogMaxSize(128, uint32(MaxNSID), false) - 4096, 1<<64 - 4} {
		f.Add(b, off, uint16(4096), false)
		f.Add(b, off, uint16(7), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, off uint64, n uint16, rgo bool) {
		count, groups, ok := ParseANALog(data)
		if !ok {
			return
		}
		page := make([]byte, ANALogSize(groups, rgo))
		PutANALog(page, count, groups, rgo)
		want := make([]byte, n)
		if off < uint64(len(page)) {
			copy(want, page[off:])
		}
		got := bytes.Repeat([]byte{0xee}, int(n))
		ANALogWindow(got, off, count, groups, rgo)
		if !bytes.Equal(got, want) {
			t.Fatalf("window %d+%d of a %d-byte page:\n got % x\nwant % x", off, n, len(page), got, want)
		}
	})
}

// FuzzResvStatus: the Reservation Report parser never panics, and what it
// reads writes back to a report that reads the same, in both formats.
func FuzzResvStatus(f *testing.F) {
	s := &ResvStatus{Gen: 5, Type: ResvWriteExclusive, PTPL: true,
		Registrants: []ResvRegistrant{{CNTLID: CNTLIDDynamic, Holder: true, HostID: [16]byte{1, 2}, Key: 4}}}
	for _, ext := range []bool{false, true} {
		b := make([]byte, ResvStatusSize(s, ext))
		PutResvStatus(b, s, ext)
		f.Add(b, ext)
	}
	f.Fuzz(func(t *testing.T, data []byte, ext bool) {
		got, ok := ParseResvStatus(data, ext)
		if !ok {
			return
		}
		out := make([]byte, ResvStatusSize(got, ext))
		PutResvStatus(out, got, ext)
		again, ok := ParseResvStatus(out, ext)
		if !ok || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %+v, want %+v", again, got)
		}
	})
}

// FuzzResvNotification: a Reservation Notification log entry reads back.
func FuzzResvNotification(f *testing.F) {
	b := make([]byte, ResvNotificationSize)
	PutResvNotification(b, ResvNotification{Count: 3, Type: ResvNotifyReleased, Available: 1, NSID: 9})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < ResvNotificationSize {
			return
		}
		n := ParseResvNotification(data)
		out := make([]byte, ResvNotificationSize)
		PutResvNotification(out, n)
		if ParseResvNotification(out) != n {
			t.Fatalf("round trip of %+v", n)
		}
	})
}

func FuzzTCPHeader(f *testing.F) {
	f.Add(make([]byte, TCPMaxHdrSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The transport reads a header into a buffer of TCPMaxHdrSize
		// bytes and looks only at the HLEN bytes it holds.
		buf := make([]byte, TCPMaxHdrSize)
		copy(buf, data)
		h := TCPHeader(buf)
		checkTCPHeaderRef(t, h)
		_ = h.FES().String()

		// Setters write back what the accessors read.
		w := TCPHeader(make([]byte, TCPMaxHdrSize))
		w.SetCommon(h.Type(), h.Flags(), h.HLEN(), h.PDO(), h.PLEN())
		if !bytes.Equal(w[:TCPCommonHeaderSize], buf[:TCPCommonHeaderSize]) {
			t.Fatalf("common header round trip = %x, want %x", []byte(w[:8]), buf[:8])
		}
		w.SetICReq(h.PFV(), h.PDA(), h.DGST(), h.MAXR2T())
		if !bytes.Equal(w[8:16], buf[8:16]) {
			t.Fatalf("ICReq round trip = %x, want %x", []byte(w[8:16]), buf[8:16])
		}
		w.SetData(h.CCCID(), h.TTAG(), h.DATAO(), h.DATAL())
		if !bytes.Equal(w[8:20], buf[8:20]) {
			t.Fatalf("data header round trip = %x, want %x", []byte(w[8:20]), buf[8:20])
		}
		w.SetTermReq(h.FES(), h.FEI())
		if !bytes.Equal(w[8:14], buf[8:14]) {
			t.Fatalf("termination request round trip = %x, want %x", []byte(w[8:14]), buf[8:14])
		}
	})
}
