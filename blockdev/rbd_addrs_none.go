//go:build !(linux && cgo && rbd)

package blockdev

// RBDClientAddrs is empty in a build without librbd.
func RBDClientAddrs() []string { return nil }

// RBDWaitForLatestOSDMap has no connection to wait for in this build.
func RBDWaitForLatestOSDMap() error { return nil }

// RBDUnsettled: no RBD write in this build.
func RBDUnsettled() bool { return false }
