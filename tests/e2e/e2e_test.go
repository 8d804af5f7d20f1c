//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDiscover checks the discovery log: one entry per subsystem with the port's address.
func TestDiscover(t *testing.T) {
	h := newHost(t)
	open, restricted := nqn("discover-open"), nqn("discover-restricted")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: open, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")}},
		// The kernel lists only subsystems the host may access; this host may.
		{NQN: restricted, Hosts: []string{h.NQN}, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")}},
	}}
	startTarget(t, spec)

	log := h.discover(t)
	t.Logf("discovery log: genctr %d, %d records", log.Genctr, len(log.Records))
	for _, ss := range spec.Subsystems {
		t.Run(strings.TrimPrefix(ss.NQN, testNQNPrefix), func(t *testing.T) {
			var recs []discoveryRecord
			for _, r := range log.Records {
				if r.Subnqn == ss.NQN {
					recs = append(recs, r)
				}
			}
			if len(recs) != 1 {
				t.Fatalf("%d discovery records for %s, want 1 (records: %+v)", len(recs), ss.NQN, log.Records)
			}
			r := recs[0]
			checks := []struct{ field, got, want string }{
				{"trtype", r.Trtype, "rdma"},
				{"adrfam", r.Adrfam, "ipv4"},
				{"traddr", r.Traddr, labAddr},
				{"trsvcid", r.Trsvcid, strconv.Itoa(portRDMA)},
				{"subtype", r.Subtype, "nvme subsystem"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
				}
			}
			t.Run("rdma-tsas", func(t *testing.T) {
				got := fmt.Sprintf("qptype %q, cms %q", r.RDMAQPType, r.RDMACMS)
				requireTgt(t, "RDMA transport specific address subtype", got)
				if r.RDMAQPType == "" && r.RDMACMS == "" {
					t.Log("nvme-cli prints no RDMA TSAS fields; nothing to check")
					return
				}
				if r.RDMAQPType != "connected" || r.RDMACMS != "rdma-cm" {
					t.Errorf("RDMA TSAS: %s, want qptype \"connected\", cms \"rdma-cm\"", got)
				}
			})
		})
	}
}

