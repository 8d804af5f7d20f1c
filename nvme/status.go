package nvme

import "fmt"

// Status is the 15-bit Status Field of a completion queue entry, without the
// Phase Tag (base 1.4 §4.6.1): SC in bits 7:0, SCT in 10:8, CRD
// in 12:11, More in 13 and DNR in 14. It is a value sent to the host, not a
// Go error.
type Status uint16

const (
	statusSCMask   = 0xff
	statusSCTShift = 8
	statusSCTMask  = 7
	statusCRDShift = 11
	statusCRDMask  = 3
	statusMore     = 1 << 13
	statusDNR      = 1 << 14
	statusMask     = 0x7fff
)

// Status Code Types (base 1.4 §4.6.1.1).
const (
	SCTGeneric         = 0
	SCTCommandSpecific = 1
	SCTMedia           = 2
	SCTPath            = 3
	SCTVendor          = 7
)

// MakeStatus returns the status with the given type and code.
func MakeStatus(sct, sc uint8) Status {
	return Status(sct&statusSCTMask)<<statusSCTShift | Status(sc)
}

// Generic command status, SCT 0 (base 1.4 §4.6.1.2.1).
const (
	StatusSuccess                     Status = 0x00
	StatusInvalidOpcode               Status = 0x01
	StatusInvalidField                Status = 0x02
	StatusCIDConflict                 Status = 0x03
	StatusDataTransferError           Status = 0x04
	StatusAbortedPowerLoss            Status = 0x05
	StatusInternalError               Status = 0x06
	StatusAbortRequested              Status = 0x07
	StatusAbortSQDeleted              Status = 0x08
	StatusAbortFusedFailed            Status = 0x09
	StatusAbortFusedMissing           Status = 0x0a
	StatusInvalidNamespace            Status = 0x0b // Invalid Namespace or Format
	StatusCommandSequenceError        Status = 0x0c
	StatusInvalidSGLSegmentDescriptor Status = 0x0d
	StatusInvalidSGLDescriptorCount   Status = 0x0e
	StatusDataSGLLengthInvalid        Status = 0x0f
	StatusMetadataSGLLengthInvalid    Status = 0x10
	StatusSGLDescriptorTypeInvalid    Status = 0x11
	StatusOperationDenied             Status = 0x15
	StatusSGLOffsetInvalid            Status = 0x16
	StatusHostIDInconsistentFormat    Status = 0x18
	StatusKeepAliveExpired            Status = 0x19
	StatusKeepAliveTimeoutInvalid     Status = 0x1a
	StatusNamespaceWriteProtected     Status = 0x20
	StatusCommandInterrupted          Status = 0x21
	StatusTransientTransportError     Status = 0x22

	// NVM command set generic status.
	StatusLBAOutOfRange       Status = 0x80
	StatusCapacityExceeded    Status = 0x81
	StatusNamespaceNotReady   Status = 0x82
	StatusReservationConflict Status = 0x83
)

