#!/usr/bin/env bash
# smcr sidecar entrypoint (see docs/SIDECAR.md).
#
#   entrypoint.sh [run]      copy smc_run + libsmcr_preload.so (+ smcr_stat) into
#                            the shared volume, load the eBPF program, then wait;
#                            on SIGTERM/SIGINT unload it if SMCR_UNLOAD_ON_EXIT=1
#   entrypoint.sh install    only copy into the shared volume (unprivileged;
#                            a Kubernetes initContainer)
#   entrypoint.sh load       only load the eBPF program (privileged), then exit
#   entrypoint.sh unload     unload it
#   entrypoint.sh status     what is loaded and installed; exit 0 loaded, 3 not
#   entrypoint.sh check      health check: exit 0 if the volume holds this
#                            image's files and the program is loaded, 3 if the
#                            program is not loaded, 1 if the volume is not right
#   entrypoint.sh manifest   the files this script expects in the image and
#                            puts in the volume
#   entrypoint.sh CMD...     anything else is run as it is (a shell, smcr_stat)
#
# Environment:
#   SMCR_SHARE_DIR       the shared volume (default /smcr); it gets
#                        bin/smc_run, bin/smcr_stat, lib/smcr/libsmcr_preload.so
#   SMCR_UNLOAD_ON_EXIT  1: unload the program when the sidecar stops (default 0:
#                        leave it loaded, as other pods may use it)
#   SMCR_CGROUP          cgroup v2 directory to attach to (default: the host's
#                        root, the cgroup2 mount in /proc/mounts, which must be
#                        the host's and not a cgroup namespace view)
#   SMCR_BPF_PIN_DIR     pin directory (smcr_ctl's default /sys/fs/bpf/smcr)
#   SMCR_IMAGE_DIR       where the image keeps its files (default: the folder
#                        above this script's, /opt/smcr)
set -euo pipefail

here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
IMAGE_DIR=${SMCR_IMAGE_DIR:-$(dirname "$here")}
SHARE_DIR=${SMCR_SHARE_DIR:-/smcr}
CTL="$IMAGE_DIR/bin/smcr_ctl"
PIN_DIR=${SMCR_BPF_PIN_DIR:-/sys/fs/bpf/smcr}

# Files of the image (relative to IMAGE_DIR) and of the volume (relative to
# SHARE_DIR, copied from the same relative path in the image). Optional files
# are copied when the image has them. scripts/sidecar/stage.sh makes exactly
# IMAGE_FILES; the sidecar test checks that.
IMAGE_FILES=(bin/smc_run bin/smcr_ctl bin/smcr_stat lib/smcr/libsmcr_preload.so sidecar/entrypoint.sh)
# Order matters: smc_run last, so that a volume with bin/smc_run is complete.
SHARE_FILES=(lib/smcr/libsmcr_preload.so bin/smcr_stat bin/smc_run)
OPTIONAL_FILES=(bin/smcr_stat)

log() { printf 'smcr-sidecar: %s\n' "$*"; }
die() { printf 'smcr-sidecar: error: %s\n' "$*" >&2; exit "${2:-1}"; }

is_optional() {
  local f
  for f in "${OPTIONAL_FILES[@]}"; do [ "$f" = "$1" ] && return 0; done
  return 1
}

cmd_manifest() {
  local f
  for f in "${IMAGE_FILES[@]}"; do
    printf 'image %s %s\n' "$f" "$(is_optional "$f" && echo optional || echo required)"
  done
  for f in "${SHARE_FILES[@]}"; do
    printf 'share %s %s\n' "$f" "$(is_optional "$f" && echo optional || echo required)"
  done
}

check_image() {  # the image has every required file
  local f bad=0
  for f in "${IMAGE_FILES[@]}"; do
    if [ ! -f "$IMAGE_DIR/$f" ] && ! is_optional "$f"; then
      echo "smcr-sidecar: error: image file $IMAGE_DIR/$f is missing" >&2
      bad=1
    fi
  done
  return $bad
}

