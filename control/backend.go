package control

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// fileWorkers is how many goroutines run blocking I/O per file or block
// namespace when it is not on a poller's io_uring.
const fileWorkers = 32

// backend is an opened namespace backend that no namespace has taken yet,
// with what opening it did to its file.
type backend struct {
	fabric.NamespaceConfig
	undo fileUndo
}

// release closes a backend no namespace took and undoes what opening it
// did to its file: docs/api.md promises that a refused change changes
// nothing.
func (b backend) release() {
	b.Device.Close()
	b.undo.run()
}

// openNamespace opens a namespace's backend and describes it to fabric.
// Memory never blocks and runs inline, with no workers.
func openNamespace(subnqn string, nc config.Namespace, log *slog.Logger) (backend, error) {
	afterOpen()
	o := blockdev.Options{Path: nc.Path, Size: int64(nc.Size), BlockSize: nc.BlockSize, ReadOnly: nc.ReadOnly, Buffered: nc.BufferedIO, Logger: log}
	var (
		dev     blockdev.Device
		undo    fileUndo
		workers = fileWorkers
		err     error
	)
	switch nc.Backend {
	case config.BackendMemory:
		dev, err = blockdev.NewMemory(int64(nc.Size), nc.BlockSize)
		workers = 0
	case config.BackendFile:
		dev, undo, err = openFile(o)
	case config.BackendBlock:
		// A block device uses its own logical block size.
		o.BlockSize = 0
		dev, err = blockdev.OpenBlockDevice(o)
	case config.BackendRBD:
		// Blocking calls (the ring full, io_uring off) wait on the
		// cluster as a file's wait on its disk: workers run them.
		dev, err = blockdev.OpenRBD(blockdev.RBDOptions{Pool: nc.Pool, Image: nc.Image, Size: int64(nc.Size),
			BlockSize: nc.BlockSize, CephConf: nc.CephConf, Client: nc.Client, ReadOnly: nc.ReadOnly, Logger: log})
	default:
		// config.ApplyDefaults inferred any backend left unset.
		err = fmt.Errorf("unknown backend %q", nc.Backend)
	}
	if err != nil {
		return backend{}, err
	}
	return backend{NamespaceConfig: fabric.NamespaceConfig{
		NSID: nc.NSID, Device: dev, UUID: nc.ResolvedUUID(subnqn), NGUID: nc.ResolvedNGUID(subnqn), EUI64: nc.ResolvedEUI64(), ANAGroup: nc.ANAGroup,
		ReadOnly: nc.ReadOnly, Workers: workers,
	}, undo: undo}, nil
}

// fileUndo undoes what opening a file namespace did to its file: remove
// the file it created, or give back the size of one it grew. Only while
// the path is still that file, at the size opening left it: never another
// file, nor one written to since.
type fileUndo struct {
	path    string
	st      fs.FileInfo // the file as opening left it; nil: nothing to undo
	created bool
	size    int64 // the size before, of a file that was there
}

// openFile is blockdev.OpenFile, noting what to undo. It creates a missing
// file itself, O_EXCL, so that it knows the file is this change's and not
// one that appeared meanwhile; when it cannot, OpenFile says why.
func openFile(o blockdev.Options) (blockdev.Device, fileUndo, error) {
	u := fileUndo{path: o.Path, size: -1}
	st, err := os.Stat(o.Path)
	switch {
	case err == nil && st.Mode().IsRegular():
		u.size = st.Size()
	case errors.Is(err, fs.ErrNotExist) && !o.ReadOnly && o.Size > 0:
		if f, err := os.OpenFile(o.Path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
			u.created = true
		}
	}
	dev, err := blockdev.OpenFile(o)
	u.st, _ = os.Stat(o.Path)
	if err != nil {
		u.run()
		return nil, fileUndo{}, err
	}
	return dev, u, nil
}

func (u fileUndo) run() {
	if u.st == nil {
		return
	}
	st, err := os.Stat(u.path)
	if err != nil || !os.SameFile(st, u.st) || st.Size() != u.st.Size() {
		return
	}
	switch {
	case u.created:
		os.Remove(u.path)
	case u.size >= 0 && u.size < st.Size():
		os.Truncate(u.path, u.size)
	}
}

// afterOpen, in tests, runs as a namespace's backend opens: where an rbd
// namespace would open a new cluster connection.
var afterOpen = func() {}
