#!/usr/bin/env bash
# blktests_target_test.sh: tests/lab/blktests-target (blktests' NVME_TARGET_CONTROL script) against
# a live nvmeof-tgt on the loop transport, so without RDMA and without blktests: the config
# answers, setup (a subsystem for that host only, namespace 1 with the UUID blktests gave, the
# port; secrets), cleanup (the port goes with the last subsystem), a setup over a leftover, bad
# input refused before anything changes, the same over a tcp port, and the nvmet shim in a private
# mount namespace (when this machine lets us mount one). cmd/nvmeof-tgt's TestBlktestsTarget runs it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ctl=$repo/tests/lab/blktests-target
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blktests-target-test.XXXXXX")
tgt=
cleanup() {
  [[ -n $tgt ]] && kill "$tgt" 2>/dev/null && wait "$tgt" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "blktests_target_test: $*" >&2
  echo "--- control log:" >&2
  cat "$tmp/ctl.log" >&2 2>/dev/null || true
  exit 1
}

for v in $(compgen -e); do
  [[ $v == NVMEOF_TGT_* || $v == BLKTESTS_* ]] && unset "$v"
done
bin=$tmp/nvmeof-tgt
(cd "$repo" && "${GO:-go}" build -o "$bin" ./cmd/nvmeof-tgt)

chmod 0700 "$tmp"
cat >"$tmp/config.yaml" <<YAML
ports:
  - {id: 1, transport: loop, address: 127.0.0.1, port: 4419}
subsystems:
  - nqn: nqn.2026-11.io.nvmeof-tgt:blktests-anchor
    hosts: [nqn.2026-11.io.nvmeof-tgt:blktests-nobody]
    ports: [1]
api:
  socket: $tmp/api.sock
state_dir: $tmp/state
metrics:
  listen: ""
YAML
"$bin" serve --config "$tmp/config.yaml" >"$tmp/tgt.log" 2>&1 &
tgt=$!
for _ in $(seq 100); do
  grep -q "target ready" "$tmp/tgt.log" && break
  sleep 0.1
done
grep -q "target ready" "$tmp/tgt.log" || { cat "$tmp/tgt.log" >&2; fail "the target did not start"; }

export NVMEOF_TGT_BIN=$bin BLKTESTS_TGT_SOCKET=$tmp/api.sock BLKTESTS_TGT_TRANSPORT=loop
export BLKTESTS_TGT_ADDR=127.0.0.2 BLKTESTS_TGT_DIR=$tmp/ns BLKTESTS_TGT_SIZE=8M BLKTESTS_TGT_LOG=$tmp/ctl.log
cli() { "$bin" --socket "$tmp/api.sock" "$@"; }
nqn=blktests-subsystem-1
uuid=91fdba0d-f87b-4c25-b80f-db7be1418b9e
host=nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349

# config: blktests' own defaults, and what this target is.
for q in "--show-trtype loop" "--show-blkdev-type file" "--show-hostnqn $host" \
  "--show-hostid 0f01fb42-9f7f-4856-b0b3-51e60b8de349" "--show-traddr 127.0.0.2" "--show-trsvid 4420" \
  "--show-subsys-uuid $uuid" "--show-subsysnqn $nqn"; do
  read -r flag want <<<"$q"
  got=$("$ctl" config "$flag") || fail "config $flag failed"
  [[ $got == "$want" ]] || fail "config $flag: got $got, want $want"
done
rc=0
"$ctl" config --show-nothing 2>/dev/null || rc=$?
((rc == 2)) || fail "config with an unknown flag: exit $rc, want 2"
"$ctl" add-ports --ports 1 --subsysnqn "$nqn" || fail "add-ports failed"

# setup: the subsystem, for that host only, namespace 1 with the UUID, and the port.
"$ctl" setup --subsysnqn "$nqn" --subsys-uuid "$uuid" --hostnqn "$host" || fail "setup failed"
sub=$(cli subsystem list --json | tr -d ' \n')
[[ $sub == *"\"nqn\":\"$nqn\",\"allow_any_host\":false,\"hosts\":[\"$host\"]"* ]] ||
  fail "setup: subsystem $nqn for $host only not in $sub"
ns=$(cli ns list "$nqn" --json | tr -d ' \n')
[[ $ns == *'"nsid":1,'* && $ns == *"\"uuid\":\"$uuid\""* && $ns == *'"size":8388608'* && $ns == *'"block_size":512'* ]] ||
  fail "setup: namespace 1 (8 MiB, 512-byte blocks, UUID $uuid) not in $ns"
[[ -f $tmp/ns/$nqn.img ]] || fail "setup: no backing file $tmp/ns/$nqn.img"
cli port list --json | tr -d ' \n' | grep -q '"id":2,"transport":"loop","address":"127.0.0.2","port":4420' ||
  fail "setup: no port 2 on 127.0.0.2:4420"

# A second subsystem, with secrets; a bad secret changes nothing.
key=DHHC-1:00:tqgDIxKZiXC3Tp5Bs7EA8IHB6p4v5wSslk49tRhXyGsG377j:
BLKTESTS_TGT_BLOCK_SIZE=4096 "$ctl" setup --subsysnqn "$nqn-2" --subsys-uuid 91fdba0d-f87b-4c25-b80f-db7be1418b00 --hostnqn "$host" \
  --hostkey "$key" --ctrkey "$key" || fail "setup with secrets failed"
