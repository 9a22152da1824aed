#!/usr/bin/env bash
# Edge-triggered epoll reports every arrival, even while earlier data is
# still unread (edge_arrivals.py), against plain TCP. Under smc_run the
# readiness socket rang once per empty-to-not: a reader that had data left
# (one that read part of a reply, or let an edge pass) never heard of the
# next replies (events [1, 0, 0, 0, 0]); a late handshake thread made the
# readiness matrix's after_del_add/in/et cell hit the same.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/edge_arrivals.py"

for variant in "partial in" "none in" "partial nginx" "none nginx"; do
  # shellcheck disable=SC2086
  PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" $variant 2>&1)
  check "plain TCP: every reply an edge ($PLAIN)" grep -q "events \[1, 1, 1, 1, 1\]" <<<"$PLAIN"
  reset_stats
  # shellcheck disable=SC2086
  OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" $variant 2>&1)
  check "SMC-R: as TCP ($OUT)" [ "$OUT" = "$PLAIN" ]
  check "SMC-R: the connection was SMC-R both ways" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
done
finish
