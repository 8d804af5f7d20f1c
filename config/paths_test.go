package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckPaths(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(regular, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")
	noDir := filepath.Join(dir, "nodir", "disk.img")
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "elsewhere.img"), dangling); err != nil {
		t.Fatal(err)
	}
	toRegular := filepath.Join(dir, "to-regular")
	if err := os.Symlink(regular, toRegular); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		ns   Namespace
		want []string // one problem each, "key: message" substrings; none for ok
	}{
		{name: "existing file", ns: Namespace{Backend: "file", Path: regular}},
		{name: "missing file with size", ns: Namespace{Backend: "file", Path: missing, Size: MiB}},
		{name: "missing file without size", ns: Namespace{Backend: "file", Path: missing},
			want: []string{"namespaces[0].size: required because " + missing + " cannot be used: no such file"}},
		{name: "missing directory", ns: Namespace{Backend: "file", Path: noDir, Size: MiB},
			want: []string{"namespaces[0].path: directory " + filepath.Dir(noDir) + " cannot be used: no such file"}},
		{name: "missing directory without size", ns: Namespace{Backend: "file", Path: noDir},
			want: []string{"namespaces[0].path: directory", "namespaces[0].size: required"}},
		{name: "parent is a file", ns: Namespace{Backend: "file", Path: filepath.Join(regular, "x.img"), Size: MiB},
			want: []string{"namespaces[0].path: " + regular + "/x.img cannot be used: not a directory"}},
		{name: "file is a directory", ns: Namespace{Backend: "file", Path: dir, Size: MiB},
			want: []string{"namespaces[0].path: \"" + dir + "\" is a directory"}},
		{name: "file is a character device", ns: Namespace{Backend: "file", Path: "/dev/null"},
			want: []string{"namespaces[0].path: \"/dev/null\" is not a regular file (a character device)"}},
		{name: "file is a dangling symlink", ns: Namespace{Backend: "file", Path: dangling, Size: MiB},
			want: []string{"namespaces[0].path: " + dangling + " is a symlink whose target does not exist; create the file or point the namespace at it"}},
		{name: "file is a symlink to a file", ns: Namespace{Backend: "file", Path: toRegular}},
		{name: "block is a dangling symlink", ns: Namespace{Backend: "block", Path: dangling},
			want: []string{"namespaces[0].path: " + dangling + " is a symlink whose target does not exist"}},
		{name: "block missing", ns: Namespace{Backend: "block", Path: "/dev/nonexistent-nvmeof-tgt"},
			want: []string{"namespaces[0].path: /dev/nonexistent-nvmeof-tgt cannot be used: no such file"}},
		{name: "block is a regular file", ns: Namespace{Backend: "block", Path: regular},
			want: []string{"namespaces[0].path: \"" + regular + "\" is not a block device (a regular file)"}},
		{name: "block is a character device", ns: Namespace{Backend: "block", Path: "/dev/null"},
			want: []string{"is not a block device (a character device)"}},
		{name: "rbd ceph_conf readable", ns: Namespace{Backend: "rbd", Pool: "rbd", Image: "a", CephConf: regular}},
		{name: "rbd ceph_conf missing", ns: Namespace{Backend: "rbd", Pool: "rbd", Image: "a", CephConf: missing},
			want: []string{"namespaces[0].ceph_conf: " + missing + " cannot be used: no such file"}},
		{name: "rbd ceph_conf a directory", ns: Namespace{Backend: "rbd", Pool: "rbd", Image: "a", CephConf: dir},
			want: []string{"namespaces[0].ceph_conf: \"" + dir + "\" is not a regular file (a directory)"}},
		// Validate reports these; CheckPaths does not repeat them.
		{name: "relative", ns: Namespace{Backend: "file", Path: "disk.img"}},
		{name: "empty", ns: Namespace{Backend: "block"}},
		{name: "memory", ns: Namespace{Backend: "memory", Size: MiB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Subsystems: []Subsystem{{Namespaces: []Namespace{tt.ns}}}}
			got := Problems(c.CheckPaths())
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %v, want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("problem %q does not contain %q", got[i], w)
				}
			}
		})
	}
}

func TestCheckPathsBlockDevice(t *testing.T) {
	dev := findBlockDevice()
	if dev == "" {
		t.Skip("no block device node found")
	}
	c := &Config{Subsystems: []Subsystem{{Namespaces: []Namespace{{Backend: "block", Path: dev}}}}}
	if err := c.CheckPaths(); err != nil {
		t.Error(err)
	}
}

// findBlockDevice returns a block device node of this machine, or "".
func findBlockDevice() string {
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		dev := "/dev/" + e.Name()
		st, err := os.Stat(dev)
		if err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
			return dev
		}
	}
	return ""
}

