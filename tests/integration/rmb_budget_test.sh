#!/usr/bin/env bash
# The RMB budget (core/rmb.h size_under_budget, SMCR_RMB_BUDGET_MB): a
# process's first 128 connections get the default 256 KiB RMB, later ones
# smaller RMBs as their number grows, each an RFC size; SMCR_RMB_SIZE keeps
# every connection at its size. 300 idle connections between two processes,
# the sizes read from each handshake's log line (SMCR_DEBUG=1).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
CB="$SMCR_BUILD_DIR/tools/bench/smcr_connbench"
[ -x "$CB" ] || skip "smcr_connbench not built"
N=300
ulimit -n $((N * 8 + 256)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

sizes_run() {  # sizes_run [ENV=VALUE...] -> SIZES (the client's RMB sizes, in order)
  local port; port=$(free_port)
  reset_stats
  # A background job opens its redirections after the fork, so the wait for
  # conns= below could read the previous run's file before the new client
  # truncates it (seen under load: the second run was judged on the first's).
  rm -f "$TMP"/client.* "$TMP"/server.*
  bg env "$@" SMCR_DEBUG=1 SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" \
    "$CB" idle-serve "$port" "$N" >"$TMP/server.out" 2>"$TMP/server.err"
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; SIZES=; return 1; }
  env "$@" SMCR_DEBUG=1 SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" \
    "$CB" idle-connect "$port" "$N" >"$TMP/client.out" 2>"$TMP/client.err" &
  local cpid=$!
  local i=0
  until grep -qs conns= "$TMP/client.out" || [ $i -ge 1200 ]; do sleep 0.05; i=$((i + 1)); done
  kill -TERM "$cpid" "$spid" 2>/dev/null
  wait "$cpid" "$spid" 2>/dev/null
  SIZES=$(sed -n 's/.*CLC: client SMC-R.*(token [0-9a-f]*, RMB \([0-9]*\),.*/\1/p' "$TMP/client.err")
  log "$*: $(wc -l <<<"$SIZES") handshakes logged, RMB sizes: $(uniq -c <<<"$SIZES" | awk '{ printf "%s x %s, ", $1, $2 }')"
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; cleanup' EXIT

sizes_run SMCR_RMB_BUDGET_MB=32
check "all $N connections SMC-R ($(stat_sum smc_active) active)" [ "$(stat_sum smc_active)" = "$N" ]
check "the first 128 connections: 256 KiB each" [ "$(head -128 <<<"$SIZES" | sort -u)" = 262144 ]
# Handshakes that overlap also log out of order: a 256 KiB one may end a few
# lines after the first 128 KiB one (ASan build under load: 131 x 256 KiB,
# 2 x 128 KiB, 1 x 256 KiB, 123 x 128 KiB). Each step may overlap the one
# before by at most 16 lines, never the one before that.
check "then smaller as they grow, never larger again: 128 KiB, then 64 KiB (32 MiB / connections)" \
  awk 'BEGIN { f128 = f64 = 0 } { seen[$1] = 1 }
       $1 == 262144 { l256 = NR } $1 == 131072 { l128 = NR; if (!f128) f128 = NR } $1 == 65536 { if (!f64) f64 = NR }
       END { n = 0; for (v in seen) n++
             exit !(n == 3 && (262144 in seen) && (131072 in seen) && (65536 in seen) &&
                    l256 - f128 < 16 && l128 - f64 < 16 && l256 < f64) }' <<<"$SIZES"
# About: handshakes that overlap see the count of established connections
# a few late (under CPU load, a dozen or more: 141 x 256 KiB, then 116 x
# 128 KiB, seen with the tree of issue 18's third increment too).
check "... 128 KiB for about the second 128 ($(grep -c '^131072$' <<<"$SIZES"))" \
  awk -v n="$(grep -c '^131072$' <<<"$SIZES")" 'BEGIN { exit !(n >= 100 && n <= 160) }' 

sizes_run SMCR_RMB_SIZE=262144
check "SMCR_RMB_SIZE: all $N connections SMC-R at 256 KiB" \
  [ "$(stat_sum smc_active)" = "$N" -a "$(sort -u <<<"$SIZES")" = 262144 -a "$(wc -l <<<"$SIZES")" = "$N" ]

# RFC 7609 8.2: the client keeps at most 255 of the server's RMBs in a link
# group, pooled ones included (core/link_group.h make_room_to_announce). 64
# connections end in order with 16 KiB RMBs (pooled: 64 is the pool's
# size), then 200 with 256 KiB ones stay open at once: 264 would reach the
# client's table, which refused the last 9 (Decline, TCP) before the server
# deleted pooled ones first (seen as 27-144 of the ASan echo test's 600
# under CI load, where RMB sizes shrink as connections grow).
command -v python3 >/dev/null || skip "python3 not installed"
port=$(free_port)
reset_stats
rm -f "$TMP/ready"
bg under_smc python3 "$SMCR_SOURCE_DIR/tests/integration/rmb_pool.py" server "$port" 64 200 "$TMP/ready"
spid=$BG_PID
wait_file "$TMP/ready" 30 || log "pool server did not start"
OUT=$(under_smc timeout 120 python3 "$SMCR_SOURCE_DIR/tests/integration/rmb_pool.py" client "$port" 64 200)
timeout 60 tail --pid="$spid" -f /dev/null
log "pool of another size: client: $OUT; server: rmb_pooled=$(stat_sum rmb_pooled) rmb_reused=$(stat_sum rmb_reused) rmb_pool_evicted=$(stat_sum rmb_pool_evicted)"
check "64 then 200 connections: every echo intact ($OUT)" [ "$OUT" = "ok=264" ]
check "64 then 200 connections: all SMC-R, no fallback ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive; fallbacks: $(fallback_summary))" \
  [ "$(stat_sum smc_active)" = 264 -a "$(stat_sum smc_passive)" = 264 -a "$(stat_sum fallback_total)" = 0 ]
check "pooled RMBs of the old size deleted to make room ($(stat_sum rmb_pool_evicted))" [ "$(stat_sum rmb_pool_evicted)" -ge 9 ]
finish
