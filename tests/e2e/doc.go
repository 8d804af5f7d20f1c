// Package e2e tests a running NVMe-oF RDMA target through the Linux kernel initiator.
//
// The tests run as root inside the lab guest (tests/lab/labvm), which has Soft-RoCE, nvme-rdma,
// nvme-cli and fio; tests/lab/e2e.sh builds the binary on the host and runs it there. Outside a
// usable guest the binary fails at once: a skipped end-to-end run must never count as a pass.
//
// E2E_TARGET picks the target under test:
//
//	nvmeof-tgt  (default) $NVMEOF_TGT_BIN serve --config FILE
//	kernel      the kernel's nvmet, configured through configfs; it checks the tests themselves
//	            and is the peer to compare against
//
// Assertions that hold only for nvmeof-tgt sit in their own subtests, which skip in kernel mode
// with the reason; no other test skips.
//
// E2E_RESULTS (default: a temporary directory) receives, per test, the target's configuration
// and log, fio's JSON reports and, on failure, the guest's dmesg.
package e2e
