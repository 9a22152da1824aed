#!/usr/bin/env bash
# clang's thread-safety analysis over the shim's sources: every member marked
# SMCR_GUARDED_BY and every function marked SMCR_REQUIRES (core/mutex.h) is
# proven to be used with its mutex held. Any finding fails (-Werror). The
# normal build is g++'s; this only compiles (-fsyntax-only), in parallel.
#   usage: scripts/check-thread-safety.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cxx=${CXX_CLANG:-clang++-14}
command -v "$cxx" >/dev/null || { echo "check-thread-safety: $cxx not found (apt-get install clang-14)" >&2; exit 77; }

flags=(-std=c++20 -fsyntax-only -I"$root" -I"$root/bpf" -Wthread-safety -Werror=thread-safety)
[ -f /usr/include/infiniband/verbs.h ] && flags+=(-DSMCR_HAVE_VERBS=1)

cd "$root"
# The instrument first: an unguarded access must be reported (the macros
# expand to nothing where the compiler lacks the attributes).
probe=$(mktemp --suffix=.cc)
trap 'rm -f "$probe"' EXIT
cat >"$probe" <<'CC'
#include "core/mutex.h"
struct Probe {
  smcr::Mutex mu;
  int guarded SMCR_GUARDED_BY(mu) = 0;
  int read_unlocked() { return guarded; }
};
CC
if "$cxx" "${flags[@]}" "$probe" 2>/dev/null; then
  echo "check-thread-safety: the analysis did not report an unguarded access: it is not working" >&2
  exit 1
fi
sources=(core/*.cc preload/*.cc bpf/option.cc)
start=$(date +%s)
# One compiler per core; xargs exits non-zero if any of them did.
if printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -I{} "$cxx" "${flags[@]}" {}; then
  echo "check-thread-safety: ${#sources[@]} files clean in $(( $(date +%s) - start )) s"
else
  echo "check-thread-safety: findings above" >&2
  exit 1
fi
