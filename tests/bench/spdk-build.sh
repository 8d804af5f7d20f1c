#!/usr/bin/env bash
# spdk-build.sh: build SPDK v24.05's nvmf_tgt on Debian 12, against Debian's DPDK (libdpdk-dev
# 22.11.x), for `make bench PEERS="kernel spdk" SPDK_DIR=PREFIX`.
#
#   tests/bench/spdk-build.sh SRC [PREFIX]
#
# SRC is an SPDK v24.05 source tree (a release archive or `git archive v24.05`: the submodules
# need not be there; DPDK comes from Debian and ISA-L stays off). SRC is never modified: it is
# copied to PREFIX (default /var/cache/nvmeof-tgt-lab/spdk) and built there, in place, which is
# how SPDK builds. Afterwards PREFIX/build/bin/nvmf_tgt and PREFIX/scripts/rpc.py exist; give
# PREFIX to make bench as SPDK_DIR. PREFIX may be SRC itself to build in place.
#
# Run as root (it installs the build dependencies with apt-get). It is idempotent: a second run
# reuses the copy, the patch, the configuration and make's own up-to-date checks.
#
# Environment: SPDK_JOBS (make -j, default 2), SPDK_NICE (nice level, default 19): the build is
# long (tens of minutes on two cores) and should not starve anything else on the machine.
set -euo pipefail
prog=spdk-build.sh
die() { echo "$prog: $*" >&2; exit 1; }

