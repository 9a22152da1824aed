#!/usr/bin/env bash
# SO_RCVTIMEO / SO_SNDTIMEO bound the whole blocking call, as TCP's do
# (timeo.py): a recv(MSG_WAITALL) fed a byte every 0.2 s and a large send()
# whose reader frees a little at a time return after about their 1 s
# timeout, over TCP and over SMC-R alike. SMC-R's waits restarted the
# timeout at every wake-up: both returned only at the peer's close (6-8 s).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/timeo.py"

# within LINE KEY LO HI: KEY's elapsed= value in LINE lies in [LO, HI].
within() { awk -v v="$(field elapsed "$1")" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }

PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" 2>&1)
PLAIN_RECV=$(grep '^recv' <<<"$PLAIN"); PLAIN_SEND=$(grep '^send' <<<"$PLAIN")
check "plain TCP recv returns at its timeout ($PLAIN_RECV)" within "$PLAIN_RECV" 0.8 2.5
check "plain TCP send returns at its timeout ($PLAIN_SEND)" within "$PLAIN_SEND" 0.8 2.5

reset_stats
OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" 2>&1)
RECV=$(grep '^recv' <<<"$OUT"); SEND=$(grep '^send' <<<"$OUT")
check "SMC-R recv returns at its timeout, as TCP ($RECV)" within "$RECV" 0.8 2.5
check "SMC-R recv returns what came by then ($RECV)" [ "$(field got "$RECV")" -ge 1 -a "$(field got "$RECV")" -lt 40 ]
check "SMC-R send returns at its timeout, as TCP ($SEND)" within "$SEND" 0.8 2.5
check "SMC-R send returns what fitted by then ($SEND)" [ "$(field sent "$SEND")" -gt 0 -a "$(field sent "$SEND")" -lt $((64 << 20)) ]
check "both connections were SMC-R (active $(stat_sum smc_active), passive $(stat_sum smc_passive))" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 ]
finish
