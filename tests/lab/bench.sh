#!/usr/bin/env bash
# bench.sh (make bench): in one boot of the test guest, run the fio jobs of deploy/fio through the
# kernel initiator against nvmeof-tgt and its peers (alternately, BENCH_REPS times), and perftest
# on the same rxe device; then write bench/results/<date>.{json,md,png}, and run the host-side
# loop benchmark into bench/results/<date-time>-loop.txt.
#
# BENCH_PEERS: "kernel" (the kernel's nvmet, the default), "spdk" (SPDK's nvmf_tgt, memory jobs
# only) or both, in the order they run after nvmeof-tgt; spdk needs BENCH_SPDK_DIR, a tree that
# tests/bench/spdk-build.sh built. BENCH_CPUS: the guest's vCPUs, 2 or 4 (default 4).
# BENCH_RUNTIME, BENCH_RAMP (seconds per fio run; default 10 and 3), BENCH_REPS (default 3) and
# BENCH_JOBS (a regexp over backend/job and the scale phase's scale/subsystems, scale/namespaces,
# scale/queues-srq and scale/queues-nosrq; BENCH_JOBS=^scale/ runs the scale phase alone) tune it; LABVM_FLAGS adds
# labvm flags.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
export BENCH_COMMIT=${BENCH_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}

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
