#!/usr/bin/env bash
# e2e-net.sh: build the end-to-end test binary with the network lab's tests (build tags
# e2e,netlab) and run its TestNet tests in the network lab (tests/netlab/cmd/labnet).
#
#   tests/lab/e2e-net.sh [TEST-BINARY-FLAGS...]      e.g. -test.run '^TestNetSmoke$'
#
# The lab: guests "target" and "host", 1 vCPU each, joined by links a and b (10.10.1.0/24 and
# 10.10.2.0/24), and a third guest "target2", off until a test boots it, joined to the host by
# link c and to the target by link d. The test binary runs in the host guest; the others are
# reached through their agents. README.md, "Testing", has the picture.
# NET_CPUS and NET_MEM set each guest's vCPUs and MiB (default 1 and 2048); LABNET_FLAGS adds
# flags to labnet boot. Reports go to tests/out/net/ (emptied first), with each guest's raw
# console log (console-GUEST.log). Exit status: the test binary's (124 on timeout).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$repo/tests/out/net
export PATH=$PATH:/usr/local/go/bin

cd "$repo"
[[ -x bin/nvmeof-tgt ]] || { echo "e2e-net.sh: bin/nvmeof-tgt is missing (make build)" >&2; exit 1; }
go test -c -tags e2e,netlab -o bin/e2e-net.test ./tests/e2e
go build -o bin/labnet ./tests/netlab/cmd/labnet
rm -rf "$out" && mkdir -p "$out"

inner=$(mktemp "${TMPDIR:-/tmp}/e2e-net-inner.XXXXXX")
trap 'rm -f "$inner"' EXIT
cat >"$inner" <<'INNER'
# In the host guest: $1 repo, then flags for the test binary.
set -o pipefail
repo=$1; shift
cd "$repo" || exit 1
export E2E_TARGET=nvmeof-tgt NVMEOF_TGT_BIN=$repo/bin/nvmeof-tgt NVMEOF_TGT_RBD_BIN=$repo/bin/nvmeof-tgt-rbd E2E_RESULTS=$repo/tests/out/net
# Only the TestNet tests know this lab: a -test.run of the caller's must begin with ^TestNet too.
./bin/e2e-net.test -test.v -test.timeout 40m -test.run '^TestNet' "$@" 2>&1 | tee "$E2E_RESULTS/e2e.log"
INNER

rc=0
# shellcheck disable=SC2086 # LABNET_FLAGS is a list of flags
./bin/labnet boot --labvm "$repo/tests/lab/labvm" --share "$repo" --timeout 45m --console-dir "$out" \
  --cpus "${NET_CPUS:-1}" --mem "${NET_MEM:-2048}" \
  --guest target --guest host --guest target2,off \
  --link a=target:host --link b=target:host --link c=target2:host --link d=target2:target \
  --driver host ${LABNET_FLAGS:-} "$inner" "$repo" "$@" || rc=$?
exit "$rc"
