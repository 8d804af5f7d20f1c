#!/usr/bin/env bash
# Runs every fuzz target in the tree, one after the other, each to a number
# of executions. `go test -list` finds the targets, so a new one is fuzzed
# without editing a list.
#
#   tests/fuzz/run.sh [EXECS] [RESULTS]
#
# EXECS (default 200000) is per target, at least: Go may run a few more. With RESULTS, a table of what each
# target did (executions, time, new interesting inputs) is written there,
# with the Go version, commit and date; `make fuzz-long` writes
# tests/fuzz/results.txt this way. FUZZ_PARALLEL sets the workers (default
# 1), FUZZ_MINIMIZE the time to minimize an input (default 10s).
# FUZZ_ONLY, an extended regexp matched against "package:Target", runs only
# the targets it matches; with RESULTS, their table is then appended to the
# file (a full run replaces it):
#
#   FUZZ_ONLY='/tcp:|:FuzzTCP' nice -n 19 tests/fuzz/run.sh 10000000 tests/fuzz/results.txt
#
# Counts, not -fuzztime durations: a duration races the fuzz coordinator's
# deadline and can fail a clean run with "context deadline exceeded" (Go
# issue 75804, fixed in Go 1.27), and a count is what the results promise.
# Every target runs even when one fails; the exit status is then 1 and Go
# has written the failing input under the package's testdata/fuzz.
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
execs=${1:-200000}
results=${2:-}
parallel=${FUZZ_PARALLEL:-1}
# Go minimizes each new interesting input for up to a minute, executions
# the count leaves out; on a slow target that is most of the time.
minimize=${FUZZ_MINIMIZE:-10s}

targets=$($GO test -list '^Fuzz' ./... | awk '/^Fuzz/ { f[n++] = $1 } /^ok/ { for (i = 0; i < n; i++) print $2 ":" f[i]; n = 0 }') || exit 1
[ -n "$targets" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
only=${FUZZ_ONLY:-}
if [ -n "$only" ]; then
	targets=$(grep -E -- "$only" <<<"$targets") || { echo "fuzz: no fuzz target matches FUZZ_ONLY=$only" >&2; exit 1; }
fi

tmp=
if [ -n "$results" ]; then
	tmp=$(mktemp)
	commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
	git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
	{
		if [ -n "$only" ]; then
			echo "# tests/fuzz/run.sh $execs, FUZZ_ONLY='$only': those fuzz targets to $execs executions, one at a time"
		else
			echo "# tests/fuzz/run.sh $execs: every fuzz target to $execs executions, one at a time"
		fi
		echo "# $($GO version), $parallel worker(s), minimizing for $minimize, commit $commit"
		echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) CPUs ($(uname -m))"
		printf '%-40s %-22s %10s %9s %8s %9s %s\n' package target execs elapsed execs/s 'new' result
	} >"$tmp"
fi

failed=0
log=$(mktemp)
trap 'rm -f "$log" ${tmp:+"$tmp"}' EXIT
for t in $targets; do
	pkg=${t%%:*} f=${t##*:}
	echo "fuzz: $pkg $f ($execs executions)"
	start=$(date +%s)
	$GO test -run '^$' -fuzz "^$f\$" -fuzztime "${execs}x" -fuzzminimizetime "$minimize" \
		-parallel "$parallel" -timeout 0 "$pkg" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	secs=$(( $(date +%s) - start ))
	result=PASS
	if [ "$rc" -ne 0 ]; then
		result=FAIL failed=1
	fi
	if [ -n "$tmp" ]; then
		# The coordinator's last line: "fuzz: elapsed: 8m3s, execs: 10000000
		# (20693/sec), new interesting: 12 (total: 52)".
		last=$(grep '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1)
		n=$(sed -n 's/.*execs: \([0-9]*\) .*/\1/p' <<<"$last")
		newi=$(sed -n 's/.*new interesting: \([0-9]*\) .*/\1/p' <<<"$last")
		if [ "$rc" -eq 0 ] && [ "${n:-0}" -lt "$execs" ]; then
			result="FAIL: $n of $execs executions" failed=1
		fi
		rate=-
		[ -n "$n" ] && [ "$secs" -gt 0 ] && rate=$(( n / secs ))
		printf '%-40s %-22s %10s %8ss %8s %9s %s\n' "$pkg" "$f" "${n:-?}" "$secs" "$rate" "${newi:-?}" "$result" >>"$tmp"
	fi
done
if [ -n "$tmp" ]; then
	echo "# finished $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$tmp"
	mkdir -p "$(dirname "$results")"
	if [ -n "$only" ] && [ -f "$results" ]; then
		{ echo; cat "$tmp"; } >>"$results"
		rm -f "$tmp"
	else
		mv "$tmp" "$results"
	fi
	tmp=
	chmod 0644 "$results"
	echo "fuzz: results in $results"
fi
exit "$failed"
