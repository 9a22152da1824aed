# Shared helpers for the shell-driven integration tests (sourced).
# Environment (set by ctest, see tests/*/CMakeLists.txt):
#   SMCR_BUILD_DIR   build tree (libsmcr_preload.so, smcr_ctl, echo_tool)
#   SMCR_SOURCE_DIR  source tree
set -u

: "${SMCR_BUILD_DIR:?}"
: "${SMCR_SOURCE_DIR:?}"
SMCR_PRELOAD="$SMCR_BUILD_DIR/preload/libsmcr_preload.so"
SMCR_CTL="$SMCR_BUILD_DIR/bpf/smcr_ctl"
ECHO_TOOL="$SMCR_BUILD_DIR/tests/integration/echo_tool"
SMC_RUN="$SMCR_SOURCE_DIR/scripts/smc_run"

# The tests prove SMC-R mechanisms, often over many short connections, which
# smc_run's short-flow guard (core/short_flows.h) would keep on TCP after the
# first few: it is off here unless a test turns it on (echo_test checks it).
export SMCR_SHORT_FLOWS=${SMCR_SHORT_FLOWS-0}

TEST_TMP=$(mktemp -d /tmp/smcr-test.XXXXXX)
STATS_DIR="$TEST_TMP/stats"
mkdir -p "$STATS_DIR"
_PIDS=()
_FAILS=0
_CHECKS=0

kill_tree() {  # kill_tree PID: the process and all its descendants
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null
}

cleanup() {
  for p in "${_PIDS[@]:-}"; do [ -n "$p" ] && kill_tree "$p"; done
  wait 2>/dev/null
  rm -rf "$TEST_TMP"
}
trap cleanup EXIT

log() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*"; }

# Exit code 77 = skipped (ctest SKIP_RETURN_CODE), with the reason printed.
skip() { log "SKIP: $*"; exit 77; }
# One case of a test, in the ASan build: logs "SKIP: reason" and succeeds,
# so that `if ! skipped_under_asan REASON; then ...case...; fi` leaves it out.
skipped_under_asan() { [ "${SMCR_SANITIZE:-OFF}" = ON ] || return 1; log "SKIP: $*"; }

check() {  # check "description" command...
  local what=$1; shift
  _CHECKS=$((_CHECKS + 1))
  if "$@"; then log "ok: $what"; else log "FAIL: $what"; _FAILS=$((_FAILS + 1)); fi
}

finish() {
  log "$_CHECKS checks, $_FAILS failed"
  [ "$_CHECKS" -gt 0 ] || { log "FAIL: no checks ran"; exit 1; }
  [ "$_FAILS" -eq 0 ]
}

# The eBPF program must be loaded (root only); otherwise SMC-R cannot happen.
require_bpf() {
  [ "$(id -u)" -eq 0 ] || skip "loading the eBPF program needs root"
  "$SMCR_CTL" status >/dev/null 2>&1 || "$SMCR_CTL" load >/dev/null || { log "FAIL: smcr_ctl load"; exit 1; }
}

# A port below the kernel's ephemeral range (ip_local_port_range starts at
# 32768), free now: a port the kernel picked (bind to 0) comes from that
# range, and a client connection made meanwhile could take it as its own
# local port before the server binds it (EADDRINUSE, seen under load).
free_port() {
  python3 -c '
import random, socket
for _ in range(200):
    p = random.randint(10000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()
'
}

# Runs a command under the shim with per-test stats and optional debug.
under_smc() {
  SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" "$@"
}

bg() {  # bg command... : start in background, remember pid in BG_PID
  "$@" &
  BG_PID=$!
  _PIDS+=("$BG_PID")
}

wait_file() {  # wait_file path [seconds]
  local i=0 limit=$(( ${2:-10} * 20 ))
  while [ ! -e "$1" ] && [ $i -lt $limit ]; do sleep 0.05; i=$((i + 1)); done
  [ -e "$1" ]
}

wait_port() {  # wait_port port [seconds]
  local i=0 limit=$(( ${2:-10} * 20 ))
  # Looks at the listening socket without connecting (a probe connection
  # would count against servers that serve a fixed number of connections).
  while [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && [ $i -lt $limit ]; do sleep 0.05; i=$((i + 1)); done
  [ $i -lt $limit ]
}

# pid of the process listening on a TCP port (the real server, not a wrapper).
listener_pid() {
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
}

# Sum of one counter over every stats file written so far.
stat_sum() {
  cat "$STATS_DIR"/smcr-*.txt 2>/dev/null | awk -v k="$1" '$1 == k { s += $2 } END { printf "%.0f\n", s }'
}
reset_stats() { rm -f "$STATS_DIR"/smcr-*.txt; }
# The non-zero fallback counters, summed over processes ("none" if none):
# what a check that expects none says when it fails.
fallback_summary() {
  local s
  s=$(cat "$STATS_DIR"/smcr-*.txt 2>/dev/null |
    awk '$1 ~ /^fallback\./ { s[$1] += $2 } END { for (k in s) if (s[k] > 0) printf "%s=%d ", k, s[k] }')
  echo "${s:-none}"
}

# field=value extraction from echo_tool's summary line.
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
