#!/usr/bin/env bash
# Runs ONE command inside a throw-away QEMU (TCG) guest that boots Debian's 6.12
# kernel and has REAL soft-RoCE (rdma_rxe) devices, so verbs code can be tested on
# a host whose kernel has no RDMA stack.
#
#   usage: scripts/guest/run.sh [--timeout SECONDS] [--devices N] [--mem MB]
#                               [--cpus N] [--rw DIR]... [--verbose] -- COMMAND [ARGS...]
#
#   --timeout S   wall-clock limit for the whole guest (boot included), enforced on
#                 the host with `timeout` around qemu (default 300). When it fires:
#                 exit 124, a clear message and the guest console on stderr.
#   --devices N   number of rxe devices (default 1, 0..8). Device i is rxe<i> on
#                 netdev dummy<i> with address 10.9.<i>.1/24, so its RoCE v2
#                 IPv4-mapped GID is ::ffff:10.9.<i>.1 (GID index 1; index 0 is
#                 the fe80:: link-local one). See "Addressing" below.
#   --mem MB      guest memory (default 1024).     --cpus N  vCPUs (default 2).
#   --rw DIR      also mount host directory DIR read-write at the same path
#                 (repeatable); everything else of the host is read-only.
#   --verbose     print a timing / QEMU RSS summary line on stderr at the end
#                 (also SMCR_GUEST_VERBOSE=1).
#   --nic-udp LPORT:RPORT --nic-ip A.B.C.D [--nic-mac MAC]  (for run-pair.sh)
#                 add a virtio-net eth0 on a QEMU UDP socket netdev (127.0.0.1)
#                 and put the only rxe device, rxe0, on it (instead of dummies).
#
# In the guest: the host's / is mounted read-only over virtio-9p and chroot'ed
# into, so the checkout and every host binary are at the same paths (build on the
# host first). Writable: /tmp, /run, /var/tmp, /dev/shm (tmpfs, empty: the host's
# /tmp is NOT visible), plus the --rw dirs. proc, sys, dev, devpts, cgroup2 at
# /sys/fs/cgroup/unified (as on the host) and bpffs at /sys/fs/bpf are mounted;
# lo is up; rdma_rxe is loaded and every rxe port is ACTIVE with its IPv4 GID
# before COMMAND starts. COMMAND runs as root with cwd = the caller's cwd, stdin
# /dev/null, HOME=/tmp, a standard PATH, and the caller's SMCR_* environment
# variables; its stdout and stderr come back on run.sh's stdout and stderr (live).
# Exit status: COMMAND's. Otherwise: 124 timeout (host or guest side), 125 the
# guest failed before/around the command (setup failure, kernel panic, no status),
# 77 skipped (not root and qemu-system-x86_64 or the 6.12 kernel is missing; as
# root, scripts/guest/install-guest-deps.sh is run instead).
# On any non-zero exit but 77 the guest console log (kernel + setup messages) is
# printed on stderr; on success only COMMAND's own output is printed.
#
# Addressing (--devices 2): rxe0/dummy0 10.9.0.1 (GID ::ffff:10.9.0.1),
# rxe1/dummy1 10.9.1.1 (GID ::ffff:10.9.1.1). rxe delivers a packet locally only
# when source and destination are on the SAME rxe device (its loopback path), so
# two processes in one guest get two links as rxe0<->rxe0 (both ends use GID
# ::ffff:10.9.0.1) and rxe1<->rxe1 (both ends ::ffff:10.9.1.1). A QP on rxe0
# cannot reach a QP on rxe1 inside one guest (the packet is routed via lo and
# dropped); use scripts/guest/run-pair.sh for two hosts.
#
# Environment: SMCR_GUEST_KERNEL=<kver> (default: newest installed
# /boot/vmlinuz-6.12.*+deb12-amd64), SMCR_GUEST_CACHE=<dir> (initramfs cache,
# default ${XDG_CACHE_HOME:-/var/cache}/smcr-guest), SMCR_GUEST_KEEP=1 keeps the
# per-run directory (console log, status) and prints its path.
set -uo pipefail

RUNSH=$(readlink -f "${BASH_SOURCE[0]}")
INITRAMFS_FORMAT=3   # bump when the initramfs contents change

