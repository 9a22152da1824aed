#!/usr/bin/env bash
# connect()'s errno sequences under smc_run are TCP's (connect_errno.py):
# refused and racing with listen() (non-blocking: EINPROGRESS, then the
# pending ECONNREFUSED, then EINPROGRESS, 0, EISCONN), SO_ERROR read once,
# a blocking connect refused and then the same socket connected. The
# sequences are compared with plain TCP's, and the counters prove that the
# connections that succeeded were SMC-R.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
T="$SMCR_SOURCE_DIR/tests/integration/connect_errno.py"

PLAIN=$(timeout 60 python3 "$T" 2>&1)
log "plain:   $PLAIN"
# The instrument: the plain run shows the sequence this test is about.
check "plain TCP: EINPROGRESS, then the pending ECONNREFUSED, then EINPROGRESS after listen()" \
  grep -q "nb1=EINPROGRESS nb2=ECONNREFUSED nb3=EINPROGRESS" <<<"$PLAIN"
reset_stats
SMC=$(under_smc timeout 60 python3 "$T" 2>&1)
log "smc_run: $SMC"
check "smc_run: every errno in the same order as over plain TCP" [ "$SMC" = "$PLAIN" ]
check "smc_run: the two connections that succeeded were SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive)" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 ]
finish
