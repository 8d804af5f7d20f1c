//go:build !(linux && cgo && rbd)

package blockdev

import "fmt"

// RBDSupported reports whether this build serves RBD images: only one
// built with the tag rbd (bin/nvmeof-tgt-rbd) links librbd.
const RBDSupported = false

// OpenRBD is not supported by this build.
func OpenRBD(o RBDOptions) (Device, error) {
	return nil, fmt.Errorf("rbd image %s/%s: %w: this nvmeof-tgt is built without librbd; nvmeof-tgt-rbd serves RBD images (make build with librbd-dev installed)",
		o.Pool, o.Image, ErrNotSupported)
}
