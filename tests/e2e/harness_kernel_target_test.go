//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

const (
	nvmetRoot = "/sys/kernel/config/nvmet"
	nullbRoot = "/sys/kernel/config/nullb"
)

// kernelTarget is the kernel's nvmet, configured through configfs. File namespaces sit on loop
// devices: nvmet's own file backend, pointed at the guest's overlay root, shows the host a
// zero-sized disk. Memory namespaces are memory-backed null_blk disks.
type kernelTarget struct {
	dir string
	// nativeFile puts file namespaces on nvmet's own file backend (O_DIRECT) instead of a loop
	// device; the image must be on a filesystem that takes O_DIRECT (scratchDir does).
	nativeFile bool

	spec      Spec
	running   bool
	undo      undoList // teardown, run last to first
	cleanupOn bool
}

type undoStep struct {
	what string
	fn   func() error
}

// undoList is a guest setup's teardown: steps pushed as the setup goes, run
// last to first.
type undoList []undoStep

func (u *undoList) push(what string, fn func() error) {
	*u = append(*u, undoStep{what, fn})
}

// run runs the steps last to first, reports each failure as who's, and
// empties the list.
func (u *undoList) run(t *testing.T, who string) {
	t.Helper()
	for i := len(*u) - 1; i >= 0; i-- {
		if err := (*u)[i].fn(); err != nil {
			t.Errorf("%s teardown: %s: %v", who, (*u)[i].what, err)
		}
	}
	*u = nil
}

var (
	nullbOnce sync.Once
	nullbErr  error
	nullbSeq  int
	portSeq   int
)

// resetNullBlk reloads null_blk without its default disk, which keeps no data and is 250 GB.
func resetNullBlk() error {
	nullbOnce.Do(func() {
		_ = runQuiet(30*time.Second, "modprobe", "-r", "null_blk")
		if err := runQuiet(30*time.Second, "modprobe", "null_blk", "nr_devices=0"); err != nil {
			nullbErr = fmt.Errorf("modprobe null_blk nr_devices=0: %w", err)
			return
		}
		if _, err := os.Stat(nullbRoot); err != nil {
			nullbErr = fmt.Errorf("null_blk configfs: %w", err)
		}
	})
	return nullbErr
}

func (k *kernelTarget) Start(t *testing.T, spec Spec) {
	t.Helper()
	if err := spec.validate(); err != nil {
		t.Fatalf("spec: %v", err)
	}
	if k.running {
		t.Fatal("kernel target: Start while running")
	}
	k.spec = spec
	createImages(t, spec)
	if !k.cleanupOn {
		k.cleanupOn = true
		t.Cleanup(func() {
			if k.running {
				k.Stop(t)
			}
		})
	}
	k.running = true
	if err := k.configure(spec); err != nil {
		k.Stop(t)
		t.Fatalf("kernel target: %v", err)
	}
	t.Logf("kernel nvmet configured: %d subsystem(s) on %s:%d", len(spec.Subsystems), spec.Port.Address, spec.Port.Service)
}