(($# >= 1 && $# <= 2)) || { sed -n '5p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2; exit 2; }
src=$(realpath -e "$1") || die "$1: no such directory"
prefix=${2:-/var/cache/nvmeof-tgt-lab/spdk}
jobs=${SPDK_JOBS:-2}
nicelvl=${SPDK_NICE:-19}

[[ -f $src/configure && -f $src/include/spdk/version.h ]] || die "$src is not an SPDK source tree"
ver() { awk -v k="SPDK_VERSION_$1" '$1 == "#define" && $2 == k {print $3}' "$src/include/spdk/version.h"; }
version=$(printf "%d.%02d" "$(ver MAJOR)" "$(ver MINOR)")
[[ $version == 24.05 ]] || echo "$prog: warning: $src is SPDK $version, not 24.05; the workarounds below are for 24.05" >&2

# ---- build dependencies (Debian 12) ----------------------------------------------------------
# What SPDK's lib/, module/ and app/ link with this configuration; libdpdk-dev brings DPDK
# 22.11.x with pkg-config files, which --with-dpdk (no directory) finds.
pkgs=(gcc g++ make pkg-config python3 libdpdk-dev libnuma-dev libaio-dev libssl-dev uuid-dev
  libkeyutils-dev libncurses-dev libibverbs-dev librdmacm-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "$prog: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi
dpdk=$(pkg-config --modversion libdpdk) || die "pkg-config finds no libdpdk"
echo "$prog: SPDK $version from $src, DPDK $dpdk (Debian), building in $prefix"

# ---- the tree to build -----------------------------------------------------------------------
mkdir -p "$prefix"
prefix=$(realpath "$prefix")
stamp=$prefix/.nvmeof-tgt-spdk-src
if [[ $prefix != "$src" ]]; then
  if [[ -f $stamp ]]; then
    [[ $(cat "$stamp") == "$src" ]] || die "$prefix holds a copy of $(cat "$stamp"), not $src: remove it first"
  elif [[ -n $(ls -A "$prefix") ]]; then
    die "$prefix is not empty and not a copy made by $prog: choose another PREFIX"
  else
    echo "$prog: copying $src to $prefix"
    cp -a "$src/." "$prefix/"
    echo "$src" >"$stamp"
  fi
fi
cd "$prefix"

# Workaround 1: configure insists on the isa-l submodule's autogen.sh even when ISA-L ends up
# off, as it does without nasm >= 2.14 (see below). An empty script satisfies the check.
if [[ ! -f isa-l/autogen.sh ]]; then
  mkdir -p isa-l
  printf '#!/bin/sh\n# Stub written by nvmeof-tgt %s: ISA-L is not built.\n' "$prog" >isa-l/autogen.sh
fi
chmod +x isa-l/autogen.sh

# Workaround 2: dpdk_pci_init() refuses DPDK 22.11.x above 22.11.4 at startup, because an LTS
# minor release *could* change the private PCI ABI. The check only picks the table of PCI
# accessors (fn_table_2211), which nvmf_tgt over RDMA with a malloc bdev never calls (no PCI
# device is probed). Accept every 22.11.x with the 22.11 table; the marker keeps this idempotent.
pci=lib/env_dpdk/pci_dpdk.c
marker='nvmeof-tgt: accept every DPDK 22.11.x'
if ! grep -q "$marker" "$pci"; then
  [[ $(grep -c 'if (minor > 4) {$' "$pci") == 1 ]] || die "$pci: the 22.11 minor-version check is not where v24.05 has it; patch by hand"
  sed -i "s|if (minor > 4) {\$|if (0 \&\& minor > 4) { /* $marker (Debian 12 ships 22.11.x > 4) */|" "$pci"
  grep -q "$marker" "$pci" || die "$pci: patch failed"
  echo "$prog: patched $pci to accept DPDK 22.11.x"
fi

# ISA-L needs nasm >= 2.14; with nasm installed configure would build it, and the submodule is
# not there. Hide nasm from configure so that ISA-L (and with it crypto and compression) is off.
nonasm=$(mktemp -d)
trap 'rm -rf "$nonasm"' EXIT
printf '#!/bin/sh\nexit 127\n' >"$nonasm/nasm"
chmod +x "$nonasm/nasm"

flags=(--with-rdma --with-dpdk --without-vhost --without-virtio --without-crypto --without-fuse
  --without-nvme-cuse --without-uring --without-xnvme --without-ocf --without-vfio-user
  --without-idxd --without-usdt --disable-tests --disable-unit-tests --disable-examples)
# bdev_rbd (ceph-nvmeof's data path, the RBD peer of make bench) where Debian's librbd-dev is
# installed (make ceph-deps); SPDK_RBD=0 leaves it out.
if [[ ${SPDK_RBD:-1} != 0 && -e /usr/include/rbd/librbd.h ]]; then
  flags+=(--with-rbd)
fi
# With a packaged DPDK, SPDK builds shared libraries (build/lib); the binaries find them through
# their run path, so that nvmf_tgt runs without LD_LIBRARY_PATH (and only from PREFIX).
ldflags="-Wl,-rpath=$prefix/build/lib"
cfgstamp=.nvmeof-tgt-configure
if [[ ! -f mk/config.mk || ! -f $cfgstamp || $(cat "$cfgstamp") != "LDFLAGS=$ldflags ${flags[*]}" ]]; then
  echo "$prog: LDFLAGS=$ldflags ./configure ${flags[*]}"
  PATH=$nonasm:$PATH LDFLAGS=$ldflags nice -n "$nicelvl" ./configure "${flags[@]}"
  echo "LDFLAGS=$ldflags ${flags[*]}" >"$cfgstamp"
fi

start=$SECONDS
echo "$prog: make -j$jobs (nice $nicelvl)"
PATH=$nonasm:$PATH nice -n "$nicelvl" make -j"$jobs"
echo "$prog: make took $((SECONDS - start)) s"

[[ -x build/bin/nvmf_tgt ]] || die "no build/bin/nvmf_tgt after make"
build/bin/nvmf_tgt --help >/dev/null 2>&1 || die "build/bin/nvmf_tgt does not start: $(ldd build/bin/nvmf_tgt | grep 'not found' | head -3)"
[[ -f scripts/rpc.py ]] || die "no scripts/rpc.py"
python3 scripts/rpc.py --help >/dev/null || die "scripts/rpc.py does not run"
echo "nvmf_tgt: $prefix/build/bin/nvmf_tgt"
echo "rpc.py:   $prefix/scripts/rpc.py"
echo "use:      make bench PEERS=\"kernel spdk\" SPDK_DIR=$prefix"
