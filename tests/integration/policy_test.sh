#!/usr/bin/env bash
# The operator's policy (smc_run --policy / SMCR_POLICY / SMCR_POLICY_RULES):
# connections it keeps on TCP carry no option (client side) or are declined
# (server side, rules about peer addresses), all with intact data; a policy
# with an error stops smc_run before the program starts, naming the line.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf

run_pair() {  # run_pair "server env" "client env" -> OUT (echo 256 KiB)
  local port; port=$(free_port)
  reset_stats
  bg env $1 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" "$ECHO_TOOL" server --port "$port" --max-conns 1
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$(env $2 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 256K)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$OUT"
  PORT=$port
}

# The instrument: without a policy the pair is SMC-R.
run_pair "" ""
check "no policy: SMC-R" [ "$(field ok "$OUT")" = 1 -a "$(stat_sum smc_active)" = 1 ]

# Client side: its policy denies the server's port: no option, plain TCP.
POL="$TEST_TMP/client.policy"
printf '# keep this service on TCP\ndeny port 1-65535\n' > "$POL"
run_pair "" "SMCR_POLICY=$POL"
check "client policy deny: data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
check "client policy deny: counted as fallback.policy" [ "$(stat_sum fallback.policy)" = 1 ]
check "client policy deny: the server saw no option (peer_no_option)" [ "$(stat_sum fallback.peer_no_option)" = 1 ]
check "client policy deny: TCP carried the payload" [ "$(field tcp_bytes_received "$OUT")" -ge 262144 ]

# Server side, by peer address: the listener stays opted in (other peers
# may be allowed), this peer is declined after the handshake starts.
port=$(free_port); reset_stats
bg env SMCR_POLICY_RULES="deny addr 127.0.0.0/8; allow" SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" \
  "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 256K)
timeout 30 tail --pid="$spid" -f /dev/null
log "$OUT"
check "server policy deny addr: data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
check "server policy deny addr: server counted fallback.policy" [ "$(stat_sum fallback.policy)" = 1 ]
check "server policy deny addr: client got a Decline" [ "$(stat_sum fallback.peer_declined)" = 1 ]

# default deny with an allow for this port: SMC-R.
port=$(free_port); reset_stats
bg env SMCR_POLICY_RULES="allow port $port; default deny" SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" \
  "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
OUT=$(SMCR_POLICY_RULES="allow port $port; default deny" under_smc timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 256K)
timeout 30 tail --pid="$spid" -f /dev/null
check "default deny + allow port: SMC-R both ways" [ "$(field ok "$OUT")" = 1 -a "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]

# By program: this client program is kept on TCP.
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
OUT=$(SMCR_POLICY_RULES="deny program echo_tool" under_smc timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 64K)
timeout 30 tail --pid="$spid" -f /dev/null
check "deny program echo_tool: TCP, data intact" [ "$(field ok "$OUT")" = 1 -a "$(stat_sum smc_active)" = 0 -a "$(stat_sum fallback.policy)" = 1 ]

# A broken policy: smc_run refuses to start the program, naming the line.
printf 'allow port 80\n\nallow port 70000\n' > "$TEST_TMP/bad.policy"
ERR=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --policy "$TEST_TMP/bad.policy" touch "$TEST_TMP/started" 2>&1); rc=$?
log "$ERR"
check "broken policy: smc_run exits 2" [ "$rc" = 2 ]
check "broken policy: the error names file and line 3" grep -q "bad.policy:3: bad port list '70000'" <<<"$ERR"
check "broken policy: the program never started" [ ! -e "$TEST_TMP/started" ]
finish
