//go:build !linux

package fabric

// lowerPriority does nothing where thread priorities are not set.
func lowerPriority() {}
