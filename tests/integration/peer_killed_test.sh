#!/usr/bin/env bash
# A peer process killed by SIGKILL (or crashed: the kernel ends it the same
# way), as the other end sees it, against plain TCP (peer_killed.py). The
# kernel closes the killed process's TCP socket with a FIN where it had read
# everything sent to it: end-of-file after the data, EPOLLIN|EPOLLRDHUP, one
# write accepted and the next failing with EPIPE; with a reset where it had
# not. A writer blocked on a full window fails rather than hangs, whether
# the peer was killed or exited. Under smc_run the other end saw a reset
# every time (the shm link's end was taken for a failure), which an
# HTTP/1.0 client reading a response to its end takes for an error.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/peer_killed.py"
MODES="idle unread blocked data epoll writing exiting closing"

run() {  # run plain|smc -> OUT (a line per mode)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  OUT=
  local mode port pid
  for mode in $MODES; do
    port=$(free_port)
    bg $wrap python3 "$PY" server "$port"
    local spid=$BG_PID
    wait_port "$port" || { log "server did not start"; return 1; }
    pid=$(listener_pid "$port")
    OUT+="$($wrap timeout 60 python3 "$PY" client "$port" "$mode" "$pid" 2>&1)"$'\n'
    wait "$spid" 2>/dev/null
  done
  log "$1: $(tr '\n' ';' <<<"$OUT")"
}

run plain
PLAIN=$OUT
check "plain TCP: a FIN where the killed peer had read everything, a reset where not" \
  grep -q "^idle recv=eof send1=ok send2=EPIPE" <<<"$PLAIN"
check "plain TCP: ... and a reset where it had not (the instrument tells them apart)" \
  grep -q "^unread recv=ECONNRESET" <<<"$PLAIN"
reset_stats
run smc
for mode in $MODES; do
  check "SMC-R, $mode: what the other end sees is TCP's ($(grep "^$mode" <<<"$PLAIN"))" \
    [ "$(grep "^$mode" <<<"$OUT")" = "$(grep "^$mode" <<<"$PLAIN")" ]
done
# The killed servers write no counters (README: a SIGKILL runs no code);
# the clients' say what they saw, and the server that exited its own reset
# (its A, answered by its client's A: both count).
check "SMC-R: every client connection was SMC-R ($(stat_sum smc_active) of 8)" [ "$(stat_sum smc_active)" = 8 ]
check "SMC-R: four peers ended as by a close, having read everything ($(stat_sum peer_vanished)); resets: two killed (one each) and one exited (two) with data unread ($(stat_sum aborts) of 4)" \
  [ "$(stat_sum peer_vanished)" = 4 -a "$(stat_sum aborts)" = 4 ]
finish
