#!/usr/bin/env bash
# End to end with an unmodified redis: redis-server under smc_run serves
#  1. redis-benchmark under smc_run: every connection it makes must be SMC-R
#     (client smc_active == connections made, fallback_total == 0);
#  2. a plain redis-cli (no shim): falls back to TCP and still works
#     (server fallback.peer_no_option >= 1);
#  3. redis-cli under smc_run: SET then GET of a 1 MiB value round-trips.
# The connection count comes from the server itself (INFO total_connections_received).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"

case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) sanitize=1 ;; *) sanitize=0 ;; esac
if [ "$sanitize" = 1 ]; then
  skip "the shim is an ASan build; it cannot be LD_PRELOADed into non-ASan redis (run this test from the normal build)"
fi
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed (apt-get install redis-server redis-tools)"
done
[ "$(id -u)" -eq 0 ] || skip "loading the eBPF program needs root"
require_bpf
[ -f "$SMCR_PRELOAD" ] || { log "FAIL: $SMCR_PRELOAD not built"; exit 1; }

SRV_STATS="$STATS_DIR/server"; BENCH_STATS="$STATS_DIR/bench"; CLI_STATS="$STATS_DIR/cli"
mkdir -p "$SRV_STATS" "$BENCH_STATS" "$CLI_STATS"