# =============================================================================
# Guest stage: runs INSIDE the guest, chroot'ed into the host root, started by
# the initramfs /init as: bash run.sh --guest-stage DEVICES CMD_LIMIT_S
# fds: 3 = command stdout file, 4 = command stderr file, 5 = status file,
#      6 = job script (cd + exports + exec COMMAND), all on the writable 9p share.
# stdout/stderr of this stage go to the guest console.
# =============================================================================
guest_stage() {
  local ndev=$1 limit=$2 nic_ip=${3:-}
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export HOME=/tmp LANG=C.UTF-8 TERM=dumb
  up() { local u _; read -r u _ < /proc/uptime; echo "$u"; }
  step() { echo "smcr-guest: [$(up)] $*"; }
  die() { echo "smcr-guest: setup failed: $*"; echo "setup-failed $*" >&5; exit 125; }

  step "guest stage started"
  # rxe<i> sits on NETDEV[i] with address ADDR[i]/24
  local -a NETDEV=() ADDR=()
  local i
  if [ -n "$nic_ip" ]; then
    NETDEV=(eth0) ADDR=("$nic_ip")
  else
    for ((i = 0; i < ndev; i++)); do NETDEV+=("dummy$i") ADDR+=("10.9.$i.1"); done
  fi
  ndev=${#NETDEV[@]}

  if [ "$ndev" -gt 0 ]; then
    step "modprobe rdma_rxe dummy rdma_ucm"
    modprobe rdma_rxe || die "modprobe rdma_rxe"
    modprobe dummy numdummies=0 || die "modprobe dummy"
    modprobe rdma_ucm || die "modprobe rdma_ucm"   # /dev/infiniband/rdma_cm for librdmacm
    step "creating $ndev rxe device(s)"
    for ((i = 0; i < ndev; i++)); do
      if [[ ${NETDEV[i]} == dummy* ]]; then
        ip link add "${NETDEV[i]}" type dummy || die "ip link add ${NETDEV[i]}"
      fi
      ip addr add "${ADDR[i]}/24" dev "${NETDEV[i]}" || die "address on ${NETDEV[i]}"
      ip link set "${NETDEV[i]}" up || die "${NETDEV[i]} up"
      rdma link add "rxe$i" type rxe netdev "${NETDEV[i]}" || die "rdma link add rxe$i"
    done
    step "waiting for ACTIVE ports"
    # Wait for every port ACTIVE with the RoCE v2 IPv4-mapped GID of its address.
    local t ok v f want o1 o2 o3 o4
    local -a IDX=()
    for ((t = 0; t < 300; t++)); do
      ok=1
      for ((i = 0; i < ndev; i++)); do
        v=$(< "/sys/class/infiniband/rxe$i/ports/1/state") 2>/dev/null
        [[ $v == *ACTIVE* ]] || { ok=0; continue; }
        IFS=. read -r o1 o2 o3 o4 <<<"${ADDR[i]}"
        want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
        IDX[i]=""
        for f in /sys/class/infiniband/rxe$i/ports/1/gids/*; do
          v=$(< "$f") 2>/dev/null
          [ "$v" = "$want" ] && { IDX[i]=${f##*/}; break; }
        done
        [ -n "${IDX[i]}" ] || ok=0
      done
      [ "$ok" = 1 ] && break
      sleep 0.1
    done
    if [ "$ok" != 1 ]; then
      rdma link show; ip addr
      die "rxe ports not ACTIVE with an IPv4 GID after 30 s"
    fi
    for ((i = 0; i < ndev; i++)); do
      step "rxe$i on ${NETDEV[i]} ${ADDR[i]} $(< /sys/class/infiniband/rxe$i/ports/1/state) gid[${IDX[i]}]=$(< /sys/class/infiniband/rxe$i/ports/1/gids/${IDX[i]})"
    done
  fi

  local job
  job=$(cat <&6) || die "reading the job"
  exec 6<&-
  local t0 uptime0
  t0=$(up)
  uptime0=${t0%.*}
  limit=$((limit - uptime0))
  if [ "$limit" -le 5 ]; then
    echo "smcr-guest: the guest needed ${t0}s to get ready: no time left for the command"
    echo "cmd-timeout $limit" >&5
    exit 124
  fi
  echo "ready $t0" >&5
  echo "smcr-guest: ready at ${t0}s uptime; running the command (limit ${limit}s)"

  # The command runs in its own session (process group); a watchdog ends it at
  # the limit, after dumping the process list and blocked tasks to the console
  # (a socket stuck in the kernel sits in D state and cannot be killed).
  local s0 s1 rc cpid wpid which ms
  s0=$(date +%s%N)
  setsid /bin/bash -c "$job" </dev/null >&3 2>&4 5>&- &
  cpid=$!
  sleep "$limit" &
  wpid=$!
  wait -n -p which "$cpid" "$wpid"
  rc=$?
  s1=$(date +%s%N)
  ms=$(((s1 - s0) / 1000000))
  if [ "$which" = "$cpid" ]; then
    kill "$wpid" 2>/dev/null
    echo "smcr-guest: command exited $rc after ${ms} ms"
  else
    rc=124
    echo "cmd-timeout $limit" >&5
    echo "smcr-guest: the command did not finish within ${limit}s; processes:"
    ps -ww --ppid 2 -p 2 --deselect -o pid,ppid,stat,wchan:32,etime,args 2>/dev/null
    echo "smcr-guest: blocked tasks (sysrq w):"
    echo w > /proc/sysrq-trigger 2>/dev/null
    kill -TERM -- "-$cpid" 2>/dev/null
    sleep 2
    kill -KILL -- "-$cpid" 2>/dev/null
  fi
  echo "cmd-ms $ms" >&5
  exit "$rc"
}

