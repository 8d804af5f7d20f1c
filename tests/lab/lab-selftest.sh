#!/usr/bin/env bash
# lab-selftest.sh: the labs' own test. A guest whose kernel dies at boot, before anything of the
# caller's has run in it, is booted once more (labvm, and labnet for each guest); a guest that
# dies after that is reported, with the end of its console, and never run again. The broken
# boots come from NVMEOF_LAB_BREAK_BOOTS (an init that does not exist: the kernel panics).
# Each case's output goes to tests/out-selftest/CASE.log. Exit status 0 when every case behaved.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$repo/tests/out-selftest
cd "$repo"
export PATH=$PATH:/usr/local/go/bin
go build -o bin/labnet ./tests/netlab/cmd/labnet || exit 1
rm -rf "$out" && mkdir -p "$out"
# Where the guests count their scripts' runs: a share, so that the host sees what they did.
runs=$(mktemp -d "${TMPDIR:-/tmp}/lab-selftest.XXXXXX")
trap 'rm -rf "$runs"' EXIT
# A script's background jobs ignore SIGINT: on the way out, TERM each case's labvm or labnet
# (a subshell's child), which stop their guests.
pids=()
trap 'for p in "${pids[@]}"; do pkill -TERM -P "$p"; done; exit 130' INT TERM HUP

script() { # NAME BODY: a guest script that records each run, then does BODY
  printf '#!/bin/bash\necho run >>%q\n%s\n' "$runs/$1.runs" "$2" >"$runs/$1.sh"
  echo "$runs/$1.sh"
}

# CASE WANT-RC BREAK-BOOTS labvm|labnet SCRIPT-BODY: run it in the background.
names=()
start() {
  local name=$1 want=$2 brk=$3 lab=$4 s
  s=$(script "$name" "$5")
  (
    if [[ $lab == labvm ]]; then
      NVMEOF_LAB_BREAK_BOOTS=$brk tests/lab/labvm --cpus 1 --mem 1024 --timeout 300 --share "$runs" "$s"
    else
      NVMEOF_LAB_BREAK_BOOTS=$brk ./bin/labnet boot --labvm tests/lab/labvm --share "$runs" --share "$repo" \
        --timeout 5m --console-dir "$out/$name-console" --cpus 1 --mem 1024 \
        --guest a --guest b --link x=a:b --driver b "$s"
    fi
    echo $? >"$out/$name.rc"
  ) >"$out/$name.log" 2>&1 &
  pids+=($!) names+=("$name:$want")
}

# labvm: the first boot dies and the second runs the script.
start retried 7 1 labvm 'exit 7'
# labvm: both boots die: reported, and the script never ran.
start twice 1 2 labvm 'exit 7'
# labvm: the guest dies after the script started (a power-off from inside): reported, not rerun.
start late 1 0 labvm 'echo o >/proc/sysrq-trigger; sleep 60'
# labnet: both guests' first boots die; the driver then reaches the agent, which powers itself
# off once ready: reported, and not booted again. The driver runs bin/labnet from the repo,
# shared (--share above): the repo may be under /tmp, and the guest's /tmp is its own.
start net 7 1 labnet "$repo/bin/labnet exec a true || exit 3
# In the background: its answer never comes.
$repo/bin/labnet exec a sh -c 'echo o >/proc/sysrq-trigger' >/dev/null 2>&1 &
sleep 20
exit 7"
wait "${pids[@]}"

fail=0
check() { # CASE WHAT COND...
  local c=$1 what=$2; shift 2
  if "$@"; then echo "lab-selftest: $c: $what: ok"; else echo "lab-selftest: $c: $what: FAILED"; fail=1; fi
}
count() { grep -c -- "$2" "$out/$1.log"; }
runs_of() { [[ -f $runs/$1.runs ]] && wc -l <"$runs/$1.runs" || echo 0; }

for nw in "${names[@]}"; do
  n=${nw%%:*} want=${nw#*:}
  rc=$(cat "$out/$n.rc" 2>/dev/null || echo none)
  check "$n" "exit status $want (got $rc)" test "$rc" = "$want"
done
check retried "one boot again" test "$(count retried 'booting it again')" = 1
check retried "the dead boot's console shown" grep -q '^labvm: boot console: .*Kernel panic' "$out/retried.log"
check retried "not marked as a failure" test "$(count retried '^labvm: console: ')" = 0
check retried "the script ran once" test "$(runs_of retried)" = 1
check twice "one boot again, then reported" test "$(count twice 'booting it again')" = 1
check twice "reported" grep -q 'the guest stopped before SCRIPT finished' "$out/twice.log"
check twice "its console marked as a failure" grep -q '^labvm: console: .*Kernel panic' "$out/twice.log"
check twice "the script never ran" test "$(runs_of twice)" = 0
check late "reported" grep -q 'the guest stopped before SCRIPT finished' "$out/late.log"
check late "the script ran once" test "$(runs_of late)" = 1
check net "each guest booted again once" test "$(count net '^labnet: [ab]: booting it again')" = 2
check net "the dead boot's console shown" grep -q '^labnet: [ab] boot console: .*Kernel panic' "$out/net.log"
check net "the agent's power-off reported" grep -q 'labnet: a stopped by itself' "$out/net.log"
check net "the agent not booted again after that" test "$(count net 'labnet: a: booting it again')" = 1
check net "the script ran once" test "$(runs_of net)" = 1
if ((fail)); then
  for nw in "${names[@]}"; do echo "=== lab-selftest: ${nw%%:*}"; cat "$out/${nw%%:*}.log"; done
  echo "lab-selftest: FAILED"
  exit 1
fi
echo "lab-selftest: ok"
