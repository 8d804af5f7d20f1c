package nvme

// Feature Identifiers (base 1.4 §5.21.1).
const (
	FeatArbitration           = 0x01
	FeatPowerManagement       = 0x02
	FeatLBARangeType          = 0x03
	FeatTemperatureThreshold  = 0x04
	FeatErrorRecovery         = 0x05
	FeatVolatileWriteCache    = 0x06
	FeatNumberOfQueues        = 0x07
	FeatInterruptCoalescing   = 0x08
	FeatInterruptVectorConfig = 0x09
	FeatWriteAtomicity        = 0x0a
	FeatAsyncEventConfig      = 0x0b
	FeatAutonomousPowerState  = 0x0c
	FeatTimestamp             = 0x0e
	FeatKeepAliveTimer        = 0x0f
	FeatHostIdentifier        = 0x81
	FeatReservationMask       = 0x82
	FeatReservationPersist    = 0x83
	FeatWriteProtect          = 0x84
)

// Get Features with Select 11b: the capabilities of a feature, in completion
// DW0 (base 1.4 §5.15.1).
const (
	FeatCapSaveable     = 1 << 0
	FeatCapPerNamespace = 1 << 1
	FeatCapChangeable   = 1 << 2
)

// HostIDSize is the size of the extended (128-bit) Host Identifier.
const HostIDSize = 16
