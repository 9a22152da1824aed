#!/usr/bin/env bash
# End to end with an unmodified redis: redis-server under smc_run serves
#  0. a plain-TCP redis-benchmark (no shim, server falls back) running every
#     default test: the list of tests the SMC-R runs must print;
#  1. redis-benchmark under smc_run, every default test, no pipelining: a
#     result for each test, and every connection it makes must be SMC-R
#     (client smc_active == connections made, fallback_total == 0);
#  2. the same with pipelining (-P 16);
#  3. redis-cli --pipe under smc_run mass-inserts 100000 SETs: no errors, all
#     replies, DBSIZE grew by that, sampled keys hold their values, SMC-R;
#  4. a plain redis-cli (no shim): falls back to TCP and still works
#     (server fallback.peer_no_option >= 1);
#  5. redis-cli under smc_run: SET then GET of a 1 MiB value round-trips;
#  6. BGSAVE (fork) while an SMC-R redis-benchmark runs.
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

# --- 0. plain-TCP redis-benchmark: which tests this redis-benchmark runs ------
# A plain redis-benchmark (no shim; the server falls back to TCP for it) with
# the same options prints one result line per default test; those labels are
# what the SMC-R runs below must print too. So that this can never be empty or
# short, it must itself contain every default test of redis 7.
BENCH_OPTS=(-h 127.0.0.1 -p "$PORT" -c 20 -n 2000 -q)
REDIS7_TESTS="PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN
  LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600 MSET"
# result_labels FILE: the label of every "LABEL: N requests per second" line,
# e.g. "SET" or "LRANGE_100 (first 100 elements)"; progress lines have no such text.
result_labels() {
  tr '\r' '\n' <"$1" | sed -n 's/^ *\([A-Z][^:]*\): [^ ]* requests per second.*/\1/p'
}
# rps_table SMCOUT TCPOUT: requests per second of each test, SMC-R and TCP side by side
rps_table() {
  awk -F': ' '/ requests per second/ { split($2, f, " "); if (FNR == NR) smc[$1] = f[1]; else { tcp[$1] = f[1]; order[++n] = $1 } }
    END { for (i = 1; i <= n; i++) printf "  %-36s smc-r %12s  plain TCP, no -P %12s\n", order[i], (order[i] in smc) ? smc[order[i]] : "-", tcp[order[i]] }' \
    <(tr '\r' '\n' <"$1") <(tr '\r' '\n' <"$2")
}
# has_test LABELFILE NAME: a result line for test NAME ("NAME" or "NAME (...)")
has_test() { grep -Eq "^$2( \(.*\))?\$" "$1"; }

tcp_rc=0
timeout 120 redis-benchmark "${BENCH_OPTS[@]}" >"$TEST_TMP/tcpbench.out" 2>"$TEST_TMP/tcpbench.err" || tcp_rc=$?
result_labels "$TEST_TMP/tcpbench.out" >"$TEST_TMP/expected"
[ "$tcp_rc" -eq 0 ] || { log "plain redis-benchmark stderr:"; tail -20 "$TEST_TMP/tcpbench.err"; }
check "plain-TCP redis-benchmark (all default tests) exits 0 (rc=$tcp_rc)" eq "$tcp_rc" 0
missing=""
for t in $REDIS7_TESTS; do has_test "$TEST_TMP/expected" "$t" || missing="$missing $t"; done
check "plain-TCP redis-benchmark printed every redis 7 default test ($(wc -l <"$TEST_TMP/expected") result lines; missing:${missing:- none})" \
  test -z "$missing"

