#!/usr/bin/env bash
# The shim's library boundary (issue 17):
#  - libsmcr_preload.so exports exactly the interposed libc entry points listed
#    in preload/exports.map: no engine internals, no libstdc++ instantiations
#    an application's own symbols could collide with;
#  - the engine (core/, bpf/option.cc) never calls an interposed entry point:
#    its I/O goes through core/sys.h's raw system calls (core/raw_syscall.h,
#    not libc's syscall(), which the shim interposes), so it cannot re-enter
#    the shim (the engine's epoll_ctl/epoll_wait and the fork handover's
#    sendmsg/recvmsg did);
#  - the shim does not link rdma-core: libibverbs is opened when the verbs
#    fabric is first wanted (core/verbs_loader.cc).
# Environment from ctest: SMCR_BUILD_DIR, SMCR_SOURCE_DIR.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"

LIB=$SMCR_BUILD_DIR/preload/libsmcr_preload.so
MAP=$SMCR_SOURCE_DIR/preload/exports.map
[ -f "$LIB" ] || { echo "SKIP: $LIB not built"; exit 77; }

# The map's global names, one per line.
sed -n '/global:/,/local:/p' "$MAP" | grep -Eo '^[[:space:]]+[A-Za-z_0-9]+;' | tr -d ' ;' | sort -u \
  >"$TEST_TMP/wanted"
nm -D --defined-only "$LIB" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u >"$TEST_TMP/exported"
log "exported: $(wc -l <"$TEST_TMP/exported") symbols, map: $(wc -l <"$TEST_TMP/wanted")"

# The instrument first: nm sees the interposers (a map that exported nothing
# would otherwise pass the checks below that look for absences).
check "the instrument: nm sees the interposers connect, epoll_wait and read" \
  bash -c 'grep -qx connect "$1" && grep -qx epoll_wait "$1" && grep -qx read "$1"' _ "$TEST_TMP/exported"
extra=$(comm -23 "$TEST_TMP/exported" "$TEST_TMP/wanted" | head -20 | tr '\n' ' ')
missing=$(comm -13 "$TEST_TMP/exported" "$TEST_TMP/wanted" | head -20 | tr '\n' ' ')
check "nothing exported beyond the interposers${extra:+ (extra: $extra)}" test -z "$extra"
check "every interposer in the map is exported${missing:+ (missing: $missing)}" test -z "$missing"
check "no C++ symbol exported" bash -c '! grep -q "^_Z" "$1"' _ "$TEST_TMP/exported"

# Every object of the engine's static libraries: undefined references to a
# name the shim interposes would bind to the interposer.
engine_libs=("$SMCR_BUILD_DIR/core/libsmcr_core.a" "$SMCR_BUILD_DIR/bpf/libsmcr_bpfopt.a")
nm -A -u "${engine_libs[@]}" 2>/dev/null | awk '{print $1, $NF}' >"$TEST_TMP/undefined"
# (not syscall any more: the shim exports one, so the engine enters the kernel
# by itself, core/raw_syscall.h, and a reference to syscall is a re-entry)
check "the instrument: nm sees the engine's undefined references (__errno_location)" \
  grep -q ' __errno_location$' "$TEST_TMP/undefined"
reentry=$(awk 'NR == FNR {want[$1]; next} ($2 in want) {print}' "$TEST_TMP/wanted" "$TEST_TMP/undefined" | head -10 | tr '\n' ' ')
check "the engine calls no interposed entry point${reentry:+ ($reentry)}" test -z "$reentry"

needed=$(readelf -d "$LIB" | awk '/NEEDED/ {print $NF}' | tr -d '[]' | tr '\n' ' ')
log "NEEDED: $needed"
check "the instrument: readelf lists the shim's NEEDED libraries (libc)" grep -q 'libc\.so' <<<"$needed"
check "the shim does not link rdma-core (libibverbs, librdmacm)" bash -c '! grep -Eq "libibverbs|librdmacm" <<<"$1"' _ "$needed"

finish