// TestConnect connects the kernel initiator and checks what it sees: the namespaces, Identify
// Controller and Identify Namespace, and the namespace identifiers (UUID, NGUID, EUI64).
func TestConnect(t *testing.T) {
	h := newHost(t)
	sub := nqn("connect")
	ns1 := fileNS(t, 1, 64*mib, 512, "4f0e2c1a-0000-4000-8000-000000000001")
	ns1.NGUID, ns1.EUI64 = "6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b", "0011223344556677"
	ns3 := memNS(3, 16*mib, 512, "4f0e2c1a-0000-4000-8000-000000000003")
	ns3.NGUID = "none"
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{
			ns1,
			memNS(2, 32*mib, 4096, "4f0e2c1a-0000-4000-8000-000000000002"), // the default NGUID
			ns3,
		},
	}}}
	startTarget(t, spec)
	nss := spec.Subsystems[0].Namespaces
	c := h.mustConnect(t, sub, 1, 2, 3)
	devs := map[uint32]string{}
	for _, ns := range nss {
		devs[ns.NSID] = c.blockDev(t, ns.NSID)
	}
	t.Logf("controller %s, disks %v", c.name, devs)

	t.Run("nvme-list", func(t *testing.T) {
		var l nvmeList
		nvmeJSON(t, &l, "list")
		for _, ns := range nss {
			found := false
			for _, d := range l.Devices {
				if d.DevicePath != devs[ns.NSID] {
					continue
				}
				found = true
				if uint32(d.NameSpace) != ns.NSID {
					t.Errorf("%s: NameSpace %d, want %d", d.DevicePath, d.NameSpace, ns.NSID)
				}
				if int64(d.PhysicalSize) != ns.Size {
					t.Errorf("%s: PhysicalSize %d, want %d", d.DevicePath, d.PhysicalSize, ns.Size)
				}
				if int(d.SectorSize) != ns.LBASize() {
					t.Errorf("%s: SectorSize %d, want %d", d.DevicePath, d.SectorSize, ns.LBASize())
				}
				if int64(d.MaximumLBA) != ns.Size/int64(ns.LBASize()) {
					t.Errorf("%s: MaximumLBA %d, want %d", d.DevicePath, d.MaximumLBA, ns.Size/int64(ns.LBASize()))
				}
			}
			if !found {
				t.Errorf("nvme list does not show %s (nsid %d)", devs[ns.NSID], ns.NSID)
			}
			name := filepath.Base(devs[ns.NSID])
			if sectors, _ := readSysUint(filepath.Join("/sys/block", name, "size")); int64(sectors)*512 != ns.Size {
				t.Errorf("/sys/block/%s/size = %d sectors, want %d bytes", name, sectors, ns.Size)
			}
		}
	})

	t.Run("id-ctrl", func(t *testing.T) {
		var id idCtrl
		nvmeJSON(t, &id, "id-ctrl", c.charDev())
		t.Logf("id-ctrl: cntlid %d mdts %d kas %d maxcmd %d nn %d sgls %#x ioccsz %d iorcsz %d msdbd %d",
			id.CNTLID, id.MDTS, id.KAS, id.MaxCmd, id.NN, uint64(id.SGLS), id.IOCCSZ, id.IORCSZ, id.MSDBD)
		t.Run("subnqn", func(t *testing.T) {
			if id.Subnqn != sub {
				t.Errorf("subnqn = %q, want %q", id.Subnqn, sub)
			}
		})
		t.Run("sgls-keyed", func(t *testing.T) {
			// SGLS bits 1:0: SGL support; bit 2: Keyed SGL Data Block descriptor, which RDMA needs.
			if id.SGLS&0x3 == 0 {
				t.Errorf("sgls %#x: SGLs not supported", uint64(id.SGLS))
			}
			if id.SGLS&(1<<2) == 0 {
				t.Errorf("sgls %#x: keyed SGL data block descriptor bit (2) not set", uint64(id.SGLS))
			}
		})
		t.Run("capsule-sizes", func(t *testing.T) {
			// Fabrics minimums: a 64-byte command capsule, a 16-byte response capsule.
			if id.IOCCSZ < 4 {
				t.Errorf("ioccsz = %d (16-byte units), want >= 4", id.IOCCSZ)
			}
			if id.IORCSZ < 1 {
				t.Errorf("iorcsz = %d (16-byte units), want >= 1", id.IORCSZ)
			}
		})
		t.Run("nn", func(t *testing.T) {
			if int(id.NN) < len(nss) {
				t.Errorf("nn = %d, want >= %d", id.NN, len(nss))
			}
		})
		t.Run("mdts", func(t *testing.T) {
			requireTgt(t, "mdts >= 8 (1 MiB transfers)", id.MDTS)
			// In units of the minimum page size (4 KiB); 0 means no limit.
			if id.MDTS != 0 && id.MDTS < 8 {
				t.Errorf("mdts = %d (%d KiB), want >= 8 (1 MiB)", id.MDTS, 4<<id.MDTS)
			}
		})
		t.Run("kas", func(t *testing.T) {
			requireTgt(t, "kas > 0", id.KAS)
			if id.KAS == 0 {
				t.Error("kas = 0, want a keep-alive granularity")
			}
		})
		t.Run("in-capsule-8k", func(t *testing.T) {
			requireTgt(t, "8 KiB of in-capsule data", fmt.Sprintf("ioccsz %d", id.IOCCSZ))
			if got := int(id.IOCCSZ)*16 - 64; got < 8*kib {
				t.Errorf("ioccsz = %d: %d bytes of in-capsule data, want >= 8192", id.IOCCSZ, got)
			}
		})
	})

	for _, ns := range nss {
		dev := devs[ns.NSID]
		t.Run(fmt.Sprintf("id-ns/nsid%d", ns.NSID), func(t *testing.T) {
			var id idNS
			nvmeJSON(t, &id, "id-ns", dev, "-n", strconv.FormatUint(uint64(ns.NSID), 10))
			want := uint64(ns.Size / int64(ns.LBASize()))
			if uint64(id.NSZE) != want || uint64(id.NCAP) != want {
				t.Errorf("nsze %d ncap %d, want %d blocks of %d", id.NSZE, id.NCAP, want, ns.LBASize())
			}
			fmtIdx := int(id.FLBAS & 0xf)
			if fmtIdx >= len(id.LBAFs) {
				t.Fatalf("flbas %d selects format %d, but only %d LBA formats", id.FLBAS, fmtIdx, len(id.LBAFs))
			}
			if ds, want := int(id.LBAFs[fmtIdx].DS), bits.TrailingZeros(uint(ns.LBASize())); ds != want {
				t.Errorf("LBA format %d in use has ds %d (%d bytes), want %d (%d bytes)", fmtIdx, ds, 1<<ds, want, ns.LBASize())
			}
			if id.LBAFs[fmtIdx].MS != 0 {
				t.Errorf("LBA format %d has %d metadata bytes, want 0", fmtIdx, id.LBAFs[fmtIdx].MS)
			}
		})
		t.Run(fmt.Sprintf("uuid/nsid%d", ns.NSID), func(t *testing.T) {
			name := filepath.Base(dev)
			if got := readSys(filepath.Join("/sys/block", name, "uuid")); got != ns.UUID {
				t.Errorf("/sys/block/%s/uuid = %q, want %q", name, got, ns.UUID)
			}
			if got := readSys(filepath.Join("/sys/block", name, "wwid")); !strings.Contains(got, ns.UUID) {
				t.Errorf("/sys/block/%s/wwid = %q, want it to contain %q", name, got, ns.UUID)
			}
			var d nsDescs
			nvmeJSON(t, &d, "ns-descs", dev, "-n", strconv.FormatUint(uint64(ns.NSID), 10))
			found := false
			for _, desc := range d.Descs {
				if desc.Type == "uuid" {
					found = true
					if desc.UUID != ns.UUID {
						t.Errorf("ns-descs uuid %q, want %q", desc.UUID, ns.UUID)
					}
				}
			}
			if !found {
				t.Errorf("ns-descs lists no uuid descriptor: %+v", d.Descs)
			}
		})
		t.Run(fmt.Sprintf("nguid-eui64/nsid%d", ns.NSID), func(t *testing.T) {
			nsid := strconv.FormatUint(uint64(ns.NSID), 10)
			var id idNS
			nvmeJSON(t, &id, "id-ns", dev, "-n", nsid)
			var d nsDescs
			nvmeJSON(t, &d, "ns-descs", dev, "-n", nsid)
			descs := map[string]string{}
			for _, desc := range d.Descs {
				switch desc.Type {
				case "nguid":
					descs["nguid"] = desc.NGUID
				case "eui64":
					descs["eui64"] = desc.EUI64
				}
			}
			const zeroNGUID, zeroEUI64 = "00000000000000000000000000000000", "0000000000000000"
			// An identifier is in Identify Namespace and, unless all zero, in the descriptor list.
			check := func(t *testing.T, what, inID, zero, want string) {
				t.Helper()
				if inID != want {
					t.Errorf("id-ns %s = %q, want %q", what, inID, want)
				}
				if got, ok := descs[what]; want == zero && ok {
					t.Errorf("ns-descs lists %s %q, want none", what, got)
				} else if want != zero && got != want {
					t.Errorf("ns-descs %s = %q, want %q", what, got, want)
				}
			}
			switch ns.NGUID {
			case "none":
				check(t, "nguid", id.NGUID, zeroNGUID, zeroNGUID)
			case "":
				// nvmeof-tgt derives one from the UUID; nvmet has none.
				t.Run("derived", func(t *testing.T) {
					requireTgt(t, "an NGUID derived from the UUID", id.NGUID)
					if id.NGUID == zeroNGUID || len(id.NGUID) != len(zeroNGUID) {
						t.Errorf("id-ns nguid = %q, want a derived one", id.NGUID)
					}
					check(t, "nguid", id.NGUID, zeroNGUID, id.NGUID)
				})
			default:
				check(t, "nguid", id.NGUID, zeroNGUID, ns.NGUID)
			}
			if ns.EUI64 == "" {
				check(t, "eui64", id.EUI64, zeroEUI64, zeroEUI64)
			} else {
				t.Run("eui64", func(t *testing.T) {
					requireTgt(t, "a configured EUI64 (nvmet has no such attribute)", id.EUI64)
					check(t, "eui64", id.EUI64, zeroEUI64, ns.EUI64)
				})
			}
		})
	}
}

