//go:build linux && !(cgo && rbd)

package blockdev

// ringRBD is the part of a Ring that takes librbd's completions: nothing
// in a build without librbd.
type ringRBD struct{}

func (*ringRBD) arm() bool                    { return true }
func (*ringRBD) reap(*Ring, []Completion) int { return 0 }
func (*ringRBD) close() error                 { return nil }
