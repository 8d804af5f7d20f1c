#!/usr/bin/env bash
# bench-2m.sh: the two-machine mode of make bench (tests/lab/bench.sh, BENCH_TOPOLOGY=two, which
# documents it): target guest and host guest, 1 vCPU each, one rxe link; TestNetBench in the
# host guest; the report in bench/results/<date>-2m.{json,md,png}.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
export BENCH_COMMIT=${BENCH_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
out=$repo/tests/out/net
notes=()
skip() { echo "bench: SKIPPED $1" >&2; notes+=("Skipped: $1"); }

[[ -x bin/nvmeof-tgt ]] || { echo "bench: bin/nvmeof-tgt is missing (make build)" >&2; exit 1; }
# Checked here, before the guests boot (TestNetBench reads it again).
export BENCH_TRANSPORTS=${BENCH_TRANSPORTS:-rdma,tcp}
for tr in ${BENCH_TRANSPORTS//,/ }; do
  case $tr in
    rdma | tcp) ;;
    *) echo "bench: BENCH_TRANSPORTS=$BENCH_TRANSPORTS: want rdma and/or tcp, e.g. rdma,tcp" >&2; exit 2 ;;
  esac
done

# SPDK: a built tree, or a source tree to build, or skipped with the reason.
spdk_dir=${BENCH_SPDK_DIR:-${SPDK_DIR:-}}
spdk_src=${SPDK_SRC:-}
built() { [[ -x $1/build/bin/nvmf_tgt && -f $1/scripts/rpc.py ]]; }
if [[ -n ${BENCH_AB_BIN:-} ]]; then
  spdk_dir= spdk_src= # an A/B run (tests/lab/ab-2m.sh) compares two builds of ours alone
  notes+=("A/B run: no peer but the previous build.")
elif [[ -n $spdk_src ]]; then
  spdk_dir=${spdk_dir:-/var/cache/nvmeof-tgt-lab/spdk}
  echo "bench: building SPDK from $spdk_src into $spdk_dir (tests/bench/spdk-build.sh)"
  tests/bench/spdk-build.sh "$spdk_src" "$spdk_dir" || { echo "bench: tests/bench/spdk-build.sh $spdk_src $spdk_dir failed" >&2; exit 1; }
fi
if [[ -n $spdk_dir ]]; then
  spdk_dir=$(realpath "$spdk_dir")
  built "$spdk_dir" || { echo "bench: SPDK_DIR=$spdk_dir has no build/bin/nvmf_tgt and scripts/rpc.py: build it with tests/bench/spdk-build.sh, or give SPDK_SRC" >&2; exit 2; }
  # bdev_rbd for the RBD jobs: spdk-build.sh adds it where librbd-dev is installed.
  if ! ldd "$spdk_dir/build/bin/nvmf_tgt" | grep -q librbd; then
    echo "bench: note: $spdk_dir was built without bdev_rbd (no librbd-dev then): SPDK will fail the RBD jobs; rebuild it (make ceph-deps first)" >&2
  fi
elif [[ -z ${BENCH_AB_BIN:-} ]]; then
  skip "peer SPDK nvmf_tgt: neither SPDK_SRC (an SPDK v24.05 source tree, which tests/bench/spdk-build.sh builds) nor SPDK_DIR (a tree it built) was given."
fi
export BENCH_SPDK_DIR=$spdk_dir

# The RBD jobs need the rbd build and the Ceph packages.
rbd=1
if [[ ! -e /usr/include/rbd/librbd.h ]]; then
  skip "the RBD jobs: librbd-dev is not installed (make ceph-deps), so there is no bin/nvmeof-tgt-rbd."
  rbd=0
elif ! command -v ceph-osd >/dev/null; then
  skip "the RBD jobs: the Ceph daemons are not installed (make ceph-deps)."
  rbd=0
else
  [[ -x bin/nvmeof-tgt-rbd ]] || go build -tags rbd -o bin/nvmeof-tgt-rbd ./cmd/nvmeof-tgt
fi
export BENCH_RBD=$rbd BENCH_RUNTIME=${BENCH_RUNTIME:-15} BENCH_RAMP=${BENCH_RAMP:-3}
BENCH_NOTES=$(printf '%s\n' "${notes[@]}")
export BENCH_NOTES

go test -c -tags e2e,netlab,bench -o bin/e2e-net-bench.test ./tests/e2e
go build -o bin/labnet ./tests/netlab/cmd/labnet
rm -rf "$out" && mkdir -p "$out"

inner=$(mktemp "${TMPDIR:-/tmp}/bench-2m-inner.XXXXXX")
trap 'rm -f "$inner"' EXIT
# The host guest starts from a clean environment: carry the benchmark's settings over.
for v in $(compgen -e -X '!BENCH_*'); do printf 'export %s=%q\n' "$v" "${!v}"; done >"$inner"
cat >>"$inner" <<'INNER'
# In the host guest: $1 repo.
set -o pipefail
repo=$1; shift
cd "$repo" || exit 1
export E2E_TARGET=nvmeof-tgt NVMEOF_TGT_BIN=$repo/bin/nvmeof-tgt NVMEOF_TGT_RBD_BIN=$repo/bin/nvmeof-tgt-rbd E2E_RESULTS=$repo/tests/out/net
./bin/e2e-net-bench.test -test.v -test.timeout 230m -test.run '^TestNetBench$' "$@" 2>&1 | tee "$E2E_RESULTS/e2e.log"
INNER

rc=0
# shellcheck disable=SC2086 # LABNET_FLAGS is a list of flags
./bin/labnet boot --labvm "$repo/tests/lab/labvm" --share "$repo" --timeout 240m --console-dir "$out" \
  --guest "target,cpus=1,mem=${BENCH_TARGET_MEM:-6144}" --guest "host,cpus=1,mem=${BENCH_HOST_MEM:-2048}" \
  --link a=target:host --driver host ${LABNET_FLAGS:-} "$inner" "$repo" || rc=$?
raw=$out/bench-raw.json
if [[ ! -s $raw ]]; then
  echo "bench: no results ($raw)" >&2
  exit $((rc ? rc : 1))
fi
go run ./tests/bench/cmd/benchreport -in "$raw" -out bench/results
for n in "${notes[@]}"; do echo "bench: $n" >&2; done
exit "$rc"
