#!/usr/bin/env bash
# ceph-up.sh: start a one-node Ceph cluster (1 mon, 1 mgr, 1 memstore OSD) for tests, from
# Debian 12's packages (Ceph 16.2 pacific: ceph-mon ceph-osd ceph-mgr ceph-common). Run as root
# in the lab guest (tests/lab/labvm); tests/lab/ceph-down.sh stops it.
#
#   tests/lab/ceph-up.sh
#
# What it leaves running: the daemons mon.a, mgr.x and osd.0 on CEPH_ADDR with `auth none`, the
# pool "rbd" (size 1, min_size 1, application rbd, `rbd pool init` done), HEALTH_OK. Clients
# (ceph, rbd, rados, librados) find it through CEPH_CONF, which names no keyring: with auth none
# they need none. The OSD keeps every object in its own memory (memstore), so what the tests
# write costs the guest RAM: measured on Debian's 16.2.15, the OSD starts at 31 MiB RSS and grows
# by about twice the data written (256 MiB written sequentially: 550-650 MiB), never shrinking
# (glibc keeps what it freed); mon.a stays near 33 MiB and mgr.x near 147 MiB. CEPH_OSD_BYTES is
# only the capacity the OSD reports, not a limit on its memory.
#
# Environment:
#   CEPH_DIR        fresh or empty directory for data, logs, pid files (default /run/ceph-lab)
#   CEPH_CONF       the configuration written (default /etc/ceph/ceph.conf, which the guest's
#                   tmpfs overlay makes writable; ceph-up.sh never overwrites a file it did not
#                   write)
#   CEPH_ADDR       the address the daemons bind (default 127.0.0.1; the guest's LAB_ADDR works too)
#   CEPH_OSD_BYTES  memstore capacity the OSD reports (default 1073741824: 1 GiB)
#   CEPH_PG_NUM     placement groups of the rbd pool (default 8)
#   CEPH_TIMEOUT    seconds until the cluster must be HEALTH_OK (default 240; a TCG guest is slow)
#
# Health: the configuration turns off the warnings a one-node test cluster raises by design
# (POOL_NO_REDUNDANCY for size 1, the insecure global_id reclaim warnings, MON_DISK_LOW on a
# small tmpfs, the PG autoscaler's advice), so nothing is tolerated by default: HEALTH_OK is
# required. CEPH_TOLERATE names further HEALTH_WARN check codes to accept (space-separated).
#
# Exit status 0 once HEALTH_OK; otherwise 1 with the cluster's health and the tail of every
# daemon's log on stderr, the daemons stopped and CEPH_DIR kept for inspection.
set -euo pipefail

prog=ceph-up
dir=${CEPH_DIR:-/run/ceph-lab}
conf=${CEPH_CONF:-/etc/ceph/ceph.conf}
addr=${CEPH_ADDR:-127.0.0.1}
osd_bytes=${CEPH_OSD_BYTES:-1073741824}
pg_num=${CEPH_PG_NUM:-8}
timeout_s=${CEPH_TIMEOUT:-240}
tolerate=${CEPH_TOLERATE:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
marker="# written by tests/lab/ceph-up.sh"

die() { echo "$prog: $*" >&2; exit 1; }
((EUID == 0)) || die "run as root (in the lab guest)"
for c in ceph ceph-mon ceph-osd ceph-mgr monmaptool rbd; do
  command -v "$c" >/dev/null || die "$c not found: install ceph-mon ceph-osd ceph-mgr ceph-common (make ceph-deps)"
done
[[ $osd_bytes =~ ^[0-9]+$ && $pg_num =~ ^[0-9]+$ && $timeout_s =~ ^[0-9]+$ ]] ||
  die "CEPH_OSD_BYTES, CEPH_PG_NUM and CEPH_TIMEOUT must be numbers"
if [[ -e $dir ]] && [[ -n $(ls -A "$dir" 2>/dev/null) ]]; then
  die "$dir is not empty (stop a running cluster with CEPH_DIR=$dir ceph-down.sh --purge, or set CEPH_DIR)"
fi
if [[ -e $conf ]] && ! head -n1 "$conf" | grep -qxF "$marker"; then
  die "$conf exists and was not written by ceph-up.sh; set CEPH_CONF to another path"
fi

start=$SECONDS
elapsed() { echo $((SECONDS - start)); }
deadline=$((SECONDS + timeout_s))
mkdir -p "$dir"/{mon,osd,mgr,log,run} "$(dirname "$conf")"
exec 3>>"$dir/log/ceph-up.log" # the commands' own output, shown on failure

# Every client call is bounded: a cluster that is not up must not hang the caller.
export CEPH_CONF=$conf
cli() {
  local left=$((deadline - SECONDS))
  ((left > 0)) || return 124
  timeout "$left" "$@" --connect-timeout "$left"
}

fail() {
  echo "$prog: $* (after $(elapsed)s)" >&2
  {
    if mon_pid=$(cat "$dir/run/mon.a.pid" 2>/dev/null) && kill -0 "$mon_pid" 2>/dev/null; then
      echo "---- ceph health detail"
      timeout 15 ceph --connect-timeout 10 health detail 2>&1 || echo "(no answer from the mon)"
      echo "---- ceph -s"
      timeout 15 ceph --connect-timeout 10 -s 2>&1 || true
    fi
    for f in "$dir"/log/*.log "$dir"/log/*.out; do
      [[ -s $f ]] || continue
      # Ceph logs errors at level -1; ceph-up.log ends in one-line JSON status reports.
      if [[ $f != */ceph-up.log ]] && grep -q ' -1 ' "$f"; then
        echo "---- errors in $f"
        grep ' -1 ' "$f" | tail -n 15
      fi
      echo "---- tail $f"
      if [[ $f == */ceph-up.log ]]; then tail -n 5 "$f"; else tail -n 25 "$f"; fi
    done
  } >&2
  CEPH_DIR=$dir "$here/ceph-down.sh" >&2 || true
  echo "$prog: daemons stopped; logs kept in $dir/log" >&2
  exit 1
}