// TestCheckBackings: one file or block device behind two namespaces, in one
// subsystem or two, however it is named, is refused naming both; so are
// two namespaces naming one file still to be created.
func TestCheckBackings(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	other := filepath.Join(dir, "other.img")
	for _, p := range []string{img, other} {
		if err := os.WriteFile(p, make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(img, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.img")
	if err := os.Link(img, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(dir, "dirlink")
	if err := os.Symlink(filepath.Join(dir, "sub"), dirLink); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")

	const (
		nqnA = "nqn.2026-11.io.example:a"
		nqnB = "nqn.2026-11.io.example:b"
	)
	file := func(nsid uint32, path string) Namespace {
		return Namespace{NSID: nsid, Backend: BackendFile, Path: path, Size: MiB, BlockSize: 512}
	}
	rbd := func(nsid uint32, pool, image string) Namespace {
		return Namespace{NSID: nsid, Backend: BackendRBD, Pool: pool, Image: image, CephConf: img, Client: "admin", BlockSize: 512}
	}
	tests := []struct {
		name string
		a, b []Namespace // namespaces of subsystems a and b
		want []string
	}{
		{name: "distinct files", a: []Namespace{file(1, img), file(2, other)}, b: []Namespace{file(1, missing)}},
		{name: "memory never clashes", a: []Namespace{{NSID: 1, Backend: BackendMemory, Size: MiB}, {NSID: 2, Backend: BackendMemory, Size: MiB}}},
		{name: "same file in one subsystem", a: []Namespace{file(1, img), file(2, img)},
			want: []string{"subsystems[0].namespaces[1].path: " + img + " is also the backing of namespace 1 of " + nqnA}},
		{name: "same file in two subsystems", a: []Namespace{file(1, img)}, b: []Namespace{file(3, img)},
			want: []string{"subsystems[1].namespaces[0].path: " + img + " is also the backing of namespace 1 of " + nqnA}},
		{name: "different block sizes", a: []Namespace{file(1, img)}, b: []Namespace{{NSID: 3, Backend: BackendFile, Path: img, BlockSize: 4096}},
			want: []string{"subsystems[1].namespaces[0].path: " + img + " is also the backing of namespace 1 of " + nqnA}},
		{name: "through a symlink", a: []Namespace{file(1, img)}, b: []Namespace{file(3, link)},
			want: []string{"subsystems[1].namespaces[0].path: " + link + " is also the backing of namespace 1 of " + nqnA + " (as " + img + ")"}},
		{name: "a hard link", a: []Namespace{file(1, hard)}, b: []Namespace{file(3, img)},
			want: []string{"subsystems[1].namespaces[0].path: " + img + " is also the backing of namespace 1 of " + nqnA}},
		{name: "uncleaned path", a: []Namespace{file(1, img)}, b: []Namespace{file(3, dir+"/./sub/../disk.img")},
			want: []string{"is also the backing of namespace 1 of " + nqnA}},
		{name: "one file to create", a: []Namespace{file(1, missing)}, b: []Namespace{file(3, dir+"//new.img")},
			want: []string{"subsystems[1].namespaces[0].path: " + dir + "//new.img is also the backing of namespace 1 of " + nqnA}},
		{name: "one file to create, through a linked directory", a: []Namespace{file(1, filepath.Join(dir, "sub", "n.img"))}, b: []Namespace{file(3, filepath.Join(dirLink, "n.img"))},
			want: []string{"is also the backing of namespace 1 of " + nqnA}},
		{name: "three namespaces, two problems", a: []Namespace{file(1, img), file(2, link)}, b: []Namespace{file(3, hard)},
			want: []string{"subsystems[0].namespaces[1].path", "subsystems[1].namespaces[0].path"}},
		{name: "all read-only may share", a: []Namespace{{NSID: 1, Backend: BackendFile, Path: img, ReadOnly: true}}, b: []Namespace{{NSID: 3, Backend: BackendFile, Path: link, ReadOnly: true}}},
		{name: "distinct rbd images", a: []Namespace{rbd(1, "rbd", "x"), rbd(2, "rbd", "y")}, b: []Namespace{rbd(1, "other", "x")}},
		{name: "one rbd image twice", a: []Namespace{rbd(1, "rbd", "x")}, b: []Namespace{rbd(3, "rbd", "x")},
			want: []string{"subsystems[1].namespaces[0].image: rbd image rbd/x is also the backing of namespace 1 of " + nqnA}},
		{name: "an rbd image named like a file", a: []Namespace{file(1, img)}, b: []Namespace{rbd(3, "rbd", img)}},
		{name: "a writer and a reader may not", a: []Namespace{{NSID: 1, Backend: BackendFile, Path: img, ReadOnly: true}}, b: []Namespace{file(3, img)},
			want: []string{"subsystems[1].namespaces[0].path: " + img + " is also the backing of namespace 1 of " + nqnA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Subsystems: []Subsystem{{NQN: nqnA, Namespaces: tt.a}, {NQN: nqnB, Namespaces: tt.b}}}
			got := Problems(c.CheckBackings())
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %v, want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("problem %q does not contain %q", got[i], w)
				}
			}
			// CheckPaths (config validate, serve) reports the same.
			if n := len(Problems(c.CheckPaths())); n != len(tt.want) {
				t.Errorf("CheckPaths found %d problems, want %d", n, len(tt.want))
			}
		})
	}
}

// TestCheckBackingsBlockDevice: a block device is one backing whatever node
// names it: a symlink, or another node of the same device number.
func TestCheckBackingsBlockDevice(t *testing.T) {
	dev := findBlockDevice()
	if dev == "" {
		t.Skip("no block device node found")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "lv")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node")
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(st.Rdev)); err != nil {
		t.Fatalf("mknod (the tests run as root): %v", err)
	}
	for _, p := range []string{dev, link, node} {
		c := &Config{Subsystems: []Subsystem{
			{NQN: "nqn.2026-11.io.example:a", Namespaces: []Namespace{{NSID: 1, Backend: BackendBlock, Path: dev}}},
			{NQN: "nqn.2026-11.io.example:b", Namespaces: []Namespace{{NSID: 1, Backend: BackendBlock, Path: p}}},
		}}
		got := Problems(c.CheckBackings())
		if len(got) != 1 || !strings.Contains(got[0].Error(), "subsystems[1].namespaces[0].path: "+p+" is also the backing of namespace 1 of nqn.2026-11.io.example:a") {
			t.Errorf("%s: %v", p, got)
		}
	}
}
