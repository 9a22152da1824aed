#!/usr/bin/env bash
# Checks the sidecar image (Dockerfile, scripts/sidecar/, docs/SIDECAR.md).
#
#   scripts/sidecar/check-image.sh [layout]   without a container engine: the
#       Dockerfile's stages against what entrypoint.sh expects, the image tree
#       made by stage.sh from a build tree, the entrypoint's install step into a
#       temporary "volume", smc_run from that volume, ldd, and (as root) the
#       entrypoint's load/check/status/SIGTERM behaviour and its error messages
#   scripts/sidecar/check-image.sh engine     builds the image with podman or
#       docker (or takes SMCR_SIDECAR_IMAGE), checks its contents and runs it:
#       sidecar privileged, then an application container using the volume
#
# Environment: SMCR_BUILD_DIR (default <source>/build), SMCR_SOURCE_DIR
# (default: the checkout this script is in); for `engine`: SMCR_SIDECAR_ENGINE
# (podman|docker; default the first that runs a debian:12 container),
# SMCR_SIDECAR_IMAGE (an already built image: no build), SMCR_ENGINE_OPTS and
# SMCR_ENGINE_RUN_OPTS (extra global / run+build options; by default tried
# bare, then with the fallbacks this script knows for nested environments).
# Exit: 0 all checks passed, 1 some failed, 77 skipped (the reason printed).
set -uo pipefail

here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
SRC=${SMCR_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
BUILD=${SMCR_BUILD_DIR:-$SRC/build}
MODE=${1:-layout}
ENTRY="$SRC/scripts/sidecar/entrypoint.sh"
STAGE="$SRC/scripts/sidecar/stage.sh"
CTL="$BUILD/bpf/smcr_ctl"

T=$(mktemp -d /tmp/smcr-sidecar-check.XXXXXX)
chmod 0755 "$T"  # the non-root check runs a staged script from here
CLEANUPS=()
cleanup() {
  local i
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[$i]}" >/dev/null 2>&1 || true; done
  rm -rf "$T"
}
trap cleanup EXIT

FAILS=0 CHECKS=0
log() { printf '[sidecar] %s\n' "$*"; }
skip() { log "SKIP: $*"; exit 77; }
check() {  # check "description" command...
  local what=$1; shift
  CHECKS=$((CHECKS + 1))
  if "$@"; then log "ok: $what"; else log "FAIL: $what"; FAILS=$((FAILS + 1)); fi
}
finish() {
  log "$CHECKS checks, $FAILS failed"
  [ "$CHECKS" -gt 0 ] || { log "FAIL: no checks ran"; exit 1; }
  [ "$FAILS" -eq 0 ] && exit 0 || exit 1
}
same() {  # same A B: equal strings, showing both when not
  [ "$1" = "$2" ] && return 0
  printf '  expected: %s\n  got:      %s\n' "$2" "$1" | sed 's/^/[sidecar]/' >&2
  return 1
}
contains() {  # contains HAYSTACK NEEDLE
  case "$1" in *"$2"*) return 0 ;; esac
  printf '[sidecar]   %s\n[sidecar]   does not contain: %s\n' "$1" "$2" >&2
  return 1
}
is_root() { [ "$(id -u)" -eq 0 ]; }
cg2_root() { awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts; }

[ -x "$ENTRY" ] || { log "FAIL: $ENTRY missing or not executable"; exit 1; }

# What entrypoint.sh expects: image files and volume files (sorted lists).
manifest() { "$ENTRY" manifest | awk -v k="$1" '$1 == k { print $2 }' | sort; }
IMAGE_FILES=$(manifest image)
SHARE_FILES=$(manifest share)

# --- Dockerfile facts -------------------------------------------------------
dockerfile_facts() {  # key=value lines about the Dockerfile's stages
  python3 - "$SRC/Dockerfile" <<'EOF'
import json, re, shlex, sys
text = open(sys.argv[1]).read()
lines, cur = [], ""
for raw in text.splitlines():
    s = raw.strip()
    if not cur and (not s or s.startswith("#")):
        continue
    if s.startswith("#"):
        continue
    if s.endswith("\\"):
        cur += s[:-1] + " "
        continue
    cur += s
    lines.append(cur)
    cur = ""
if cur:
    lines.append(cur)
stages = []  # [name, base, [(instr, args)]]
for l in lines:
    instr, _, args = l.partition(" ")
    instr = instr.upper()
    if instr == "FROM":
        m = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.I)
        stages.append([m.group(2) or str(len(stages)), m.group(1), []])
    elif stages:
        stages[-1][2].append((instr, args.strip()))
final = stages[-1]
out = {"stages": " ".join(s[0] for s in stages),
       "bases": " ".join(sorted(set(s[1] for s in stages))),
       "final": final[0]}
