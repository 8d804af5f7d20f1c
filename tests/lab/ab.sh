#!/usr/bin/env bash
# ab.sh: A/B-test nvmeof-tgt configurations against the kernel's nvmet in one boot of the test
# guest. Each variant is a separate nvmeof-tgt process with extra rdma.* keys; every fio job runs
# on the kernel target and on each variant in turn, REPS times, and the medians are printed as
# ratios to the kernel, with the guest's busy CPU time per I/O over each run. This is how the techniques in bench/results/*-experiments.md were measured.
#
#   tests/lab/ab.sh OUTDIR "JOB..." REPS RUNTIME NAME=KEY:VALUE[;KEY:VALUE]... 
#   e.g. tests/lab/ab.sh tests/out/ab "randread-4k-qd1 randwrite-4k-qd32" 3 8 \
#          "def=" "spin=poll_nap: 0s" "ev=poll_idle: 0s"
#
# The key bin:PATH runs that variant with another build (an older commit's binary, for an A/B
# of a code change); PATH must be inside the repository or OUTDIR, which the guest shares.
#
# AB_CPUS sets the guest's vCPUs (default 4). AB_BACKEND=memory (default; the kernel gets memory-backed null_blk) or file (files on the
# guest's scratch disk, the kernel's nvmet file backend). JOBs are deploy/fio/<JOB>.fio. Needs
# python3 (to read fio's JSON) and what make test installs. Build bin/nvmeof-tgt first (make).
set -uo pipefail

if [[ ${1:-} != --guest ]]; then
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  out=$(realpath -m "$1"); mkdir -p "$out"
  # labvm runs a copy of this script in the guest: tell it where the repository is.
  exec "$repo/tests/lab/labvm" --share "$repo" --share "$out" --cpus "${AB_CPUS:-4}" --mem 4096 --scratch-size 4G \
    --timeout 3600 "$repo/tests/lab/ab.sh" --guest "$repo" "${AB_BACKEND:-memory}" "$out" "${@:2}"
fi