// TestData writes and verifies data through the kernel initiator with fio: in-capsule-sized
// (4 KiB) and larger writes (128 KiB, 1 MiB, which take RDMA READs), sequential and random,
// one and 32 outstanding.
func TestData(t *testing.T) {
	h := newHost(t)
	sub := nqn("data")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{
			fileNS(t, 1, 64*mib, 512, ""),
			memNS(2, 32*mib, 4096, ""),
			blockNS(t, 3, 32*mib, 4096),
		},
	}}}
	tgt, dir := startTarget(t, spec)
	c := h.mustConnect(t, sub, 1, 2, 3)

	type row struct {
		nsid uint32
		fioCase
	}
	var rows []row
	for _, bs := range []int{4 * kib, 128 * kib, mib} {
		size := int64(16 * mib)
		if bs == 4*kib {
			size = 8 * mib
		}
		for _, rw := range []string{"randwrite", "write"} {
			for _, qd := range []int{1, 32} {
				n := size
				if bs == 4*kib && qd == 1 {
					n = 4 * mib // 1,024 round trips cover the path; more only costs guest time
				}
				rows = append(rows, row{1, fioCase{rw: rw, bs: bs, iodepth: qd, size: n}})
			}
		}
	}
	rows = append(rows,
		row{2, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib}},
		row{2, fioCase{rw: "randwrite", bs: 128 * kib, iodepth: 1, size: 16 * mib}},
		row{2, fioCase{rw: "write", bs: mib, iodepth: 32, size: 16 * mib}},
		row{3, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib}},
		row{3, fioCase{rw: "randwrite", bs: 128 * kib, iodepth: 1, size: 16 * mib}},
		row{3, fioCase{rw: "write", bs: mib, iodepth: 32, size: 16 * mib}},
	)
	for _, r := range rows {
		backend := spec.Subsystems[0].Namespaces[r.nsid-1].Backend
		t.Run(fmt.Sprintf("%s/%s", backend, r.name()), func(t *testing.T) {
			runFio(t, c.blockDev(t, r.nsid), dir, r.fioCase)
		})
	}

	// nvmeof-tgt's own counters must agree with what fio moved, over the RDMA path.
	if _, ok := tgt.(*tgtProcess); ok {
		var written [4]float64 // by nsid
		for _, r := range rows {
			written[r.nsid] += float64(r.size)
		}
		t.Run("metrics", func(t *testing.T) {
			m := scrapeMetrics(t)
			for nsid := 1; nsid <= 3; nsid++ {
				id := fmt.Sprintf(`nsid="%d"`, nsid)
				for _, op := range []string{"write", "read"} { // fio's verify phase reads it all back
					got, ok := metricSum(m, "nvmeof_tgt_namespace_bytes_total", id, `op="`+op+`"`)
					if !ok || got < written[nsid] {
						t.Errorf("nsid %d %s bytes = %v (found %v), want at least the %v fio wrote", nsid, op, got, ok, written[nsid])
					}
				}
				if errs, _ := metricSum(m, "nvmeof_tgt_namespace_errors_total", id); errs != 0 {
					t.Errorf("nsid %d backend errors = %v, want 0", nsid, errs)
				}
			}
			if v, ok := metricSum(m, "nvmeof_tgt_rdma_completion_errors_total"); !ok || v != 0 {
				t.Errorf("rdma completion errors = %v (found %v), want 0", v, ok)
			}
			// The kernel host registers a memory region per larger I/O and asks for remote
			// invalidation; rxe supports SEND_WITH_INV, so the target must have used it.
			if v, ok := metricSum(m, "nvmeof_tgt_rdma_send_with_invalidate_total"); !ok || v == 0 {
				t.Errorf("responses sent with invalidate = %v (found %v), want > 0", v, ok)
			}
			// File and block namespaces (nsid 1 and 3) run their I/O on the pollers' io_uring
			// (rdma.io_uring defaults to auto, and the lab kernel has io_uring): at least every
			// write of those rows went there: at least one per MDTS (1 MiB) fio wrote, however the
			// host's block layer merged them.
			var fdIOs float64
			for _, r := range rows {
				if r.nsid != 2 {
					fdIOs += float64(r.size / mib)
				}
			}
			if v, ok := metricSum(m, "nvmeof_tgt_rdma_io_uring_requests_total"); !ok || v < fdIOs {
				t.Errorf("io_uring requests = %v (found %v), want at least %v (file and block writes)", v, ok, fdIOs)
			}
			if v, ok := metricSum(m, "nvmeof_tgt_rdma_queues_live"); !ok || v < 2 {
				t.Errorf("rdma queues live = %v (found %v), want the admin queue and at least one I/O queue", v, ok)
			}
		})
	}
}