copies, adds, apt = [], 0, []
for instr, args in final[2]:
    if instr == "COPY":
        toks = shlex.split(args)
        frm = [t.split("=", 1)[1] for t in toks if t.startswith("--from=")]
        paths = [t for t in toks if not t.startswith("--")]
        copies.append("%s:%s" % (frm[0] if frm else "context", ",".join(paths)))
    elif instr == "ADD":
        adds += 1
    elif instr == "RUN":
        for cmd in re.split(r"&&|;", args):
            t = cmd.split()
            if "apt-get" in t and "install" in t:
                apt += [x for x in t[t.index("install") + 1:] if not x.startswith("-")]
    elif instr == "ENTRYPOINT":
        try:
            ep = json.loads(args)
        except ValueError:
            ep = ["<shell form>", args]
        out["entrypoint"] = ep[0] if ep else ""
out["final_copies"] = " ".join(copies)
out["final_adds"] = str(adds)
out["final_apt"] = " ".join(sorted(set(apt)))
for name, base, ins in stages[:-1]:
    for instr, args in ins:
        if instr != "RUN":
            continue
        m = re.search(r"scripts/sidecar/stage\.sh\s+(?:--strip\s+)?(\S+)\s+(\S+)\s+(\S+)", args)
        if m:
            out["stage_in"] = name
            out["stage_build"], out["stage_src"], out["stage_dest"] = m.groups()
            t = re.search(r"--target\s+((?:[\w.+-]+\s*)+)", args)
            out["targets"] = " ".join(sorted(t.group(1).split())) if t else ""
for k, v in out.items():
    print("%s=%s" % (k, v))
EOF
}

