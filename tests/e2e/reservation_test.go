//go:build e2e

package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Persistent reservations between two hosts of one guest. The Linux host groups controllers
// by subsystem NQN, so the two host identities are two paths of one disk; a command goes out as
// a given host through that host's controller (/dev/nvmeN with -n), which the host allows
// while the controller has a single namespace. The subsystem therefore has one.

// resvHost is one host identity's controller of the subsystem.
type resvHost struct {
	host
	ctrl string // /dev/nvmeN
	id   string // the host ID, as the target reports it
}

func (h resvHost) nvme(t *testing.T, args ...string) cmdResult {
	t.Helper()
	return run(t, cmdTimeout, "nvme", append([]string{args[0], h.ctrl, "-n", "1"}, args[1:]...)...)
}

// ok runs a reservation command that must succeed.
func (h resvHost) ok(t *testing.T, args ...string) {
	t.Helper()
	if r := h.nvme(t, args...); r.err != nil {
		t.Fatalf("nvme %s as %s: %v", strings.Join(args, " "), h.NQN, r)
	}
}

// conflicts runs a command that must fail with Reservation Conflict.
func (h resvHost) conflicts(t *testing.T, what string, args ...string) {
	t.Helper()
	r := h.nvme(t, args...)
	if r.err == nil || !strings.Contains(strings.ToUpper(string(r.stdout)+string(r.stderr)), "RESERVATION_CONFLICT") &&
		!strings.Contains(string(r.stdout)+string(r.stderr), "Reservation Conflict") {
		t.Fatalf("%s as %s: %v, want a Reservation Conflict", what, h.NQN, r)
	}
}

// write writes one block at LBA 0 through the host's own controller.
func (h resvHost) write(t *testing.T, dir string) cmdResult {
	t.Helper()
	data := filepath.Join(dir, "block-"+h.ID)
	if err := os.WriteFile(data, pattern(512, 9), 0o600); err != nil {
		t.Fatal(err)
	}
	return h.nvme(t, "write", "-s", "0", "-c", "0", "-z", "512", "-d", data)
}

func (h resvHost) read(t *testing.T) cmdResult {
	t.Helper()
	return h.nvme(t, "read", "-s", "0", "-c", "0", "-z", "512")
}

// resvReport is `nvme resv-report -e -o json`.
type resvReport struct {
	Gen       int `json:"gen"`
	RType     int `json:"rtype"`
	RegCtl    int `json:"regctl"`
	PTPLS     int `json:"ptpls"`
	RegCtlExt []struct {
		CNTLID int    `json:"cntlid"`
		RCSTS  int    `json:"rcsts"`
		HostID string `json:"hostid"`
		RKey   uint64 `json:"rkey"`
	} `json:"regctlext"`
}

func (h resvHost) report(t *testing.T) resvReport {
	t.Helper()
	r := h.nvme(t, "resv-report", "-e", "-o", "json")
	var rep resvReport
	if r.err != nil || json.Unmarshal(r.stdout, &rep) != nil {
		t.Fatalf("resv-report: %v", r)
	}
	return rep
}

// notification reads the oldest Reservation Notification log entry (log page 80h): its type
// and NSID.
func (h resvHost) notification(t *testing.T) (typ int, nsid uint32) {
	t.Helper()
	r := run(t, cmdTimeout, "nvme", "get-log", h.ctrl, "--log-id=0x80", "--log-len=64", "-b")
	if r.err != nil || len(r.stdout) < 16 {
		t.Fatalf("get-log 80h: %v", r)
	}
	return int(r.stdout[8]), binary.LittleEndian.Uint32(r.stdout[12:])
}

func hostIDHex(id string) string { return strings.ReplaceAll(id, "-", "") }

