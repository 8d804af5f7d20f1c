//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An RDMA device removed under the running target (`rdma link delete`, as
// a NIC unplugged, reset or its driver unloaded): rxe has no
// disassociate_ucontext, so the kernel's unregistration waits until every
// process has closed all it opened on the device. The target must let go
// of the device while it keeps serving its other ports, say that the port
// is down, and listen again once the device is back.

const (
	// portBackTimeout bounds how long a port takes to listen again once its
	// device is back (the transport retries with a backoff of at most 10 s).
	portBackTimeout = 60 * time.Second
)

// ctlPort is one port of `status --json`.
type ctlPort struct {
	ID      uint16 `json:"id"`
	Address string `json:"address"`
	Port    int    `json:"port"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
}

// port is the port on addr:portRDMA in `status --json`.
func (p *tgtProcess) port(t *testing.T, addr string) ctlPort {
	t.Helper()
	var st struct {
		Ports []ctlPort `json:"ports"`
	}
	out := p.ctl(t, "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, pt := range st.Ports {
		if pt.Address == addr && pt.Port == portRDMA {
			return pt
		}
	}
	t.Fatalf("status --json lists no port %s:%d: %+v", addr, portRDMA, st.Ports)
	return ctlPort{}
}

// waitPortState waits for the port on addr to be in state.
func (p *tgtProcess) waitPortState(t *testing.T, addr, state string, within time.Duration) ctlPort {
	t.Helper()
	var pt ctlPort
	start := time.Now()
	if err := waitFor(within, func() bool { pt = p.port(t, addr); return pt.State == state }); err != nil {
		t.Fatalf("port %s:%d is %q (reason %q) after %v, want %q", addr, portRDMA, pt.State, pt.Reason, within, state)
	}
	t.Logf("port %s:%d %s after %v (reason %q)", addr, portRDMA, state, time.Since(start).Round(time.Millisecond), pt.Reason)
	return pt
}

// deleteSoftRoCE runs `rdma link delete rxe1` under the running target,
// which must let go of the device for the command to return.
func deleteSoftRoCE(t *testing.T) {
	t.Helper()
	start := time.Now()
	out, err := runBounded(rmDeleteTimeout, "rdma", "link", "delete", rmDev)
	if err != nil {
		t.Fatalf("rdma link delete %s with the target running: %v\n%s", rmDev, err, out)
	}
	t.Logf("rdma link delete %s took %v", rmDev, time.Since(start).Round(time.Millisecond))
}

// connectAt connects h to subnqn through addr:portRDMA and returns the
// controller and the block device of namespace nsid.
func (h host) connectAt(t *testing.T, subnqn, addr string, nsid uint32) (*controller, string) {
	t.Helper()
	args := []string{"connect", "-t", "rdma", "-a", addr, "-s", strconv.Itoa(portRDMA), "-n", subnqn}
	args = append(args, h.flags()...)
	args = append(args, fmt.Sprintf("--ctrl-loss-tmo=%d", int(h.ctrlLossTmo().Seconds())),
		fmt.Sprintf("--reconnect-delay=%d", int(reconnectDelay.Seconds())))
	mustRun(t, connectTimeout, "nvme", args...)
	ctrls := controllersOf(subnqn, h.NQN)
	if len(ctrls) != 1 {
		t.Fatalf("connect to %s through %s: want one controller, found %v", subnqn, addr, ctrls)
	}
	c := &controller{name: ctrls[0], subnqn: subnqn, host: h}
	t.Cleanup(func() { c.disconnect(t) })
	return c, c.blockDev(t, nsid)
}

// TestDeviceRemoval: the host is connected through two ports, one on each
// Soft-RoCE device; rxe1 is deleted. The deletion completes, the target
// serves on through rxe0, and status and metrics show the port on rxe1
// down. Once rxe1 is back the port listens again and a new connection
// through it works. A second removal, with nothing connected, completes
// too, and the target shuts down cleanly with the port down.
func TestDeviceRemoval(t *testing.T) {
	requireTgt(t, "nvmeof-tgt's port status and API (the kernel target lets go of a removed device in nvmet_rdma_remove_one)")
	h := newHost(t)
	addSoftRoCE(t)
	sub1, sub2 := nqn("devrm-1"), nqn("devrm-2")
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: sub1, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
		{NQN: sub2, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
	}})
	p.ctl(t, "port", "add", "--address", rmAddr, "--port", strconv.Itoa(portRDMA))
	p.port(t, rmAddr) // listed: listening

	c1 := h.mustConnect(t, sub1, 1)
	dev1 := c1.blockDev(t, 1)
	c2, dev2 := h.connectAt(t, sub2, rmAddr, 1)
	ddWrite(t, dev1, 0, pattern(mib, 1))
	ddWrite(t, dev2, 0, pattern(mib, 2))
	checkSame(t, "through rxe1", 0, ddRead(t, dev2, 0, mib), pattern(mib, 2))

	deleteSoftRoCE(t)
	select {
	case <-p.exited:
		t.Fatalf("the target exited after the device removal: %v", p.waitErr)
	default:
	}
	// The host's own end of the path was on rxe1 too: it deletes the
	// controller (nvme_rdma_remove_one).
	if err := waitFor(deviceTimeout, func() bool {
		_, err := os.Stat("/sys/class/nvme/" + c2.name)
		return os.IsNotExist(err)
	}); err != nil {
		t.Errorf("the host's controller %s through %s is still there", c2.name, rmDev)
	}
	c2.gone = true

	// The other port serves on.
	ddWrite(t, dev1, mib, pattern(mib, 3))
	checkSame(t, "through rxe0 after the removal", 0, ddRead(t, dev1, 0, 2*mib), append(pattern(mib, 1), pattern(mib, 3)...))

	down := p.waitPortState(t, rmAddr, "down", 10*time.Second)
	if down.Reason == "" {
		t.Errorf("port %s is down with no reason", rmAddr)
	}
	if st := p.port(t, labAddr); st.State != "live" {
		t.Errorf("port %s on rxe0 is %q (%s), want live", labAddr, st.State, st.Reason)
	}
	m := scrapeMetrics(t)
	if v, ok := metricSum(m, "nvmeof_tgt_port_up", `address="`+rmAddr+`"`); !ok || v != 0 {
		t.Errorf("nvmeof_tgt_port_up for %s = %v (found %v), want 0", rmAddr, v, ok)
	}
	if v, ok := metricSum(m, "nvmeof_tgt_port_up", `address="`+labAddr+`"`); !ok || v != 1 {
		t.Errorf("nvmeof_tgt_port_up for %s = %v (found %v), want 1", labAddr, v, ok)
	}
	if v, ok := metricSum(m, "nvmeof_tgt_rdma_device_removals_total"); !ok || v < 1 {
		t.Errorf("nvmeof_tgt_rdma_device_removals_total = %v (found %v), want at least 1", v, ok)
	}

	// The device returns: the port listens again by itself.
	reAddSoftRoCE(t)
	p.waitPortState(t, rmAddr, "live", portBackTimeout)
	if v, ok := metricSum(scrapeMetrics(t), "nvmeof_tgt_port_up", `address="`+rmAddr+`"`); !ok || v != 1 {
		t.Errorf("nvmeof_tgt_port_up for %s = %v (found %v) once back, want 1", rmAddr, v, ok)
	}
	c3, dev3 := h.connectAt(t, sub2, rmAddr, 1)
	checkSame(t, "through the new rxe1", 0, ddRead(t, dev3, 0, mib), pattern(mib, 2))
	ddWrite(t, dev3, mib, pattern(mib, 4))
	checkSame(t, "through the new rxe1", mib, ddRead(t, dev3, mib, mib), pattern(mib, 4))
	c3.disconnect(t)

	// A device with nothing connected goes as well; the target stops
	// cleanly (its cleanup) with the port down.
	deleteSoftRoCE(t)
	p.waitPortState(t, rmAddr, "down", 10*time.Second)
	checkSame(t, "through rxe0 after the second removal", mib, ddRead(t, dev1, mib, mib), pattern(mib, 3))

	// rxe0 still takes new connections: librdmacm, synced at each removal
	// (the deletion returned only after that), still knows it live:
	// rdma-core before 52 can mis-sort its device list and take a live
	// device for a removed one.
	c4 := h.mustConnect(t, sub2, 1) // sub1 is connected through rxe0 already
	checkSame(t, "a new connection through rxe0", 0, ddRead(t, c4.blockDev(t, 1), 0, 2*mib), append(pattern(mib, 2), pattern(mib, 4)...))
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "librdmacm device sync") {
			t.Errorf("target log: %s", line)
		}
	}
}
