#!/usr/bin/env bash
# An abortive close (SO_LINGER {1, 0}) as its peer sees it, against plain
# TCP: CPython's test_ssl test_preauth_data_to_tls_server pattern
# (abort_close.py): the client connects, sets SO_LINGER 0 at once, sends a
# request and closes; then the server calls getpeername() (ssl's "is it
# connected?") and recv(). TCP: ENOTCONN, the request, ECONNRESET, every time.
# Under smc_run the peer could read the SMC-R abort before the TCP reset
# (getpeername still answered), and a SO_LINGER set while the client's
# handshake ran on a thread was lost (an orderly close: EOF, no reset).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/abort_close.py"
ROUNDS=50

PLAIN=$(timeout 120 python3 "$PY" 20 fork 2>&1); rc=$?
log "plain TCP: $PLAIN"
WANT=${PLAIN#20 x }
tcp_as_expected() { [ "$rc" = 0 ] && [ "$(wc -l <<<"$PLAIN")" = 1 ] && [[ $PLAIN == "20 x getpeername=ENOTCONN "*ECONNRESET ]]; }
check "plain TCP: one outcome in 20 rounds, the reset seen first (getpeername ENOTCONN, then the request, then ECONNRESET)" \
  tcp_as_expected

for mode in fork thread; do
  reset_stats
  OUT=$(under_smc timeout 120 python3 "$PY" "$ROUNDS" "$mode" 2>&1); rc=$?
  log "SMC-R ($mode: client and server in two processes, or two threads of one): $OUT"
  check "SMC-R ($mode): all $ROUNDS rounds as over TCP" [ "$rc" = 0 -a "$OUT" = "$ROUNDS x $WANT" ]
  check "SMC-R ($mode): every connection was SMC-R both ways, none fell back, each close an abort" \
    [ "$(stat_sum smc_active)" = "$ROUNDS" -a "$(stat_sum smc_passive)" = "$ROUNDS" \
      -a "$(stat_sum fallback_total)" = 0 -a "$(stat_sum aborts)" -ge "$ROUNDS" ]
done
finish