# start_daemon NAME CMD...: the daemon forks once it has initialised; what it says before goes
# to log/NAME.out.
start_daemon() {
  local name=$1; shift
  "$@" -c "$conf" >"$dir/log/$name.out" 2>&1 || fail "$name did not start (exit $?)"
}

fsid=$(cat /proc/sys/kernel/random/uuid)
mon_addrs="[v2:$addr:3300,v1:$addr:6789]"

# ---- configuration -------------------------------------------------------------------------------
cat >"$conf" <<EOF
$marker
# A one-node test cluster (CEPH_DIR=$dir); tests/lab/ceph-down.sh --purge removes this file.
[global]
fsid = $fsid
mon host = $mon_addrs
public addr = $addr
auth cluster required = none
auth service required = none
auth client required = none
run dir = $dir/run
admin socket = \$run_dir/\$name.asok
pid file = \$run_dir/\$name.pid
mon cluster log file = $dir/log/cluster.log
# One OSD on one host: place replicas on OSDs, one copy.
osd crush chooseleaf type = 0
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
# Warnings a one-node cluster raises by design.
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
mon data avail crit = 0
# The mgr loads every module in its module path, each in its own Python interpreter, compiling
# the sources anew (ceph-mgr writes no bytecode): Debian's 27 took 4 minutes in a TCG guest.
# Its path holds a compiled copy of the always-on ones only (leaving one of those out is
# HEALTH_ERR MGR_MODULE_ERROR).
mgr module path = $dir/mgr-modules
mgr initial modules =
# PG states reach the mgr and the mon's health each second rather than each 5 s.
mgr stats period = 1
mon mgr digest period = 1

[client]
# Clients (ceph, rbd, librados in the target) log nowhere and keep no admin socket.
log file = /dev/null
admin socket =

[mon]
mon data = $dir/mon
log file = $dir/log/\$name.log

[mgr]
mgr data = $dir/mgr
log file = $dir/log/\$name.log

[osd]
osd data = $dir/osd
log file = $dir/log/\$name.log
osd objectstore = memstore
memstore device bytes = $osd_bytes
# Data in 4 KiB pages: the default keeps each write's buffer, and 32 MiB of 4 KiB random writes
# then cost the OSD 410 MiB instead of 130 MiB.
memstore page set = true
memstore page size = 4096
EOF

# Each `ceph` command is a Python program that fetches the mon's command table first: about 0.4 s
# here, several seconds in a TCG guest. So there are few of them, and the daemons start without
# waiting for one another; the final health check covers them all.

# ---- mon.a ---------------------------------------------------------------------------------------
monmaptool --create --fsid "$fsid" --addv a "$mon_addrs" "$dir/monmap" >&3 2>&1 || fail "monmaptool failed"
# auth none: no keys, but the mon wants a keyring file in its data directory.
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring /dev/null >&3 2>&1 ||
  fail "ceph-mon --mkfs failed"
[[ -d $dir/mon/store.db ]] || fail "ceph-mon --mkfs made no store"
: >"$dir/mon/keyring"
start_daemon mon.a ceph-mon -i a

