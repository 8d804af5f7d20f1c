//go:build linux && cgo && rbd

package control

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// rbdCLI runs rbd(8) against the test cluster, as an operator would.
func rbdCLI(t *testing.T, conf string, args ...string) {
	t.Helper()
	out, err := exec.Command("rbd", append([]string{"-c", conf}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rbd %v: %v\n%s", args, err, out)
	}
}

// TestRBDNamespaces: rbd namespaces through the API, on the cluster
// NVMEOF_TGT_TEST_CEPH_CONF names (the e2e suite runs this in the guest:
// TestRBDUnit). Bad input is refused with what is wrong and how to fix it,
// and changes nothing; a resize through the API resizes the image, and one
// by rbd(8) reaches the namespace by itself.
func TestRBDNamespaces(t *testing.T) {
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (tests/lab/ceph-up.sh)")
	}
	if _, err := exec.LookPath("rbd"); err != nil {
		t.Fatalf("rbd(8) is needed with a cluster: %v", err)
	}
	b := newBench(t, baseYAML)
	h := b.m.Handler()
	b.connect("127.0.0.1", subA, hst1)
	prefix := fmt.Sprintf("control-%d", time.Now().UnixNano())
	image := prefix + "-a"
	locked := prefix + "-locked"
	t.Cleanup(func() {
		for _, im := range []string{image, locked} {
			exec.Command("rbd", "-c", conf, "rm", "--no-progress", "rbd/"+im).Run()
		}
	})
	add := func(body string, want int, says string) {
		t.Helper()
		rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces", strings.ReplaceAll(body, "CONF", conf))
		if rec.Code != want || !strings.Contains(rec.Body.String(), says) {
			t.Fatalf("add %s: %d %s; want %d saying %q", body, rec.Code, rec.Body, want, says)
		}
	}
	rbdCLI(t, conf, "create", "--size", "1M", "--image-feature", "layering,exclusive-lock", "rbd/"+locked)
	for _, tc := range []struct{ body, says string }{
		{`{"nsid": 3, "pool": "no-such-pool", "image": "x", "size": "4MiB", "ceph_conf": "CONF"}`, "pool no-such-pool does not exist"},
		{`{"nsid": 3, "pool": "rbd", "image": "` + prefix + `-missing", "ceph_conf": "CONF"}`, "no size is given to create it with"},
		{`{"nsid": 3, "pool": "rbd", "image": "` + locked + `", "ceph_conf": "CONF"}`, "rbd feature disable rbd/" + locked + " exclusive-lock"},
		{`{"nsid": 3, "backend": "rbd", "pool": "rbd", "ceph_conf": "CONF"}`, "image: required for the rbd backend"},
	} {
		add(tc.body, http.StatusBadRequest, tc.says)
		if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2}) {
			t.Fatalf("after a refused add: namespaces %v", got)
		}
	}

	// Created with its size; hosts see it.
	add(`{"nsid": 3, "pool": "rbd", "image": "`+image+`", "size": "4MiB", "ceph_conf": "CONF"}`, http.StatusCreated, "add namespace 3")
	if got := b.liveSize(3); got != 4<<20 {
		t.Fatalf("size %d, want 4MiB", got)
	}
	st := decodeAs[Status](t, do(t, h, "GET", "/v1/status", ""))
	ns := st.Subsystems[0].Namespaces[2]
	if ns.Backend != "rbd" || ns.Pool != "rbd" || ns.Image != image || ns.Size != 4<<20 {
		t.Fatalf("status %+v", ns)
	}
	// The API resizes the image.
	rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces/3/resize", `{"size": "6MiB"}`)
	if rec.Code != http.StatusOK || b.liveSize(3) != 6<<20 {
		t.Fatalf("resize: %d %s, size %d", rec.Code, rec.Body, b.liveSize(3))
	}
	out, err := exec.Command("rbd", "-c", conf, "info", "--format", "json", "rbd/"+image).Output()
	if err != nil || !strings.Contains(string(out), `"size":6291456`) {
		t.Fatalf("rbd info after the API's resize: %v %s", err, out)
	}
	// rbd resize from outside: followed with no API call.
	rbdCLI(t, conf, "resize", "--no-progress", "--size", "10M", "rbd/"+image)
	deadline := time.Now().Add(10 * time.Second)
	for b.liveSize(3) != 10<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("size %d 10s after rbd resize to 10MiB", b.liveSize(3))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Removed: the image stays, with its data, for the next to serve it.
	if rec := do(t, h, "DELETE", "/v1/subsystems/"+subA+"/namespaces/3", ""); rec.Code != http.StatusOK {
		t.Fatalf("remove: %d %s", rec.Code, rec.Body)
	}
	add(`{"nsid": 3, "pool": "rbd", "image": "`+image+`", "ceph_conf": "CONF"}`, http.StatusCreated, "add namespace 3")
	if got := b.liveSize(3); got != 10<<20 {
		t.Fatalf("served again at %d, want its 10MiB", got)
	}
}