cli host list "$nqn-2" --json | tr -d ' \n' | grep -q '"dhchap":"bidirectional"' ||
  fail "setup with secrets: the host does not authenticate both ways"
grep -q -F "${key:10:20}" "$tmp/ctl.log" && fail "a secret reached the control log"
cli ns list "$nqn-2" --json | tr -d ' \n' | grep -q '"block_size":4096' || fail "BLKTESTS_TGT_BLOCK_SIZE=4096 not applied"
rc=0
"$ctl" setup --subsysnqn "$nqn-3" --hostnqn "$host" --hostkey 'x"}' 2>/dev/null || rc=$?
((rc != 0)) || fail "setup with a malformed secret succeeded"
cli subsystem list --json | grep -q "\"$nqn-3\"" && fail "setup with a malformed secret added a subsystem"
rc=0
"$ctl" setup --subsysnqn "a/b" --hostnqn "$host" 2>/dev/null || rc=$?
((rc != 0)) || fail "setup with an NQN holding / succeeded"

# setup over a leftover replaces it.
"$ctl" setup --subsysnqn "$nqn" --subsys-uuid "$uuid" --hostnqn "$host" || fail "setup over a leftover failed"

# cleanup: the port stays while a blktests subsystem does, and goes with the last.
"$ctl" cleanup --subsysnqn "$nqn" || fail "cleanup failed"
cli subsystem list --json | grep -q "\"$nqn\"" && fail "cleanup: $nqn still there"
[[ ! -e $tmp/ns/$nqn.img ]] || fail "cleanup: backing file left"
cli port list --json | tr -d ' \n' | grep -q '"id":2,' || fail "cleanup: port 2 gone while $nqn-2 is there"
"$ctl" cleanup --subsysnqn "$nqn-2" || fail "cleanup of the last failed"
cli port list --json | tr -d ' \n' | grep -q '"id":2,' && fail "cleanup: port 2 left after the last subsystem"
"$ctl" cleanup --subsysnqn "$nqn" || fail "cleanup of a subsystem that is gone failed"
cli subsystem list --json | grep -q '"nqn": "nqn.2026-11.io.nvmeof-tgt:blktests-anchor"' || fail "the anchor is gone"

# Over TCP (BLKTESTS_TRTYPE=tcp): the same verbs, with a tcp port.
tport=$((20000 + $$ % 20000))
(
  export BLKTESTS_TGT_TRANSPORT=tcp BLKTESTS_TGT_TRSVCID=$tport
  [[ $("$ctl" config --show-trtype) == tcp ]] || fail "config --show-trtype over tcp"
  "$ctl" setup --subsysnqn "$nqn" --subsys-uuid "$uuid" --hostnqn "$host" || fail "setup over tcp failed"
  cli port list --json | tr -d ' \n' | grep -q "\"id\":2,\"transport\":\"tcp\",\"address\":\"127.0.0.2\",\"port\":$tport" ||
    fail "setup over tcp: no tcp port 2 on 127.0.0.2:$tport"
  "$ctl" cleanup --subsysnqn "$nqn" || fail "cleanup over tcp failed"
  cli port list --json | tr -d ' \n' | grep -q '"id":2,' && fail "cleanup over tcp: port 2 left"
  true
) || exit 1

# The shim: only a tmpfs mounted exactly at BLKTESTS_NVMET_SHIM is written, and only resv_enable.
mkdir -p "$tmp/shim"
rc=0
BLKTESTS_NVMET_SHIM=$tmp/shim "$ctl" setup --subsysnqn "$nqn" --hostnqn "$host" 2>/dev/null || rc=$?
((rc != 0)) || fail "setup wrote a shim that is not a tmpfs mount"
cli subsystem list --json | grep -q "\"$nqn\"" && fail "setup with a bad shim added a subsystem"
if [[ $EUID == 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
  export BLKTESTS_NVMET_SHIM=$tmp/shim nqn uuid host ctl
  unshare --mount --propagation private bash -euc '
    mount -t tmpfs -o ro,mode=0755,size=1m test-shim "$BLKTESTS_NVMET_SHIM"
    "$ctl" setup --subsysnqn "$nqn" --subsys-uuid "$uuid" --hostnqn "$host"
    f=$BLKTESTS_NVMET_SHIM/subsystems/$nqn/namespaces/1/resv_enable
    [[ $(cat "$f") == 1 ]] || { echo "shim: no $f"; exit 1; }
    [[ $(find "$BLKTESTS_NVMET_SHIM" -type f) == "$f" ]] || { echo "shim: files besides $f"; exit 1; }
    if (echo 0 >"$BLKTESTS_NVMET_SHIM/subsystems/$nqn/namespaces/1/enable") 2>/dev/null; then
      echo "shim: writable outside setup and cleanup"; exit 1
    fi
    "$ctl" cleanup --subsysnqn "$nqn"
    [[ ! -e $BLKTESTS_NVMET_SHIM/subsystems/$nqn ]] || { echo "shim: $nqn left after cleanup"; exit 1; }
  ' || fail "the shim"
  findmnt -M "$tmp/shim" >/dev/null && fail "the shim leaked out of its mount namespace"
  echo "blktests_target_test: shim checked"
else
  echo "blktests_target_test: shim not checked (needs root and unshare -m)"
fi
echo "blktests_target_test: ok"
