package control

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// liveSize is the size hosts see of namespace nsid of subsystem a.
func (b *bench) liveSize(nsid uint32) int64 {
	b.t.Helper()
	for _, ns := range b.tgt.Subsystem(subA).Namespaces() {
		if ns.NSID() == nvme.NSID(nsid) {
			return ns.Info().Size
		}
	}
	b.t.Fatalf("no namespace %d", nsid)
	return 0
}

// truncate sets the length of namespace 2's file from outside the target,
// as an operator growing it would.
func (b *bench) truncate(size int64) {
	b.t.Helper()
	if err := os.Truncate(b.file(), size); err != nil {
		b.t.Fatal(err)
	}
}

// TestResizeFollowsBackend: size 0 re-reads the backend's size (the README's
// grow workflow: grow the file or volume, then `ns resize NQN NSID 0`); a
// reload re-reads namespaces whose size is 0; a backend that got smaller
// than hosts see is refused unless forced; other changes leave sizes alone.
func TestResizeFollowsBackend(t *testing.T) {
	b := newBench(t, baseYAML) // namespace 2 of a: a 1MiB file, size 1MiB in the file
	h := b.m.Handler()
	b.connect("127.0.0.1", subA, hst1)
	resize := func(body string, want int) Result {
		t.Helper()
		rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces/2/resize", body)
		if rec.Code != want {
			t.Fatalf("resize %s: %d %s, want %d", body, rec.Code, rec.Body, want)
		}
		if want != http.StatusOK {
			return Result{}
		}
		return decodeAs[Result](t, rec)
	}
	wantSize := func(what string, size int64) {
		t.Helper()
		if got := b.liveSize(2); got != size {
			t.Fatalf("%s: hosts see %d bytes, want %d", what, got, size)
		}
	}

	// Grown, then resized to 0: hosts see the file's new size.
	b.truncate(4 << 20)
	res := resize(`{"size": 0}`, http.StatusOK)
	if len(res.Applied) != 1 || !strings.Contains(res.Applied[0], "4MiB") {
		t.Fatalf("resize 0 after growing: %+v", res)
	}
	wantSize("resize 0 after growing", 4<<20)
	if n := findNamespace(sub(b.m.Running(), subA), 2); n.Size != 0 {
		t.Fatalf("running size %v, want 0: the namespace follows its file", n.Size)
	}
	// Again, nothing grew: nothing to do.
	if res := resize(`{"size": 0}`, http.StatusOK); len(res.Applied) != 0 {
		t.Fatalf("resize 0 with nothing grown: %+v", res)
	}
	// Grown again, then 0 again (the configuration does not change).
	b.truncate(6 << 20)
	if res := resize(`{"size": 0}`, http.StatusOK); len(res.Applied) != 1 {
		t.Fatalf("second resize 0: %+v", res)
	}
	wantSize("second resize 0", 6<<20)

	// A reload re-reads a namespace whose size is 0 (the file now says so).
	b.truncate(8 << 20)
	res, err := b.m.Reload(tester)
	if err != nil || len(res.Applied) != 1 || !strings.Contains(res.Applied[0], "resize namespace 2") {
		t.Fatalf("reload after growing: %+v %v", res, err)
	}
	wantSize("reload after growing", 8<<20)
	if res, err := b.m.Reload(tester); err != nil || len(res.Applied) != 0 {
		t.Fatalf("reload with nothing grown: %+v %v", res, err)
	}

	// Another change does not touch sizes.
	b.truncate(10 << 20)
	res, err = b.m.Update(tester, func(c *config.Config) error {
		s := sub(c, subA)
		s.Hosts = append(s.Hosts, config.Host{NQN: "nqn.2026-11.io.example:host3"})
		return nil
	}, false)
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("add host: %+v %v", res, err)
	}
	wantSize("another change", 8<<20)

	// Cut shorter than hosts see: refused, by the API and by reload,
	// unless forced.
	b.truncate(2 << 20)
	resize(`{"size": 0}`, http.StatusBadRequest)
	wantSize("a refused shrink", 8<<20)
	if _, err := b.m.Reload(tester); !errors.Is(err, ErrShrink) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "hosts see 8MiB") {
		t.Fatalf("reload after the file was cut: %v, want ErrShrink naming the sizes", err)
	}
	wantSize("a refused reload", 8<<20)
	resize(`{"size": 0, "force": true}`, http.StatusOK)
	wantSize("a forced shrink", 2<<20)

	// From size 0, an explicit size smaller than hosts see is a shrink
	// too, though the configuration went from 0 up.
	resize(`{"size": "1MiB"}`, http.StatusBadRequest)
	wantSize("a refused explicit shrink", 2<<20)
	resize(`{"size": "3MiB"}`, http.StatusOK)
	wantSize("an explicit grow", 3<<20)

	// A memory namespace has no backend to re-read.
	rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces/1/resize", `{"size": 0}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "memory") {
		t.Fatalf("resize memory to 0: %d %s", rec.Code, rec.Body)
	}
	if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("namespaces %v", got)
	}
}

// TestResizeBlockFollowsDevice: a block namespace of size 0 takes the
// device's size again after the volume grew (here a loop device over a
// file, grown and `losetup -c`), through the API and through reload.
func TestResizeBlockFollowsDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("losetup needs root")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	backing := filepath.Join(t.TempDir(), "lv.img")
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(backing, 1<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("losetup cannot attach a loop device here: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "--detach", dev).Run() })
	grow := func(size int64) {
		t.Helper()
		if err := os.Truncate(backing, size); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("losetup", "-c", dev).CombinedOutput(); err != nil {
			t.Fatalf("losetup -c: %v: %s", err, out)
		}
	}

	b := newBench(t, strings.Replace(baseYAML, "{nsid: 2, path: FILE, size: 1MiB}", "{nsid: 2, path: "+dev+"}", 1))
	h := b.m.Handler()
	b.connect("127.0.0.1", subA, hst1)
	if got := b.liveSize(2); got != 1<<20 {
		t.Fatalf("size %d at start", got)
	}
	grow(4 << 20)
	if got := b.liveSize(2); got != 1<<20 {
		t.Fatalf("size %d before the resize", got)
	}
	rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces/2/resize", `{"size": 0}`)
	if rec.Code != http.StatusOK || b.liveSize(2) != 4<<20 {
		t.Fatalf("resize 0 after growing: %d %s, size %d", rec.Code, rec.Body, b.liveSize(2))
	}
	grow(6 << 20)
	if res, err := b.m.Reload(tester); err != nil || len(res.Applied) != 1 || b.liveSize(2) != 6<<20 {
		t.Fatalf("reload after growing: %+v %v, size %d", res, err, b.liveSize(2))
	}
	rec = do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces/2/resize", `{"size": "8MiB"}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "past the end") {
		t.Fatalf("resize past the device: %d %s", rec.Code, rec.Body)
	}
}
