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
// A test starts the target with startTarget(t, spec), which gives the selected one. A test, or a
// subtest, whose assertions hold for nvmeof-tgt only (its API, its metrics, its process, its
// fault injection, its answers where nvmet's differ) first calls requireTgt(t, why), which skips
// it in kernel mode with the reason; that is the suite's one skip. (TestTCPSPDKHost, SPDK's host
// against the TCP port, is built with the tag spdk only and fails without SPDK_DIR.) A
// nvmeof-tgt-only test gets the process
// from startTgt(t, spec, opts...), whose options set what Spec does not:
//
//	withEnv(kv...)         variables for the target (NVMEOF_TGT_*, fault plans, WATCHDOG_USEC)
//	withBinary(path)       another build, e.g. the faultinject one (faultBin)
//	withNotify(fn)         every systemd notify datagram, as it arrives
//	withConfig(yaml)       a whole configuration file instead of the one rendered from spec
//	withConfigEdit(fn)     an edit of the rendered file (withSubsystem is one)
//	withDir(dir)           where the configuration and the log go
//
// The harness writes the api section of the file either way (the socket is new at each start).
//
// The harness is in the harness_*_test.go files, which hold no tests:
//
//	harness_main_test.go          TestMain: the guest's environment; each test's results
//	                              directory; the kernel log saved on failure
//	harness_target_test.go        the target interface, startTarget, startTgt and their options,
//	                              requireTgt
//	harness_spec_test.go          Spec: the port, subsystems, hosts and keys, namespaces and their
//	                              images and loop devices
//	harness_tgt_process_test.go   tgtProcess, nvmeof-tgt as a child process: its configuration
//	                              file, readiness (READY=1), stop, crash and restart, the CLI
//	harness_kernel_target_test.go kernelTarget: nvmet through configfs
//	harness_host_test.go          the kernel initiator: host identities, discover, connect,
//	                              block devices, DH-HMAC-CHAP keys, the kernel log
//	harness_io_test.go            data through the block device: dd patterns, fio with verification
//	harness_exec_test.go          external commands with timeouts
//	harness_metrics_test.go       nvmeof-tgt's metrics: scraping, teardown and buffers released
//	harness_nvmecli_test.go       nvme-cli's JSON output
//	harness_softroce_test.go      a second Soft-RoCE device (lab1/rxe1), made before the target
//	                              starts so that it is deleted after the target is gone
//	harness_ceph_test.go          the guest's one-node Ceph cluster (tests/lab/ceph-up.sh),
//	                              started in the background by TestMain when the tests to
//	                              run need it (cephTests), else by the first that does;
//	                              needCeph waits for it; stopped after the suite; rbd namespaces' images, rbd(8), and
//	                              the rbd build of nvmeof-tgt (needRBDBin)
//	harness_hostile_test.go       the hostile host (a raw rdma/rdmatest initiator) of the
//	                              hostile_*_test.go attacks, which TestHostile runs in turn
//	harness_spdk_target_test.go   SPDK's nvmf_tgt, TestBench's optional peer (tags e2e,bench)
//	harness_netlab_test.go        the network lab (tests/netlab): its guests, commands in them
//	                              through their agents, links cut, set down or shaped with
//	                              netem from either end, rxe counters, power cuts and boots,
//	                              nvmeof-tgt in another guest (startRemoteTgt)
//
// The network lab's tests (net_test.go, build tags e2e,netlab, named TestNet*) run in several
// guests joined by links (tests/lab/e2e-net.sh): this binary in the host guest, the targets in
// the others. They run only there, and only they do.
//
// E2E_RESULTS (default: a temporary directory) receives, per test, the target's configuration
// and log, fio's JSON reports and, on failure, the guest's dmesg.
package e2e