# bench_smc NAME STATSDIR [redis-benchmark options...]: all default tests under
# smc_run with BENCH_OPTS plus the options; checks that it printed a result for
# every test the plain run printed (same labels, same order) and that every
# connection it made (counted by the server) was SMC-R with no fallback.
# Sets MADE to that connection count.
bench_smc() {
  local name=$1 stats=$2; shift 2
  local before after rc=0 active missing="" t
  mkdir -p "$stats"
  before=$(conns_received)   # includes this plain redis-cli connection
  timeout 180 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$stats" \
    redis-benchmark "${BENCH_OPTS[@]}" "$@" >"$TEST_TMP/$name.out" 2>"$TEST_TMP/$name.err" || rc=$?
  after=$(conns_received)    # includes this plain redis-cli connection
  MADE=$(( ${after:-0} - ${before:-0} - 1 ))
  result_labels "$TEST_TMP/$name.out" >"$TEST_TMP/$name.labels"
  rps_table "$TEST_TMP/$name.out" "$TEST_TMP/tcpbench.out"
  [ "$rc" -eq 0 ] || { log "$name: redis-benchmark stdout/stderr tail:"; tr '\r' '\n' <"$TEST_TMP/$name.out" | tail -5; tail -20 "$TEST_TMP/$name.err"; }
  check "$name: redis-benchmark under smc_run exits 0 (rc=$rc)" eq "$rc" 0
  while IFS= read -r t; do
    grep -qxF -- "$t" "$TEST_TMP/$name.labels" || missing="$missing [$t]"
  done <"$TEST_TMP/expected"
  check "$name: printed a result for each of the $(wc -l <"$TEST_TMP/expected") tests of the plain run (missing:${missing:- none})" \
    test -z "$missing"
  check "$name: result lines are exactly those of the plain run, in order" cmp -s "$TEST_TMP/expected" "$TEST_TMP/$name.labels"
  check "$name: redis-benchmark wrote its stats file" eq "$(nfiles "$stats")" 1
  active=$(stat_in "$stats" smc_active)
  log "$name: made $MADE connections (server count); client smc_active=$active"
  check "$name: made >= 20 connections per test ($MADE >= $(( 20 * $(wc -l <"$TEST_TMP/expected") )))" \
    ge "$MADE" "$(( 20 * $(wc -l <"$TEST_TMP/expected") ))"
  check "$name: client smc_active ($active) == connections made ($MADE)" eq "$active" "$MADE"
  check "$name: client fallback_total == 0 ($(stat_in "$stats" fallback_total))" eq "$(stat_in "$stats" fallback_total)" 0
  check "$name: client aborts == 0 ($(stat_in "$stats" aborts))" eq "$(stat_in "$stats" aborts)" 0
  check "$name: client moved payload over the fabric (tx_bytes > 0)" ge "$(stat_in "$stats" tx_bytes)" 1
  check "$name: client received payload over the fabric (rx_bytes > 0)" ge "$(stat_in "$stats" rx_bytes)" 1
  # Its event loop found replies in memory, without a readiness byte
  # (preload/epoll.h); how many depends on timing, that some did does not.
  check "$name: client epoll events found in memory ($(stat_in "$stats" epoll_from_memory)) > 0" \
    ge "$(stat_in "$stats" epoll_from_memory)" 1
}

# --- 1. redis-benchmark under smc_run: every default test, no pipelining -----
bench_smc bench "$BENCH_STATS"
made=$MADE

# --- 2. the same with pipelining (-P 16) -------------------------------------
PIPE_BENCH_STATS="$STATS_DIR/bench-p16"
bench_smc bench-P16 "$PIPE_BENCH_STATS" -P 16
made_p16=$MADE

# --- 3. redis-cli --pipe under smc_run: mass insertion, checked key by key ---
MASS_STATS="$STATS_DIR/mass"; mkdir -p "$MASS_STATS"
NMASS=100000
tag="$RANDOM$$"
# RESP: SET mass:<tag>:<i> v<i>-<tag>-<i*i mod 9973>
awk -v n="$NMASS" -v tag="$tag" 'BEGIN {
  for (i = 1; i <= n; i++) {
    k = "mass:" tag ":" i; v = "v" i "-" tag "-" (i * i) % 9973
    printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v
  }
}' >"$TEST_TMP/mass.resp"
mass_value() { echo "v$1-$tag-$(( $1 * $1 % 9973 ))"; }
dbsize_before=$(plain_cli dbsize)
mass_rc=0
timeout 30 env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$MASS_STATS" \
  redis-cli -h 127.0.0.1 -p "$PORT" --pipe <"$TEST_TMP/mass.resp" >"$TEST_TMP/mass.out" 2>"$TEST_TMP/mass.err" || mass_rc=$?