# ---- osd.0 ---------------------------------------------------------------------------------------
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
osd_id=$(cli ceph osd new "$osd_uuid" 2>&3) || fail "ceph osd new failed (is mon.a up?)"
[[ $osd_id == 0 ]] || fail "ceph osd new gave id '$osd_id', want 0"
echo "$prog: mon.a up after $(elapsed)s"
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >&3 2>&1 || fail "ceph-osd --mkfs failed"
start_daemon osd.0 ceph-osd -i 0

# ---- mgr.x ---------------------------------------------------------------------------------------
# The always-on modules of pacific (16.x), and the helpers they import; another release's are asked
# of the mon (one more `ceph` command).
sys_modules=/usr/share/ceph/mgr
if [[ $(ceph-mgr --version) == "ceph version 16."* ]]; then
  always_on="balancer crash devicehealth orchestrator pg_autoscaler progress rbd_support status telemetry volumes"
else
  always_on=$(cli ceph mgr module ls --format json 2>&3 |
    sed -n 's/.*"always_on_modules":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' ' ')
  [[ -n $always_on ]] || fail "the mon named no always-on mgr modules"
fi
mkdir -p "$dir/mgr-modules"
for m in $always_on mgr_module.py mgr_util.py; do
  [[ -e $sys_modules/$m ]] || fail "mgr module $sys_modules/$m is missing"
  cp -r "$sys_modules/$m" "$dir/mgr-modules/"
done
# The interpreter ceph-mgr embeds is Debian's python3; compiled once here, read by every module.
/usr/bin/python3 -m compileall -q "$dir/mgr-modules" >&3 2>&1 || fail "compiling the mgr modules failed"
start_daemon mgr.x ceph-mgr -i x
echo "$prog: daemons started after $(elapsed)s"

# ---- pool rbd ------------------------------------------------------------------------------------
# Size 1 and min_size 1 are the configuration's defaults; `rbd pool init` enables application rbd
# and writes the pool's first objects, so it returns once osd.0 serves the pool.
cli ceph osd pool create rbd "$pg_num" "$pg_num" replicated >&3 2>&1 || fail "ceph osd pool create rbd failed"
timeout $((deadline - SECONDS)) rbd pool init rbd >&3 2>&1 || fail "rbd pool init failed (is osd.0 up?)"
echo "$prog: pool rbd ready after $(elapsed)s"

# ---- health ----------------------------------------------------------------------------------
# ready: mgr.x active, osd.0 up, every PG active+clean, and HEALTH_OK or a HEALTH_WARN whose every
# check is in CEPH_TOLERATE. HEALTH_OK alone is not enough: the mon reports a missing mgr only
# after a grace period (mon_mgr_mkfs_grace, 120 s), and PG states come from the mgr.
status= health= waiting_for="the mon to answer"
ready() {
  local codes c states
  status=$(cli ceph status --format json 2>&3) || return 1
  echo "$status" >>"$dir/log/ceph-up.log"
  health=$(sed -n 's/.*"health":{"status":"\(HEALTH_[A-Z]*\)".*/\1/p' <<<"$status")
  waiting_for="mgr.x to become active"
  [[ $status == *'"mgrmap":{"available":true'* ]] || return 1
  waiting_for="osd.0 to come up"
  [[ $status == *'"num_up_osds":1,'* ]] || return 1
  waiting_for="every PG to be active+clean"
  states=$(grep -o '"state_name":"[^"]*"' <<<"$status" | sort -u)
  [[ $states == '"state_name":"active+clean"' ]] || return 1
  waiting_for="HEALTH_OK (not $health)"
  [[ $health == HEALTH_OK ]] && return 0
  [[ $health == HEALTH_WARN && -n $tolerate ]] || return 1
  codes=$(grep -o '"[A-Z_0-9]*":{"severity":"HEALTH_[A-Z]*"' <<<"$status" | cut -d'"' -f2)
  for c in $codes; do
    [[ " $tolerate " == *" $c "* ]] || return 1
  done
}
until ready; do
  ((SECONDS < deadline)) || fail "timed out (CEPH_TIMEOUT=${timeout_s}s) waiting for $waiting_for"
  sleep 1
done
echo "$prog: $health after $(elapsed)s"

# RSS of each daemon, for sizing the guest.
for n in mon.a mgr.x osd.0; do
  pid=$(cat "$dir/run/$n.pid" 2>/dev/null) || continue
  printf '%s: pid %s, %s MiB RSS\n' "$n" "$pid" \
    "$(($(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0) / 1024))"
done | sed "s/^/$prog: /"