// Command specific status, SCT 1 (base 1.4 §4.6.1.2.2;
// NVMe-oF §3.3 for Connect).
const (
	//lint:ignore SA4016 every status is written SCT and SC, SC 0 too
	StatusCQInvalid                   Status = SCTCommandSpecific<<statusSCTShift | 0x00
	StatusInvalidQID                  Status = SCTCommandSpecific<<statusSCTShift | 0x01
	StatusInvalidQueueSize            Status = SCTCommandSpecific<<statusSCTShift | 0x02
	StatusAbortLimitExceeded          Status = SCTCommandSpecific<<statusSCTShift | 0x03
	StatusAsyncEventLimitExceeded     Status = SCTCommandSpecific<<statusSCTShift | 0x05
	StatusInvalidLogPage              Status = SCTCommandSpecific<<statusSCTShift | 0x09
	StatusInvalidFormat               Status = SCTCommandSpecific<<statusSCTShift | 0x0a
	StatusInvalidQueueDeletion        Status = SCTCommandSpecific<<statusSCTShift | 0x0c
	StatusFeatureNotSaveable          Status = SCTCommandSpecific<<statusSCTShift | 0x0d
	StatusFeatureNotChangeable        Status = SCTCommandSpecific<<statusSCTShift | 0x0e
	StatusFeatureNotNamespaceSpecific Status = SCTCommandSpecific<<statusSCTShift | 0x0f

	// Fabrics Connect; the same codes mean other things for NVM I/O
	// commands (0x82 is Attempted Write to Read Only Range there).
	StatusConnectIncompatibleFormat Status = SCTCommandSpecific<<statusSCTShift | 0x80
	StatusConnectControllerBusy     Status = SCTCommandSpecific<<statusSCTShift | 0x81
	StatusConnectInvalidParameters  Status = SCTCommandSpecific<<statusSCTShift | 0x82
	StatusConnectRestartDiscovery   Status = SCTCommandSpecific<<statusSCTShift | 0x83
	StatusConnectInvalidHost        Status = SCTCommandSpecific<<statusSCTShift | 0x84
)

// Media and data integrity errors, SCT 2 (base 1.4 §4.6.1.2.3).
const (
	StatusWriteFault             Status = SCTMedia<<statusSCTShift | 0x80
	StatusUnrecoveredReadError   Status = SCTMedia<<statusSCTShift | 0x81
	StatusGuardCheckError        Status = SCTMedia<<statusSCTShift | 0x82
	StatusAppTagCheckError       Status = SCTMedia<<statusSCTShift | 0x83
	StatusRefTagCheckError       Status = SCTMedia<<statusSCTShift | 0x84
	StatusCompareFailure         Status = SCTMedia<<statusSCTShift | 0x85
	StatusAccessDenied           Status = SCTMedia<<statusSCTShift | 0x86
	StatusDeallocatedOrUnwritten Status = SCTMedia<<statusSCTShift | 0x87
)

// SCT returns the Status Code Type.
func (s Status) SCT() uint8 { return uint8(s>>statusSCTShift) & statusSCTMask }

// SC returns the Status Code.
func (s Status) SC() uint8 { return uint8(s & statusSCMask) }

// CRD returns the Command Retry Delay index (base 1.4 §4.6.1).
func (s Status) CRD() uint8 { return uint8(s>>statusCRDShift) & statusCRDMask }

// More reports that the Error Information log page has more detail.
func (s Status) More() bool { return s&statusMore != 0 }

// DNR reports Do Not Retry.
func (s Status) DNR() bool { return s&statusDNR != 0 }

// WithDNR returns s with Do Not Retry set.
func (s Status) WithDNR() Status { return s | statusDNR }

// IsSuccess reports a Successful Completion, whatever the DNR and More bits.
func (s Status) IsSuccess() bool { return s&(statusSCTMask<<statusSCTShift|statusSCMask) == 0 }

// code returns s with only SCT and SC.
func (s Status) code() Status { return s & (statusSCTMask<<statusSCTShift | statusSCMask) }