// TestReservations: every reservation type between two hosts, a write the holder's type forbids
// refused to the other host, preempt-and-abort, release, clear, the extended report, the
// notification log, and PTPL: the state survives a restart of the target when a host asked for
// it, and is gone after a restart when none did. Host A is on RDMA and host B on NVMe/TCP, so
// that each transport carries every command, and reservations hold across the two.
func TestReservations(t *testing.T) {
	requireTgt(t, "the 6.12 kernel target has no reservations")
	requireNVMeTCP(t)
	sub := nqn("resv")
	dir := testDir(t)
	// Reservations persist in a state directory of the test's own. Host B connects through a
	// second port (nvme-cli refuses a second controller of a subsystem through the same address
	// and port, whatever the host NQN, even with --duplicate-connect): a TCP one.
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 0, "")},
	}}}, withConfigEdit(func(y string) string {
		return withTCPPort(y) + fmt.Sprintf("state_dir: %q\n", filepath.Join(dir, "state"))
	}))

	ha, hb := newHost(t), newHost(t)
	a := resvHost{host: ha, ctrl: "/dev/" + mpConnect(t, ha, sub, labAddr, portRDMA), id: ha.ID}
	bh := resvHost{host: hb, ctrl: "/dev/" + mpConnectOver(t, hb, "tcp", sub, labAddr, portTCP), id: hb.ID}

	a.ok(t, "resv-register", "--nrkey=1", "--rrega=0", "--cptpl=3")
	bh.ok(t, "resv-register", "--nrkey=2", "--rrega=0")
	// Every type: A holds it; B is a registrant; the table decides B's write.
	types := []struct {
		rtype  int
		bWrite bool // B, a registrant, may write
		bRead  bool
	}{{1, false, true}, {2, false, false}, {3, true, true}, {4, true, true}, {5, true, true}, {6, true, true}}
	for _, ty := range types {
		a.ok(t, "resv-acquire", "--crkey=1", "--rtype="+strconv.Itoa(ty.rtype), "--racqa=0")
		if r := a.write(t, dir); r.err != nil {
			t.Errorf("type %d: the holder's write: %v", ty.rtype, r)
		}
		if ty.bWrite {
			if r := bh.write(t, dir); r.err != nil {
				t.Errorf("type %d: a registrant's write: %v", ty.rtype, r)
			}
		} else {
			bh.conflicts(t, fmt.Sprintf("type %d write", ty.rtype), "write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")
		}
		if r := bh.read(t); (r.err == nil) != ty.bRead {
			t.Errorf("type %d: a registrant's read: %v, want allowed %v", ty.rtype, r.err, ty.bRead)
		}
		rep := a.report(t)
		if rep.RType != ty.rtype || rep.RegCtl != 2 || len(rep.RegCtlExt) != 2 {
			t.Fatalf("type %d: report %+v", ty.rtype, rep)
		}
		a.ok(t, "resv-release", "--crkey=1", "--rtype="+strconv.Itoa(ty.rtype), "--rrela=0")
	}

	// A holds write exclusive; B preempts and aborts it, taking exclusive access.
	a.ok(t, "resv-acquire", "--crkey=1", "--rtype=1", "--racqa=0")
	bh.conflicts(t, "write under A's write exclusive", "write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")
	bh.ok(t, "resv-acquire", "--crkey=2", "--prkey=1", "--rtype=2", "--racqa=2")
	rep := bh.report(t)
	if rep.RType != 2 || rep.RegCtl != 1 || rep.RegCtlExt[0].RKey != 2 || rep.RegCtlExt[0].RCSTS != 1 ||
		rep.RegCtlExt[0].CNTLID != 0xffff || !strings.EqualFold(rep.RegCtlExt[0].HostID, hostIDHex(hb.ID)) {
		t.Fatalf("after preempt and abort: %+v", rep)
	}
	if typ, nsid := a.notification(t); typ != 1 || nsid != 1 {
		t.Errorf("A's notification: type %d nsid %d, want Registration Preempted (1) of namespace 1", typ, nsid)
	}
	a.conflicts(t, "A's read under B's exclusive access", "read", "-s", "0", "-c", "0", "-z", "512")
	// A registers again and B clears everything: A is told its reservation was preempted.
	a.ok(t, "resv-register", "--nrkey=1", "--rrega=0")
	bh.ok(t, "resv-release", "--crkey=2", "--rrela=1")
	if typ, _ := a.notification(t); typ != 3 {
		t.Errorf("A's notification after the clear: type %d, want Reservation Preempted (3)", typ)
	}
	if rep := a.report(t); rep.RType != 0 || rep.RegCtl != 0 {
		t.Fatalf("after the clear: %+v", rep)
	}

	// PTPL: A registers asking for it and takes a reservation; a restart keeps both.
	a.ok(t, "resv-register", "--nrkey=5", "--rrega=0", "--cptpl=3")
	a.ok(t, "resv-acquire", "--crkey=5", "--rtype=3", "--racqa=0")
	p.RestartKeep(t)
	var after resvReport
	if err := waitFor(time.Minute, func() bool {
		r := a.nvme(t, "resv-report", "-e", "-o", "json")
		return r.err == nil && json.Unmarshal(r.stdout, &after) == nil
	}); err != nil {
		t.Fatalf("no report after the restart: %v", err)
	}
	if after.RType != 3 || after.PTPLS != 1 || after.RegCtl != 1 || after.RegCtlExt[0].RKey != 5 {
		t.Fatalf("after a restart with PTPL: %+v", after)
	}
	// B's controller reconnects on its own schedule, not A's: until it is live again its
	// commands fail on the host with EAGAIN and never reach the target.
	bctl := strings.TrimPrefix(bh.ctrl, "/dev/")
	if err := waitFor(time.Minute, func() bool { return ctrlState(bctl) == "live" }); err != nil {
		t.Fatalf("host B's controller %s is %s a minute after the restart, want live", bctl, ctrlState(bctl))
	}
	bh.conflicts(t, "B's write after the restart", "write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")
	// Without PTPL (CPTPL 2) a restart starts empty.
	a.ok(t, "resv-register", "--nrkey=5", "--rrega=0", "--cptpl=2")
	p.RestartKeep(t)
	if err := waitFor(time.Minute, func() bool {
		r := a.nvme(t, "resv-report", "-e", "-o", "json")
		return r.err == nil && json.Unmarshal(r.stdout, &after) == nil
	}); err != nil {
		t.Fatalf("no report after the second restart: %v", err)
	}
	if after.RType != 0 || after.RegCtl != 0 || after.PTPLS != 0 {
		t.Fatalf("after a restart without PTPL: %+v", after)
	}
}
