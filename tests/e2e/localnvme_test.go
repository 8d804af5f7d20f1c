//go:build e2e

package e2e

import (
	"path/filepath"
	"strconv"
	"testing"
)

// TestLocalNVMe serves a real NVMe namespace: the guest's own (QEMU's emulated controller,
// driven by nvme-pci), as a block-device namespace. The host's view must be that device, byte for
// byte, and fio, Flush, Write Zeroes and Deallocate through the fabric must reach it.
func TestLocalNVMe(t *testing.T) {
	h := newHost(t)
	sub := nqn("local-nvme")
	ns := localNVMeNS(t, 1)
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{ns}}}}
	_, dir := startTarget(t, spec)
	c := h.mustConnect(t, sub, 1)
	dev := c.blockDev(t, 1)
	bs := int64(ns.LBASize())
	nsid := "1"
	t.Logf("%s (local, %d MiB, %d-byte blocks) is %s on the host", localNVMe, ns.Size/mib, bs, dev)

	t.Run("identity", func(t *testing.T) {
		// Two NVMe disks of the same size now: the suite's lookup by subsystem NQN and NSID
		// must find the fabric one alone.
		name := filepath.Base(dev)
		if got := blockDevsOf(sub); len(got) != 1 || got[name] != 1 || dev == localNVMe {
			t.Errorf("disks of %s: %v (host device %s, local %s), want only the host's, nsid 1", sub, got, dev, localNVMe)
		}
		if sectors, _ := readSysUint(filepath.Join("/sys/block", name, "size")); int64(sectors)*512 != ns.Size {
			t.Errorf("host's %s is %d sectors, the local device %d bytes", dev, sectors, ns.Size)
		}
		if lbs, _ := readSysUint(filepath.Join("/sys/block", name, "queue/logical_block_size")); int64(lbs) != bs {
			t.Errorf("host's %s has %d-byte blocks, the local device %d", dev, lbs, bs)
		}
	})

	// Both ways: what the host writes is on the local device at the same offset, and what is
	// written locally the host reads.
	t.Run("same-blocks", func(t *testing.T) {
		pat := pattern(mib, 41)
		ddWrite(t, dev, 64*mib, pat)
		checkSame(t, "local device after a write through the fabric", 64*mib, ddRead(t, localNVMe, 64*mib, mib), pat)
		pat = pattern(mib, 42)
		ddWrite(t, localNVMe, 80*mib, pat)
		checkSame(t, "host after a local write", 80*mib, ddRead(t, dev, 80*mib, mib), pat)
	})

	for _, fc := range []fioCase{
		{rw: "randwrite", bs: 4 * kib, iodepth: 32, size: 8 * mib},
		{rw: "write", bs: mib, iodepth: 16, size: 32 * mib},
	} {
		t.Run("fio/"+fc.name(), func(t *testing.T) { runFio(t, dev, dir, fc) })
	}

	t.Run("flush", func(t *testing.T) {
		mustRun(t, cmdTimeout, "nvme", "flush", dev, "-n", nsid)
	})

	// A 2 MiB pattern at 128 MiB, its middle 1 MiB zeroed or deallocated through the fabric; the
	// edges keep the pattern, on the host and on the local device alike.
	const off, n = 128 * mib, 2 * mib
	const zoff, zlen = off + 512*kib, mib
	withHole := func(seed uint64, hole []byte) (pat, want []byte) {
		pat = pattern(n, seed)
		want = append([]byte(nil), pat...)
		copy(want[zoff-off:zoff-off+zlen], hole)
		return pat, want
	}
	t.Run("write-zeroes", func(t *testing.T) {
		pat, want := withHole(43, make([]byte, zlen))
		ddWrite(t, dev, off, pat)
		mustRun(t, cmdTimeout, "nvme", "write-zeroes", dev, "-n", nsid,
			"-s", strconv.FormatInt(zoff/bs, 10), "-c", strconv.FormatInt(zlen/bs-1, 10)) // -c is 0's based
		checkSame(t, "host after write-zeroes", off, ddRead(t, dev, off, n), want)
		checkSame(t, "local device after write-zeroes", off, ddRead(t, localNVMe, off, n), want)
	})

	t.Run("deallocate", func(t *testing.T) {
		// The local drive says what its deallocated blocks read as (DLFEAT bits 2:0, 1: zeroes);
		// the target cannot know it through the block layer, and must not promise it.
		var local, remote idNS
		nvmeJSON(t, &local, "id-ns", localNVMe)
		nvmeJSON(t, &remote, "id-ns", dev, "-n", nsid)
		t.Logf("dlfeat: local drive %#x, through the target %#x", uint64(local.DLFEAT), uint64(remote.DLFEAT))
		if local.DLFEAT&7 != 1 {
			t.Fatalf("the local drive's dlfeat %#x does not say deallocated blocks read as zeroes: "+
				"nothing to check a deallocate against (labvm gives QEMU discard=unmap)", uint64(local.DLFEAT))
		}
		pat, want := withHole(44, make([]byte, zlen))
		ddWrite(t, dev, off, pat)
		mustRun(t, cmdTimeout, "nvme", "dsm", dev, "-n", nsid, "--ad",
			"-s", strconv.FormatInt(zoff/bs, 10), "-b", strconv.FormatInt(zlen/bs, 10))
		// Zeroes prove the Deallocate reached the drive, not just that it was acknowledged.
		checkSame(t, "host after deallocate", off, ddRead(t, dev, off, n), want)
		checkSame(t, "local device after deallocate", off, ddRead(t, localNVMe, off, n), want)
	})
}
