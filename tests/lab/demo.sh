#!/usr/bin/env bash
# demo: boot the test guest, start nvmeof-tgt on Soft-RoCE, connect the Linux
# kernel initiator with nvme-cli, run a short verified fio job and print it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $root/bin/nvmeof-tgt ]] || { echo "demo: build first (make build)" >&2; exit 1; }
guest=$(mktemp /tmp/nvmeof-demo.XXXXXX.sh)
trap 'rm -f "$guest"' EXIT
cat >"$guest" <<GUEST
set -euo pipefail
cd "$root"
cat >/tmp/demo.yaml <<Y
ports:
  - {transport: rdma, address: \$LAB_ADDR, port: 4420}
subsystems:
  - nqn: nqn.2026-11.io.nvmeof-tgt:demo
    allow_any_host: true
    namespaces:
      - {nsid: 1, path: \$LAB_SCRATCH/demo.img, size: 256MiB}
      - {nsid: 2, backend: memory, size: 128MiB}
Y
echo "== nvmeof-tgt serve"
./bin/nvmeof-tgt serve --config /tmp/demo.yaml 2>/tmp/tgt.log &
tgt=\$!
for i in \$(seq 60); do grep -q "target ready" /tmp/tgt.log && break; sleep 1; done
grep -q "target ready" /tmp/tgt.log || { cat /tmp/tgt.log; exit 1; }
echo "== nvme discover"
nvme discover -t rdma -a \$LAB_ADDR -s 4420
echo "== nvme connect"
nvme connect -t rdma -a \$LAB_ADDR -s 4420 -n nqn.2026-11.io.nvmeof-tgt:demo \
  --hostnqn nqn.2026-11.io.nvmeof-tgt:demo-host --hostid 2b1b0a6c-9d7e-4f1c-8a55-6d3f0e4b9c21
dev=
for i in \$(seq 30); do
  for b in /sys/block/nvme[0-9]*n[0-9]*; do
    [[ -e \$b/nsid && \$(cat \$b/nsid) == 1 && \$(cat \$b/device/subsysnqn 2>/dev/null) == nqn.2026-11.io.nvmeof-tgt:demo ]] && dev=/dev/\$(basename \$b)
  done
  [[ -n \$dev && -b \$dev ]] && break
  sleep 1
done
nvme list
echo "== fio on \$dev (4 KiB random write + crc32c verify, then 4 KiB random read)"
fio --name=demo-verify --filename=\$dev --direct=1 --ioengine=libaio --rw=randwrite --bs=4k --iodepth=16 \
  --size=32M --verify=crc32c --do_verify=1 --verify_state_save=0 --group_reporting | grep -E "IOPS|err=|verify"
fio --name=demo-randread --filename=\$dev --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=32 \
  --runtime=10 --time_based --size=128M --group_reporting | grep -E "IOPS|lat \(usec\)|err="
nvme disconnect -n nqn.2026-11.io.nvmeof-tgt:demo
kill -TERM \$tgt; wait \$tgt
echo "== target stopped cleanly"
GUEST
exec "$root/tests/lab/labvm" --share "$root" --timeout 900 "$guest"
