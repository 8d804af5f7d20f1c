//go:build linux && cgo && !faultinject

package verbs

// SetupFaults does nothing: this build has no fault injection.
func SetupFaults() (string, error) { return "", nil }

func postFault(*Batch) faultCut { return faultCut{} }

func createQPFault() bool { return false }

// SRQDepthFault is 0: this build has no fault injection.
func SRQDepthFault() int { return 0 }

// SRQStartFault is 0: this build has no fault injection.
func SRQStartFault() int { return 0 }
