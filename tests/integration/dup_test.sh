#!/usr/bin/env bash
# A socket duplicated before connect() (dup, or F_DUPFD_CLOEXEC as Python's
# os.dup does) and connected through the duplicate becomes SMC-R, as one
# duplicated with dup2/dup3 does, and carries its bytes intact
# (dup_connect.py). The duplicate's number did not carry the socket's kind:
# connect() on it never tried SMC-R.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/dup_connect.py"

for mode in dup fdupfd; do
  PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" "$mode" 2>&1)
  check "plain TCP, $mode: $PLAIN" [ "$PLAIN" = "$mode echoed=1048576 intact=yes" ]
  reset_stats
  OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" "$mode" 2>&1)
  check "SMC-R, $mode: as TCP ($OUT)" [ "$OUT" = "$PLAIN" ]
  check "SMC-R, $mode: the connection made through the duplicate was SMC-R (active $(stat_sum smc_active), passive $(stat_sum smc_passive))" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
done
finish
