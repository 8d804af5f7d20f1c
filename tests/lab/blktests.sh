#!/usr/bin/env bash
# blktests.sh (make blktests): run blktests' NVMe-oF tests in the lab guest against bin/nvmeof-tgt
# over Soft-RoCE or NVMe/TCP, as a remote target (blktests' NVME_TARGET_CONTROL, here
# tests/lab/blktests-target), and write what blktests found to tests/out/blktests/.
#
#   BLKTESTS_DIR=/path/to/blktests [BLKTESTS_TESTS='nvme/054 ...'] [BLKTESTS_TRTYPE=tcp] tests/lab/blktests.sh
#
# blktests is not packaged for Debian 12 and is not vendored here: BLKTESTS_DIR is a checkout of
# https://github.com/linux-blktests/blktests (README.md, "blktests"). Nothing in it is built: the
# nvme tests need no helper program from its src/.
#
# In the guest: nvmeof-tgt serves only a placeholder subsystem (a target keeps at least one) on
# LAB_ADDR:4419; blktests-target adds each test's subsystem and the port blktests connects to
# (LAB_ADDR:4420) and removes them again. blktests runs with NVMET_TRTYPES=BLKTESTS_TRTYPE (rdma,
# the default, with USE_RXE=1: the guest's rxe0 on lab0; or tcp, the target's ports then tcp
# too) and NVME_IMG_SIZE=BLKTESTS_IMG_SIZE (default 64M). Namespaces are files on
# the guest's scratch disk with BLKTESTS_BLOCK_SIZE-byte blocks (default 512, as blktests' own
# default namespace, a loop device, has: nvme/029 moves 511 blocks in one command, which at 4 KiB
# is past the Linux RDMA host's 1 MiB; 4096 makes fio's I/O, sized by the block, 8 times fewer).
# nvme/012 needs NVME_IMG_SIZE >= 350M: BLKTESTS_IMG_SIZE=350M BLKTESTS_BLOCK_SIZE=4096
# BLKTESTS_TESTS=nvme/012 runs it in a few minutes.
#
# The nvmet shim: blktests runs in a private mount namespace (unshare -m) where a read-only tmpfs
# covers /sys/kernel/config/nvmet. nvme/054 tests reservations only if
# /sys/kernel/config/nvmet/subsystems/<nqn>/namespaces/<k>/resv_enable exists locally (<k>: the
# second number of the host's block device name, nvmeXnK, 1 for the one namespace of a fresh
# subsystem); the guest's 6.12 nvmet has no such attribute, so 054 would always skip. With
# BLKTESTS_NVMET_SHIM set, blktests-target's setup writes that one file for the subsystem it
# created (it serves reservations) and its cleanup removes it. Outside that namespace nothing
# changes, and the kernel's configfs is never written: the only other reader under that path in
# the tests that can run against a remote target is _nvme_ns_ready, which then waits for the
# namespace's block device as it does with the kernel target. A test that writes nvmet's configfs
# itself (nvme/051, the ANA and authentication-key ones) gets "Read-only file system", a failure,
# as it fails without the shim.
#
# tests/out/blktests/: check.log (blktests' output), results/ (its results directory),
# summary.tsv and summary.txt (one line per test run: pass, fail or skip, with the reason),
# target.log and target-control.log (the target's log and each call of blktests-target), and
# console.log. Exit status: 1 if a test failed, a selected test has no result, nvme/054 was
# selected and did not pass (a skip is not a pass), or the target did not stop cleanly; else 0.
# LABVM_FLAGS adds flags to labvm.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$repo/tests/out/blktests
# The fabrics tests that run against a remote target over RDMA (README.md, "blktests").
default_tests="nvme/003 nvme/004 nvme/005 nvme/006 nvme/008 nvme/010 nvme/014 nvme/018 nvme/019
  nvme/021 nvme/022 nvme/023 nvme/025 nvme/026 nvme/027 nvme/028 nvme/029 nvme/040 nvme/041
  nvme/054 nvme/061"

die() { echo "blktests: $*" >&2; exit 2; }

[[ -n ${BLKTESTS_DIR:-} ]] || die "set BLKTESTS_DIR to a blktests checkout (README.md, \"blktests\")"
dir=$(realpath "$BLKTESTS_DIR")
[[ -x $dir/check && -f $dir/tests/nvme/rc && -f $dir/tests/nvme/054 ]] ||
  die "$dir: not a blktests tree (no check, tests/nvme/rc or tests/nvme/054)"
[[ $dir != *[[:space:]]* && $repo != *[[:space:]]* ]] ||
  die "paths with spaces: blktests runs NVME_TARGET_CONTROL unquoted"
