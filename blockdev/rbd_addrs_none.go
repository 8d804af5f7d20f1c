//go:build !(linux && cgo && rbd)

package blockdev

// RBDClientAddrs is empty in a build without librbd.
func RBDClientAddrs() []string { return nil }
