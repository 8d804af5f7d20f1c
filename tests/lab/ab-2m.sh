#!/usr/bin/env bash
# ab-2m.sh: an A/B run of a code change in the two-machine bench: the working tree's
# nvmeof-tgt (and its rbd build) against REV's (default HEAD~1), both in the target guest, in
# turn, in one boot; the report goes to bench/results/<date>-2m-ab-<rev>.{json,md,png}.
#
#   tests/lab/ab-2m.sh [REV]
#
# BENCH_JOBS, BENCH_REPS, BENCH_RUNTIME, BENCH_RAMP, BENCH_TRANSPORTS and BENCH_PROFILE as for
# make bench (the A/B runs every memory, file and RBD job by default: a change that wins one job
# and loses another is not taken; BENCH_TRANSPORTS=rdma for a REV from before the TCP port).
# Build bin/nvmeof-tgt first (make build).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
rev=${1:-HEAD~1}
short=$(git rev-parse --short "$rev")
prev=$repo/bin/ab-prev
rm -rf "$prev" && mkdir -p "$prev"
src=$(mktemp -d "${TMPDIR:-/tmp}/ab-2m-src.XXXXXX")
trap 'rm -rf "$src"' EXIT
git archive "$rev" | tar -x -C "$src"
(cd "$src" && go build -o "$prev/nvmeof-tgt" ./cmd/nvmeof-tgt)
if [[ -e /usr/include/rbd/librbd.h ]]; then
  (cd "$src" && go build -tags rbd -o "$prev/nvmeof-tgt-rbd" ./cmd/nvmeof-tgt)
  export BENCH_AB_RBD_BIN=$prev/nvmeof-tgt-rbd
fi
export BENCH_AB_BIN=$prev/nvmeof-tgt BENCH_LABEL=ab-$short
export BENCH_COMMIT=${BENCH_COMMIT:-$(git describe --always --dirty) vs $short}
exec tests/lab/bench-2m.sh