if [ "${1:-}" = --guest-stage ]; then
  shift
  guest_stage "$@"
  exit $?
fi

# =============================================================================
# Host side
# =============================================================================
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
TIMEOUT=300 DEVICES=1 MEM=1024 CPUS=2 VERBOSE=${SMCR_GUEST_VERBOSE:-0}
NIC_UDP="" NIC_IP="" NIC_MAC=52:54:00:12:34:56
RW_DIRS=()
usage() { sed -n '2,/^set -uo/p' "$RUNSH" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --devices) DEVICES=${2:?}; shift 2 ;;
    --devices=*) DEVICES=${1#*=}; shift ;;
    --mem) MEM=${2:?}; shift 2 ;;
    --mem=*) MEM=${1#*=}; shift ;;
    --cpus) CPUS=${2:?}; shift 2 ;;
    --cpus=*) CPUS=${1#*=}; shift ;;
    --rw) RW_DIRS+=("$(readlink -f "${2:?}")"); shift 2 ;;
    --rw=*) RW_DIRS+=("$(readlink -f "${1#*=}")"); shift ;;
    --verbose|-v) VERBOSE=1; shift ;;
    --nic-udp) NIC_UDP=${2:?}; shift 2 ;;      # LPORT:RPORT (used by run-pair.sh)
    --nic-ip) NIC_IP=${2:?}; shift 2 ;;
    --nic-mac) NIC_MAC=${2:?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown option '$1' (the command goes after --)" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "run.sh: no command given" >&2; usage; }
for v in "$TIMEOUT" "$DEVICES" "$MEM" "$CPUS"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "run.sh: '$v' is not a number" >&2; exit 2; }
done
[ -z "$NIC_UDP" ] || [[ $NIC_UDP =~ ^[0-9]+:[0-9]+$ ]] || { echo "run.sh: --nic-udp LPORT:RPORT" >&2; exit 2; }
[ -z "$NIC_IP" ] || [[ $NIC_IP =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "run.sh: --nic-ip A.B.C.D" >&2; exit 2; }
[ -n "$NIC_IP" ] && [ -z "$NIC_UDP" ] && { echo "run.sh: --nic-ip needs --nic-udp" >&2; exit 2; }
[ "$DEVICES" -le 8 ] || { echo "run.sh: --devices at most 8" >&2; exit 2; }
[ "$TIMEOUT" -ge 20 ] || { echo "run.sh: --timeout at least 20 s" >&2; exit 2; }
for d in "${RW_DIRS[@]}"; do
  [ -d "$d" ] || { echo "run.sh: --rw $d is not a directory" >&2; exit 2; }
  case $d in /|/tmp|/proc*|/sys*|/dev*|/run*) echo "run.sh: --rw $d not allowed" >&2; exit 2 ;; esac
