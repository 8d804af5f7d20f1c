#!/usr/bin/env bash
# e2e-all.sh: the one-guest suite (e2e.sh) and the network lab's suite (e2e-net.sh) at once, as
# make test runs them. Neither keeps the machine's CPUs busy alone (the network lab's guests
# wait on links, timers and power cuts much of the time), so side by side they take little more
# than the longer one. Each one's output goes to tests/out-all/{one,net}.log while it runs
# (tail -f them to follow); once both end, both logs are printed, then a summary with each one's
# exit status, time and failed tests. Exit status: 0 when both passed, else the first failure's.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
logs=$repo/tests/out-all
cd "$repo"
rm -rf "$logs" && mkdir -p "$logs"

pids=()
for s in one net; do
  script=tests/lab/e2e.sh
  [[ $s == net ]] && script=tests/lab/e2e-net.sh
  (
    t0=$SECONDS
    "$script" >"$logs/$s.log" 2>&1
    echo "$? $((SECONDS - t0))" >"$logs/$s.status"
  ) &
  pids+=($!)
  echo "e2e-all: $script started (its output: $logs/$s.log)"
done
wait "${pids[@]}"

status=0
for s in one net; do
  echo "=== e2e-all: the $s suite's output"
  cat "$logs/$s.log"
done
echo "=== e2e-all: summary"
for s in one net; do
  read -r rc took <"$logs/$s.status" || { rc=1 took=?; }
  echo "e2e-all: $s suite: exit $rc after ${took}s"
  # A guest that died says why on its console: labvm and labnet print its end, marked.
  grep -E '^(--- FAIL|FAIL|panic:)|^labnet: (timed out|the driver stopped|.* stopped by itself|.* never got ready|[^ ]+ console: )|^labvm: (timed out|the guest stopped|console: )' "$logs/$s.log" |
    sed "s/^/e2e-all: $s: /"
  if [[ $rc -ne 0 && $status -eq 0 ]]; then status=$rc; fi
done
exit "$status"
