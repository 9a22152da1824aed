#!/usr/bin/env bash
# Does core/ and preload/ compile for aarch64? A syntax and semantics pass
# (-fsyntax-only: no code generated, nothing linked) of every .cc with a
# cross compiler, with the verbs fabric (-DSMCR_HAVE_VERBS=1, as the normal
# build) and, for core/, without it. x86-only code (an intrinsic, a system
# call aarch64 does not have) fails here instead of on an arm64 host.
#
# Needs Debian's g++-12-aarch64-linux-gnu (or g++-aarch64-linux-gnu);
# installs nothing: exits 77 when no cross compiler is found.
# The headers that the cross sysroot lacks (rdma-core's infiniband/,
# abseil's, architecture-independent) are taken from the host's /usr/include.
# SMCR_AARCH64_CXX overrides the compiler; -j N (default: nproc) the
# parallelism.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=$(nproc 2>/dev/null || echo 2)
[ "${1:-}" = -j ] && JOBS=$2

CXX=${SMCR_AARCH64_CXX:-}
if [ -z "$CXX" ]; then
  for c in aarch64-linux-gnu-g++-12 aarch64-linux-gnu-g++; do
    if command -v "$c" >/dev/null; then CXX=$c; break; fi
  done
fi
if [ -z "$CXX" ] || ! command -v "$CXX" >/dev/null; then
  echo "check-aarch64: no aarch64 cross compiler (apt-get install g++-12-aarch64-linux-gnu): skipped" >&2
  exit 77
fi

# Only the host headers named here are seen: the rest must come from the
# cross sysroot, or an x86 header could hide an x86 dependency.
HOST_INC=$(mktemp -d /tmp/smcr-aarch64-inc.XXXXXX)
trap 'rm -rf "$HOST_INC"' EXIT
for d in infiniband absl; do
  [ -d "/usr/include/$d" ] && ln -s "/usr/include/$d" "$HOST_INC/$d"
done
VERBS=()
[ -e "$HOST_INC/infiniband/verbs.h" ] && VERBS=(-DSMCR_HAVE_VERBS=1)
[ ${#VERBS[@]} -eq 0 ] && echo "check-aarch64: no infiniband/verbs.h: the verbs fabric is not checked" >&2

FLAGS=(-std=c++20 -fsyntax-only -Wall -Wextra -Wno-missing-field-initializers
       -I"$ROOT" -idirafter "$HOST_INC")
# Every file, with and without the verbs fabric: "<defines> <file>" lines.
{
  for f in "$ROOT"/core/*.cc "$ROOT"/preload/*.cc; do echo "verbs $f"; done
  for f in "$ROOT"/core/*.cc; do
    case "$f" in */fabric_verbs.cc | */handshake_verbs.cc | */verbs_device.cc | */verbs_loader.cc) continue ;; esac
    echo "plain $f"
  done
} > "$HOST_INC/jobs"

start=$(date +%s)
export CXX HOST_INC ROOT
export FLAGS_STR="${FLAGS[*]}" VERBS_STR="${VERBS[*]:-}"
failed=$(xargs -P "$JOBS" -L 1 bash -c '
  mode=$0 f=$1
  defs=""; [ "$mode" = verbs ] && defs=$VERBS_STR
  [ "$mode" = verbs ] && [ -z "$defs" ] && case "$f" in */fabric_verbs.cc | */handshake_verbs.cc | */verbs_device.cc | */verbs_loader.cc) exit 0 ;; esac
  if ! out=$($CXX $FLAGS_STR $defs "$f" 2>&1); then
    printf "%s\n" "== ${f#$ROOT/} ($mode)" "$out" >&2
    echo x
  elif [ -n "$out" ]; then
    printf "%s\n" "== ${f#$ROOT/} ($mode): warnings" "$out" >&2
  fi
' < "$HOST_INC/jobs" | wc -l)
total=$(wc -l < "$HOST_INC/jobs")
echo "check-aarch64: $CXX: $((total - failed))/$total compiled ($(( $(date +%s) - start )) s)"
[ "$failed" -eq 0 ]
