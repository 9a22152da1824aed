#!/usr/bin/env bash
# The shim's own descriptors stay out of the application's reach
# (own_fds.py): probing every number with fcntl() answers for the same
# numbers as over plain TCP, epoll_ctl() on a number the program never
# opened fails with EBADF (CPython's test_epoll registers 10000 and
# expects that), and a daemon's close loop over every number leaves the
# SMC-R connection and the shim itself working. Before, the probe answered
# for the shim's dozen descriptors at 10000 and up, and the close loop
# closed them: the connection hung.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/own_fds.py"

PLAIN=$(timeout 120 python3 "$PY" "$(free_port)" 2>&1)
check "plain TCP: both echoes intact, EBADF for every unopened number ($(tr '\n' ';' <<<"$PLAIN"))" \
  bash -c 'grep -c "intact=True" <<<"$1" | grep -qx 3 && grep -q "other=0 accepted=0" <<<"$1" && grep -q "other=0 adopted=0" <<<"$1"' _ "$PLAIN"
reset_stats
OUT=$(SMCR_SHORT_FLOWS=0 under_smc timeout 120 python3 "$PY" "$(free_port)" 2>&1)
check "SMC-R: every line as over plain TCP ($(tr '\n' ';' <<<"$OUT"))" [ "$OUT" = "$PLAIN" ]
check "SMC-R: both connections SMC-R, after the close loop too (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary))" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 -a "$(stat_sum fallback_total)" = 0 ]
finish