[[ -x $repo/bin/nvmeof-tgt ]] || die "build first (make build)"
read -r -d '' -a tests <<<"${BLKTESTS_TESTS:-$default_tests}" || true
((${#tests[@]})) || die "BLKTESTS_TESTS is empty"
for t in "${tests[@]}"; do
  [[ $t =~ ^[a-z]+(/[0-9]{3})?$ && -e $dir/tests/$t ]] || die "BLKTESTS_TESTS: no test or group $t in $dir"
done
img=${BLKTESTS_IMG_SIZE:-64M}
[[ $img =~ ^[0-9]+[KMG]?$ ]] || die "BLKTESTS_IMG_SIZE=$img: want a size such as 64M or 1G"
bs=${BLKTESTS_BLOCK_SIZE:-512}
[[ $bs == 512 || $bs == 4096 ]] || die "BLKTESTS_BLOCK_SIZE=$bs: want 512 or 4096"
trtype=${BLKTESTS_TRTYPE:-rdma}
[[ $trtype == rdma || $trtype == tcp ]] || die "BLKTESTS_TRTYPE=$trtype: want rdma or tcp"

rm -rf "$out" && mkdir -p "$out"
inner=$(mktemp "${TMPDIR:-/tmp}/blktests-inner.XXXXXX")
trap 'rm -f "$inner"' EXIT
cat >"$inner" <<'INNER'
# In the guest: $1 repo, $2 blktests, $3 out dir, $4 image size, $5 block size, $6 the lab's kernel
# cache, $7 the transport, then the tests.
set -uo pipefail
repo=$1 dir=$2 out=$3 img=$4 bs=$5 cache=$6 trtype=$7
shift 7

# blktests asks /boot/config-$(uname -r) which options the kernel has (_have_kernel_option); the
# guest's / is the host's, without it. Take it from the guest kernel's own package.
kver=$(uname -r)
if [[ ! -e /boot/config-$kver ]]; then
  deb=$(find "$cache/debs" -maxdepth 1 -name "linux-image-${kver}_*.deb" 2>/dev/null | sort -V | tail -n1)
  if [[ -n $deb ]]; then
    mkdir -p /boot && dpkg-deb --fsys-tarfile "$deb" | tar -x -C / "./boot/config-$kver" ||
      echo "blktests: could not take /boot/config-$kver from $deb"
  else
    echo "blktests: no kernel package in $cache/debs: tests that need kernel options will skip"
  fi
fi

run=/run/nvmeof-tgt-blktests
mkdir -p "$run"
anchor=nqn.2026-11.io.nvmeof-tgt:blktests-anchor
cat >"$run/config.yaml" <<YAML
ports:
  - {id: 1, transport: $trtype, address: $LAB_ADDR, port: 4419}
subsystems:
  # The placeholder: a target keeps at least one subsystem. No blktests host may use it.
  - nqn: $anchor
    hosts: [nqn.2026-11.io.nvmeof-tgt:blktests-nobody]
    ports: [1]
api:
  socket: $run/api.sock
state_dir: $run/state
YAML
"$repo/bin/nvmeof-tgt" serve --config "$run/config.yaml" >"$out/target.log" 2>&1 &
tgt=$!
for _ in $(seq 60); do
  grep -q "target ready" "$out/target.log" && break
  kill -0 "$tgt" 2>/dev/null || break
  sleep 1
done
if ! grep -q "target ready" "$out/target.log"; then
  echo "blktests: nvmeof-tgt did not start:"
  cat "$out/target.log"
  exit 1
fi

cat >"$out/config" <<CONFIG
NVMET_TRTYPES=$trtype
$([[ $trtype == rdma ]] && echo USE_RXE=1)
NVME_TARGET_CONTROL=$repo/tests/lab/blktests-target
NVME_IMG_SIZE=$img
TEST_DEVS=()
CONFIG
export NVMEOF_TGT_BIN=$repo/bin/nvmeof-tgt BLKTESTS_TGT_SOCKET=$run/api.sock
export BLKTESTS_TGT_ADDR=$LAB_ADDR BLKTESTS_TGT_TRSVCID=4420 BLKTESTS_TGT_PORT_ID=2 BLKTESTS_TGT_TRANSPORT=$trtype
export BLKTESTS_TGT_DIR=$LAB_SCRATCH/blktests-ns BLKTESTS_TGT_SIZE=$img BLKTESTS_TGT_BLOCK_SIZE=$bs
export BLKTESTS_TGT_LOG=$out/target-control.log
shim=/sys/kernel/config/nvmet
[[ -d $shim ]] || { echo "blktests: $shim missing: is nvmet loaded?"; exit 1; }
echo "blktests: $(git -C "$dir" describe --always --dirty 2>/dev/null || echo "blktests in $dir"), $trtype, NVME_IMG_SIZE=$img, $bs-byte blocks, tests: $*" |
  tee "$out/run.txt"

cd "$dir" || exit 1
# The shim (tests/lab/blktests.sh's header): mounted in this namespace only.
BLKTESTS_NVMET_SHIM=$shim unshare --mount --propagation private -- bash -c '
  mount -t tmpfs -o ro,mode=0755,size=1m blktests-nvmet-shim "$BLKTESTS_NVMET_SHIM" || exit 1
  exec ./check -c "$0" -o "$1" "${@:2}"' "$out/config" "$out/results" "$@" 2>&1 | tee "$out/check.log"
rc=${PIPESTATUS[0]}
echo "blktests: check exited $rc"

# Outside the namespace the kernel's nvmet must be as it was: no shim, nothing configured.
if findmnt -rn -M "$shim" >/dev/null || find "$shim/subsystems" "$shim/ports" "$shim/hosts" -mindepth 1 | grep -q .; then
  echo "blktests: the kernel's nvmet was touched:"; findmnt -M "$shim"; ls -R "$shim"
  : >"$out/nvmet-touched"
fi

kill -TERM "$tgt"
trc=0
wait "$tgt" || trc=$?
echo "$trc" >"$out/target.exit"
echo "blktests: nvmeof-tgt exited $trc"
exit "$rc"
INNER

rc=0
# shellcheck disable=SC2086 # LABVM_FLAGS is a list of flags
"$repo/tests/lab/labvm" --share "$repo" --timeout "${BLKTESTS_TIMEOUT:-3600}" --console "$out/console.log" \
  ${LABVM_FLAGS:-} "$inner" "$repo" "$dir" "$out" "$img" "$bs" "${NVMEOF_LAB_CACHE:-/var/cache/nvmeof-tgt-lab}" \
  "$trtype" "${tests[@]}" || rc=$?
echo "blktests: the guest exited $rc"

# ---- summary -------------------------------------------------------------------------------
# blktests writes results/<dev or nodev>_<condition>/<group>/<test>: "key<TAB>value" lines, status
# "pass", "fail" or "not run" (reported here as skip). Skip reasons are only in its output.
res=$out/results
: >"$out/summary.tsv"
if [[ -d $res ]]; then
  while IFS= read -r f; do
    rel=${f#"$res"/}
    cond=${rel%%/*}
    cond=${cond#nodev_}
    name=${rel#*/}
    status=$(awk -F'\t' '$1 == "status" {print $2}' "$f")
    reason=$(awk -F'\t' '$1 == "reason" {print $2}' "$f")
    runtime=$(awk -F'\t' '$1 == "runtime" {print $2}' "$f")
    case $status in
      pass) ;;
      fail) [[ $reason == output && -f $f.out.bad ]] && reason="output differs: diff -u $dir/tests/$name.out $f.out.bad" ;;
      "not run")
        status=skip
        # The indented lines after "<name> (...) [not run]" that are not a "key old ... new" row.
        reason=$(awk -v n="$name" '
          index($0, n " ") == 1 && /\[not run\]$/ {on = 1; next}
          on && /^    / && !/\.\.\./ {sub(/^ +/, ""); r = r (r ? "; " : "") $0; next}
          on && !/^    / {on = 0}
          END {print r}' "$out/check.log")
        ;;
      *) status=fail reason="blktests wrote status \"$status\"" ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$cond" "$status" "${runtime:--}" "${reason:--}" >>"$out/summary.tsv"
  done < <(find "$res" -mindepth 3 -type f ! -name '*.*')
fi

fail=0
for t in "${tests[@]}"; do
  [[ $t == */* ]] || continue # a group: whatever it ran is in the summary
  grep -q "^$t	" "$out/summary.tsv" && continue
  why=$({ grep -A3 -F "$t" "$out/check.log" || true; } | head -n4 | tr '\n' ' ')
  printf '%s\t-\tfail\t-\tno result from blktests%s\n' "$t" "${why:+: $why}" >>"$out/summary.tsv"
done
if awk -F'\t' '$3 == "fail" {found = 1} END {exit !found}' "$out/summary.tsv"; then fail=1; fi
if [[ " ${tests[*]} " == *" nvme/054 "* || " ${tests[*]} " == *" nvme "* ]]; then
  if ! awk -F'\t' '$1 == "nvme/054" && $3 == "pass" {p = 1} $1 == "nvme/054" && $3 != "pass" {q = 1}
      END {exit !(p && !q)}' "$out/summary.tsv"; then
    echo "blktests: nvme/054 (reservations) did not pass" >&2
    fail=1
  fi
fi
# target.exit is written last: without it the guest stopped early (labvm's 1, 124 or 125).
trc=$(cat "$out/target.exit" 2>/dev/null || echo "none: the guest stopped first (exit $rc)")
if [[ $trc != 0 ]]; then
  echo "blktests: nvmeof-tgt did not stop cleanly (exit $trc; tests/out/blktests/target.log)" >&2
  fail=1
fi
if [[ -e $out/nvmet-touched ]]; then
  echo "blktests: the kernel's nvmet configfs was changed (console.log)" >&2
  fail=1
fi

{
  printf '%-10s %-16s %-6s %-10s %s\n' TEST CONDITION RESULT RUNTIME REASON
  sort "$out/summary.tsv" | awk -F'\t' '{printf "%-10s %-16s %-6s %-10s %s\n", $1, $2, $3, $4, $5}'
  awk -F'\t' '{n[$3]++} END {printf "\n%d passed, %d failed, %d skipped\n", n["pass"], n["fail"], n["skip"]}' "$out/summary.tsv"
} | tee "$out/summary.txt"
echo "blktests: results in tests/out/blktests (summary.txt, check.log, results/)"
((fail)) && exit 1
exit 0
