package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