// TestCommands exercises I/O commands beyond read and write (Flush, Write Zeroes, Dataset
// Management) and the log pages.
func TestCommands(t *testing.T) {
	h := newHost(t)
	sub := nqn("commands")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{
			fileNS(t, 1, 64*mib, 512, ""),
			memNS(2, 32*mib, 4096, ""),
			blockNS(t, 3, 32*mib, 4096), // the target must take 4096 from the device
		},
	}}}
	_, dir := startTarget(t, spec)
	c := h.mustConnect(t, sub, 1, 2, 3)

	for _, ns := range spec.Subsystems[0].Namespaces {
		dev := c.blockDev(t, ns.NSID)
		nsid := strconv.FormatUint(uint64(ns.NSID), 10)
		bs := int64(ns.LBASize())
		t.Run(fmt.Sprintf("%s-nsid%d", ns.Backend, ns.NSID), func(t *testing.T) {
			t.Run("block-size", func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "queue/logical_block_size"))
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(bs, 10) {
					t.Errorf("%s logical block size %s, want %d", dev, got, bs)
				}
			})
			t.Run("flush", func(t *testing.T) {
				mustRun(t, cmdTimeout, "nvme", "flush", dev, "-n", nsid)
			})

			// A 2 MiB pattern at 4 MiB; zero its middle 1 MiB; the edges must keep the pattern.
			const off, n = 4 * mib, 2 * mib
			const zoff, zlen = off + 512*kib, mib
			t.Run("write-zeroes", func(t *testing.T) {
				pat := pattern(n, uint64(ns.NSID))
				ddWrite(t, dev, off, pat)
				checkSame(t, "pattern before write-zeroes", off, ddRead(t, dev, off, n), pat)
				slba, nlb := zoff/bs, zlen/bs
				mustRun(t, cmdTimeout, "nvme", "write-zeroes", dev, "-n", nsid,
					"-s", strconv.FormatInt(slba, 10), "-c", strconv.FormatInt(nlb-1, 10)) // -c is 0's based
				got := ddRead(t, dev, off, n)
				want := append([]byte(nil), pat...)
				clear(want[zoff-off : zoff-off+zlen])
				checkSame(t, "after write-zeroes", off, got, want)
			})

			t.Run("dsm-deallocate", func(t *testing.T) {
				var id idNS
				nvmeJSON(t, &id, "id-ns", dev, "-n", nsid)
				slba, nlb := off/bs, int64(n)/bs
				mustRun(t, cmdTimeout, "nvme", "dsm", dev, "-n", nsid, "--ad",
					"-s", strconv.FormatInt(slba, 10), "-b", strconv.FormatInt(nlb, 10))
				got := ddRead(t, dev, off, n) // the range must stay readable
				// DLFEAT bits 2:0 say what deallocated blocks read as: 1 zeroes, 2 ones.
				switch id.DLFEAT & 0x7 {
				case 1:
					checkSame(t, "deallocated range (dlfeat: reads zeroes)", off, got, make([]byte, n))
				case 2:
					checkSame(t, "deallocated range (dlfeat: reads ones)", off, got, filled(0xff, n))
				default:
					t.Logf("dlfeat %#x: contents after deallocate unspecified; not checked", uint64(id.DLFEAT))
				}
			})
		})
	}

	t.Run("log-pages", func(t *testing.T) {
		// Some fio I/O first, so the SMART counters have something to count.
		runFio(t, c.blockDev(t, 1), dir, fioCase{rw: "write", bs: 128 * kib, iodepth: 8, size: 4 * mib})

		t.Run("error-log", func(t *testing.T) {
			var l errorLog
			nvmeJSON(t, &l, "error-log", c.charDev())
			if len(l.Errors) == 0 {
				t.Error("error-log returned no entries (want ELPE+1 entries, possibly all zero)")
			}
		})
		t.Run("fw-log", func(t *testing.T) {
			var l map[string]any
			nvmeJSON(t, &l, "fw-log", c.charDev())
			if len(l) == 0 {
				t.Error("fw-log printed an empty object")
			}
		})
		var smart smartLog
		t.Run("smart-log", func(t *testing.T) {
			nvmeJSON(t, &smart, "smart-log", c.charDev())
			t.Logf("smart-log: data units read %d written %d, host read cmds %d write cmds %d, critical warning %#x",
				smart.DataUnitsRead, smart.DataUnitsWritten, smart.HostReadCommands, smart.HostWriteCommands, uint64(smart.CriticalWarning))
			if smart.CriticalWarning != 0 {
				t.Errorf("critical_warning = %#x, want 0", uint64(smart.CriticalWarning))
			}
		})
		t.Run("smart-log-data-units", func(t *testing.T) {
			if smart.DataUnitsRead == 0 || smart.DataUnitsWritten == 0 {
				requireTgt(t, "data units read and written after fio",
					fmt.Sprintf("read %d written %d for these backends", smart.DataUnitsRead, smart.DataUnitsWritten))
				t.Errorf("after fio: data units read %d, written %d; want both > 0", smart.DataUnitsRead, smart.DataUnitsWritten)
			}
		})
		t.Run("get-log-raw", func(t *testing.T) {
			// The raw SMART / Health page must agree with the decoded one (no I/O in between).
			out := filepath.Join(t.TempDir(), "smart.bin")
			raw := mustRun(t, cmdTimeout, "nvme", "get-log", c.charDev(), "--log-id=2", "--log-len=512", "--raw-binary")
			if err := os.WriteFile(out, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			if len(raw) != 512 {
				t.Fatalf("get-log --log-id=2 returned %d bytes, want 512", len(raw))
			}
			// Data Units Read at bytes 47:32, Data Units Written at 63:48 (128-bit little endian).
			dur, duw := binary.LittleEndian.Uint64(raw[32:]), binary.LittleEndian.Uint64(raw[48:])
			if dur != uint64(smart.DataUnitsRead) || duw != uint64(smart.DataUnitsWritten) {
				t.Errorf("raw log page: data units read %d written %d; smart-log said %d and %d",
					dur, duw, smart.DataUnitsRead, smart.DataUnitsWritten)
			}
		})
	})
}

