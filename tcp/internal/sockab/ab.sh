#!/usr/bin/env bash
# The socket-layer A/B of issue 30 (package doc): ROUNDS rounds of BenchmarkSockets from one
# test binary, each round starting from the next variant in turn so that background load
# (another session's guest, say) falls on every variant alike; then the summary.
#
#   tcp/internal/sockab/ab.sh [PREFIX]     (make sockab)
#
# Writes PREFIX-raw.txt (every round's output, with the machine and its load) and
# PREFIX-table.md (summarize's table); PREFIX defaults to bench/results/<date>-tcp-sockets.
# ROUNDS (default 6), BENCHTIME (default 2s) and BENCH (a -test.bench pattern under
# BenchmarkSockets/, default every case) are optional.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${ROUNDS:-6}
BENCHTIME=${BENCHTIME:-2s}
BENCH=${BENCH:-}
prefix=${1:-bench/results/$(date +%F)-tcp-sockets}
GO=${GO:-go}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO test -c -tags sockab -o "$tmp/sockab.test" ./tcp/internal/sockab
variants=(netpoller netpoller-inline uring)

raw=$prefix-raw.txt
{
	echo "# sockab: $(git rev-parse --short HEAD 2>/dev/null || echo no-git), $($GO version), kernel $(uname -r), $(nproc) CPUs"
	echo "# io_uring_disabled=$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo absent), ROUNDS=$ROUNDS BENCHTIME=$BENCHTIME BENCH=$BENCH"
} >"$raw"
for ((i = 0; i < ROUNDS; i++)); do
	first=${variants[i % ${#variants[@]}]}
	echo "# round $((i + 1)) first=$first $(date +%T) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$raw"
	if ! "$tmp/sockab.test" -test.run '^$' -test.bench "BenchmarkSockets/$BENCH" -test.benchtime "$BENCHTIME" \
		-sockab.first "$first" >"$tmp/round.txt" 2>&1; then
		cat "$tmp/round.txt" >&2
		exit 1
	fi
	cat "$tmp/round.txt" >>"$raw"
	grep '^Benchmark' "$tmp/round.txt"
done
echo "# end $(date +%T) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
$GO run ./tcp/internal/sockab/summarize <"$raw" | tee "$prefix-table.md"
