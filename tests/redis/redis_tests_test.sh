#!/usr/bin/env bash
# ctest wrapper of scripts/redis-tests.sh: redis' own Tcl suite, the units
# that found differences from TCP (a command on a new connection overtaken
# by one on an old connection: unit/type/list, unit/type/stream-cgroups;
# MIGRATE to a server that has not accepted yet: unit/dump), plain TCP vs
# smc_run, the same failures required and SMC-R on both ends. The suite
# comes from Debian's source package of the installed redis (the archive is
# reached at test time); without it the test is skipped with the reason.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) skip "the shim is an ASan build; it cannot be preloaded into redis" ;; esac
require_bpf
OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" bash "$SMCR_SOURCE_DIR/scripts/redis-tests.sh" -c 4 \
  unit/type/list unit/type/stream-cgroups unit/dump 2>&1)
rc=$?
echo "$OUT"
[ $rc = 77 ] && skip "$(tail -1 <<<"$OUT")"
check "redis' suite: the same results under smc_run as over plain TCP" grep -q "^redis-tests: the same results" <<<"$OUT"
check "redis' suite: SMC-R carried connections on both ends ($(grep '^counters' <<<"$OUT"))" \
  bash -c '[ "$(sed -n "s/.*smc_active=\([0-9]*\).*/\1/p" <<<"$1")" -gt 50 ] && [ "$(sed -n "s/.*smc_passive=\([0-9]*\).*/\1/p" <<<"$1")" -gt 50 ]' _ "$OUT"
finish
