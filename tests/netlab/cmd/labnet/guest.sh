# labnet's guest setup: stage 2 of labvm's initramfs (which mounts the host root over 9p under a
# tmpfs overlay, the kernel's modules and this guest's control share at /labvm), run by bash
# from the host root. The launcher writes, in the control share:
#   env     LAB_GUEST, LAB_ROLE (driver or agent), LAB_AGENT_LISTEN, and the LAB_* of the driver
#   nics    one line per NIC: MAC NETDEV ADDRESS/PREFIX RDMA-DEVICE ("-" for none)
#   shares  one line per --share: 9P-TAG DIRECTORY
#   the driver: script, args (NUL-separated), cwd; an agent: labnet (the launcher's binary)
# It mirrors labvm's own stage 2 (kept apart so that the one-guest lab does not change), with
# NICs instead of the dummy netdev and without the emulated NVMe drive.
set -u
. /labvm/env
fail() {
  echo "labnet: $LAB_GUEST: guest setup failed: $*"
  echo 125 >/labvm/status; sync
  busybox poweroff -f; echo o >/proc/sysrq-trigger
}
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
ln -sfn /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs -o mode=1777 tmpfs /tmp; mount -t tmpfs -o mode=0755 tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo /sbin/modprobe >/proc/sys/kernel/modprobe
hostname "$LAB_GUEST"

while read -r tag dir; do
  mkdir -p "$dir" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 "$tag" "$dir" ||
    fail "cannot mount share $dir"
done </labvm/shares

# No IPv6 on the NICs (set before virtio_net makes them): its link-local addresses, DAD and
# router solicitations are traffic no test asked for.
echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6
echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6
for m in virtio_net virtio_blk ext4 rdma_rxe ib_uverbs rdma_ucm nvme_rdma nvmet nvmet_rdma loop sch_netem; do
  modprobe "$m" || fail "modprobe $m"
done
modprobe null_blk nr_devices=0 || fail "modprobe null_blk"
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || fail "configfs"

ip link set lo up
# The NICs by MAC: with no udev, their kernel names follow probe order, which nothing promises.
while read -r mac name addr rdma; do
  dev=
  for _ in $(seq 100); do
    for d in /sys/class/net/*; do
      [ "$(cat "$d/address" 2>/dev/null)" = "$mac" ] && dev=${d##*/}
    done
    [ -n "$dev" ] && break
    sleep 0.1
  done
  [ -n "$dev" ] || fail "no NIC with MAC $mac"
  { [ "$dev" = "$name" ] || ip link set dev "$dev" name "$name"; } &&
    ip addr add "$addr" dev "$name" && ip link set "$name" up || fail "NIC $name ($mac, $addr)"
  if [ "$rdma" != - ]; then
    rdma link add "$rdma" type rxe netdev "$name" || fail "rdma link add $rdma on $name"
  fi
done </labvm/nics

# The guest's own disk: ext4, made by the launcher, kept across power cuts (the journal is
# replayed here after one).
mkdir -p /scratch
for _ in $(seq 50); do [ -b /dev/vda ] && break; sleep 0.1; done
mount -o noatime /dev/vda /scratch || fail "cannot mount the disk /dev/vda"

export HOME=/root TERM=dumb LANG=C.UTF-8
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ulimit -l unlimited
: >/labvm/ready || fail "cannot write /labvm/ready" # from here on: never booted again
echo "labnet: $LAB_GUEST: guest ready: kernel $(uname -r), $(nproc) cpus, $(($(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024)) MiB, up $(cut -d' ' -f1 /proc/uptime)s"

if [ "$LAB_ROLE" = agent ]; then
  /labvm/labnet agent "$LAB_AGENT_LISTEN" </dev/null
  fail "the agent exited ($?)"
fi
mapfile -d '' -t args </labvm/args
cd "$(cat /labvm/cwd)" 2>/dev/null || cd /
bash /labvm/script "${args[@]}" </dev/null
rc=$?
echo "$rc" >/labvm/status
sync
busybox poweroff -f
echo o >/proc/sysrq-trigger