// statusNames names the codes this target may send or meet. For SCT 1 codes
// 0x80-0x84 it uses the fabrics Connect meanings.
var statusNames = map[Status]string{
	StatusSuccess:                     "Successful Completion",
	StatusInvalidOpcode:               "Invalid Command Opcode",
	StatusInvalidField:                "Invalid Field in Command",
	StatusCIDConflict:                 "Command ID Conflict",
	StatusDataTransferError:           "Data Transfer Error",
	StatusAbortedPowerLoss:            "Commands Aborted due to Power Loss Notification",
	StatusInternalError:               "Internal Error",
	StatusAbortRequested:              "Command Abort Requested",
	StatusAbortSQDeleted:              "Command Aborted due to SQ Deletion",
	StatusAbortFusedFailed:            "Command Aborted due to Failed Fused Command",
	StatusAbortFusedMissing:           "Command Aborted due to Missing Fused Command",
	StatusInvalidNamespace:            "Invalid Namespace or Format",
	StatusCommandSequenceError:        "Command Sequence Error",
	StatusInvalidSGLSegmentDescriptor: "Invalid SGL Segment Descriptor",
	StatusInvalidSGLDescriptorCount:   "Invalid Number of SGL Descriptors",
	StatusDataSGLLengthInvalid:        "Data SGL Length Invalid",
	StatusMetadataSGLLengthInvalid:    "Metadata SGL Length Invalid",
	StatusSGLDescriptorTypeInvalid:    "SGL Descriptor Type Invalid",
	StatusOperationDenied:             "Operation Denied",
	StatusSGLOffsetInvalid:            "SGL Offset Invalid",
	StatusHostIDInconsistentFormat:    "Host Identifier Inconsistent Format",
	StatusKeepAliveExpired:            "Keep Alive Timer Expired",
	StatusKeepAliveTimeoutInvalid:     "Keep Alive Timeout Invalid",
	StatusNamespaceWriteProtected:     "Namespace is Write Protected",
	StatusCommandInterrupted:          "Command Interrupted",
	StatusTransientTransportError:     "Transient Transport Error",
	StatusLBAOutOfRange:               "LBA Out of Range",
	StatusCapacityExceeded:            "Capacity Exceeded",
	StatusNamespaceNotReady:           "Namespace Not Ready",
	StatusReservationConflict:         "Reservation Conflict",
	StatusAbortPreempt:                "Command Aborted due to Preempt and Abort",

	StatusCQInvalid:                   "Completion Queue Invalid",
	StatusInvalidQID:                  "Invalid Queue Identifier",
	StatusInvalidQueueSize:            "Invalid Queue Size",
	StatusAbortLimitExceeded:          "Abort Command Limit Exceeded",
	StatusAsyncEventLimitExceeded:     "Asynchronous Event Request Limit Exceeded",
	StatusInvalidLogPage:              "Invalid Log Page",
	StatusInvalidFormat:               "Invalid Format",
	StatusInvalidQueueDeletion:        "Invalid Queue Deletion",
	StatusFeatureNotSaveable:          "Feature Identifier Not Saveable",
	StatusFeatureNotChangeable:        "Feature Not Changeable",
	StatusFeatureNotNamespaceSpecific: "Feature Not Namespace Specific",
	StatusConnectIncompatibleFormat:   "Connect Incompatible Format",
	StatusConnectControllerBusy:       "Connect Controller Busy",
	StatusConnectInvalidParameters:    "Connect Invalid Parameters",
	StatusConnectRestartDiscovery:     "Connect Restart Discovery",
	StatusConnectInvalidHost:          "Connect Invalid Host",

	StatusWriteFault:             "Write Fault",
	StatusUnrecoveredReadError:   "Unrecovered Read Error",
	StatusGuardCheckError:        "End-to-end Guard Check Error",
	StatusAppTagCheckError:       "End-to-end Application Tag Check Error",
	StatusRefTagCheckError:       "End-to-end Reference Tag Check Error",
	StatusCompareFailure:         "Compare Failure",
	StatusAccessDenied:           "Access Denied",
	StatusDeallocatedOrUnwritten: "Deallocated or Unwritten Logical Block",

	StatusInternalPathError: "Internal Path Error",
	StatusANAPersistentLoss: "Asymmetric Access Persistent Loss",
	StatusANAInaccessible:   "Asymmetric Access Inaccessible",
	StatusANATransition:     "Asymmetric Access Transition",
}

// String returns the status name, its type and code, and the DNR and More
// bits, e.g. "Invalid Field in Command (sct 0x0 sc 0x02) DNR".
func (s Status) String() string {
	name, ok := statusNames[s.code()]
	if !ok {
		name = "Unknown Status"
	}
	str := fmt.Sprintf("%s (sct %#x sc %#02x)", name, s.SCT(), s.SC())
	if s.More() {
		str += " More"
	}
	if s.DNR() {
		str += " DNR"
	}
	return str
}
