#!/usr/bin/env bash
# epoll_wait's fairness with connections that always have data
# (epoll_fair.py), against plain TCP: every busy connection is served and a
# client connecting meanwhile is accepted, with maxevents=1 and with
# maxevents equal to the number of busy connections. Under smc_run the
# connections answered from memory came first and only: the listener was
# never reported (the late client waited for ever), nor were the
# connections after the first with maxevents=1.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/epoll_fair.py"

for maxevents in 1 3; do
  PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" "$maxevents" 2>&1)
  check "plain TCP: $PLAIN" [ "$PLAIN" = "maxevents=$maxevents: 3 of 3 busy connections served; late client accepted" ]
  reset_stats
  OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" "$maxevents" 2>&1)
  check "SMC-R: as TCP ($OUT)" [ "$OUT" = "$PLAIN" ]
  check "SMC-R: the four connections were SMC-R, events found in memory ($(stat_sum epoll_from_memory))" \
    [ "$(stat_sum smc_passive)" = 4 -a "$(stat_sum epoll_from_memory)" -gt 0 ]
done
finish
