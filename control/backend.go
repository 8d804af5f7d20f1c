package control

import (
	"fmt"
	"log/slog"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// fileWorkers is how many goroutines run blocking I/O per file or block
// namespace when it is not on a poller's io_uring.
const fileWorkers = 32

// openNamespace opens a namespace's backend and describes it to fabric.
// Memory never blocks and runs inline, with no workers.
func openNamespace(subnqn string, nc config.Namespace, log *slog.Logger) (fabric.NamespaceConfig, error) {
	o := blockdev.Options{Path: nc.Path, Size: int64(nc.Size), BlockSize: nc.BlockSize, ReadOnly: nc.ReadOnly, Buffered: nc.BufferedIO, Logger: log}
	var (
		dev     blockdev.Device
		workers = fileWorkers
		err     error
	)
	switch nc.Backend {
	case config.BackendMemory:
		dev, err = blockdev.NewMemory(int64(nc.Size), nc.BlockSize)
		workers = 0
	case config.BackendFile:
		dev, err = blockdev.OpenFile(o)
	case config.BackendBlock:
		// A block device uses its own logical block size.
		o.BlockSize = 0
		dev, err = blockdev.OpenBlockDevice(o)
	default:
		// config.ApplyDefaults inferred any backend left unset.
		err = fmt.Errorf("unknown backend %q", nc.Backend)
	}
	if err != nil {
		return fabric.NamespaceConfig{}, err
	}
	return fabric.NamespaceConfig{
		NSID: nc.NSID, Device: dev, UUID: nc.ResolvedUUID(subnqn), NGUID: nc.ResolvedNGUID(subnqn), EUI64: nc.ResolvedEUI64(),
		ReadOnly: nc.ReadOnly, Workers: workers,
	}, nil
}