# --- install: copy into the shared volume -----------------------------------
# Each file is written under a temporary name and renamed over the old one, so
# that a program already running with the old library keeps its mapping intact
# (overwriting a mapped .so in place would crash it) and an application never
# sees a half-written file.
install_one() {  # install_one RELPATH
  local src="$IMAGE_DIR/$1" dst="$SHARE_DIR/$1" tmp
  if [ ! -f "$src" ]; then
    is_optional "$1" && return 0
    die "image file $src is missing"
  fi
  mkdir -p "$(dirname "$dst")"
  if [ -f "$dst" ] && [ -x "$dst" ] && cmp -s "$src" "$dst"; then return 0; fi
  tmp="$(dirname "$dst")/.$(basename "$dst").tmp.$$"
  cp "$src" "$tmp" && chmod 0755 "$tmp" && mv -f "$tmp" "$dst" || { rm -f "$tmp"; die "cannot write $dst"; }
}

cmd_install() {
  [ -d "$SHARE_DIR" ] || mkdir -p "$SHARE_DIR" 2>/dev/null ||
    die "shared volume $SHARE_DIR does not exist and cannot be created (mount one there: -v smcr:$SHARE_DIR, or set SMCR_SHARE_DIR)"
  [ -w "$SHARE_DIR" ] || die "shared volume $SHARE_DIR is not writable (mount it read-write in the sidecar)"
  check_image || exit 1
  local f
  for f in "${SHARE_FILES[@]}"; do install_one "$f"; done
  chmod 0755 "$SHARE_DIR" "$SHARE_DIR/bin" "$SHARE_DIR/lib" "$SHARE_DIR/lib/smcr" 2>/dev/null || true
  log "installed in $SHARE_DIR: $(cd "$SHARE_DIR" && for f in "${SHARE_FILES[@]}"; do [ -f "$f" ] && printf '%s ' "$f"; done)"
}

share_ok() {  # share_ok: the volume holds this image's files; prints what is wrong
  local f bad=0
  for f in "${SHARE_FILES[@]}"; do
    if [ ! -f "$IMAGE_DIR/$f" ] && is_optional "$f"; then continue; fi
    if [ ! -f "$SHARE_DIR/$f" ]; then
      echo "share: $SHARE_DIR/$f missing"; bad=1
    elif [ ! -x "$SHARE_DIR/$f" ]; then
      echo "share: $SHARE_DIR/$f not executable"; bad=1
    elif ! cmp -s "$IMAGE_DIR/$f" "$SHARE_DIR/$f"; then
      echo "share: $SHARE_DIR/$f differs from the image's"; bad=1
    fi
  done
  return $bad
}

# --- preflight for loading: name what is missing ----------------------------
cgroup2_mount() {  # the first cgroup2 mount in /proc/mounts (what smcr_ctl uses)
  awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts
}

