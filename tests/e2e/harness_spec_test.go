//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Spec describes a target: one port and its subsystems.
type Spec struct {
	Port       Port
	Subsystems []Subsystem
	// More are ports beside Port, serving the same subsystems (nvmeof-tgt only: the two-machine
	// bench's TCP port).
	More []Port
}

// Port is a listening port of a spec.
type Port struct {
	Transport string // "rdma"
	Address   string
	Service   int
}

// Subsystem is an NVM subsystem. Exactly one of AllowAnyHost and Hosts is set.
type Subsystem struct {
	NQN          string
	AllowAnyHost bool
	Hosts        []string
	// Auth holds the DH-HMAC-CHAP keys of some of Hosts, by host NQN. All of one subsystem's
	// share Hash and DHGroup: nvmeof-tgt sets them per subsystem, nvmet per host.
	Auth       map[string]HostAuth
	Namespaces []Namespace
}

// HostAuth is a host's DH-HMAC-CHAP configuration: its key, the controller's key for
// bidirectional authentication (or ""), and the one hash and DH group it may use.
type HostAuth struct {
	Key, CtrlKey  string
	Hash, DHGroup string // "sha256", "sha384", "sha512"; "null", "ffdhe2048", ...
}

// Backend is where a namespace keeps its data.
type Backend string

const (
	BackendFile Backend = "file"
	// BackendBlock is a loop block device over an image on the scratch filesystem, with the
	// namespace's block size as its logical block size, or, when Path is a block device (see
	// localNVMeNS), that device itself.
	BackendBlock  Backend = "block"
	BackendMemory Backend = "memory"
	// BackendRBD is an image of the guest's Ceph cluster (rbdNS, harness_ceph_test.go), which
	// the target creates with the namespace's size; nvmeof-tgt's rbd build only.
	BackendRBD Backend = "rbd"
)

// Namespace is one namespace of a subsystem.
type Namespace struct {
	NSID      uint32
	Backend   Backend
	Path      string // BackendFile, BackendBlock: an image on the scratch filesystem
	Size      int64  // bytes, a multiple of 1 MiB
	BlockSize int    // logical block size; 0 means 512
	UUID      string // optional
	// NGUID is 32 hex digits, "none", or empty for the target's default (nvmeof-tgt derives
	// one; nvmet has none).
	NGUID string
	// EUI64 is 16 hex digits, or empty for none. nvmeof-tgt only: nvmet has no EUI64
	// attribute, so the kernel target reports none; assert it after requireTgt.
	EUI64 string
	// Pool and Image name a BackendRBD namespace's image (ceph_conf: the default).
	Pool, Image string
	// Extra are more keys of nvmeof-tgt's namespace entry, YAML flow style ("hosts: [...]",
	// "qos: {iops: 100}").
	Extra []string
	// BufferedIO makes nvmeof-tgt use the page cache for a file or block namespace (buffered_io)
	// instead of O_DIRECT.
	BufferedIO bool
}

