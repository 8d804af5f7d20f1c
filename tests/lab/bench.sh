#!/usr/bin/env bash
# bench.sh (make bench): in one boot of the test guest, run the fio jobs of deploy/fio through the
# kernel initiator against nvmeof-tgt and the kernel's nvmet (alternately, BENCH_REPS times),
# and perftest on the same rxe device; then write bench/results/<date>.{json,md,png}, and run the
# host-side loop benchmark into bench/results/<date-time>-loop.txt.
#
# BENCH_RUNTIME, BENCH_RAMP (seconds per fio run; default 10 and 3), BENCH_REPS (default 3) and
# BENCH_JOBS (a regexp over backend/job) tune it; LABVM_FLAGS adds labvm flags.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
export BENCH_COMMIT=${BENCH_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}

# Four vCPUs, so that the 4-job run has four host I/O queues.
rc=0
E2E_TAGS=e2e,bench LABVM_FLAGS="--cpus 4 --mem 4096 --scratch-size 4G --timeout 6000 ${LABVM_FLAGS:-}" \
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
