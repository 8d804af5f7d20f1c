//go:build e2e

package e2e

// JSON shapes of the nvme-cli 2.3 commands the tests use (`-o json`). Only the fields asserted on
// are declared; numbers go through jsonUint, which also takes nvme-cli's decimal strings.

// nvmeList is `nvme list -o json`.
type nvmeList struct {
	Devices []struct {
		NameSpace    jsonUint `json:"NameSpace"`
		DevicePath   string   `json:"DevicePath"`
		ModelNumber  string   `json:"ModelNumber"`
		SerialNumber string   `json:"SerialNumber"`
		MaximumLBA   jsonUint `json:"MaximumLBA"`
		PhysicalSize jsonUint `json:"PhysicalSize"`
		SectorSize   jsonUint `json:"SectorSize"`
	} `json:"Devices"`
}

// idCtrl is `nvme id-ctrl -o json`.
type idCtrl struct {
	Subnqn string   `json:"subnqn"`
	CNTLID jsonUint `json:"cntlid"`
	MDTS   jsonUint `json:"mdts"`
	KAS    jsonUint `json:"kas"`
	MaxCmd jsonUint `json:"maxcmd"`
	NN     jsonUint `json:"nn"`
	SGLS   jsonUint `json:"sgls"`
	IOCCSZ jsonUint `json:"ioccsz"`
	IORCSZ jsonUint `json:"iorcsz"`
	MSDBD  jsonUint `json:"msdbd"`
}

// idNS is `nvme id-ns -o json`.
type idNS struct {
	NGUID  string   `json:"nguid"` // 32 hex digits
	EUI64  string   `json:"eui64"` // 16 hex digits
	NSZE   jsonUint `json:"nsze"`
	NCAP   jsonUint `json:"ncap"`
	NUSE   jsonUint `json:"nuse"`
	FLBAS  jsonUint `json:"flbas"`
	NLBAF  jsonUint `json:"nlbaf"`
	DLFEAT jsonUint `json:"dlfeat"`
	LBAFs  []struct {
		MS jsonUint `json:"ms"`
		DS jsonUint `json:"ds"` // log2 of the LBA data size
		RP jsonUint `json:"rp"`
	} `json:"lbafs"`
}

// nsDescs is `nvme ns-descs -o json`.
type nsDescs struct {
	Descs []struct {
		Type  string `json:"type"` // "uuid", "nguid", "eui64", "csi"
		UUID  string `json:"uuid"`
		NGUID string `json:"nguid"` // 32 hex digits
		EUI64 string `json:"eui64"` // 16 hex digits
	} `json:"ns-descs"`
}

// smartLog is `nvme smart-log -o json`; nvme-cli 2.3 prints the 128-bit counters as strings.
type smartLog struct {
	CriticalWarning   jsonUint `json:"critical_warning"`
	DataUnitsRead     jsonUint `json:"data_units_read"`
	DataUnitsWritten  jsonUint `json:"data_units_written"`
	HostReadCommands  jsonUint `json:"host_read_commands"`
	HostWriteCommands jsonUint `json:"host_write_commands"`
	NumErrLogEntries  jsonUint `json:"num_err_log_entries"`
}

// errorLog is `nvme error-log -o json`.
type errorLog struct {
	Errors []struct {
		ErrorCount jsonUint `json:"error_count"`
		SQID       jsonUint `json:"sqid"`
		CmdID      jsonUint `json:"cmdid"`
	} `json:"errors"`
}
