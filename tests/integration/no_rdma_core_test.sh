#!/usr/bin/env bash
# The shim where rdma-core is not installed (a slim application container):
# in a mount namespace where libibverbs.so.1 and its providers are gone, the
# shim loads, two processes talk SMC-R over the shm fabric, and a connection
# that wants the verbs fabric says why it cannot have it.
# Environment from ctest: SMCR_BUILD_DIR, SMCR_SOURCE_DIR.
if [ -z "${SMCR_IN_NAMESPACE:-}" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "[no_rdma_core] SKIP: a mount namespace needs root"; exit 77; }
  exec unshare --mount --propagation private env SMCR_IN_NAMESPACE=1 bash "$0" "$@"
fi
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf

loads_verbs() { python3 -c 'import ctypes; ctypes.CDLL("libibverbs.so.1")' 2>/dev/null; }

lib=$(ldconfig -p | awk '/libibverbs\.so\.1 / {print $NF; exit}')
[ -n "$lib" ] || skip "rdma-core is not installed here: nothing to take away"
# The instrument: with rdma-core in place the probe loads it.
check "the instrument: libibverbs.so.1 loads before it is hidden" loads_verbs
real=$(readlink -f "$lib")
mount --bind /dev/null "$real" || { log "FAIL: cannot hide $real"; exit 1; }
providers=$(dirname "$real")/libibverbs
[ -d "$providers" ] && mount -t tmpfs none "$providers"
check "libibverbs.so.1 no longer loads in this namespace" bash -c '! python3 -c "import ctypes; ctypes.CDLL(\"libibverbs.so.1\")" 2>/dev/null'

run_pair() {  # run_pair NAME "client env" "client args": sets OUT
  local name=$1 cenv=$2 cargs=$3 port
  port=$(free_port)
  reset_stats
  bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 1
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$(env $cenv SMCR_DEBUG=1 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" \
        timeout 120 "$ECHO_TOOL" client --port "$port" $cargs 2>"$TEST_TMP/client.log")
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$name: $OUT"
}

run_pair "shm" "" "--bytes 4M"
check "shm: echo intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "shm: both ends SMC-R without rdma-core" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
check "shm: TCP carried only the CLC" [ "$(field tcp_bytes_received "$OUT")" -lt 200 ]

# A client told to prefer verbs (SMCR_FABRIC=verbs) finds no device and
# offers the shm fabric, as on a host without an RDMA device.
run_pair "verbs wanted" "SMCR_FABRIC=verbs" "--bytes 1M"
check "verbs wanted: echo intact" [ "$(field ok "$OUT")" = 1 ]
check "verbs wanted: SMC-R over shm all the same" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
check "verbs wanted: the log says rdma-core cannot be loaded" grep -q "libibverbs.so.1 cannot be loaded" "$TEST_TMP/client.log"

finish