done
CWD=$(pwd -P)
case $CWD in
  /tmp/*)
    # The guest's /tmp is its own tmpfs; a checkout under the host's /tmp
    # (e.g. a CI clone) is shared into it at the same path instead.
    already=0
    for d in "${RW_DIRS[@]}"; do case $CWD in "$d"|"$d"/*) already=1 ;; esac; done
    [ "$already" = 1 ] || RW_DIRS+=("$CWD") ;;
  /tmp|/run|/run/*|/var/tmp|/var/tmp/*)
    echo "run.sh: the cwd $CWD is hidden in the guest (tmpfs there); run from elsewhere" >&2; exit 2 ;;
esac

find_kernel() {
  if [ -n "${SMCR_GUEST_KERNEL:-}" ]; then
    [ -r "/boot/vmlinuz-$SMCR_GUEST_KERNEL" ] && [ -e "/lib/modules/$SMCR_GUEST_KERNEL/modules.dep" ] &&
      echo "$SMCR_GUEST_KERNEL"
    return 0
  fi
  local k
  for k in /boot/vmlinuz-6.12.*+deb12-amd64; do
    [ -r "$k" ] || continue
    k=${k#/boot/vmlinuz-}
    [ -e "/lib/modules/$k/modules.dep" ] && echo "$k"
  done | sort -V | tail -n1
}

KVER=$(find_kernel)
if [ -z "$KVER" ] || ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /bin/busybox ] ||
   ! command -v rdma >/dev/null || ! command -v ibv_devinfo >/dev/null; then
  why="qemu-system-x86_64, busybox-static, rdma tools or the Debian 6.12 guest kernel (/boot/vmlinuz-6.12.*+deb12-amd64) not installed"
  if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: SKIP: $why; run scripts/guest/install-guest-deps.sh as root" >&2
    exit 77
  fi
  echo "run.sh: $why; installing (scripts/guest/install-guest-deps.sh)" >&2
  bash "$(dirname "$RUNSH")/install-guest-deps.sh" >/dev/null || { echo "run.sh: install-guest-deps.sh failed" >&2; exit 125; }
  KVER=$(find_kernel)
  [ -n "$KVER" ] || { echo "run.sh: no usable guest kernel after installing" >&2; exit 125; }
fi

# ---- initramfs (cached per kernel version and format) ------------------------
INIT_SCRIPT='#!/bin/sh
# smcr guest /init (busybox). Parameters come from /out/params.
export PATH=/bin:/sbin
fail() { echo "smcr-guest-init: $*"; echo "init-failed $*" >> /out/status 2>/dev/null; sync; poweroff -f; sleep 5; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo 1 > /proc/sys/kernel/printk_ratelimit 2>/dev/null
for m in $(cat /modules.order); do
  insmod "/lib/modules/$m" || fail "insmod $m"
done
mkdir -p /newroot /out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 smcrout /out || fail "mount of the out share"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /newroot || fail "mount of the host root"
. /out/params || fail "params"
echo "boot $(cut -d" " -f1 /proc/uptime)" >> /out/status
mount -t proc proc /newroot/proc || fail "proc"
mount -t sysfs sys /newroot/sys || fail "sys"
mount -t devtmpfs dev /newroot/dev || fail "dev"
mkdir -p /newroot/dev/pts /newroot/dev/shm 2>/dev/null
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
mount -t tmpfs -o mode=1777 tmp /newroot/tmp || fail "tmpfs /tmp"
mount -t tmpfs -o mode=755 run /newroot/run
[ -d /newroot/var/tmp ] && mount -t tmpfs -o mode=1777 vartmp /newroot/var/tmp
mount -t tmpfs -o mode=755 cgroup /newroot/sys/fs/cgroup || fail "tmpfs on /sys/fs/cgroup"
mkdir -p /newroot/sys/fs/cgroup/unified
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup/unified || fail "cgroup2"
mount -t bpf bpf /newroot/sys/fs/bpf || fail "bpffs"
hostname "$(cat /newroot/etc/hostname 2>/dev/null || echo smcr-guest)"
ip link set lo up || fail "lo up"
i=0
while [ "$i" -lt "$NRW" ]; do
  eval "d=\$RW$i"
  mkdir -p "/newroot$d" 2>/dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 "rw$i" "/newroot$d" || fail "mount rw$i on $d"
  i=$((i + 1))
done
exec 3>>/out/stdout 4>>/out/stderr 5>>/out/status 6</out/job.sh
chroot /newroot /bin/bash "$RUNSH" --guest-stage "$DEVICES" "$CMD_LIMIT" "$NIC_IP"
rc=$?
echo "rc $rc" >&5
exec 3>&- 4>&- 5>&-
sync
poweroff -f
sleep 10
'
MODPROBE_SCRIPT='#!/bin/sh
# kernel module autoload: use the host root'"'"'s kmod and /lib/modules
exec /bin/chroot /newroot /sbin/modprobe "$@"
'

pick_cache_dir() {
  local d
  for d in "${SMCR_GUEST_CACHE:-}" "${XDG_CACHE_HOME:-/var/cache}/smcr-guest" "${HOME:-/nonexistent}/.cache/smcr-guest" "/tmp/smcr-guest-cache-$(id -u)"; do
    [ -n "$d" ] || continue
    mkdir -p "$d" 2>/dev/null && [ -w "$d" ] && { echo "$d"; return; }
  done
}
CACHE=$(pick_cache_dir)
[ -n "$CACHE" ] || { echo "run.sh: no writable cache dir" >&2; exit 125; }
INITRD_MODS=(9p 9pnet_virtio virtio_net)
KEY=$( { echo "$INITRAMFS_FORMAT $KVER ${INITRD_MODS[*]}"; echo "$INIT_SCRIPT$MODPROBE_SCRIPT"; sha256sum /bin/busybox; } | sha256sum | cut -c1-12)
INITRD="$CACHE/initramfs-$KVER-$KEY.cpio.gz"

build_initramfs() {
  # (no `set -e` here: it is ignored in a function called from `||`)
  local w m ko base
  w=$(mktemp -d "$CACHE/build.XXXXXX") || return 1
  mkdir -p "$w"/root/{bin,sbin,proc,sys,dev,lib/modules,newroot,out} &&
    cp /bin/busybox "$w/root/bin/busybox" || { rm -rf "$w"; return 1; }
  for m in sh mount insmod mkdir cat cut poweroff sleep sync chroot echo ip hostname; do
    ln -s busybox "$w/root/bin/$m"
  done
  printf '%s' "$INIT_SCRIPT" > "$w/root/init"
  printf '%s' "$MODPROBE_SCRIPT" > "$w/root/sbin/modprobe"
  chmod 755 "$w/root/init" "$w/root/sbin/modprobe"
  : > "$w/root/modules.order"
  local kos=()
  for m in "${INITRD_MODS[@]}"; do
    mapfile -t -O "${#kos[@]}" kos < <(modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}')
  done
  for ko in "${kos[@]}"; do
    base=$(basename "$ko"); base=${base%.xz}; base=${base%.zst}; base=${base%.gz}
    grep -qxF "$base" "$w/root/modules.order" && continue
    case $ko in
      *.xz) xz -dc "$ko" ;;
      *.zst) zstd -dqc "$ko" ;;
      *.gz) gzip -dc "$ko" ;;
      *) cat "$ko" ;;
    esac > "$w/root/lib/modules/$base" || { echo "run.sh: cannot unpack $ko" >&2; rm -rf "$w"; return 1; }
    echo "$base" >> "$w/root/modules.order"
  done
  for m in 9p.ko 9pnet_virtio.ko; do
    grep -qxF "$m" "$w/root/modules.order" ||
      { echo "run.sh: $m of $KVER not found (modprobe -S $KVER --show-depends)" >&2; rm -rf "$w"; return 1; }
  done
  (cd "$w/root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -6 > "$w/initramfs.cpio.gz" &&
    [ -s "$w/initramfs.cpio.gz" ] && mv -f "$w/initramfs.cpio.gz" "$INITRD"
  local rc=$?
  rm -rf "$w"
  return $rc
}
if [ ! -s "$INITRD" ]; then
  build_initramfs || { echo "run.sh: building the initramfs failed" >&2; exit 125; }
  # drop stale initramfs images of older formats / kernels
  find "$CACHE" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -name "$(basename "$INITRD")" -delete 2>/dev/null
fi

# ---- per-run directory (the guest's writable share) --------------------------
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/smcr-guest.XXXXXX") || exit 125
chmod 755 "$RUNDIR"
: > "$RUNDIR/stdout"; : > "$RUNDIR/stderr"; : > "$RUNDIR/status"; : > "$RUNDIR/console.log"
{
  printf 'cd -- %q || exit 125\n' "$CWD"
  while IFS= read -r -d '' kv; do
    name=${kv%%=*}
    [[ $name =~ ^SMCR_[A-Za-z0-9_]*$ ]] || continue
    printf 'export %s=%q\n' "$name" "${kv#*=}"
  done < <(env -0)
  printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$RUNDIR/job.sh"
{
  printf "RUNSH='%s'\n" "$RUNSH"
  printf 'DEVICES=%s\nCMD_LIMIT=%s\nNRW=%s\nNIC_IP=%s\n' "$DEVICES" "$((TIMEOUT - 12))" "${#RW_DIRS[@]}" "$NIC_IP"
  i=0
  for d in "${RW_DIRS[@]}"; do printf "RW%s='%s'\n" "$i" "$d"; i=$((i + 1)); done
} > "$RUNDIR/params"
case $RUNSH in *"'"*) echo "run.sh: its path must not contain a quote" >&2; exit 2 ;; esac

QEMU_PID="" TPID="" TAIL_PIDS=() RSS_PID=""
status_field_early() { awk -v k="$1" '$1 == k {print $2; exit}' "$RUNDIR/status"; }
cleanup() {
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null
  [ -n "$QEMU_PID" ] && kill -9 "$QEMU_PID" 2>/dev/null
  for p in "${TAIL_PIDS[@]}" $RSS_PID; do kill "$p" 2>/dev/null; done
  if [ "${SMCR_GUEST_KEEP:-0}" = 1 ]; then
    echo "run.sh: kept $RUNDIR" >&2
  else
    rm -rf "$RUNDIR"
  fi
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM HUP

QEMU=(qemu-system-x86_64 -accel tcg -cpu max -smp "$CPUS" -m "$MEM"
  -nodefaults -no-user-config -display none -monitor none -no-reboot
  -serial "file:$RUNDIR/console.log"
  -kernel "/boot/vmlinuz-$KVER" -initrd "$INITRD"
  -append "console=ttyS0 panic=-1 oops=panic loglevel=4 mitigations=off i8042.noaux i8042.nokbd i8042.nopnp rdinit=/init"
  -fsdev "local,id=hostroot,path=/,readonly=on,security_model=none,multidevs=remap"
  -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"
  -fsdev "local,id=smcrout,path=$RUNDIR,security_model=none,multidevs=remap"
  -device "virtio-9p-pci,fsdev=smcrout,mount_tag=smcrout")
if [ -n "$NIC_UDP" ]; then
  QEMU+=(-netdev "socket,id=n0,udp=127.0.0.1:${NIC_UDP#*:},localaddr=127.0.0.1:${NIC_UDP%%:*}"
         -device "virtio-net-pci,netdev=n0,mac=$NIC_MAC")
fi
i=0
for d in "${RW_DIRS[@]}"; do
  QEMU+=(-fsdev "local,id=rw$i,path=$d,security_model=none,multidevs=remap" -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
  i=$((i + 1))
done

# A kernel that panics while it boots, before its init ran (TCG's code
# patching races in QEMU: seen once as an int3 oops in sched_clock_cpu at
# 1.8 s), is booted once more: the command never started, so nothing of
# the test ran twice.
T0=$(date +%s%N)
for attempt in 1 2; do
  timeout -k 10 "$TIMEOUT" "${QEMU[@]}" </dev/null >"$RUNDIR/qemu.log" 2>&1 &
  TPID=$!
  # the qemu process itself (child of timeout), for RSS and last-resort cleanup
  for _ in $(seq 50); do
    QEMU_PID=$(cat "/proc/$TPID/task/$TPID/children" 2>/dev/null | awk '{print $1}')
    [ -n "$QEMU_PID" ] && break
    sleep 0.02
  done
  tail -n +1 -f --pid="$TPID" "$RUNDIR/stdout" &
  TAIL_PIDS+=($!)
  tail -n +1 -f --pid="$TPID" "$RUNDIR/stderr" >&2 &
  TAIL_PIDS+=($!)
  if [ "$VERBOSE" = 1 ] && [ -n "$QEMU_PID" ]; then
    ( while kill -0 "$QEMU_PID" 2>/dev/null; do
        awk '/^VmHWM/ {print $2}' "/proc/$QEMU_PID/status" > "$RUNDIR/rss.tmp" 2>/dev/null && mv -f "$RUNDIR/rss.tmp" "$RUNDIR/rss"
        sleep 0.5
      done ) &
    RSS_PID=$!
  fi
  wait "$TPID"
  QRC=$?
  TPID=""
  T1=$(date +%s%N)
  for p in "${TAIL_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  TAIL_PIDS=()
  [ -n "$RSS_PID" ] && { kill "$RSS_PID" 2>/dev/null; wait "$RSS_PID" 2>/dev/null; RSS_PID=""; }
  QEMU_PID=""
  if [ "$attempt" = 1 ] && [ -z "$(status_field_early boot)" ] && grep -q 'Kernel panic' "$RUNDIR/console.log" &&
     [ "$QRC" != 124 ] && [ "$QRC" != 137 ]; then
    echo "run.sh: the guest kernel panicked while booting, before its init ran: booting it once more" >&2
    tr -d '\r' < "$RUNDIR/console.log" | grep -m3 -E 'Kernel panic|Oops|RIP:' | sed 's/^/  /' >&2
    : > "$RUNDIR/stdout"; : > "$RUNDIR/stderr"; : > "$RUNDIR/status"; : > "$RUNDIR/console.log"; : > "$RUNDIR/qemu.log"
    continue
  fi
  break
done

print_console() {
  {
    echo "----- guest console ($KVER) -----"
    tr -d '\r' < "$RUNDIR/console.log"
    if [ -s "$RUNDIR/qemu.log" ]; then echo "----- qemu output -----"; cat "$RUNDIR/qemu.log"; fi
    echo "----- guest status -----"
    cat "$RUNDIR/status"
    echo "----- end of guest console -----"
  } >&2
}
status_field() { awk -v k="$1" '$1 == k {print $2; exit}' "$RUNDIR/status"; }

RC=$(status_field rc)
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
  echo "run.sh: TIMEOUT: the guest did not finish within ${TIMEOUT}s and was killed (qemu exit $QRC)" >&2
  print_console
  EXIT=124
elif [ -z "$RC" ]; then
  if grep -q '^init-failed' "$RUNDIR/status"; then
    echo "run.sh: the guest's init failed: $(grep '^init-failed' "$RUNDIR/status" | head -n1)" >&2
  else
    why=$(tr -d '\r' < "$RUNDIR/console.log" | grep -m1 -E '^smcr-guest-init:|Kernel panic' )
    echo "run.sh: the guest ended without reporting an exit status (qemu exit $QRC)${why:+: $why}" >&2
  fi
  print_console
  EXIT=125
elif grep -q '^setup-failed' "$RUNDIR/status"; then
  echo "run.sh: guest setup failed before the command ran: $(grep '^setup-failed' "$RUNDIR/status" | cut -d' ' -f2-)" >&2
  print_console
  EXIT=125
elif grep -q '^cmd-timeout' "$RUNDIR/status"; then
  echo "run.sh: TIMEOUT: the command did not finish within the guest's limit ($(status_field cmd-timeout)s of --timeout ${TIMEOUT}s)" >&2
  print_console
  EXIT=124
else
  EXIT=$RC
  if [ "$RC" != 0 ] && [ "$RC" != 77 ]; then
    echo "run.sh: the command exited $RC in the guest" >&2
    print_console
  fi
fi

if [ "$VERBOSE" = 1 ]; then
  rss=$(cat "$RUNDIR/rss" 2>/dev/null)
  echo "run.sh: kernel $KVER: boot to init $(status_field boot)s, ready (rxe ACTIVE) $(status_field ready)s guest uptime;" \
       "command $(status_field cmd-ms) ms; total wall $(((T1 - T0) / 1000000)) ms; qemu peak RSS ${rss:-?} kB; exit $EXIT" >&2
fi
exit "$EXIT"