has_cap() {  # has_cap BIT: the bit is set in CapEff
  local hex
  hex=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
  [ -n "$hex" ] && (( (16#$hex >> $1) & 1 ))
}

preflight() {
  local missing=() fstype cg
  [ "$(id -u)" -eq 0 ] || missing+=("root: the sidecar runs as uid $(id -u); loading needs uid 0 in a privileged container (--privileged / securityContext.privileged: true)")
  # CAP_SYS_ADMIN (21) or CAP_BPF (39), and CAP_NET_ADMIN (12) for cgroup sockops.
  if ! { has_cap 21 || has_cap 39; } || ! has_cap 12; then
    missing+=("privileges: CAP_SYS_ADMIN (or CAP_BPF) and CAP_NET_ADMIN are not in the effective set; run the sidecar with --privileged (docker/podman) or securityContext.privileged: true (Kubernetes)")
  fi
  fstype=$(stat -f -c %T /sys/fs/bpf 2>/dev/null || echo none)
  if [ "$fstype" != bpf_fs ]; then
    missing+=("/sys/fs/bpf: not a bpf filesystem (it is ${fstype}); mount the host's: -v /sys/fs/bpf:/sys/fs/bpf (Kubernetes: hostPath /sys/fs/bpf). The pins must live in the host's bpffs so that application containers see them and they outlive this container")
  fi
  if [ -n "${SMCR_CGROUP:-}" ]; then
    [ "$(stat -f -c %T "$SMCR_CGROUP" 2>/dev/null)" = cgroup2fs ] ||
      missing+=("SMCR_CGROUP=$SMCR_CGROUP: not a cgroup v2 directory")
  else
    cg=$(cgroup2_mount)
    if [ -z "$cg" ]; then
      missing+=("cgroup v2: no cgroup2 mount in /proc/mounts; mount the host's: -v /sys/fs/cgroup:/sys/fs/cgroup (the host needs cgroup v2, unified or hybrid)")
    elif [ -e "$cg/cgroup.type" ]; then
      # Only a non-root cgroup has cgroup.type: this is a cgroup namespace view.
      missing+=("cgroup v2: $cg is not the host's root cgroup (a cgroup namespace shows the container's own cgroup); run with --cgroupns=host and -v /sys/fs/cgroup:/sys/fs/cgroup (Kubernetes: hostPath /sys/fs/cgroup), or set SMCR_CGROUP")
    fi
  fi
  [ -x "$CTL" ] || missing+=("smcr_ctl: $CTL is missing from the image")
  if ((${#missing[@]})); then
    echo "smcr-sidecar: error: cannot load the eBPF program:" >&2
    local m
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    return 1
  fi
}

cmd_load() {
  preflight || exit 1
  local args=()
  [ -n "${SMCR_CGROUP:-}" ] && args=(--cgroup "$SMCR_CGROUP")
  "$CTL" load "${args[@]}" || die "smcr_ctl load failed"
}

cmd_unload() {
  [ -x "$CTL" ] || die "smcr_ctl: $CTL is missing from the image"
  "$CTL" unload
}

bpf_state() {  # prints smcr_ctl status; returns its code (0 loaded, 3 not)
  [ -x "$CTL" ] || { echo "smcr_ctl: $CTL is missing from the image"; return 1; }
  local rc=0
  "$CTL" status 2>&1 || rc=$?
  return $rc
}

cmd_status() {
  local rc=0 out
  out=$(bpf_state) || rc=$?
  case $rc in
    0) echo "bpf: loaded ($PIN_DIR)" ;;
    3) echo "bpf: not loaded ($PIN_DIR)" ;;
    *) echo "bpf: unknown (smcr_ctl status exit $rc)" ;;
  esac
  printf '%s\n' "$out" | sed 's/^/  /'
  if out=$(share_ok); then
    echo "share: $SHARE_DIR holds this image's files"
  else
    printf '%s\n' "$out"
  fi
  return $rc
}

cmd_check() {
  local rc=0 src=0 out
  bpf_state >/dev/null 2>&1 || rc=$?
  case $rc in
    0) echo "bpf: loaded ($PIN_DIR)" ;;
    3) echo "bpf: not loaded ($PIN_DIR)" ;;
    *) echo "bpf: unknown (smcr_ctl status exit $rc)"; rc=1 ;;
  esac
  if out=$(share_ok); then echo "share: ok ($SHARE_DIR)"; else printf '%s\n' "$out"; src=1; fi
  [ $src -eq 0 ] || return 1
  return $rc
}

# --- run: install, load, wait -----------------------------------------------
on_stop() {
  log "stopping"
  if [ "${SMCR_UNLOAD_ON_EXIT:-0}" = 1 ]; then
    "$CTL" unload || { log "unload failed"; exit 1; }
  else
    log "leaving the eBPF program loaded (SMCR_UNLOAD_ON_EXIT=1 unloads it)"
  fi
  [ -n "${sleep_pid:-}" ] && kill "$sleep_pid" 2>/dev/null
  exit 0
}

cmd_run() {
  cmd_install
  cmd_load
  log "ready: application containers run $SHARE_DIR/bin/smc_run PROGRAM"
  trap on_stop TERM INT
  # A child to wait on: bash runs the trap as soon as `wait` is interrupted
  # (as PID 1 too, since the signal has a handler). A sleep killed by someone
  # else is replaced.
  while :; do
    sleep infinity &
    sleep_pid=$!
    wait "$sleep_pid" || true
  done
}

cmd=${1:-run}
case "$cmd" in
  run) cmd_run ;;
  install) cmd_install ;;
  load) cmd_load ;;
  unload) cmd_unload ;;
  status) cmd_status ;;
  check) cmd_check ;;
  manifest) cmd_manifest ;;
  -h|--help|help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0" ;;
  *) exec "$@" ;;
esac