repo=$2 backend=$3 out=$4 jobs=$5 reps=$6 rt=$7; shift 7
cd "$repo" || exit 1
: >"$out/summary"
names=() i=0
for v in "$@"; do
  name=${v%%=*} kv=${v#*=}; i=$((i + 1))
  if [[ $backend == file ]]; then
    ns="        backend: file
        path: $LAB_SCRATCH/$name.img"
  else
    ns="        backend: memory"
  fi
  bin=./bin/nvmeof-tgt
  IFS=';' read -ra kvs <<<"$kv"
  {
    cat <<Y
ports: [{transport: rdma, address: $LAB_ADDR, port: $((4420 + i))}]
subsystems:
  - nqn: nqn.2026-11.io.test:$name
    allow_any_host: true
    namespaces:
      - nsid: 1
$ns
        size: 256MiB
metrics: {listen: "127.0.0.1:$((9500 + i))"}
api: {socket: /run/nvmeof-tgt-ab/$name.sock}  # not /tmp: a directory others may write is refused
state_dir: ""  # none: each process must have its own, and the jobs persist nothing
rdma:
  buffer_pool_size: 32MiB
Y
    for x in "${kvs[@]}"; do
      if [[ $x == bin:* ]]; then bin=${x#bin:}; elif [[ -n $x ]]; then echo "  $x"; fi
    done
  } >"/tmp/$name.yaml"
  "$bin" serve --config "/tmp/$name.yaml" >"$out/tgt-$name.log" 2>&1 &
  names+=("$name")
done

# The kernel's nvmet on 4420, same kind of backend and size.
if [[ $backend == file ]]; then
  truncate -s 256M "$LAB_SCRATCH/kern.img"; kdev=$LAB_SCRATCH/kern.img
else
  modprobe -r null_blk; modprobe null_blk nr_devices=0
  nb=/sys/kernel/config/nullb/nullb0; mkdir $nb
  echo 1 >$nb/memory_backed; echo 256 >$nb/size; echo 512 >$nb/blocksize; echo 1 >$nb/power
  kdev=/dev/nullb0
fi
S=/sys/kernel/config/nvmet/subsystems/nqn.2026-11.io.test:kern
mkdir $S; echo 1 >$S/attr_allow_any_host; mkdir $S/namespaces/1
echo -n "$kdev" >$S/namespaces/1/device_path; echo 1 >$S/namespaces/1/enable
P=/sys/kernel/config/nvmet/ports/1; mkdir $P
echo rdma >$P/addr_trtype; echo ipv4 >$P/addr_adrfam; echo "$LAB_ADDR" >$P/addr_traddr; echo 4420 >$P/addr_trsvcid
ln -s $S $P/subsystems/
sleep 3
nvme connect -t rdma -a "$LAB_ADDR" -s 4420 -n nqn.2026-11.io.test:kern >/dev/null || exit 1
i=0
for n in "${names[@]}"; do
  i=$((i + 1))
  nvme connect -t rdma -a "$LAB_ADDR" -s $((4420 + i)) -n "nqn.2026-11.io.test:$n" >/dev/null || { cat "$out/tgt-$n.log"; exit 1; }
done
sleep 2
devof() { # the host block device of subsystem ...:$1
  for d in /sys/block/nvme*; do
    [[ -b /dev/${d##*/} ]] && grep -q ":$1\$" "$d/device/subsysnqn" 2>/dev/null && { echo "/dev/${d##*/}"; return; }
  done
}
all=(kern "${names[@]}")
busy() { # the guest's busy CPU ticks since boot, every CPU: user, nice, system, irq, softirq (not idle, iowait or steal)
  awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat
}
for n in "${all[@]}"; do dd if=/dev/zero of="$(devof "$n")" bs=1M count=256 oflag=direct 2>/dev/null; done
for job in $jobs; do
  for rep in $(seq "$reps"); do
    for n in "${all[@]}"; do
      f=$out/fio-$job-$n-$rep.json
      b0=$(busy)
      DEV=$(devof "$n") RUNTIME=$rt RAMP=2 fio --output-format=json --output="$f" "deploy/fio/$job.fio" >/dev/null 2>&1
      b1=$(busy)
      python3 - "$f" "$job" "$n" "$rep" "$((b1 - b0))" "$(getconf CLK_TCK)" >>"$out/summary" <<'P'
import json, sys
f, job, n, rep, ticks, hz = sys.argv[1:]
j = json.load(open(f))["jobs"][0]
r = j["read"] if j["read"]["io_bytes"] else j["write"]
p = r["clat_ns"].get("percentile", {})
# The guest's busy CPU over the whole fio run, per I/O: target, fio, softirq and rxe alike for
# every variant. The ticks include fio's start and its ramp, which its I/O count leaves out: the
# figure is high by about (start + ramp) / runtime, the same for every variant, so the ratios
# between variants lean toward 1.
ios = sum(j[d]["total_ios"] for d in ("read", "write"))
cpu = int(ticks) / int(hz) * 1e6 / max(ios, 1)
print(job, n, rep, round(r["iops"]), round(r["bw"] / 1024, 1), round(p.get("50.000000", 0) / 1000), round(p.get("99.000000", 0) / 1000), round(cpu, 1))
P
    done
  done
done
i=0
for n in "${names[@]}"; do
  i=$((i + 1))
  curl -s "127.0.0.1:$((9500 + i))/metrics" | grep -E '^(nvmeof_tgt_rdma_(poller_sleeps|io_uring_requests|post_calls|work_requests|srq_moved)_total|process_cpu_seconds_total)' | sed "s/^/$n /" >>"$out/metrics.txt"
done
nvme disconnect-all >/dev/null
kill $(jobs -p) 2>/dev/null; sleep 1
python3 - "$out/summary" <<'P' | tee "$out/ratios.txt"
import collections, statistics as st, sys
d = collections.defaultdict(list); order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) in (7, 8):
        d[(f[0], f[1])].append([float(x) for x in f[3:]] + ([0.0] if len(f) == 7 else []))
        order.append((f[0], f[1]))
seen = set()
for job, n in order:
    if (job, n) in seen: continue
    seen.add((job, n))
    med = lambda k: [st.median(x[i] for x in d[k]) for i in range(5)]
    m, km = med((job, n)), med((job, "kern"))
    print(f"{job:20s} {n:10s} IOPS {m[0]:7.0f} MiB/s {m[1]:6.1f} p50 {m[2]:6.0f}us p99 {m[3]:6.0f}us"
          f" CPU/IO {m[4]:6.1f}us  {m[0] / km[0]:.2f}x IOPS, p50 {m[2] / km[2]:.2f}x, CPU/IO {m[4] / max(km[4], 1e-9):.2f}x"
          f"  ({len(d[(job, n)])} runs)")
P
