#!/usr/bin/env bash
# rsync's daemon and client under smc_run, against plain TCP: a download, an
# upload and a delta transfer of 30 MB. The client forks its receiver after
# connecting: the receiver reads the connection while the parent (the
# generator) writes it. Before, the receiver's first read waited 2 s for a
# parent that never let go, then failed with EOPNOTSUPP ("read error:
# Operation not supported"); now the parent relays the connection for both
# once none of its threads waits inside a call on it. The daemon hands each
# connection to its forked child (re-homed).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into rsync" ;; esac
require_bpf
command -v rsync >/dev/null || skip "rsync not installed (scripts/install-deps.sh)"

D="$TEST_TMP/rsync"
mkdir -p "$D/src/sub" "$D/up"
head -c 30000000 /dev/urandom >"$D/src/big"
for i in $(seq 1 20); do head -c 20000 /dev/urandom >"$D/src/sub/f$i"; done
cat >"$D/rsyncd.conf" <<CONF
pid file = $D/rsyncd.pid
use chroot = no
[data]
path = $D/src
read only = yes
[up]
path = $D/up
read only = no
uid = root
gid = root
CONF

# rsync_run plain|smc: RESULTS gets one word per transfer (intact/broken).
rsync_run() {
  local wrap=(env) port
  [ "$1" = smc ] && wrap=(env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR")
  port=$(free_port)
  rm -rf "$D/get" "$D/up" && mkdir -p "$D/get" "$D/up"
  "${wrap[@]}" rsync --daemon --no-detach --config="$D/rsyncd.conf" --port="$port" --address=127.0.0.1 \
    >"$D/daemon-$1.log" 2>&1 &
  local dpid=$!
  wait_port "$port" || log "rsync daemon did not start: $(head -3 "$D/daemon-$1.log")"
  RESULTS=""
  "${wrap[@]}" timeout 60 rsync -a "rsync://127.0.0.1:$port/data/" "$D/get/" >"$D/client-$1.log" 2>&1 &&
    diff -r "$D/src" "$D/get" >/dev/null && RESULTS+="download=intact " || RESULTS+="download=broken "
  "${wrap[@]}" timeout 60 rsync -a "$D/src/" "rsync://127.0.0.1:$port/up/" >>"$D/client-$1.log" 2>&1 &&
    diff -r "$D/src" "$D/up" >/dev/null && RESULTS+="upload=intact " || RESULTS+="upload=broken "
  # A delta: 1000 bytes changed in the middle of the big file, and its
  # time moved on (rsync compares times in whole seconds).
  head -c 1000 /dev/urandom | dd of="$D/src/big" bs=1 seek=15000000 conv=notrunc 2>/dev/null
  touch -d "@$(($(date +%s) + 100))" "$D/src/big"
  "${wrap[@]}" timeout 60 rsync -a "rsync://127.0.0.1:$port/data/" "$D/get/" >>"$D/client-$1.log" 2>&1 &&
    diff -r "$D/src" "$D/get" >/dev/null && RESULTS+="delta=intact" || RESULTS+="delta=broken"
  kill "$dpid" 2>/dev/null
  wait "$dpid" 2>/dev/null
  log "$1: $RESULTS"
  grep -v '^$' "$D/client-$1.log" | head -5 | sed 's/^/    /'
}

rsync_run plain
check "plain TCP: download, upload and delta intact" [ "$RESULTS" = "download=intact upload=intact delta=intact" ]
reset_stats
rsync_run smc
check "under smc_run: download, upload and delta intact" [ "$RESULTS" = "download=intact upload=intact delta=intact" ]
check "every transfer's connection SMC-R at both ends, no fallback (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary))" \
  [ "$(stat_sum smc_active)" = 3 -a "$(stat_sum smc_passive)" = 3 -a "$(stat_sum fallback_total)" = 0 ]
check "the client's parent relayed its connections for its receiver ($(stat_sum handovers) relayed)" \
  [ "$(stat_sum handovers)" -ge 2 ]
check "no aborts, no protocol violations ($(stat_sum aborts), $(stat_sum protocol_violations))" \
  [ "$(stat_sum aborts)" = 0 -a "$(stat_sum protocol_violations)" = 0 ]
finish