func filled(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestPersistence writes to a file-backed namespace, restarts the target and reads it back.
func TestPersistence(t *testing.T) {
	h := newHost(t)
	sub := nqn("persist")
	const size = 64 * mib
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{fileNS(t, 1, size, 4096, "")},
	}}}
	tgt, _ := startTarget(t, spec)

	regions := []struct {
		name string
		off  int64
		data []byte
	}{
		{"4MiB at 8MiB", 8 * mib, pattern(4*mib, 11)},
		{"last MiB", size - mib, pattern(mib, 12)},
	}
	c := h.mustConnect(t, sub, 1)
	dev := c.blockDev(t, 1)
	for _, r := range regions {
		ddWrite(t, dev, r.off, r.data)
		t.Logf("wrote %s: sha256 %x", r.name, sha256.Sum256(r.data))
	}
	c.disconnect(t)
	if _, ok := tgt.(*tgtProcess); ok {
		waitTornDown(t)
	}

	start := time.Now()
	tgt.Restart(t)
	t.Logf("target restarted in %v", time.Since(start).Round(time.Millisecond))

	c = h.mustConnect(t, sub, 1)
	dev = c.blockDev(t, 1)
	for _, r := range regions {
		got := ddRead(t, dev, r.off, len(r.data))
		if sha256.Sum256(got) != sha256.Sum256(r.data) {
			t.Errorf("%s: sha256 after restart %x, want %x", r.name, sha256.Sum256(got), sha256.Sum256(r.data))
			checkSame(t, r.name, r.off, got, r.data)
		}
	}
	// Never written: must still read as zeroes (catches shifted writes).
	checkSame(t, "first MiB (never written)", 0, ddRead(t, dev, 0, mib), make([]byte, mib))
}

