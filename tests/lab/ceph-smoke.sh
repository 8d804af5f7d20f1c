#!/usr/bin/env bash
# ceph-smoke.sh: prove the one-node test cluster works, in the lab guest:
#
#   tests/lab/labvm --share "$PWD" --mem 3072 tests/lab/ceph-smoke.sh "$PWD" [PROGRAM [ARGS...]]
#   (make ceph-smoke)
#
# $1 is the repository (labvm runs a copy of this file, so it cannot find its neighbours). It
# starts the cluster with ceph-up.sh, then: an image created, written and read by `rbd bench`,
# grown and shrunk; a client address blocklisted and un-blocklisted (gateway failover fences a
# dead gateway's client so); PROGRAM, if given, run against the cluster with its ARGS (e.g. a
# librados/librbd client built on the host); the image removed and the cluster stopped with
# ceph-down.sh --purge. Prints the time to HEALTH_OK and the daemons' memory. Exit status 0 when
# every step passed.
set -euo pipefail

repo=${1:?usage: ceph-smoke.sh REPO [PROGRAM [ARGS...]]}
shift
lab=$repo/tests/lab
prog=ceph-smoke
export CEPH_DIR=${CEPH_DIR:-/run/ceph-lab}
step() { echo "== $prog: $*"; }
die() { echo "$prog: FAIL: $*" >&2; exit 1; }

rss() {
  local n pid
  for n in mon.a mgr.x osd.0; do
    pid=$(cat "$CEPH_DIR/run/$n.pid")
    printf '%s %s MiB  ' "$n" $(($(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status") / 1024))
  done
  echo "(guest: $(free -m | awk '/^Mem:/ {print $3 " MiB used, " $7 " MiB available"}'))"
}

step "ceph-up.sh"
t0=$SECONDS
"$lab/ceph-up.sh"
echo "$prog: cluster up in $((SECONDS - t0))s"
trap '"$lab/ceph-down.sh" --purge >/dev/null 2>&1 || true' EXIT
ceph -s
detail=$(ceph osd pool ls detail)
echo "$detail"
[[ $detail == *"'rbd' replicated size 1 min_size 1 "*"application rbd"* ]] || die "pool rbd is not size 1, min_size 1, application rbd"

step "rbd create, bench, resize"
rbd create rbd/img --size 64M
rbd info rbd/img
rbd bench --io-type write --io-size 4K --io-total 16M --io-pattern rand rbd/img | tail -n 2
rbd bench --io-type read --io-size 4K --io-total 16M --io-pattern rand rbd/img | tail -n 2
rbd resize --no-progress rbd/img --size 128M
[[ $(rbd info rbd/img --format json) == *'"size":134217728,'* ]] || die "resize to 128M not seen"
rbd resize --no-progress rbd/img --size 32M --allow-shrink
[[ $(rbd info rbd/img --format json) == *'"size":33554432,'* ]] || die "shrink to 32M not seen"
echo "memory after bench: $(rss)"

step "ceph osd blocklist"
# A client address (addr:port/nonce) as a gateway's librados instance has one.
victim=127.0.0.1:0/3141592653
ceph osd blocklist add "$victim" 600
ceph osd blocklist ls 2>&1 | grep -F "$victim" || die "$victim not in ceph osd blocklist ls"
ceph osd blocklist rm "$victim"
if ceph osd blocklist ls 2>&1 | grep -qF "$victim"; then die "$victim still blocklisted after rm"; fi

if (($#)); then
  step "$*"
  "$@"
fi

step "rbd rm, ceph-down.sh"
rbd rm --no-progress rbd/img
[[ -z $(rbd ls rbd) ]] || die "rbd ls not empty after rbd rm"
"$lab/ceph-down.sh" --purge
trap - EXIT
for d in ceph-mon ceph-osd ceph-mgr; do
  if pgrep -x "$d" >/dev/null; then die "$d survived ceph-down.sh"; fi
done
echo "$prog: PASS"
