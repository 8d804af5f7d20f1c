#!/usr/bin/env bash
# e2e.sh: build the end-to-end test binary and run it in the lab guest against a target.
#
#   tests/lab/e2e.sh [TEST-BINARY-FLAGS...]      e.g. -test.run 'TestConnect|TestData'
#
# E2E_TARGET=nvmeof-tgt (default) tests bin/nvmeof-tgt, which `make` builds; E2E_TARGET=kernel
# tests the kernel's nvmet instead. Reports go to tests/out/, emptied first but for the network
# lab's tests/out/net (the guest's raw console log too).
# LABVM_FLAGS adds flags to labvm (e.g. "--cpus 4 --mem 4096"; the default memory is 3072 MiB,
# room for the Ceph cluster of the rbd tests beside the rest). E2E_TAGS are the build tags
# (default e2e; make bench uses e2e,bench). BENCH_* variables are passed on to the guest, and
# SPDK_DIR (a tree tests/bench/spdk-build.sh built: TestTCPSPDKHost runs SPDK's NVMe/TCP host from
# it, and skips without it).
# Exit status: the test binary's (labvm's 124 on timeout).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=${E2E_TARGET:-nvmeof-tgt}
out=$repo/tests/out
export PATH=$PATH:/usr/local/go/bin

cd "$repo"
go test -c -tags "${E2E_TAGS:-e2e}" -o bin/e2e.test ./tests/e2e
# TestPostFailure's target: batch posts fail on purpose (rdma/internal/verbs/fault.go), and the
# race detector watches the failure path. Never install this binary.
go build -race -tags faultinject -o bin/nvmeof-tgt-faultinject ./cmd/nvmeof-tgt
# The rbd tests' target (nvmeof-tgt with librbd, build tag rbd: `make build` builds it beside
# bin/nvmeof-tgt where librbd-dev is installed, built here only if missing) and the unit tests
# of the rbd build that need a cluster, which TestRBDUnit runs against the guest's. Without
# librbd-dev (make ceph-deps) they are not built, and the rbd tests fail saying so.
rm -rf bin/rbd-unit
if [[ -e /usr/include/rbd/librbd.h ]]; then
  [[ -x bin/nvmeof-tgt-rbd ]] || go build -tags rbd -o bin/nvmeof-tgt-rbd ./cmd/nvmeof-tgt
  for p in blockdev/internal/rbd blockdev fabric control; do
    go test -c -tags rbd -o "bin/rbd-unit/$(basename "$p").test" "./$p"
  done
else
  echo "e2e.sh: librbd-dev is not installed (make ceph-deps): the rbd tests will fail" >&2
fi
# Emptied, but for the network lab's reports (tests/out/net), whose suite may be running beside
# this one (e2e-all.sh).
mkdir -p "$out" && find "$out" -mindepth 1 -maxdepth 1 ! -name net -exec rm -rf {} +

inner=$(mktemp "${TMPDIR:-/tmp}/e2e-inner.XXXXXX")
trap 'rm -f "$inner"' EXIT
# The guest starts from a clean environment: carry the benchmark's settings over.
for v in $(compgen -e -X '!BENCH_*'); do printf 'export %s=%q\n' "$v" "${!v}"; done >"$inner"
# The guest sees the host's files at the same paths.
if [[ -n ${SPDK_DIR:-} ]]; then printf 'export SPDK_DIR=%q\n' "$(realpath "$SPDK_DIR")" >>"$inner"; fi
cat >>"$inner" <<'INNER'
# In the guest: $1 repo, $2 target kind, then flags for the test binary.
set -o pipefail
repo=$1 target=$2; shift 2
cd "$repo" || exit 1
export E2E_TARGET=$target NVMEOF_TGT_BIN=$repo/bin/nvmeof-tgt E2E_RESULTS=$repo/tests/out
export NVMEOF_TGT_FAULT_BIN=$repo/bin/nvmeof-tgt-faultinject
export NVMEOF_TGT_RBD_BIN=$repo/bin/nvmeof-tgt-rbd NVMEOF_TGT_RBD_UNIT_DIR=$repo/bin/rbd-unit
./bin/e2e.test -test.v -test.timeout 40m "$@" 2>&1 | tee "$E2E_RESULTS/e2e.log"
INNER

rc=0
# shellcheck disable=SC2086 # LABVM_FLAGS is a list of flags
"$repo/tests/lab/labvm" --share "$repo" --timeout 2700 --mem 3072 --console "$out/console.log" ${LABVM_FLAGS:-} \
  "$inner" "$repo" "$target" "$@" || rc=$?
exit "$rc"
