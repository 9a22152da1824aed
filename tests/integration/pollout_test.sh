#!/usr/bin/env bash
# POLLOUT and POLLHUP as TCP reports them (pollout.py), over TCP and SMC-R:
#  - a filled connection whose reader takes 5000 bytes is not writable yet
#    (TCP: until a third of the send buffer is free). SMC-R said writable
#    at any free byte: socat polled for POLLOUT, wrote 8 KiB blocking into
#    a 5 KB window, and a bidirectional transfer stopped at both ends;
#  - after shutdown(SHUT_WR), writable at once, and hung up (POLLHUP) once
#    the peer has closed too, with its last bytes still readable after.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/pollout.py"

steps_ok() {  # steps_ok OUTPUT WHAT
  check "$2: a filled connection whose reader took 5000 bytes is not writable ($(grep '^step1' <<<"$1"))" \
    [ "$(field pollout_after_5000 "$(grep '^step1' <<<"$1")")" = 0 ]
  local s2; s2=$(grep '^step2' <<<"$1")
  check "$2: writable at once after shutdown(SHUT_WR) ($s2)" [ "$(field pollout_after_shut "$s2")" = 1 ]
  check "$2: hung up (POLLHUP) once the peer closed too, its last bytes still readable after ($s2)" \
    [ "$(field pollhup_before_reading "$s2")" = 1 -a "$(field tail_intact "$s2")" = 1 ]
  check "$2: the server read all the client sent ($s2, $(grep '^step1' <<<"$1"))" \
    [ "$(field server_read "$s2")" -gt 0 ]
}
PLAIN=$(timeout 60 python3 "$PY" "$(free_port)" 2>&1); log "plain: $(tr '\n' ' ' <<<"$PLAIN")"
steps_ok "$PLAIN" "plain TCP"
reset_stats
OUT=$(under_smc timeout 60 python3 "$PY" "$(free_port)" 2>&1); log "smc: $(tr '\n' ' ' <<<"$OUT")"
steps_ok "$OUT" "SMC-R"
check "the connection was SMC-R (active $(stat_sum smc_active), passive $(stat_sum smc_passive))" \
  [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
finish
