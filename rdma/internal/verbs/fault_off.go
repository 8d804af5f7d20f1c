//go:build linux && cgo && !faultinject

package verbs

// FaultInjection reports whether this binary was built to inject faults.
const FaultInjection = false

func postFault([]postGroup) faultCut { return faultCut{} }