// LBASize is the namespace's logical block size.
func (ns Namespace) LBASize() int {
	if ns.BlockSize == 0 {
		return 512
	}
	return ns.BlockSize
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

// rdmaPort is the port every spec uses: rdma on the lab address, 4420.
func rdmaPort() Port {
	return Port{Transport: "rdma", Address: labAddr, Service: portRDMA}
}

// fileNS is a file-backed namespace whose image lives on the scratch filesystem under a name
// derived from the test, so tests never share an image.
func fileNS(t *testing.T, nsid uint32, size int64, blockSize int, uuid string) Namespace {
	name := fmt.Sprintf("%s-ns%d.img", filepath.Base(testDir(t)), nsid)
	return Namespace{NSID: nsid, Backend: BackendFile, Path: filepath.Join(scratchDir, name),
		Size: size, BlockSize: blockSize, UUID: uuid}
}

// blockNS is a namespace on a loop block device whose image lives on the scratch filesystem.
func blockNS(t *testing.T, nsid uint32, size int64, blockSize int) Namespace {
	ns := fileNS(t, nsid, size, blockSize, "")
	ns.Backend = BackendBlock
	return ns
}

// localNVMeNS is a namespace on the guest's own NVMe namespace (LAB_NVME_DEV), whole, with the
// device's logical block size. Tests that use it share the device: none may expect it to hold
// anything it did not write itself.
func localNVMeNS(t *testing.T, nsid uint32) Namespace {
	t.Helper()
	name := filepath.Base(localNVMe)
	sectors, err := readSysUint(filepath.Join("/sys/block", name, "size"))
	if err != nil {
		t.Fatalf("size of %s: %v", localNVMe, err)
	}
	lbs, err := readSysUint(filepath.Join("/sys/block", name, "queue/logical_block_size"))
	if err != nil {
		t.Fatalf("block size of %s: %v", localNVMe, err)
	}
	return Namespace{NSID: nsid, Backend: BackendBlock, Path: localNVMe, Size: int64(sectors) * 512, BlockSize: int(lbs)}
}

// isBlockDevice reports whether path is a block special file.
func isBlockDevice(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
}

// memNS is a memory-backed namespace.
func memNS(nsid uint32, size int64, blockSize int, uuid string) Namespace {
	return Namespace{NSID: nsid, Backend: BackendMemory, Size: size, BlockSize: blockSize, UUID: uuid}
}

// validate rejects specs the harness cannot express for both targets.
func (s Spec) validate() error {
	for _, ss := range s.Subsystems {
		if ss.AllowAnyHost == (len(ss.Hosts) > 0) {
			return fmt.Errorf("subsystem %s: set exactly one of AllowAnyHost and Hosts", ss.NQN)
		}
		var first *HostAuth
		for h, a := range ss.Auth {
			if !slices.Contains(ss.Hosts, h) {
				return fmt.Errorf("subsystem %s: keys for %s, which is not one of its hosts", ss.NQN, h)
			}
			if first != nil && (a.Hash != first.Hash || a.DHGroup != first.DHGroup) {
				return fmt.Errorf("subsystem %s: hosts with different hashes or DH groups", ss.NQN)
			}
			first = &a
		}
		for _, ns := range ss.Namespaces {
			if ns.Size <= 0 || ns.Size%mib != 0 {
				return fmt.Errorf("%s nsid %d: size %d is not a positive multiple of 1 MiB", ss.NQN, ns.NSID, ns.Size)
			}
			switch {
			case ns.Backend == BackendRBD && (ns.Pool == "" || ns.Image == ""):
				return fmt.Errorf("%s nsid %d: rbd namespace without a pool and image", ss.NQN, ns.NSID)
			case ns.Backend != BackendMemory && ns.Backend != BackendRBD && ns.Path == "":
				return fmt.Errorf("%s nsid %d: %s namespace without a path", ss.NQN, ns.NSID, ns.Backend)
			}
		}
	}
	return nil
}

// createImages makes each missing file-backed image, sparse and of its full size, and removes
// the images the test created when it ends. An existing image is left as it is (Restart).
func createImages(t *testing.T, spec Spec) {
	t.Helper()
	for _, ss := range spec.Subsystems {
		for _, ns := range ss.Namespaces {
			if ns.Backend == BackendMemory || ns.Backend == BackendRBD {
				continue
			}
			if _, err := os.Stat(ns.Path); err == nil {
				continue
			}
			f, err := os.OpenFile(ns.Path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				t.Fatalf("create image: %v", err)
			}
			err = f.Truncate(ns.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatalf("size image %s: %v", ns.Path, err)
			}
			p := ns.Path
			t.Cleanup(func() { os.Remove(p) })
		}
	}
}

// attachLoop puts ns's image on a free loop device with the namespace's logical block size, and
// returns the device and how to detach it.
func attachLoop(ns Namespace) (dev string, detach func() error, err error) {
	out, err := runOut(30*time.Second, "losetup", "-f", "--show", "-b", strconv.Itoa(ns.LBASize()), ns.Path)
	if err != nil {
		return "", nil, fmt.Errorf("losetup %s: %w", ns.Path, err)
	}
	dev = strings.TrimSpace(out)
	return dev, func() error { return runQuiet(30*time.Second, "losetup", "-d", dev) }, nil
}
