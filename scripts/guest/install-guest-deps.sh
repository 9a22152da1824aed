#!/usr/bin/env bash
# Installs what scripts/guest/run.sh needs to boot a QEMU (TCG) guest with a
# real soft-RoCE (rdma_rxe) device: QEMU, Debian's 6.12 kernel image (only its
# /boot/vmlinuz-* and /lib/modules/* are used; the host keeps running its own
# kernel), static busybox and the rdma userspace tools.
# Idempotent: runs `apt-get update` only when something is missing.
# Prints the chosen guest kernel version on the last line of stdout.
#   usage: scripts/guest/install-guest-deps.sh
set -euo pipefail

PKGS=(
  qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers
  perftest rdmacm-utils iproute2 cpio kmod
)

export DEBIAN_FRONTEND=noninteractive
SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo -E); fi

installed() {  # installed PKG : true if dpkg has it fully installed
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# The guest kernel: any already installed Debian 6.12 amd64 image (newest) with
# its modules, else the one the linux-image-6.12-amd64 meta-package points at.
installed_kver() {
  local k
  for k in /boot/vmlinuz-6.12.*+deb12-amd64; do
    [ -e "$k" ] || continue
    k=${k#/boot/vmlinuz-}
    [ -e "/lib/modules/$k/modules.dep" ] && echo "$k"
  done | sort -V | tail -n1
}

missing=()
for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
KVER=$(installed_kver)

need_update=0
((${#missing[@]})) && need_update=1
[ -z "$KVER" ] && need_update=1

if [ "$need_update" = 1 ]; then
  if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
    echo "install-guest-deps: missing: ${missing[*]} ${KVER:-(6.12 kernel image)}; not root and no sudo" >&2
    exit 1
  fi
  echo "install-guest-deps: missing: ${missing[*]}${KVER:- linux-image-6.12 (guest kernel)}" >&2
  "${SUDO[@]}" apt-get update -qq >&2
  pkgs=("${missing[@]}")
  if [ -z "$KVER" ]; then
    # The meta-package depends on exactly the current image, e.g.
    # linux-image-6.12.117+deb12-amd64 (signed, non-rt, non-cloud).
    img=$(apt-cache depends linux-image-6.12-amd64 2>/dev/null |
          sed -n 's/^ *Depends: \(linux-image-6\.12\.[0-9]*+deb12-amd64\)$/\1/p' | head -n1)
    if [ -z "$img" ]; then
      img=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' |
            awk '{print $1}' | sort -V | tail -n1)
    fi
    [ -n "$img" ] || { echo "install-guest-deps: no linux-image-6.12.*+deb12-amd64 in apt" >&2; exit 1; }
    pkgs+=("$img")
  fi
  # --no-install-recommends: no apparmor, no firmware; the kernel's postinst
  # runs initramfs-tools (pulled in as a dependency) but no bootloader update
  # (grub is not installed, it is only "Suggested").
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
  KVER=$(installed_kver)
  [ -n "$KVER" ] || { echo "install-guest-deps: kernel image installed but /boot/vmlinuz-6.12.* or its modules are missing" >&2; exit 1; }
fi

command -v qemu-system-x86_64 >/dev/null || { echo "install-guest-deps: qemu-system-x86_64 missing" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "install-guest-deps: /bin/busybox missing" >&2; exit 1; }
echo "install-guest-deps: guest kernel $KVER (/boot/vmlinuz-$KVER)" >&2
echo "$KVER"
