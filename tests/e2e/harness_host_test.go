//go:build e2e

package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The kernel initiator side: host identities, discovery, connect and disconnect, and finding a
// namespace's block device.

const (
	testNQNPrefix = "nqn.2026-11.io.example:e2e-"
	deviceTimeout = 30 * time.Second
	// Bounded reconnects (nvme connect --ctrl-loss-tmo, --reconnect-delay): if the target dies
	// mid-test, I/O fails after ctrlLossTmo instead of hanging the suite, and a target back
	// within it gets its host back.
	ctrlLossTmo    = 30 * time.Second
	reconnectDelay = 2 * time.Second
)

// host is one host identity. Every test has its own NQN and its own host ID: the kernel refuses
// a second host NQN that reuses a host ID it already knows.
type host struct {
	NQN string
	ID  string
	// CtrlLossTmo, if set, replaces ctrlLossTmo for this host's connections.
	CtrlLossTmo time.Duration
}

// ctrlLossTmo is how long the host's controllers keep reconnecting to a target that is gone.
func (h host) ctrlLossTmo() time.Duration {
	if h.CtrlLossTmo != 0 {
		return h.CtrlLossTmo
	}
	return ctrlLossTmo
}

func newHost(t *testing.T) host {
	t.Helper()
	id := newUUID(t)
	return host{NQN: "nqn.2014-08.org.nvmexpress:uuid:" + id, ID: id}
}

// newUUID returns a random (version 4) UUID.
func newUUID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random: %v", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (h host) flags() []string {
	return []string{"--hostnqn", h.NQN, "--hostid", h.ID}
}

func fabricFlags() []string { return fabricFlagsPort(portRDMA) }

func fabricFlagsPort(port int) []string { return fabricFlagsTo("rdma", labAddr, port) }

func fabricFlagsAt(addr string, port int) []string { return fabricFlagsTo("rdma", addr, port) }

// fabricFlagsOver is fabricFlagsPort over transport ("rdma", "tcp").
func fabricFlagsOver(transport string, port int) []string {
	return fabricFlagsTo(transport, labAddr, port)
}

// fabricFlagsTo is nvme-cli's flags for transport to addr:port.
func fabricFlagsTo(transport, addr string, port int) []string {
	return []string{"-t", transport, "-a", addr, "-s", strconv.Itoa(port)}
}

// discoveryLog is `nvme discover -o json` (nvme-cli 2.3).
type discoveryLog struct {
	Genctr  jsonUint          `json:"genctr"`
	Records []discoveryRecord `json:"records"`
}

type discoveryRecord struct {
	Trtype     string   `json:"trtype"`
	Adrfam     string   `json:"adrfam"`
	Subtype    string   `json:"subtype"`
	Treq       string   `json:"treq"`
	Portid     jsonUint `json:"portid"`
	Trsvcid    string   `json:"trsvcid"`
	Subnqn     string   `json:"subnqn"`
	Traddr     string   `json:"traddr"`
	RDMAPrtype string   `json:"rdma_prtype"`
	RDMAQPType string   `json:"rdma_qptype"`
	RDMACMS    string   `json:"rdma_cms"`
}

func (h host) discover(t *testing.T) discoveryLog {
	t.Helper()
	var log discoveryLog
	args := append([]string{"discover"}, fabricFlags()...)
	nvmeJSON(t, &log, append(args, h.flags()...)...)
	return log
}

// controller is a fabrics controller the kernel initiator created by connecting.
type controller struct {
	name   string // nvmeN
	subnqn string
	host   host
	gone   bool
	took   time.Duration // nvme connect's run time
}

// connect runs nvme connect. On success it returns the new controller, to be disconnected when
// the test ends; on failure it checks that the attempt left no controller behind.
func (h host) connect(t *testing.T, subnqn string) (*controller, error) {
	t.Helper()
	return h.connectPort(t, subnqn, portRDMA)
}

// connectPort is connect to the target's RDMA port port.
func (h host) connectPort(t *testing.T, subnqn string, port int) (*controller, error) {
	t.Helper()
	return h.connectWith(t, subnqn, port)
}

// connectWith is connectPort with more nvme connect flags (--dhchap-secret ..., queue counts
// and sizes).
func (h host) connectWith(t *testing.T, subnqn string, port int, extra ...string) (*controller, error) {
	t.Helper()
	return h.connectTo(t, "rdma", labAddr, subnqn, port, extra...)
}

// connectAddr is connectWith to the target at addr: in the network lab, a target guest's
// address on one of its links.
func (h host) connectAddr(t *testing.T, addr, subnqn string, port int, extra ...string) (*controller, error) {
	t.Helper()
	return h.connectTo(t, "rdma", addr, subnqn, port, extra...)
}

// connectOver is connectWith over transport ("rdma", "tcp").
func (h host) connectOver(t *testing.T, transport, subnqn string, port int, extra ...string) (*controller, error) {
	t.Helper()
	return h.connectTo(t, transport, labAddr, subnqn, port, extra...)
}

