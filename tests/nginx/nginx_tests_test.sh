#!/usr/bin/env bash
# ctest wrapper of scripts/nginx-tests.sh: the files that exercise nginx's
# upstream connections (where SMC-R readiness, connect() and close matter
# most), plain TCP vs smc_run, the same failures required.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) skip "the shim is an ASan build; it cannot be preloaded into nginx" ;; esac
require_bpf
OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" bash "$SMCR_SOURCE_DIR/scripts/nginx-tests.sh" -j 2 \
  'proxy*' 'fastcgi*' 'scgi*' 'grpc*' 'memcached*' 'stream_proxy*' 'stream_upstream*' 'upstream*' 'mail_*' 'h2_proxy*' 2>&1)
rc=$?
echo "$OUT"
[ $rc = 77 ] && skip "$(tail -1 <<<"$OUT")"
differs=$(sed -n 's/^== first run differs in: \(.*\); its.*/\1/p' <<<"$OUT")
check "nginx-tests: the same failures under smc_run as over plain TCP${differs:+ (the first run differed in: $differs)}" grep -q "^== verdict: the same failures" <<<"$OUT"
check "nginx-tests: SMC-R carried connections on both ends ($(grep '^== counters' <<<"$OUT"))" \
  bash -c '[ "$(sed -n "s/.*smc_active=\([0-9]*\).*/\1/p" <<<"$1")" -gt 100 ] && [ "$(sed -n "s/.*smc_passive=\([0-9]*\).*/\1/p" <<<"$1")" -gt 100 ]' _ "$OUT"
finish
