package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckPaths checks what Validate leaves to the machine the target runs
// on: a file namespace's path is a regular file, or is missing (and not a
// dangling symlink) in an existing directory with a size to create it
// with; a block namespace's path is a block device. serve and `config validate` run it after
// Validate; paths Validate refuses (empty, relative) are skipped.
func (c *Config) CheckPaths() error {
	var p problems
	for i, s := range c.Subsystems {
		for j, n := range s.Namespaces {
			n.checkPath(&p, fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j))
		}
		for j, h := range s.Hosts {
			if _, _, err := h.Secrets(); err != nil {
				p.add(fmt.Sprintf("subsystems[%d].hosts[%d]", i, j), "%v", err)
			}
		}
	}
	for j, h := range c.Discovery.Hosts {
		if _, _, err := h.Secrets(); err != nil {
			p.add(fmt.Sprintf("discovery.hosts[%d]", j), "%v", err)
		}
	}
	if g := c.GatewayGroup; g.Enabled() {
		Namespace{CephConf: g.CephConf}.checkCephConf(&p, "gateway_group")
	}
	c.checkBackings(&p)
	return errors.Join(p...)
}

// CheckBackings refuses a file or block device behind two namespaces, in
// one subsystem or two, whatever their block sizes: each host would
// overwrite the other's data unknowingly (SPDK likewise refuses a bdev
// claimed twice). Namespaces that are all read-only may share one. A file
// or device is known by what it is, after symlinks: a regular file by
// device and inode, a block device by its device number (whichever node
// names it), and a file still to be created by its directory and name.
// CheckPaths runs it; the control package runs it on every change, where a
// namespace replaced on the same path is in the new configuration once.
func (c *Config) CheckBackings() error {
	var p problems
	c.checkBackings(&p)
	return errors.Join(p...)
}

// nsRef names a namespace for a clash message.
type nsRef struct {
	nqn  string
	nsid uint32
	path string
}

func (c *Config) checkBackings(p *problems) {
	type users struct {
		first, writer *nsRef
	}
	seen := map[backing]*users{}
	for i, s := range c.Subsystems {
		for j, n := range s.Namespaces {
			var b backing
			key := fmt.Sprintf("subsystems[%d].namespaces[%d].path", i, j)
			switch {
			case n.Backend == BackendRBD:
				if n.Pool == "" || n.Image == "" {
					continue
				}
				// One cluster by its configuration file: two files naming
				// one cluster are not caught.
				b = backing{kind: 'r', name: filepath.Clean(n.CephConf) + "\x00" + n.Pool + "\x00" + n.Image}
				key = fmt.Sprintf("subsystems[%d].namespaces[%d].image", i, j)
			case n.Backend == BackendMemory || n.Path == "" || !filepath.IsAbs(n.Path):
				continue
			default:
				b = backingOf(n.Path)
			}
			ref := &nsRef{nqn: s.NQN, nsid: n.NSID, path: n.backingName()}
			u := seen[b]
			if u == nil {
				u = &users{first: ref}
				seen[b] = u
			}
			other := u.first
			if n.ReadOnly {
				other = u.writer // readers share with readers
			}
			if other != nil && other != ref {
				msg := fmt.Sprintf("%s is also the backing of namespace %d of %s", ref.path, other.nsid, other.nqn)
				if other.path != ref.path {
					msg += fmt.Sprintf(" (as %s)", other.path)
				}
				p.add(key, "%s", msg)
			}
			if !n.ReadOnly && u.writer == nil {
				u.writer = ref
			}
		}
	}
}

// backing identifies the file or device behind a path.
type backing struct {
	kind     byte // 'f' regular file, 'b' block device, 'n' a name to create, 'p' a path that cannot be looked at
	dev, ino uint64
	name     string
}

func backingOf(path string) backing {
	path = filepath.Clean(path)
	st, err := os.Stat(path)
	if err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			if st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0 {
				return backing{kind: 'b', dev: uint64(sys.Rdev)}
			}
			return backing{kind: 'f', dev: uint64(sys.Dev), ino: sys.Ino}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		// To be created: two names of one directory are one file.
		if dst, derr := os.Stat(filepath.Dir(path)); derr == nil {
			if sys, ok := dst.Sys().(*syscall.Stat_t); ok {
				return backing{kind: 'n', dev: uint64(sys.Dev), ino: sys.Ino, name: filepath.Base(path)}
			}
		}
	}
	return backing{kind: 'p', name: path}
}

// backingName names what backs the namespace, for messages: its path, or
// its RBD image as rbd(8) names it.
func (n Namespace) backingName() string {
	if n.Backend == BackendRBD {
		return "rbd image " + n.Pool + "/" + n.Image
	}
	return n.Path
}

func (n Namespace) checkPath(p *problems, k string) {
	if n.Backend == BackendRBD {
		n.checkCephConf(p, k)
		return
	}
	if n.Path == "" || !filepath.IsAbs(n.Path) {
		return
	}
	st, err := os.Stat(n.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if lst, lerr := os.Lstat(n.Path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			// The target never creates a file through a link (blockdev.OpenFile).
			p.add(k+".path", "%s is a symlink whose target does not exist; create the file or point the namespace at it", n.Path)
			return
		}
	}
	switch n.Backend {
	case BackendFile:
		switch {
		case err == nil && st.IsDir():
			p.add(k+".path", "%q is a directory", n.Path)
		case err == nil && !st.Mode().IsRegular():
			p.add(k+".path", "%q is not a regular file (%s)", n.Path, typeName(st.Mode()))
		case errors.Is(err, fs.ErrNotExist):
			// The file is created at start, but not its directory, and
			// only if we know how large to make it.
			dir := filepath.Dir(n.Path)
			if _, derr := os.Stat(dir); derr != nil {
				p.add(k+".path", "directory %s cannot be used: %v", dir, unwrapPathError(derr))
			}
			if n.Size == 0 {
				p.add(k+".size", "required because %s cannot be used: %v", n.Path, unwrapPathError(err))
			}
		case err != nil:
			p.add(k+".path", "%s cannot be used: %v", n.Path, unwrapPathError(err))
		}
	case BackendBlock:
		switch {
		case err != nil:
			p.add(k+".path", "%s cannot be used: %v", n.Path, unwrapPathError(err))
		case st.Mode()&fs.ModeDevice == 0 || st.Mode()&fs.ModeCharDevice != 0:
			p.add(k+".path", "%q is not a block device (%s)", n.Path, typeName(st.Mode()))
		}
	}
}

// checkCephConf checks that an rbd namespace's Ceph configuration is a
// regular file the target can read: librados would otherwise fail only
// when the namespace is opened, with a less telling error.
func (n Namespace) checkCephConf(p *problems, k string) {
	if n.CephConf == "" || !filepath.IsAbs(n.CephConf) {
		return
	}
	st, err := os.Stat(n.CephConf)
	switch {
	case err != nil:
		p.add(k+".ceph_conf", "%s cannot be used: %v", n.CephConf, unwrapPathError(err))
	case !st.Mode().IsRegular():
		p.add(k+".ceph_conf", "%q is not a regular file (%s)", n.CephConf, typeName(st.Mode()))
	default:
		f, err := os.Open(n.CephConf)
		if err != nil {
			p.add(k+".ceph_conf", "%s cannot be read: %v", n.CephConf, unwrapPathError(err))
			return
		}
		f.Close()
	}
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