// TestHostAccess checks a subsystem with an allowed-hosts list.
func TestHostAccess(t *testing.T) {
	allowed, other := newHost(t), newHost(t)
	sub := nqn("hosts")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, Hosts: []string{allowed.NQN},
		Namespaces: []Namespace{memNS(1, 16*mib, 0, "")},
	}}}
	startTarget(t, spec)

	refused := func(t *testing.T) {
		before := allDisks()
		if c, err := other.connect(t, sub); err == nil {
			t.Fatalf("host %s, not in the allowed list, connected as %s", other.NQN, c.name)
		}
		time.Sleep(time.Second) // a disk would appear asynchronously after a connect
		for d := range allDisks() {
			if !before[d] {
				t.Errorf("disk %s appeared after a refused connect", d)
			}
		}
	}
	t.Run("refused", refused)
	t.Run("allowed", func(t *testing.T) {
		c := allowed.mustConnect(t, sub, 1)
		if id := readSys(filepath.Join("/sys/class/nvme", c.name, "hostnqn")); id != allowed.NQN {
			t.Errorf("controller %s hostnqn %q, want %q", c.name, id, allowed.NQN)
		}
		t.Run("refused-while-allowed-connected", refused)
	})
}

// TestUnknownSubsystem connects to an NQN the target does not have.
func TestUnknownSubsystem(t *testing.T) {
	h := newHost(t)
	sub := nqn("known")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true,
		Namespaces: []Namespace{memNS(1, 16*mib, 0, "")},
	}}}
	startTarget(t, spec)

	unknown := nqn("no-such-subsystem")
	before := allDisks()
	start := time.Now()
	if c, err := h.connect(t, unknown); err == nil {
		t.Fatalf("connect to unknown subsystem %s succeeded as %s", unknown, c.name)
	}
	t.Logf("connect to unknown subsystem refused in %v", time.Since(start).Round(time.Millisecond))
	for d := range allDisks() {
		if !before[d] {
			t.Errorf("disk %s appeared after a failed connect", d)
		}
	}
	// The target is still serving.
	h.mustConnect(t, sub, 1)
}
