#!/usr/bin/env bash
# install_test.sh: `make install` into scratch DESTDIRs, with the default PREFIX and with
# PREFIX=/usr, and check what lands where: the files, the unit's ExecStart, a config.yaml that
# passes `config validate`, an edited one kept on a second install, and completions that name
# the command. cmd/nvmeof-tgt's
# TestMakeInstall runs it; it builds its binary in a scratch directory, not in bin/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/build/nvmeof-tgt
# make build builds the rbd binary too where librbd-dev is installed, and make install installs it.
rbd_bin=$tmp/build/nvmeof-tgt-rbd
rbd_want=
[[ -e /usr/include/rbd/librbd.h ]] && rbd_want=yes

fail() { echo "install_test: $*" >&2; exit 1; }

# The environment may override configuration keys; check the file alone.
for v in $(compgen -e); do
  [[ $v == NVMEOF_TGT_* ]] && unset "$v"
done

# check PREFIX: install with it, twice, and check the result.
check() {
  local prefix=$1 dest=$tmp/dest${1//\//-}
  make -s -C "$repo" install DESTDIR="$dest" PREFIX="$prefix" BIN="$bin" RBD_BIN="$rbd_bin" >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; fail "PREFIX=$prefix: make install failed"; }

  local want got
  want=$(grep . <<LIST | sort
$prefix/bin/nvmeof-tgt
$prefix/lib/systemd/system/nvmeof-tgt.service
$prefix/share/bash-completion/completions/nvmeof-tgt
$prefix/share/fish/vendor_completions.d/nvmeof-tgt.fish
$prefix/share/zsh/site-functions/_nvmeof-tgt
/etc/nvmeof-tgt/config.example.yaml
/etc/nvmeof-tgt/config.yaml
${rbd_want:+$prefix/bin/nvmeof-tgt-rbd}
LIST
)
  got=$(cd "$dest" && find . -type f | sed 's|^\.||' | sort)
  [[ $got == "$want" ]] || fail "PREFIX=$prefix: installed files:
$got
want:
$want"

  [[ -x $dest$prefix/bin/nvmeof-tgt ]] || fail "PREFIX=$prefix: the binary is not executable"
  "$dest$prefix/bin/nvmeof-tgt" version >/dev/null || fail "PREFIX=$prefix: the installed binary does not run"
  local exec
  exec=$(grep '^ExecStart=' "$dest$prefix/lib/systemd/system/nvmeof-tgt.service")
  [[ $exec == "ExecStart=$prefix/bin/nvmeof-tgt serve --config /etc/nvmeof-tgt/config.yaml" ]] ||
    fail "PREFIX=$prefix: unit has $exec"
  cmp -s "$repo/deploy/config.example.yaml" "$dest/etc/nvmeof-tgt/config.example.yaml" ||
    fail "PREFIX=$prefix: config.example.yaml differs from deploy/"
  cmp -s "$repo/deploy/config.yaml" "$dest/etc/nvmeof-tgt/config.yaml" ||
    fail "PREFIX=$prefix: config.yaml differs from deploy/config.yaml"
  [[ $(stat -c %a "$dest/etc/nvmeof-tgt/config.yaml") == 600 ]] ||
    fail "PREFIX=$prefix: config.yaml is mode $(stat -c %a "$dest/etc/nvmeof-tgt/config.yaml"), want 600"
  # The unit starts with the installed configuration as it is, so it must pass what serve checks
  # first (no RDMA device needed for that), on any machine.
  "$dest$prefix/bin/nvmeof-tgt" config validate "$dest/etc/nvmeof-tgt/config.yaml" >"$tmp/validate.log" 2>&1 ||
    { cat "$tmp/validate.log" >&2; fail "PREFIX=$prefix: the installed config.yaml fails config validate"; }
  local f
  for f in bash-completion/completions/nvmeof-tgt zsh/site-functions/_nvmeof-tgt fish/vendor_completions.d/nvmeof-tgt.fish; do
    grep -q nvmeof-tgt "$dest$prefix/share/$f" || fail "PREFIX=$prefix: completion $f does not name the command"
  done

  # A second install keeps the operator's config.yaml and refreshes the example.
  echo "# edited" >>"$dest/etc/nvmeof-tgt/config.yaml"
  echo "# stale" >>"$dest/etc/nvmeof-tgt/config.example.yaml"
  make -s -C "$repo" install DESTDIR="$dest" PREFIX="$prefix" BIN="$bin" RBD_BIN="$rbd_bin" >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; fail "PREFIX=$prefix: second make install failed"; }
  grep -q '^# edited$' "$dest/etc/nvmeof-tgt/config.yaml" || fail "PREFIX=$prefix: a second install overwrote config.yaml"
  ! grep -q '^# stale$' "$dest/etc/nvmeof-tgt/config.example.yaml" ||
    fail "PREFIX=$prefix: a second install left the old config.example.yaml"
  echo "install_test: PREFIX=$prefix ok"
}

check /usr/local
check /usr