// connectTo connects over transport to the target at addr.
func (h host) connectTo(t *testing.T, transport, addr, subnqn string, port int, extra ...string) (*controller, error) {
	t.Helper()
	args := append([]string{"connect"}, fabricFlagsTo(transport, addr, port)...)
	args = append(args, "-n", subnqn)
	args = append(args, h.flags()...)
	args = append(args, extra...)
	args = append(args, fmt.Sprintf("--ctrl-loss-tmo=%d", int(h.ctrlLossTmo().Seconds())),
		fmt.Sprintf("--reconnect-delay=%d", int(reconnectDelay.Seconds())))
	r := run(t, connectTimeout, "nvme", args...)
	ctrls := controllersOf(subnqn, h.NQN)
	if r.err != nil {
		for _, name := range ctrls {
			t.Errorf("failed connect to %s left controller %s behind", subnqn, name)
			_ = runQuiet(cmdTimeout, "nvme", "disconnect", "-d", name)
		}
		return nil, r.err
	}
	if len(ctrls) != 1 {
		for _, name := range ctrls {
			_ = runQuiet(cmdTimeout, "nvme", "disconnect", "-d", name)
		}
		return nil, fmt.Errorf("connect to %s: want one controller for host %s, found %v", subnqn, h.NQN, ctrls)
	}
	c := &controller{name: ctrls[0], subnqn: subnqn, host: h, took: r.took}
	t.Cleanup(func() { c.disconnect(t) })
	t.Logf("connected %s to %s as %s (%v)", h.NQN, subnqn, c.name, r.took.Round(time.Millisecond))
	return c, nil
}

// mustConnect connects and waits for the block devices of nsids.
func (h host) mustConnect(t *testing.T, subnqn string, nsids ...uint32) *controller {
	t.Helper()
	return h.mustConnectPort(t, subnqn, portRDMA, nsids...)
}

// mustConnectPort is mustConnect to the target's RDMA port port.
func (h host) mustConnectPort(t *testing.T, subnqn string, port int, nsids ...uint32) *controller {
	t.Helper()
	c, err := h.connectPort(t, subnqn, port)
	if err != nil {
		t.Fatalf("connect %s: %v", subnqn, err)
	}
	for _, nsid := range nsids {
		c.blockDev(t, nsid)
	}
	return c
}

// charDev is the controller's character device, the target of admin commands.
func (c *controller) charDev() string { return "/dev/" + c.name }

// disconnect runs nvme disconnect -n and waits for the controller and its disks to go.
func (c *controller) disconnect(t *testing.T) {
	t.Helper()
	if c.gone {
		return
	}
	c.gone = true
	if r := run(t, cmdTimeout, "nvme", "disconnect", "-n", c.subnqn); r.err != nil {
		t.Errorf("nvme disconnect -n %s: %v", c.subnqn, r.err)
		return
	}
	err := waitFor(deviceTimeout, func() bool {
		_, err := os.Stat(filepath.Join("/sys/class/nvme", c.name))
		return os.IsNotExist(err) && len(blockDevsOf(c.subnqn)) == 0
	})
	if err != nil {
		t.Errorf("after disconnect, %s or its disks %v are still there after %v", c.name, blockDevsOf(c.subnqn), deviceTimeout)
	}
}

// blockDev waits for the block device of nsid and returns its /dev path.
//
// With native multipath, the nvmeXnY disk names follow instance order, not NSIDs, so the NSID is
// read from sysfs; nvmeXcYnZ entries are hidden per-path disks without a /dev node.
func (c *controller) blockDev(t *testing.T, nsid uint32) string {
	t.Helper()
	var dev string
	err := waitFor(deviceTimeout, func() bool {
		for name, n := range blockDevsOf(c.subnqn) {
			if n != nsid {
				continue
			}
			if sz, _ := readSysUint(filepath.Join("/sys/block", name, "size")); sz == 0 {
				return false
			}
			if _, err := os.Stat("/dev/" + name); err == nil {
				dev = "/dev/" + name
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no block device for %s nsid %d after %v (found %v)", c.subnqn, nsid, deviceTimeout, blockDevsOf(c.subnqn))
	}
	return dev
}

var headDisk = regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)

// blockDevsOf maps the namespace disks (nvmeXnY) of subsystem subnqn to their NSIDs.
func blockDevsOf(subnqn string) map[string]uint32 {
	out := map[string]uint32{}
	ents, _ := os.ReadDir("/sys/block")
	for _, e := range ents {
		if !headDisk.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join("/sys/block", e.Name())
		if readSys(filepath.Join(dir, "device", "subsysnqn")) != subnqn {
			continue
		}
		if nsid, err := readSysUint(filepath.Join(dir, "nsid")); err == nil {
			out[e.Name()] = uint32(nsid)
		}
	}
	return out
}

// controllersOf lists the controllers (nvmeN) connected to subnqn as host hostnqn.
func controllersOf(subnqn, hostnqn string) []string {
	var out []string
	ents, _ := os.ReadDir("/sys/class/nvme")
	for _, e := range ents {
		dir := filepath.Join("/sys/class/nvme", e.Name())
		if readSys(filepath.Join(dir, "subsysnqn")) == subnqn && readSys(filepath.Join(dir, "hostnqn")) == hostnqn {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// allDisks is the set of disks in /sys/block.
func allDisks() map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir("/sys/block")
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

func readSys(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readSysUint(path string) (uint64, error) {
	return strconv.ParseUint(readSys(path), 10, 64)
}

// nqn is the suite's subsystem NQN called name.
func nqn(name string) string { return testNQNPrefix + name }

// genKey runs nvme gen-dhchap-key, as an operator would.
func genKey(t *testing.T, hmac int, nqn string) string {
	t.Helper()
	out := strings.TrimSpace(string(mustRun(t, cmdTimeout, "nvme", "gen-dhchap-key", "-m", fmt.Sprint(hmac), "-n", nqn)))
	if !strings.HasPrefix(out, "DHHC-1:") {
		t.Fatalf("gen-dhchap-key printed %q", out)
	}
	return out
}

// dmesgText is the guest's kernel log, where the host logs what it negotiated and what it
// recovered from.
func dmesgText(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dmesg").CombinedOutput()
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	return string(out)
}

// discoveryNQN is the well-known discovery subsystem NQN.
const discoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"
