//go:build !(linux && cgo && rbd)

package rados

import (
	"log/slog"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
)

// Supported reports whether Open can reach a cluster in this build.
const Supported = false

// Open is ErrNotSupported: this build has no librados.
func Open(g config.GatewayGroup, log *slog.Logger) (group.Store, error) { return nil, ErrNotSupported }