func (k *kernelTarget) configure(spec Spec) error {
	for _, ss := range spec.Subsystems {
		sdir := filepath.Join(nvmetRoot, "subsystems", ss.NQN)
		if err := k.mkdir(sdir); err != nil {
			return err
		}
		allowAny := "0"
		if ss.AllowAnyHost {
			allowAny = "1"
		}
		if err := writeAttr(filepath.Join(sdir, "attr_allow_any_host"), allowAny); err != nil {
			return err
		}
		for _, h := range ss.Hosts {
			hdir := filepath.Join(nvmetRoot, "hosts", h)
			if _, err := os.Stat(hdir); errors.Is(err, os.ErrNotExist) {
				if err := k.mkdir(hdir); err != nil {
					return err
				}
			}
			if a, ok := ss.Auth[h]; ok {
				attrs := [][2]string{{"dhchap_key", a.Key}, {"dhchap_ctrl_key", a.CtrlKey},
					{"dhchap_hash", "hmac(" + a.Hash + ")"}, {"dhchap_dhgroup", a.DHGroup}}
				for _, kv := range attrs {
					if kv[1] == "" {
						continue
					}
					if err := writeAttr(filepath.Join(hdir, kv[0]), kv[1]); err != nil {
						return err
					}
				}
			}
			if err := k.symlink(hdir, filepath.Join(sdir, "allowed_hosts", h)); err != nil {
				return err
			}
		}
		for _, ns := range ss.Namespaces {
			dev, err := k.backingDevice(ns)
			if err != nil {
				return fmt.Errorf("%s nsid %d: %w", ss.NQN, ns.NSID, err)
			}
			nsdir := filepath.Join(sdir, "namespaces", strconv.FormatUint(uint64(ns.NSID), 10))
			if err := k.mkdir(nsdir); err != nil {
				return err
			}
			if err := writeAttr(filepath.Join(nsdir, "device_path"), dev); err != nil {
				return err
			}
			if ns.UUID != "" {
				if err := writeAttr(filepath.Join(nsdir, "device_uuid"), ns.UUID); err != nil {
					return err
				}
			}
			// nvmet has no NGUID unless given one, and no EUI64 attribute at all.
			if ns.NGUID != "" && ns.NGUID != "none" {
				if err := writeAttr(filepath.Join(nsdir, "device_nguid"), ns.NGUID); err != nil {
					return err
				}
			}
			enable := filepath.Join(nsdir, "enable")
			if err := writeAttr(enable, "1"); err != nil {
				return err
			}
			k.undo.push("disable "+nsdir, func() error { return writeAttr(enable, "0") })
		}
	}

	portSeq++
	pdir := filepath.Join(nvmetRoot, "ports", strconv.Itoa(portSeq))
	if err := k.mkdir(pdir); err != nil {
		return err
	}
	attrs := [][2]string{
		{"addr_trtype", spec.Port.Transport},
		{"addr_adrfam", "ipv4"},
		{"addr_traddr", spec.Port.Address},
		{"addr_trsvcid", strconv.Itoa(spec.Port.Service)},
	}
	for _, a := range attrs {
		if err := writeAttr(filepath.Join(pdir, a[0]), a[1]); err != nil {
			return err
		}
	}
	// Same in-capsule data size as nvmeof-tgt (8 KiB), so the two are compared like for like.
	if err := writeAttr(filepath.Join(pdir, "param_inline_data_size"), "8192"); err != nil {
		return err
	}
	// Linking a subsystem enables the port: nvmet-rdma listens before the write returns.
	for _, ss := range spec.Subsystems {
		if err := k.symlink(filepath.Join(nvmetRoot, "subsystems", ss.NQN), filepath.Join(pdir, "subsystems", ss.NQN)); err != nil {
			return err
		}
	}
	return nil
}

// backingDevice returns the block device that backs ns, creating it.
func (k *kernelTarget) backingDevice(ns Namespace) (string, error) {
	switch ns.Backend {
	case BackendFile, BackendBlock:
		if (k.nativeFile && ns.Backend == BackendFile) || (ns.Backend == BackendBlock && isBlockDevice(ns.Path)) {
			return ns.Path, nil
		}
		// Otherwise a file namespace goes through a loop device too (see kernelTarget).
		dev, detach, err := attachLoop(ns)
		if err != nil {
			return "", err
		}
		k.undo.push("losetup -d "+dev, detach)
		return dev, nil
	case BackendMemory:
		if err := resetNullBlk(); err != nil {
			return "", err
		}
		nullbSeq++
		name := fmt.Sprintf("e2emem%d", nullbSeq)
		dir := filepath.Join(nullbRoot, name)
		if err := k.mkdir(dir); err != nil {
			return "", err
		}
		attrs := [][2]string{
			{"memory_backed", "1"},
			{"size", strconv.FormatInt(ns.Size/mib, 10)}, // MiB
			{"blocksize", strconv.Itoa(ns.LBASize())},
			// Without it nvmet fails Dataset Management with Invalid Command Opcode.
			{"discard", "1"},
			{"power", "1"},
		}
		for _, a := range attrs {
			if err := writeAttr(filepath.Join(dir, a[0]), a[1]); err != nil {
				return "", err
			}
		}
		k.undo.push("power off "+name, func() error { return writeAttr(filepath.Join(dir, "power"), "0") })
		dev := "/dev/" + name
		if err := waitFor(10*time.Second, func() bool { _, err := os.Stat(dev); return err == nil }); err != nil {
			return "", fmt.Errorf("%s did not appear", dev)
		}
		return dev, nil
	}
	return "", fmt.Errorf("unknown backend %q", ns.Backend)
}

func (k *kernelTarget) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	k.undo.push("rmdir "+dir, func() error { return os.Remove(dir) })
	return nil
}

func (k *kernelTarget) symlink(oldname, newname string) error {
	if err := os.Symlink(oldname, newname); err != nil {
		return err
	}
	k.undo.push("unlink "+newname, func() error { return os.Remove(newname) })
	return nil
}

func (k *kernelTarget) Stop(t *testing.T) {
	t.Helper()
	if !k.running {
		return
	}
	k.running = false
	k.undo.run(t, "kernel target")
}

func (k *kernelTarget) Restart(t *testing.T) {
	t.Helper()
	spec := k.spec
	k.Stop(t)
	if t.Failed() {
		t.FailNow()
	}
	k.Start(t, spec)
}

// writeAttr writes a configfs or sysfs attribute.
func writeAttr(path, value string) error {
	if err := os.WriteFile(path, []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}