# Sum of one counter over the stats files in one directory.
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'; }
nfiles() { find "$1" -name 'smcr-*.txt' | wc -l; }
eq() { [ "$1" -eq "$2" ]; }
ge() { [ "$1" -ge "$2" ]; }
plain_cli() { timeout 20 redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
conns_received() {
  plain_cli info stats | tr -d '\r' | awk -F: '$1 == "total_connections_received" { print $2 }'
}

PORT=$(free_port)
log "redis-server under smc_run on port $PORT"
# env -> smc_run -> exec redis-server: BG_PID is redis-server's pid (its stats file name)
bg env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$SRV_STATS" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no --dir "$TEST_TMP" --logfile "$TEST_TMP/redis.log"
SRV_PID=$BG_PID
wait_port "$PORT" 15 || { log "FAIL: redis-server did not listen"; cat "$TEST_TMP/redis.log"; exit 1; }

# --- 1. redis-benchmark under smc_run ---------------------------------------
before=$(conns_received)   # includes this plain redis-cli connection
CLIENTS=20
bench_rc=0
timeout 180 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$BENCH_STATS" \
  redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -n 5000 -t get,set,lpush,lrange -q \
  >"$TEST_TMP/bench.out" 2>"$TEST_TMP/bench.err" || bench_rc=$?
after=$(conns_received)    # includes this plain redis-cli connection
made=$(( ${after:-0} - ${before:-0} - 1 ))
tr '\r' '\n' <"$TEST_TMP/bench.out" | grep -a 'requests per second' >"$TEST_TMP/results" || true
sed 's/^/  /' "$TEST_TMP/results"
[ "$bench_rc" -eq 0 ] || { log "redis-benchmark stderr:"; tail -20 "$TEST_TMP/bench.err"; }

check "redis-benchmark under smc_run exits 0 (rc=$bench_rc)" eq "$bench_rc" 0
for t in SET GET LPUSH LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600; do
  check "redis-benchmark printed a result for $t" grep -q "^$t[ :(]" "$TEST_TMP/results"
done
check "redis-benchmark wrote its stats file" eq "$(nfiles "$BENCH_STATS")" 1
active=$(stat_in "$BENCH_STATS" smc_active)
log "benchmark made $made connections (server count); client smc_active=$active"
check "benchmark made >= $CLIENTS connections ($made)" ge "$made" "$CLIENTS"
check "client smc_active ($active) == connections made ($made)" eq "$active" "$made"
check "client fallback_total == 0 ($(stat_in "$BENCH_STATS" fallback_total))" \
  eq "$(stat_in "$BENCH_STATS" fallback_total)" 0
check "client moved payload over the fabric (tx_bytes > 0)" ge "$(stat_in "$BENCH_STATS" tx_bytes)" 1
check "client received payload over the fabric (rx_bytes > 0)" ge "$(stat_in "$BENCH_STATS" rx_bytes)" 1

# --- 2. plain redis-cli (no shim): TCP fallback against the same server ------
val="plain-tcp-$RANDOM-$$"
check "plain redis-cli SET" test "$(plain_cli set plainkey "$val")" = OK
check "plain redis-cli GET round-trips" test "$(plain_cli get plainkey)" = "$val"

# --- 3. redis-cli under smc_run: 1 MiB value ---------------------------------
head -c 786432 /dev/urandom | base64 -w0 >"$TEST_TMP/big"        # 1048576 bytes, no newline
set_out=$(timeout 60 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$CLI_STATS" \
  redis-cli -h 127.0.0.1 -p "$PORT" -x set bigkey <"$TEST_TMP/big" 2>&1) || true
check "smc redis-cli SET of 1 MiB value replies OK ($set_out)" test "$set_out" = OK
timeout 60 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$CLI_STATS" \
  redis-cli -h 127.0.0.1 -p "$PORT" --raw get bigkey >"$TEST_TMP/big.got" 2>"$TEST_TMP/big.err" || true
check "smc redis-cli GET returns 1 MiB + newline ($(stat -c %s "$TEST_TMP/big.got") bytes)" \
  eq "$(stat -c %s "$TEST_TMP/big.got")" 1048577
check "smc redis-cli GET of 1 MiB value is byte-identical" \
  cmp -s <(head -c 1048576 "$TEST_TMP/big.got") "$TEST_TMP/big"
check "both smc redis-cli processes were SMC-R (smc_active == 2)" eq "$(stat_in "$CLI_STATS" smc_active)" 2
check "smc redis-cli fallback_total == 0" eq "$(stat_in "$CLI_STATS" fallback_total)" 0
check "smc redis-cli moved >= 2 MiB over the fabric (tx+rx)" \
  ge "$(( $(stat_in "$CLI_STATS" tx_bytes) + $(stat_in "$CLI_STATS" rx_bytes) ))" 2097152

# --- 4. BGSAVE while SMC-R clients are connected -----------------------------
# redis forks a child that writes the dataset and exits; the parent's SMC-R
# connections must carry on untouched (the child never uses them).
BG_STATS="$STATS_DIR/bgsave"; mkdir -p "$BG_STATS"
timeout 180 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$BG_STATS" \
  redis-benchmark -h 127.0.0.1 -p "$PORT" -c 10 -n 60000 -t set,get -d 256 -q \
  >"$TEST_TMP/bgbench.out" 2>"$TEST_TMP/bgbench.err" &
bgbench=$!
saves=0
for _ in 1 2 3; do
  sleep 0.3
  plain_cli bgsave >/dev/null 2>&1 || continue
  for _ in $(seq 100); do
    plain_cli info persistence | tr -d '\r' | grep -q '^rdb_bgsave_in_progress:0' && break
    sleep 0.1
  done
  plain_cli info persistence | tr -d '\r' | grep -q '^rdb_last_bgsave_status:ok' && saves=$((saves + 1))
done
bgrc=0; wait "$bgbench" || bgrc=$?
log "BGSAVE under load: $saves saves; benchmark: $(tr '\r' '\n' <"$TEST_TMP/bgbench.out" | grep -a 'requests per second' | tr '\n' ' ')"
check "three BGSAVEs (fork) succeeded while the benchmark ran ($saves)" eq "$saves" 3
check "the benchmark across the BGSAVEs exits 0 (rc=$bgrc)" eq "$bgrc" 0
check "its connections were SMC-R, none aborted" \
  bash -c '[ "$0" -ge 10 ] && [ "$1" = 0 ]' "$(stat_in "$BG_STATS" smc_active)" "$(stat_in "$BG_STATS" aborts)"
check "the BGSAVE children wrote their own stats with nothing of the parent's" \
  bash -c '! grep -l "^smc_passive [1-9]" "$0"/smcr-*.txt | grep -v "smcr-$1.txt"' "$SRV_STATS" "$SRV_PID"

# --- server: clean shutdown writes its stats --------------------------------
plain_cli shutdown nosave >/dev/null 2>&1 || true
i=0; while kill -0 "$SRV_PID" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
check "redis-server exited after SHUTDOWN" bash -c "! kill -0 $SRV_PID 2>/dev/null"
wait_file "$SRV_STATS/smcr-$SRV_PID.txt" 5 || true
check "redis-server wrote its stats file" test -s "$SRV_STATS/smcr-$SRV_PID.txt"
passive=$(stat_in "$SRV_STATS" smc_passive)
log "server: smc_passive=$passive fallback.peer_no_option=$(stat_in "$SRV_STATS" fallback.peer_no_option)"
check "server smc_passive ($passive) >= benchmark connections ($made) + 2 redis-cli" ge "$passive" "$(( made + 2 ))"
check "server fell back for plain clients (fallback.peer_no_option >= 1)" \
  ge "$(stat_in "$SRV_STATS" fallback.peer_no_option)" 1
check "server saw no protocol violations" eq "$(stat_in "$SRV_STATS" protocol_violations)" 0

finish
