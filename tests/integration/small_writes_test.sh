#!/usr/bin/env bash
# 40,000 one-byte writes while the reader does not look, then the reader
# reads (small_writes.py), against plain TCP: every byte arrives. Over the
# shared-memory fabric each write is a CDC in the reader's control page and
# the reader finds only the newest; its 16-bit sequence number had moved
# more than half round, so serial arithmetic called it older than the last
# one read: it was dropped as stale, and reader and writer both waited for
# ever (an epoll server with maxevents=1 that served another connection
# first hung at its exit the same way).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/small_writes.py"

for mode in blocking epoll; do
  PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" "$mode" 2>&1)
  check "plain TCP, $mode reader: $PLAIN" [ "$PLAIN" = "$mode read=40000 of 40000" ]
  reset_stats
  OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" "$mode" 2>&1)
  check "SMC-R, $mode reader: as TCP ($OUT)" [ "$OUT" = "$PLAIN" ]
  check "SMC-R, $mode reader: the connection was SMC-R, more than half the sequence space of CDCs through memory ($(stat_sum cdc_in_memory) > 32768)" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum cdc_in_memory)" -gt 32768 ]
done
finish
