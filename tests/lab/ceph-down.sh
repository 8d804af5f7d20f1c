#!/usr/bin/env bash
# ceph-down.sh: stop the test cluster that tests/lab/ceph-up.sh started.
#
#   tests/lab/ceph-down.sh [--purge]
#
# Stops mgr.x, osd.0 and mon.a (SIGTERM, SIGKILL after CEPH_STOP_TIMEOUT seconds, default 20)
# by the pid files in CEPH_DIR (default /run/ceph-lab). --purge then removes CEPH_DIR and
# CEPH_CONF (default /etc/ceph/ceph.conf) if ceph-up.sh wrote it; without it the logs stay in
# CEPH_DIR/log. Stopping a cluster that is not running is not an error.
set -euo pipefail

prog=ceph-down
dir=${CEPH_DIR:-/run/ceph-lab}
conf=${CEPH_CONF:-/etc/ceph/ceph.conf}
stop_s=${CEPH_STOP_TIMEOUT:-20}
marker="# written by tests/lab/ceph-up.sh"
purge=0
case ${1:-} in
  --purge) purge=1 ;;
  "") ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

# A pid file names one of our daemons only while that process is still a live ceph daemon (a
# zombie has exited).
ours() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ $stat == *"(ceph-"*") "[!Z]* ]]
}

pids=()
for n in mgr.x osd.0 mon.a; do
  f=$dir/run/$n.pid
  [[ -s $f ]] || continue
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" || continue
  kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
done
for pid in "${pids[@]}"; do
  for _ in $(seq $((stop_s * 10))); do ours "$pid" || break; sleep 0.1; done
  if ours "$pid"; then
    echo "$prog: pid $pid ignored SIGTERM for ${stop_s}s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
done
echo "$prog: stopped ${#pids[@]} daemon(s)"

if ((purge)); then
  if [[ -e $conf ]] && head -n1 "$conf" | grep -qxF "$marker"; then rm -f "$conf"; fi
  rm -rf "$dir"
  echo "$prog: removed $dir"
fi
