#!/usr/bin/env bash
# bench.sh (make bench): run the fio jobs of deploy/fio through the kernel initiator against
# nvmeof-tgt and its peers, alternately, BENCH_REPS times, and write the report to
# bench/results/. Two topologies (BENCH_TOPOLOGY):
#
# two (the default): the network lab (tests/netlab/cmd/labnet) with a target guest and a host
#   guest, 1 vCPU each, one rxe link between them. Every target runs in the target guest in its
#   turn: nvmeof-tgt, the kernel's nvmet-rdma and SPDK's nvmf_tgt, on memory namespaces
#   (null_blk, malloc bdev) and on one file (nvmet's file backend, SPDK's aio bdev); then, with a
#   one-node Ceph cluster started in the target guest, the same jobs on one RBD image through
#   nvmeof-tgt-rbd, SPDK's bdev_rbd and fio's rbd engine run in the target guest. Each run's CPU
#   per I/O comes from /proc/stat in the target guest. Report: bench/results/<date>-2m.*.
#   BENCH_TRANSPORTS (default rdma,tcp) are the transports of the memory and file jobs, run one
#   after the other: tcp runs them again over NVMe/TCP on the same link (ours' TCP port, the
#   kernel's nvmet-tcp, SPDK's TCP transport; the host's nvme-tcp), reported beside the RDMA
#   rows; BENCH_TRANSPORTS=rdma leaves TCP out, =tcp RDMA. The RBD jobs run over RDMA alone.
#   SPDK: SPDK_DIR names a tree tests/bench/spdk-build.sh built; otherwise SPDK_SRC names an
#   SPDK v24.05 source tree, which spdk-build.sh builds into SPDK_DIR (default
#   /var/cache/nvmeof-tgt-lab/spdk) first; with neither, SPDK is skipped and the run says so.
#   The RBD jobs need bin/nvmeof-tgt-rbd (librbd-dev, make ceph-deps): without it they are
#   skipped and the run says so. BENCH_TARGET_MEM (MiB, default 6144: Ceph's memstore OSD,
#   SPDK's 2 GiB of hugepages, the memory namespaces) and BENCH_HOST_MEM (default 2048).
# one: the one-guest benchmark, as its history in bench/results/<date>.* was measured: targets
#   and host in one guest (BENCH_CPUS, 2 or 4 vCPUs, default 4); BENCH_PEERS "kernel" (default)
#   and/or "spdk" (memory jobs only, needs BENCH_SPDK_DIR); the scale phase, perftest, and the
#   host-side loop benchmark into bench/results/<date-time>-loop.txt.
#
# BENCH_RUNTIME, BENCH_RAMP (seconds per fio run; default 15 and 3 with two machines, 10 and 3
# with one), BENCH_REPS (default 3) and BENCH_JOBS (a regexp over backend/job, e.g.
# '^(memory|file)/' or '^rbd/'; with one guest also the scale phase's scale/...) tune it;
# LABVM_FLAGS adds labvm flags (one guest), LABNET_FLAGS labnet boot flags (two machines).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
export BENCH_COMMIT=${BENCH_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}

case ${BENCH_TOPOLOGY:-two} in
  one) ;;
  two) exec "$repo/tests/lab/bench-2m.sh" ;;
  *) echo "bench: BENCH_TOPOLOGY=$BENCH_TOPOLOGY: want two (the default) or one" >&2; exit 2 ;;
esac

# Four vCPUs by default, so that the 4-job run has four host I/O queues.
export BENCH_CPUS=${BENCH_CPUS:-4} BENCH_PEERS=${BENCH_PEERS:-kernel}
[[ $BENCH_CPUS == 2 || $BENCH_CPUS == 4 ]] || { echo "bench: BENCH_CPUS=$BENCH_CPUS: want 2 or 4" >&2; exit 2; }
mem=5120 # the rbd jobs' Ceph cluster keeps what is written in its OSD's memory (memstore)
for p in $BENCH_PEERS; do
  case $p in
    kernel) ;;
    spdk)
      # Checked here, before the guest boots; the guest sees the host's files at the same paths.
      [[ -n ${BENCH_SPDK_DIR:-} ]] || { echo "bench: PEERS has spdk: set SPDK_DIR (see tests/bench/spdk-build.sh)" >&2; exit 2; }
      BENCH_SPDK_DIR=$(realpath "$BENCH_SPDK_DIR")
      [[ -x $BENCH_SPDK_DIR/build/bin/nvmf_tgt && -f $BENCH_SPDK_DIR/scripts/rpc.py ]] ||
        { echo "bench: $BENCH_SPDK_DIR has no build/bin/nvmf_tgt and scripts/rpc.py: build it with tests/bench/spdk-build.sh" >&2; exit 2; }
      export BENCH_SPDK_DIR
      mem=6144 # SPDK reserves 1,024 hugepages of 2 MiB
      ;;
    *) echo "bench: unknown peer $p in BENCH_PEERS: want kernel and/or spdk" >&2; exit 2 ;;
  esac
done
rc=0
E2E_TAGS=e2e,bench LABVM_FLAGS="--cpus $BENCH_CPUS --mem $mem --scratch-size 4G --timeout 6000 ${LABVM_FLAGS:-}" \
  tests/lab/e2e.sh -test.run '^TestBench$' -test.timeout 100m || rc=$?
raw=tests/out/bench-raw.json
if [[ ! -s $raw ]]; then
  echo "bench: no results ($raw)" >&2
  exit $((rc ? rc : 1))
fi
go run ./tests/bench/cmd/benchreport -in "$raw" -out bench/results

# The host-side benchmark: the fabric core through the loop transport, memory backend.
loop=bench/results/$(date -u +%Y-%m-%d-%H%M)-loop.txt
go test -run '^$' -bench BenchmarkLoopIO -benchmem -count 3 ./fabric | tee "$loop"
echo "wrote $loop"
exit "$rc"