layout_checks() {
  local facts
  facts=$(dockerfile_facts) || { log "FAIL: cannot parse $SRC/Dockerfile"; exit 1; }
  fact() { printf '%s\n' "$facts" | awk -F= -v k="$1" '$1 == k { sub(/^[^=]*=/, ""); print; exit }'; }
  local dest; dest=$(fact stage_dest)
  log "Dockerfile: stages $(fact stages); final $(fact final); stage.sh -> ${dest:-?}; final COPY $(fact final_copies)"

  check "Dockerfile: every stage is FROM debian:12" same "$(fact bases)" "debian:12"
  check "Dockerfile: a build stage lays out the image with scripts/sidecar/stage.sh" [ -n "$dest" ]
  check "Dockerfile: stage.sh gets the build tree and the source tree" \
    same "$(fact stage_build) $(fact stage_src)" "build ."
  check "Dockerfile: the build stage builds smcr_preload, smcr_ctl and smcr_stat" \
    same "$(fact targets)" "smcr_ctl smcr_preload smcr_stat"
  check "Dockerfile: the final stage copies exactly the staged tree ($dest) to the same path, nothing else" \
    same "$(fact final_copies) adds=$(fact final_adds)" "$(fact stage_in):$dest,$dest adds=0"
  check "Dockerfile: ENTRYPOINT is the staged entrypoint ($dest/sidecar/entrypoint.sh)" \
    same "$(fact entrypoint)" "$dest/sidecar/entrypoint.sh"
  check "entrypoint manifest lists sidecar/entrypoint.sh among the image files" \
    contains " $(echo $IMAGE_FILES) " " sidecar/entrypoint.sh "

  # The image tree, made as the Dockerfile's build stage makes it.
  local img="$T/image"
  check "stage.sh lays out the image tree from the build tree" \
    bash "$STAGE" "$BUILD" "$SRC" "$img"
  local staged; staged=$(cd "$img" 2>/dev/null && find . -type f -o -type l | sed 's|^\./||' | sort)
  check "the staged tree holds exactly the files entrypoint.sh expects in the image" \
    same "$(echo $staged)" "$(echo $IMAGE_FILES)"
  check "the staged smc_run is scripts/smc_run" cmp -s "$img/bin/smc_run" "$SRC/scripts/smc_run"
  check "the staged entrypoint is scripts/sidecar/entrypoint.sh" cmp -s "$img/sidecar/entrypoint.sh" "$ENTRY"

  # Runtime packages: every shared library the image's ELF files load comes
  # from a package the final stage installs (libc6 is in every Debian image).
  if command -v dpkg-query >/dev/null 2>&1; then
    local f l p pkgs="" missing=""
    for f in bin/smcr_ctl bin/smcr_stat lib/smcr/libsmcr_preload.so; do
      [ -f "$img/$f" ] || continue
      for l in $(ldd "$img/$f" | awk '$3 ~ /^\// { print $3 }'); do
        p=$(dpkg-query -S "$l" 2>/dev/null || dpkg-query -S "$(readlink -f "$l")" 2>/dev/null || dpkg-query -S "/usr$(readlink -f "$l")" 2>/dev/null)
        p=${p%%:*}
        [ -n "$p" ] && pkgs="$pkgs $p"
      done
    done
    pkgs=$(printf '%s\n' $pkgs | sort -u | grep -vx libc6)
    for p in $pkgs; do
      case " $(fact final_apt) " in *" $p "*) ;; *) missing="$missing $p" ;; esac
    done
    log "runtime packages of the image's binaries (ldd + dpkg): $(echo $pkgs); the final stage installs: $(fact final_apt)"
    check "the final stage installs the packages of every library the binaries load" same "${missing# }" ""
  else
    log "no dpkg-query: runtime package check not run"
  fi

  # --- the entrypoint's install step into a temporary shared volume --------
  local share="$T/share" out rc
  out=$(env -u SMCR_IMAGE_DIR SMCR_SHARE_DIR="$share" "$img/sidecar/entrypoint.sh" install 2>&1); rc=$?
  log "install: $out"
  check "entrypoint install exits 0" [ $rc -eq 0 ]
  local got; got=$(cd "$share" 2>/dev/null && find . -type f -o -type l | sed 's|^\./||' | sort)
  check "the volume holds exactly bin/smc_run, bin/smcr_stat, lib/smcr/libsmcr_preload.so" \
    same "$(echo $got)" "$(echo $SHARE_FILES)"
  local f
  for f in $SHARE_FILES; do
    check "volume $f is executable and the image's file" eval "[ -x '$share/$f' ] && cmp -s '$img/$f' '$share/$f'"
  done

  # Re-install: identical files are left alone; a changed one is replaced by
  # rename, so that a process holding the old one keeps intact content.
  local lib="$share/lib/smcr/libsmcr_preload.so" ino1 ino2 ino3
  ino1=$(stat -c %i "$lib" 2>/dev/null)
  SMCR_SHARE_DIR="$share" "$img/sidecar/entrypoint.sh" install >/dev/null 2>&1
  ino2=$(stat -c %i "$lib" 2>/dev/null)
  check "re-install leaves an identical library in place (same inode)" same "$ino2" "$ino1"
  printf 'old library\n' > "$lib"
  exec {old_fd}<"$lib"
  SMCR_SHARE_DIR="$share" "$img/sidecar/entrypoint.sh" install >/dev/null 2>&1
  ino3=$(stat -c %i "$lib" 2>/dev/null)
  check "re-install replaces a changed library by rename (new inode, image content)" \
    eval "[ '$ino3' != '$ino1' ] && cmp -s '$img/lib/smcr/libsmcr_preload.so' '$lib'"
  check "a process holding the old library still reads its old content" \
    same "$(cat <&$old_fd)" "old library"
  exec {old_fd}<&-

  # --- smc_run from the volume finds the library in the volume by itself ---
  local reallib; reallib=$(readlink -f "$lib")
  out=$(env -u SMCR_PRELOAD_LIB -u LD_PRELOAD "$share/bin/smc_run" /bin/true 2>&1); rc=$?
  check "<volume>/bin/smc_run /bin/true works with SMCR_PRELOAD_LIB unset (rc $rc, stderr '${out}')" \
    eval "[ $rc -eq 0 ] && [ -z \"\$out\" ]"
  out=$(env -u SMCR_PRELOAD_LIB -u LD_PRELOAD "$share/bin/smc_run" /bin/sh -c 'echo "$LD_PRELOAD"; cat /proc/$$/maps' 2>&1)
  check "smc_run sets LD_PRELOAD to the volume's library" same "$(printf '%s\n' "$out" | head -1)" "$reallib"
  check "the volume's library is mapped in the program smc_run starts" \
    contains "$(printf '%s\n' "$out" | awk '$6 ~ /libsmcr_preload/ { print $6 }' | sort -u)" "$reallib"
  # A copy of the volume elsewhere works the same (nothing absolute inside).
  cp -a "$share" "$T/moved"
  out=$(env -u SMCR_PRELOAD_LIB -u LD_PRELOAD "$T/moved/bin/smc_run" /bin/sh -c 'echo "$LD_PRELOAD"' 2>&1)
  check "a copy of the volume at another path uses its own library" same "$out" "$(readlink -f "$T/moved/lib/smcr/libsmcr_preload.so")"
  rm -rf "$T/moved"

  out=$(ldd "$lib" 2>&1)
  log "ldd libsmcr_preload.so: $(printf '%s\n' "$out" | awk '{ print $1 }' | tr '\n' ' ')"
  check "ldd of the volume's library: no 'not found'" eval "! printf '%s\n' \"\$out\" | grep -q 'not found'"
  check "ldd of the volume's library: the instrument sees libc" eval "printf '%s\n' \"\$out\" | grep -q 'libc.so.6 => /'"
  # rdma-core is opened at run time, when the verbs fabric is wanted
  # (core/verbs_loader.cc): an application image without it still runs the shim.
  check "ldd of the volume's library: no rdma-core (opened at run time)" eval "! printf '%s\n' \"\$out\" | grep -q 'libibverbs'"

  # --- check / status: program not loaded (a pin directory nobody uses) ----
  local absent="/sys/fs/bpf/smcr-sidecar-absent-$$"
  out=$(SMCR_SHARE_DIR="$share" SMCR_BPF_PIN_DIR="$absent" "$img/sidecar/entrypoint.sh" check 2>&1); rc=$?
  log "check (not loaded): rc=$rc: $(echo $out)"
  check "check: not loaded -> exit 3" same "$rc" 3
  check "check: not loaded -> says so" contains "$out" "bpf: not loaded"
  check "check: not loaded -> the volume is ok" contains "$out" "share: ok"
  out=$(SMCR_SHARE_DIR="$share" SMCR_BPF_PIN_DIR="$absent" "$img/sidecar/entrypoint.sh" status 2>&1); rc=$?
  check "status: not loaded -> exit 3 and says so" eval "[ $rc -eq 3 ] && printf '%s' \"\$out\" | grep -q 'bpf: not loaded'"

  # A broken volume is reported, naming the file.
  cp -a "$share" "$T/broken"
  rm -f "$T/broken/lib/smcr/libsmcr_preload.so"
  out=$(SMCR_SHARE_DIR="$T/broken" SMCR_BPF_PIN_DIR="$absent" "$img/sidecar/entrypoint.sh" check 2>&1); rc=$?
  check "check: a volume without the library -> exit 1, naming it" \
    eval "[ $rc -eq 1 ] && printf '%s' \"\$out\" | grep -q 'libsmcr_preload.so missing'"
  printf 'x' >> "$T/broken/bin/smc_run"
  out=$(SMCR_SHARE_DIR="$T/broken" SMCR_BPF_PIN_DIR="$absent" "$img/sidecar/entrypoint.sh" check 2>&1)
  check "check: a volume with a changed smc_run -> names it" contains "$out" "bin/smc_run differs"

  if ! is_root; then
    log "not root: load/unload, SIGTERM and preflight checks not run"
    return
  fi
  [ -x "$CTL" ] || { log "FAIL: $CTL not built"; FAILS=$((FAILS + 1)); return; }

  # --- check / status: program loaded (the default pins, as the other tests) -
  "$CTL" status >/dev/null 2>&1 || "$CTL" load >/dev/null || { log "FAIL: smcr_ctl load"; FAILS=$((FAILS + 1)); }
  out=$(env -u SMCR_BPF_PIN_DIR SMCR_SHARE_DIR="$share" "$img/sidecar/entrypoint.sh" check 2>&1); rc=$?
  log "check (loaded): rc=$rc: $(echo $out)"
  check "check: loaded -> exit 0" same "$rc" 0
  check "check: loaded -> says so" contains "$out" "bpf: loaded"
  out=$(env -u SMCR_BPF_PIN_DIR SMCR_SHARE_DIR="$share" "$img/sidecar/entrypoint.sh" status 2>&1); rc=$?
  check "status: loaded -> exit 0, with smcr_ctl's cgroup line" \
    eval "[ $rc -eq 0 ] && printf '%s' \"\$out\" | grep -q 'cgroup: '"

  # --- run / SIGTERM, in a cgroup of our own with pins of our own, so that
  # nothing else on this host is touched --------------------------------------
  local root; root=$(cg2_root)
  if [ -z "$root" ]; then
    log "no cgroup2 mount: run/SIGTERM checks not run"
  else
    local cg="$root/smcr-sidecar-test-$$" pins="/sys/fs/bpf/smcr-sidecar-test-$$"
    mkdir "$cg"
    CLEANUPS+=("SMCR_BPF_PIN_DIR='$pins' '$CTL' unload; rmdir '$cg'")
    run_lifecycle() {  # run_lifecycle UNLOAD(0|1): sets LC_* results
      local vol="$T/vol$1" i
      SMCR_SHARE_DIR="$vol" SMCR_BPF_PIN_DIR="$pins" SMCR_CGROUP="$cg" SMCR_UNLOAD_ON_EXIT=$1 \
        "$img/sidecar/entrypoint.sh" run >"$T/run$1.log" 2>&1 &
      local pid=$!
      LC_READY=1
      for ((i = 0; i < 100; i++)); do
        SMCR_SHARE_DIR="$vol" SMCR_BPF_PIN_DIR="$pins" "$img/sidecar/entrypoint.sh" check >/dev/null 2>&1 && { LC_READY=0; break; }
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
      done
      LC_STATUS=$(SMCR_BPF_PIN_DIR="$pins" "$CTL" status 2>&1)
      LC_INSTALLED=$( [ -x "$vol/bin/smc_run" ] && echo yes || echo no)
      kill -TERM $pid 2>/dev/null
      LC_EXIT=timeout
      for ((i = 0; i < 100; i++)); do
        kill -0 $pid 2>/dev/null || { wait $pid; LC_EXIT=$?; break; }
        sleep 0.1
      done
      [ "$LC_EXIT" = timeout ] && kill -KILL $pid 2>/dev/null
      SMCR_BPF_PIN_DIR="$pins" "$CTL" status >/dev/null 2>&1; LC_AFTER=$?
      log "run (SMCR_UNLOAD_ON_EXIT=$1): $(tr '\n' '|' < "$T/run$1.log")"
    }
    run_lifecycle 1
    check "run: installs the volume and loads; check turns healthy" eval "[ $LC_READY -eq 0 ] && [ $LC_INSTALLED = yes ]"
    check "run: attached to SMCR_CGROUP" contains "$LC_STATUS" "cgroup: $cg"
    check "run: SIGTERM ends it with exit 0" same "$LC_EXIT" 0
    check "run: SMCR_UNLOAD_ON_EXIT=1 unloads on SIGTERM" same "$LC_AFTER" 3
    check "run: no pin directory left after unload" [ ! -e "$pins" ]
    run_lifecycle 0
    check "run (no SMCR_UNLOAD_ON_EXIT): healthy, SIGTERM exits 0" eval "[ $LC_READY -eq 0 ] && [ '$LC_EXIT' = 0 ]"
    check "run (no SMCR_UNLOAD_ON_EXIT): the program stays loaded after SIGTERM" same "$LC_AFTER" 0
    out=$(SMCR_BPF_PIN_DIR="$pins" "$img/sidecar/entrypoint.sh" unload 2>&1); rc=$?
    check "unload: exits 0 and the program is gone" \
      eval "[ $rc -eq 0 ] && ! SMCR_BPF_PIN_DIR='$pins' '$CTL' status >/dev/null 2>&1"
  fi

  # --- load's preflight names what is missing --------------------------------
  if command -v unshare >/dev/null 2>&1 && [ -n "$root" ]; then
    local env=(env SMCR_BPF_PIN_DIR="/sys/fs/bpf/smcr-sidecar-test-$$" SMCR_SHARE_DIR="$share")
    # No bpffs at /sys/fs/bpf (a private mount namespace hides it).
    out=$("${env[@]}" SMCR_CGROUP="$cg" unshare -m --propagation private \
      sh -c 'mount -t tmpfs none /sys/fs/bpf && exec "$0" load' "$img/sidecar/entrypoint.sh" 2>&1); rc=$?
    check "load without the host's bpffs fails, naming /sys/fs/bpf and the -v to add" \
      eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q -- '-v /sys/fs/bpf:/sys/fs/bpf'"
    # No cgroup2 mount.
    out=$("${env[@]}" unshare -m --propagation private sh -c '
      for m in $(awk '\''$3 == "cgroup2" { print $2 }'\'' /proc/mounts); do umount -l "$m" || exit 9; done
      exec "$0" load' "$img/sidecar/entrypoint.sh" 2>&1); rc=$?
    check "load without a cgroup2 mount fails, naming cgroup v2 and the -v to add" \
      eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q 'cgroup v2: no cgroup2 mount' && printf '%s' \"\$out\" | grep -q -- '-v /sys/fs/cgroup:/sys/fs/cgroup'"
    # A cgroup namespace view: the process sits in our cgroup, unshares its
    # cgroup namespace and mounts cgroup2 again: the "root" is not the host's.
    out=$("${env[@]}" sh -c 'echo $$ > "$1/cgroup.procs" && exec unshare -C -m --propagation private sh -c "
      umount -l \"\$0\" && mount -t cgroup2 none \"\$0\" && exec \"\$1\" load" "$2" "$3"' sh "$cg" "$root" "$img/sidecar/entrypoint.sh" 2>&1); rc=$?
    check "load in a cgroup namespace view fails, saying it is not the host's root cgroup" \
      eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q \"not the host's root cgroup\""
    # Not root and no capabilities.
    if command -v setpriv >/dev/null 2>&1; then
      out=$("${env[@]}" setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all \
        "$img/sidecar/entrypoint.sh" load 2>&1); rc=$?
      check "load unprivileged fails, asking for --privileged" \
        eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q -- '--privileged'"
    fi
    log "preflight message (example): $(printf '%s\n' "$out" | tr '\n' ' ')"
    check "no test pins left behind by the preflight checks" [ ! -e "/sys/fs/bpf/smcr-sidecar-test-$$" ]
  else
    log "no unshare or no cgroup2: preflight checks not run"
  fi
}

# --- engine ----------------------------------------------------------------
ENGINE="" EOPTS=() RUNOPTS=() ONLYRUN=()
eng() { "$ENGINE" "${EOPTS[@]}" "$@"; }
loaded() { SMCR_BPF_PIN_DIR=${1:-/sys/fs/bpf/smcr} "$CTL" status >/dev/null 2>&1; }

pick_engine() {  # sets ENGINE, EOPTS, RUNOPTS to something that runs debian:12, or skips
  local cands=() e why=""
  if [ -n "${SMCR_SIDECAR_ENGINE:-}" ]; then cands=("$SMCR_SIDECAR_ENGINE"); else cands=(podman docker); fi
  for e in "${cands[@]}"; do
    command -v "$e" >/dev/null 2>&1 || { why="$why $e: not installed;"; continue; }
    local tries=()
    if [ -n "${SMCR_ENGINE_OPTS:-}${SMCR_ENGINE_RUN_OPTS:-}" ]; then
      tries=("${SMCR_ENGINE_OPTS:-}|${SMCR_ENGINE_RUN_OPTS:-}")
    elif [ "$e" = podman ]; then
      # Bare, then what a nested root environment needs: vfs storage (no
      # overlay on overlay), runc (crun refuses hybrid cgroup hosts), cgroupfs,
      # rlimits not above the caller's (no CAP_SYS_RESOURCE).
      tries=("|" "--storage-driver vfs --cgroup-manager cgroupfs --runtime runc|--ulimit nofile=1024:1024 --ulimit nproc=4096:4096")
    else
      tries=("|")
    fi
    local t
    for t in "${tries[@]}"; do
      ENGINE=$e
      read -r -a EOPTS <<<"${t%%|*}"
      read -r -a RUNOPTS <<<"${t#*|}"
      local err label="$e${EOPTS[*]:+ ${EOPTS[*]}}"
      if ! err=$(timeout 60 "$ENGINE" "${EOPTS[@]}" info 2>&1 >/dev/null); then
        why="$why $label: $(printf '%s' "$err" | tail -1);"
        continue
      fi
      if ! eng image inspect debian:12 >/dev/null 2>&1; then
        why="$why $label: no debian:12 image (no registry here? see docs/SIDECAR.md);"
        continue
      fi
      if err=$(timeout 120 "$ENGINE" "${EOPTS[@]}" run --rm "${RUNOPTS[@]}" debian:12 true 2>&1); then
        log "engine: $ENGINE ${EOPTS[*]} (run/build options: ${RUNOPTS[*]:-none})"
        # podman runs a docker-format HEALTHCHECK through systemd timers; the
        # short runs here need none (and there may be no systemd).
        [ "$ENGINE" = podman ] && ONLYRUN=(--no-healthcheck)
        return 0
      fi
      why="$why $label: $(printf '%s' "$err" | tail -1);"
    done
  done
  skip "no usable container engine:$why"
}

engine_checks() {
  pick_engine
  local img=${SMCR_SIDECAR_IMAGE:-} out rc
  local app=localhost/smcr-sidecar-app:check bopts=()
  [ "$ENGINE" = podman ] && bopts=(--format docker --layers=false)
  if [ -n "$img" ]; then
    eng image inspect "$img" >/dev/null 2>&1 || { log "FAIL: SMCR_SIDECAR_IMAGE=$img not found"; exit 1; }
  else
    img=localhost/smcr-sidecar:check
    # Built images go away afterwards (vfs storage keeps a full copy per
    # layer), unless SMCR_SIDECAR_KEEP_IMAGE=1.
    [ "${SMCR_SIDECAR_KEEP_IMAGE:-0}" = 1 ] || CLEANUPS+=("eng rmi -f $img $app")
    log "building $img from $SRC (the build stage installs the build dependencies: minutes)"
    timeout 3000 "$ENGINE" "${EOPTS[@]}" build "${RUNOPTS[@]}" "${bopts[@]}" --network host \
      -t "$img" "$SRC" >"$T/build.log" 2>&1; rc=$?
    tail -5 "$T/build.log" | sed 's/^/[sidecar] build: /'
    check "image build ($ENGINE build) exits 0" same "$rc" 0
    [ $rc -eq 0 ] || finish
  fi
  local run=(eng run --rm "${RUNOPTS[@]}" "${ONLYRUN[@]}")

  # Contents: exactly the manifest under /opt/smcr; entrypoint; runtime libs.
  out=$("${run[@]}" --entrypoint /bin/sh "$img" -c 'cd /opt/smcr && find . -type f -o -type l | sed "s|^\./||" | sort' 2>"$T/err")
  check "image /opt/smcr holds exactly the files entrypoint.sh expects" same "$(echo $out)" "$(echo $IMAGE_FILES)"
  out=$(eng image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' "$img" 2>&1)
  check "image entrypoint and default command" same "$out" '["/opt/smcr/sidecar/entrypoint.sh"] ["run"]'
  out=$("${run[@]}" --entrypoint /bin/sh "$img" -c 'ldd /opt/smcr/bin/smcr_ctl /opt/smcr/bin/smcr_stat /opt/smcr/lib/smcr/libsmcr_preload.so' 2>&1)
  check "in the image, ldd of smcr_ctl, smcr_stat and the library: no 'not found'" \
    eval "! printf '%s\n' \"\$out\" | grep -q 'not found'"
  check "the image's entrypoint is this checkout's" \
    same "$("${run[@]}" --entrypoint /bin/cat "$img" /opt/smcr/sidecar/entrypoint.sh 2>/dev/null | sha256sum)" "$(sha256sum < "$ENTRY")"

  # install into a host directory as the volume; smc_run from it on this host.
  local vol="$T/evol"; mkdir -p "$vol"
  out=$("${run[@]}" -v "$vol:/smcr" "$img" install 2>&1); rc=$?
  log "engine install: $out"
  local got; got=$(cd "$vol" && find . -type f | sed 's|^\./||' | sort)
  check "engine: install fills the volume with exactly the expected files" \
    eval "[ $rc -eq 0 ] && [ '$(echo $got)' = '$(echo $SHARE_FILES)' ]"
  out=$(env -u SMCR_PRELOAD_LIB "$vol/bin/smc_run" /bin/sh -c 'echo "$LD_PRELOAD"' 2>&1)
  check "engine: the volume's smc_run picks the volume's library" same "$out" "$(readlink -f "$vol/lib/smcr/libsmcr_preload.so")"

  # Loading without privileges / without the host mounts: clear errors.
  out=$("${run[@]}" "$img" load 2>&1); rc=$?
  check "engine: load without --privileged fails asking for it" \
    eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q -- '--privileged'"
  log "engine: unprivileged load says: $(echo $out)"
  out=$("${run[@]}" --privileged "$img" load 2>&1); rc=$?
  log "engine: privileged load without host mounts says: $(echo $out)"
  check "engine: privileged load without -v /sys/fs/bpf fails naming it" \
    eval "[ $rc -ne 0 ] && printf '%s' \"\$out\" | grep -q -- '-v /sys/fs/bpf:/sys/fs/bpf'"

  if ! is_root; then log "not root: privileged sidecar runs not tried"; finish; fi
  local root; root=$(cg2_root)
  [ -n "$root" ] || { log "no cgroup2 on this host: sidecar runs not tried"; finish; }

  # The sidecar as documented (default pins, the host's root cgroup; already
  # loaded by the other tests or loaded now, left loaded as they leave it).
  local sc="smcr-sidecar-check-$$" vol2="$T/evol2" i
  mkdir -p "$vol2"
  CLEANUPS+=("eng rm -f $sc")
  local cgopt=(); [ "$ENGINE" = docker ] && cgopt=(--cgroupns=host)
  out=$(eng run -d --name "$sc" "${RUNOPTS[@]}" "${ONLYRUN[@]}" --privileged "${cgopt[@]}" \
    -v /sys/fs/bpf:/sys/fs/bpf -v /sys/fs/cgroup:/sys/fs/cgroup -v "$vol2:/smcr" "$img" 2>&1); rc=$?
  check "engine: the sidecar starts (privileged, host bpffs and cgroup)" same "$rc" 0
  rc=1
  for ((i = 0; i < 100; i++)); do
    eng exec "$sc" /opt/smcr/sidecar/entrypoint.sh check >/dev/null 2>&1 && { rc=0; break; }
    sleep 0.2
  done
  log "engine: sidecar log: $(eng logs "$sc" 2>&1 | tr '\n' '|')"
  check "engine: the sidecar's check turns healthy" same "$rc" 0
  check "engine: the host sees the program loaded (pins in the host's bpffs)" loaded
  check "engine: the host sees the sidecar's files in the volume" [ -x "$vol2/bin/smc_run" ]

  # An application container: plain Debian 12 (no rdma-core: the shim opens
  # libibverbs only for the verbs fabric), the volume read-only, the host's
  # bpffs; two processes in it talk SMC-R over the shm fabric.
  if ! eng image inspect "$app" >/dev/null 2>&1; then
    printf 'FROM debian:12\n' > "$T/App.Dockerfile"
    timeout 900 "$ENGINE" "${EOPTS[@]}" build "${RUNOPTS[@]}" "${bopts[@]}" --network host -t "$app" -f "$T/App.Dockerfile" "$T" >"$T/app-build.log" 2>&1 ||
      { tail -3 "$T/app-build.log"; log "FAIL: app image build"; FAILS=$((FAILS + 1)); }
  fi
  local echo_tool="$BUILD/tests/integration/echo_tool"
  if [ -x "$echo_tool" ] && eng image inspect "$app" >/dev/null 2>&1; then
    # shellcheck disable=SC2016
    local pair='/smcr/bin/smc_run -d /echo_tool server --port 7100 --max-conns 1 2>/tmp/s.err & sleep 1;
      /smcr/bin/smc_run -d /echo_tool client --port 7100 --bytes 1M 2>/tmp/c.err; wait; cat /tmp/s.err /tmp/c.err'
    local appargs=(-v "$vol2:/smcr:ro" -v /sys/fs/bpf:/sys/fs/bpf:ro -v "$echo_tool:/echo_tool:ro")
    # seccomp: the engine's default profile refuses bpf(2) without
    # CAP_SYS_ADMIN; seccomp-allow-bpf.sh makes one that allows it.
    local seccomp=unconfined prof=${SMCR_SECCOMP_DEFAULT:-}
    [ -z "$prof" ] && [ "$ENGINE" = podman ] && prof=/usr/share/containers/seccomp.json
    if [ -n "$prof" ] && bash "$SRC/scripts/sidecar/seccomp-allow-bpf.sh" "$prof" > "$T/seccomp.json"; then
      seccomp="$T/seccomp.json"
    fi
    out=$("${run[@]}" "${appargs[@]}" --security-opt seccomp="$seccomp" --user 65534:65534 "$app" /bin/sh -c "$pair" 2>&1)
    log "engine: app as uid 65534, seccomp=$seccomp: $(printf '%s\n' "$out" | grep -E 'ok=|CLC|fallback' | tr '\n' '|')"
    check "engine: app container, bpf() allowed: the echo is intact" contains "$out" "ok=1"
    check "engine: app container, bpf() allowed, no capabilities, uid 65534: SMC-R over shm" contains "$out" "SMC-R over shm"
    out=$("${run[@]}" "${appargs[@]}" "$app" /bin/sh -c "$pair" 2>&1)
    log "engine: app (default seccomp): $(printf '%s\n' "$out" | grep -E 'ok=|CLC|fallback' | tr '\n' '|')"
    check "engine: app container, default seccomp: the echo is intact (TCP at worst)" contains "$out" "ok=1"
    out=$("${run[@]}" -v "$vol2:/smcr:ro" "$app" /bin/sh -c 'ldd /smcr/lib/smcr/libsmcr_preload.so; /smcr/bin/smc_run /bin/true && echo SMC_RUN_OK' 2>&1)
    check "engine: in the app image the library's dependencies resolve and smc_run runs" \
      eval "! printf '%s' \"\$out\" | grep -q 'not found' && printf '%s' \"\$out\" | grep -q SMC_RUN_OK"
  else
    log "no echo_tool or app image: application container checks not run"
  fi

  out=$(eng stop -t 20 "$sc" 2>&1); rc=$(eng inspect --format '{{.State.ExitCode}}' "$sc" 2>&1)
  check "engine: the sidecar stops on SIGTERM with exit 0" same "$rc" 0
  check "engine: without SMCR_UNLOAD_ON_EXIT the program stays loaded" loaded
  eng rm -f "$sc" >/dev/null 2>&1

  # SMCR_UNLOAD_ON_EXIT=1, in a cgroup and pin directory of our own.
  local cg="$root/smcr-sidecar-eng-$$" pins="/sys/fs/bpf/smcr-sidecar-eng-$$"
  mkdir -p "$cg"
  CLEANUPS+=("SMCR_BPF_PIN_DIR='$pins' '$CTL' unload; rmdir '$cg'")
  out=$(eng run -d --name "$sc" "${RUNOPTS[@]}" "${ONLYRUN[@]}" --privileged "${cgopt[@]}" \
    -v /sys/fs/bpf:/sys/fs/bpf -v /sys/fs/cgroup:/sys/fs/cgroup -v "$vol2:/smcr" \
    -e SMCR_BPF_PIN_DIR="$pins" -e SMCR_CGROUP="$cg" -e SMCR_UNLOAD_ON_EXIT=1 "$img" 2>&1)
  rc=1
  for ((i = 0; i < 100; i++)); do
    SMCR_BPF_PIN_DIR="$pins" "$CTL" status >/dev/null 2>&1 && { rc=0; break; }
    sleep 0.2
  done
  check "engine: sidecar with SMCR_CGROUP and its own pins loads" same "$rc" 0
  eng stop -t 20 "$sc" >/dev/null 2>&1
  log "engine: sidecar log: $(eng logs "$sc" 2>&1 | tr '\n' '|')"
  check "engine: SMCR_UNLOAD_ON_EXIT=1: stopped sidecar unloaded the program" \
    eval "! SMCR_BPF_PIN_DIR='$pins' '$CTL' status >/dev/null 2>&1 && [ ! -e '$pins' ]"
  eng rm -f "$sc" >/dev/null 2>&1
}

case "$MODE" in
  layout) layout_checks ;;
  engine) engine_checks ;;
  *) echo "usage: $0 [layout|engine]" >&2; exit 2 ;;
esac
finish