dbsize_after=$(plain_cli dbsize)
[ "$mass_rc" -eq 124 ] && log "redis-cli --pipe did not finish within 30 s (killed; it wrote no stats file)"
sed 's/^/  /' "$TEST_TMP/mass.out"; [ -s "$TEST_TMP/mass.err" ] && sed 's/^/  stderr: /' "$TEST_TMP/mass.err"
check "smc redis-cli --pipe of $NMASS SETs ($(stat -c %s "$TEST_TMP/mass.resp") bytes) exits 0 (rc=$mass_rc)" eq "$mass_rc" 0
check "smc redis-cli --pipe reports 'errors: 0, replies: $NMASS'" grep -qx "errors: 0, replies: $NMASS" "$TEST_TMP/mass.out"
check "DBSIZE grew by $NMASS ($dbsize_before -> $dbsize_after)" eq "$(( ${dbsize_after:-0} - ${dbsize_before:-0} ))" "$NMASS"
bad=""
for i in 1 2 "$NMASS" $(( NMASS / 2 )) $(( RANDOM % NMASS + 1 )) $(( RANDOM % NMASS + 1 )) $(( RANDOM % NMASS + 1 )) \
         $(( RANDOM * 3 % NMASS + 1 )) $(( RANDOM * 3 % NMASS + 1 )); do
  got=$(plain_cli get "mass:$tag:$i")
  [ "$got" = "$(mass_value "$i")" ] || bad="$bad $i(got '$got')"
done
check "random mass-inserted keys read back (plain redis-cli) with their values (bad:${bad:- none})" test -z "$bad"
check "the --pipe redis-cli wrote its stats file" eq "$(nfiles "$MASS_STATS")" 1
check "the --pipe redis-cli was SMC-R (smc_active == 1)" eq "$(stat_in "$MASS_STATS" smc_active)" 1
check "the --pipe redis-cli fallback_total == 0" eq "$(stat_in "$MASS_STATS" fallback_total)" 0
check "the --pipe redis-cli sent the whole stream over the fabric (tx_bytes $(stat_in "$MASS_STATS" tx_bytes) >= $(stat -c %s "$TEST_TMP/mass.resp"))" \
  ge "$(stat_in "$MASS_STATS" tx_bytes)" "$(stat -c %s "$TEST_TMP/mass.resp")"
check "the --pipe redis-cli received $NMASS +OK replies over the fabric (rx_bytes $(stat_in "$MASS_STATS" rx_bytes) >= $(( 5 * NMASS )))" \
  ge "$(stat_in "$MASS_STATS" rx_bytes)" "$(( 5 * NMASS ))"

# --- 4. plain redis-cli (no shim): TCP fallback against the same server ------
val="plain-tcp-$RANDOM-$$"
check "plain redis-cli SET" test "$(plain_cli set plainkey "$val")" = OK
check "plain redis-cli GET round-trips" test "$(plain_cli get plainkey)" = "$val"

# --- 5. redis-cli under smc_run: 1 MiB value ---------------------------------
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

# --- 6. BGSAVE while SMC-R clients are connected -----------------------------
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

# --- server: clean shutdown writes its stats --------------------------------
plain_cli shutdown nosave >/dev/null 2>&1 || true
i=0; while kill -0 "$SRV_PID" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
check "redis-server exited after SHUTDOWN" bash -c "! kill -0 $SRV_PID 2>/dev/null"
wait_file "$SRV_STATS/smcr-$SRV_PID.txt" 5 || true
check "redis-server wrote its stats file" test -s "$SRV_STATS/smcr-$SRV_PID.txt"
# redis's BGSAVE children leave with _exit: nothing of theirs may have closed
# (or counted) the parent's connections, so the server's file is the only one.
check "only redis-server wrote stats (the BGSAVE children ran no exit-time close)" \
  test "$(nfiles "$SRV_STATS")" = 1
passive=$(stat_in "$SRV_STATS" smc_passive)
log "server: smc_passive=$passive fallback.peer_no_option=$(stat_in "$SRV_STATS" fallback.peer_no_option)"
check "server smc_passive ($passive) >= benchmark connections ($made + $made_p16) + 3 redis-cli" \
  ge "$passive" "$(( made + made_p16 + 3 ))"
check "server fell back for plain clients (fallback.peer_no_option >= 1)" \
  ge "$(stat_in "$SRV_STATS" fallback.peer_no_option)" 1
check "server saw no protocol violations" eq "$(stat_in "$SRV_STATS" protocol_violations)" 0

finish
