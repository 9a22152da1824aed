#!/usr/bin/env bash
# Benchmarks (not a test): plain TCP vs SMC-R (both ends under smc_run) on this
# host, interleaved (tcp, smc, tcp, smc ...) for REPS repetitions, reported as
# a table of MEDIANS with SMC-R/TCP ratios and a PNG chart (gnuplot, if there):
#   sockperf ping-pong 14 B (avg/p50/p99), sockperf throughput 64000 B and 1 KiB;
#   redis-benchmark -c 50 -d 1024 SET/GET, plain and -P 16, and -c 1000 (one
#   client process, a thousand connections, every one SMC-R);
#   memcached (2 threads) + memcaslap -c 1000 -T 2, 1 KiB values, 9:1 get/set;
#   nginx (1 KiB file, sendfile) + wrk -t2 -c50 keepalive, 1 and 2 workers;
#   short-lived connections: wrk "Connection: close" and a connect/request/close
#   loop (tools/bench/smcr_connbench), connect-to-first-byte latency: SMC-R for
#   every connection (SMCR_SHORT_FLOWS=0), smc_run's default (its short-flow
#   guard keeps a destination's connections on TCP while they end short:
#   "default" rows), and a policy that keeps those flows on TCP ("policy" rows);
#   idle: N connections held open, CPU% and memory per connection;
#   program start: /bin/true under smc_run vs with the shim preloaded directly
#   (LD_PRELOAD), alternating start by start; smc_run's own cost is the median
#   difference (ms);
#   stalling clients: connect-to-first-byte p99 of 1000 SMC-R clients of a
#   single-threaded server, beside 21 clients stalled in their CLC handshake
#   vs without them (both SMC-R);
#   accept-then-fork echo servers (tools/bench/fork_echo.py): Python's
#   ForkingTCPServer (each connection moves to its child) and an inetd-style
#   server whose child execs cat (the connection is carried into cat), 4
#   connections of 64 MiB each way in turn, and the same echo in a
#   ThreadingTCPServer (no fork: the baseline for the other two);
#   PostgreSQL + pgbench -c 8 -j 2, select-only and TPC-B: an accept-then-fork
#   server: under smc_run each connection moves to its backend (re-homed)
#   (README, fork()); skipped, with the reason, when PostgreSQL is not installed.
# An SMC-R run counts only if its client's counters prove it (smc_active > 0,
# fallback_total == 0; policy runs: smc_active == 0, every fallback a policy
# one; default runs: every fallback a short-flow one; start runs: both ways
# mapped the shim); otherwise it is VOID. A run that fails or times out is FAILED.
# Needs root (eBPF). Builds the tree (scripts/build.sh) unless -B. BENCH_LIB=PATH
# runs another build of the shim in the SMC-R columns (A/B of two trees).
#   usage: scripts/bench.sh [-t SECS] [-r REPS] [-n REDIS_REQUESTS] [-c IDLE_CONNS]
#                           [-i IDLE_SECS] [-s BENCHES] [-o OUTDIR] [-q] [-B] [-d] [-k]
#   -t  seconds per timed run (default 5)       -r  repetitions (default 3)
#   -n  redis requests (default 100000; -P 16 runs use 5x)
#   -c  idle connections (default 1000)         -i  idle measuring window (default 3 s)
#   -s  only these, comma separated: pp,tp,redis,mc,nginx,loop,idle,start,stall,fork,pg (default all)
#   -o  where results.tsv, runs.tsv, table.txt and bench.png go (default build/bench)
#   -q  quick mode (ctest -L bench): -t 1 -r 1 -n 20000 -i 1; exits 1 if any
#       SMC-R run is VOID/FAILED or a ratio collapses: ping-pong p50 > 0.5x TCP,
#       a throughput/request rate < 0.6x TCP, a short-lived connection rate
#       < 0.05x TCP (a known gap: the CLC handshake per connection), smc_run
#       starting a program more than 10 ms later than plain LD_PRELOAD in the
#       same run (issue 15's bound; a difference of two interleaved medians);
#       override with BENCH_MAX_LAT_RATIO / BENCH_MIN_RATE_RATIO /
#       BENCH_MIN_SHORT_RATIO / BENCH_MAX_START_MS / BENCH_MAX_STALL_RATIO (stalled CLCs beside: p99 over 3x the calm run's). Never compares absolute times. Leaves out pg, fork, mc and redis -c 1000 (unless -s names
#       them): their rows have no gate; a database cluster to create would double its time, and
#       a thousand connections of a few requests each measure their handshakes, not the rows' subject.
#   -B  do not rebuild   -k  keep the logs   -d  SMCR_DEBUG=1 also in the short-lived
#       connection runs (elsewhere it is on: the smc_run processes' logs are in the run's
#       directory, copied to OUTDIR/failed/ for a run that is VOID or FAILED)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
SECS=5 REPS=3 REQS=100000 IDLE_CONNS=1000 IDLE_SECS=3 QUICK=0 BUILD=1 DEBUG=0 KEEP=0 OUTDIR="$root/build/bench"
SET_T="" SET_R="" SET_N="" SET_I=""
ONLY=""
while getopts "t:r:n:c:i:s:o:qBdkh" o; do
  case "$o" in
    t) SET_T=$OPTARG ;; r) SET_R=$OPTARG ;; n) SET_N=$OPTARG ;; c) IDLE_CONNS=$OPTARG ;;
    i) SET_I=$OPTARG ;; s) ONLY=",$OPTARG," ;; o) OUTDIR=$OPTARG ;; q) QUICK=1 ;; B) BUILD=0 ;; d) DEBUG=1 ;; k) KEEP=1 ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
  esac
done
[ "$QUICK" = 1 ] && { SECS=1 REPS=1 REQS=20000 IDLE_SECS=1; }
SECS=${SET_T:-$SECS} REPS=${SET_R:-$REPS} REQS=${SET_N:-$REQS} IDLE_SECS=${SET_I:-$IDLE_SECS}
MAX_LAT_RATIO=${BENCH_MAX_LAT_RATIO:-0.5} MIN_RATE_RATIO=${BENCH_MIN_RATE_RATIO:-0.6}
MIN_SHORT_RATIO=${BENCH_MIN_SHORT_RATIO:-0.05} MAX_START_MS=${BENCH_MAX_START_MS:-10}
T_START=$(date +%s.%N)

[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (loads the eBPF program)" >&2; exit 1; }
want() { [ -z "$ONLY" ] || [[ $ONLY == *",$1,"* ]]; }  # want BENCH: selected by -s (or no -s)
TOOLS=(ss python3)  # what the selected benchmarks run
{ want pp || want tp; } && TOOLS+=(sockperf)
want redis && TOOLS+=(redis-server redis-benchmark)
want mc && TOOLS+=(memcached memcaslap)
want nginx && TOOLS+=(wrk)
for t in "${TOOLS[@]}"; do
  command -v "$t" >/dev/null || { echo "bench: $t missing; run scripts/install-deps.sh" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if want nginx && [ ! -x "$NGINX" ]; then echo "bench: nginx missing; run scripts/install-deps.sh" >&2; exit 1; fi
if [ "$BUILD" = 1 ]; then
  bash scripts/build.sh >/tmp/smcr-bench-build.log 2>&1 || { tail -20 /tmp/smcr-bench-build.log; echo "bench: build failed" >&2; exit 1; }
fi

CTL="$root/build/bpf/smcr_ctl"
LIB="${BENCH_LIB:-$root/build/preload/libsmcr_preload.so}"  # BENCH_LIB: another build of the shim (A/B runs)
CB="$root/build/tools/bench/smcr_connbench"
FORK_ECHO="$root/tools/bench/fork_echo.py"
SMC_RUN="$root/scripts/smc_run"
for f in "$CTL" "$LIB" "$CB"; do [ -e "$f" ] || { echo "bench: $f missing (build first)" >&2; exit 1; }; done
LOG=$(mktemp -d /tmp/smcr-bench.XXXXXX)
chmod 755 "$LOG"
mkdir -p "$OUTDIR"; rm -rf "$OUTDIR/failed"
SRV_PID=""
LOADED_HERE=0
cleanup() {
  stop_server
  [ "$LOADED_HERE" = 1 ] && "$CTL" unload >/dev/null 2>&1
  if [ "$KEEP" = 1 ]; then echo "bench: logs kept in $LOG"; else rm -rf "$LOG"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mountpoint -q /sys/fs/bpf || { mkdir -p /sys/fs/bpf; mount -t bpf bpf /sys/fs/bpf; }
if ! "$CTL" status >/dev/null 2>&1; then "$CTL" load >/dev/null || { echo "bench: smcr_ctl load failed" >&2; exit 1; }; LOADED_HERE=1; fi
# idle connections: 4 descriptors each on the SMC-R side (TCP socket, readiness socketpair, the shim's copy)
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $(( IDLE_CONNS * 4 + 256 )) ]; then
  echo "bench: warning: RLIMIT_NOFILE $(ulimit -n) may be too low for $IDLE_CONNS idle SMC-R connections" >&2
fi
CLK_TCK=$(getconf CLK_TCK) NCPU=$(nproc)
# cpu_snap: "BUSY STEAL OURS": busy and steal seconds of the whole machine (/proc/stat)
# and CPU seconds of this script's reaped descendants (bash `times`), to tell how much
# of the machine something else used while a run went (a concurrent build or test).
cpu_snap() {  # -> SNAP (not in a subshell: `times` must see this shell's children)
  times >"$LOG/.times"
  SNAP=$(awk -v hz="$CLK_TCK" 'FNR == NR { if (FNR == 2) for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } next }
    $1 == "cpu" { printf "%.2f %.2f %.3f", ($2 + $3 + $4 + $7 + $8 + $9) / hz, $9 / hz, t; exit }' "$LOG/.times" /proc/stat)
}
# foreign A B SECS: % of the machine's CPU capacity used by others between snapshots A and B
foreign() { awk -v a="$1" -v b="$2" -v t="$3" -v n="$NCPU" 'BEGIN { split(a, x, " "); split(b, y, " ")
  f = ((y[1] - x[1]) - (y[3] - x[3])) / (t * n) * 100; if (f < 0) f = 0; printf "%.0f", f }'; }
steal() { awk -v a="$1" -v b="$2" -v t="$3" -v n="$NCPU" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.0f", (y[2] - x[2]) / (t * n) * 100 }'; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits for a listener without connecting to it (a probe would count as a fallback).
wait_listen() { local i=0; until ss -Hltn "sport = :$1" | grep -q LISTEN; do sleep 0.05; i=$((i+1)); [ $i -lt 200 ] || return 1; done; }
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { printf "%.0f\n", s + 0 }'; }
stop_server() {  # stop_server [SIGNAL]: SIGINT (nginx: QUIT), then SIGKILL after 10 s
  [ -n "$SRV_PID" ] || return 0
  kill "-${1:-INT}" "$SRV_PID" 2>/dev/null
  timeout 10 tail -s 0.05 --pid="$SRV_PID" -f /dev/null 2>/dev/null || { echo "bench: server $SRV_PID did not stop; SIGKILL" >&2; kill -KILL "$SRV_PID" 2>/dev/null; }
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=""
}
# prefix MODE STATSDIR PORT: sets PFX, the command prefix for a process of MODE:
#   tcp (plain), smc (smc_run; in the short-lived runs with the short-flow guard
#   off, so that every connection is SMC-R), auto (smc_run as it comes),
#   pol (smc_run with a policy that denies PORT: TCP)
# SMCR_DEBUG=1 (one log line per connection event, in the run's logs) everywhere but
# in the short-lived connection runs, where it would cost a share of each
# connection's time; -d turns it on there too.
prefix() {
  mkdir -p "$2"
  local DBG=(SMCR_DEBUG=1)
  [ "$DEBUG" = 0 ] && [ "${SHORT_LIVED:-0}" = 1 ] && DBG=()
  case "$1" in
    tcp) PFX=() ;;
    smc) PFX=(env SMCR_PRELOAD_LIB="$LIB" "${DBG[@]}" SMCR_SHORT_FLOWS="$( [ "${SHORT_LIVED:-0}" = 1 ] && echo 0 || echo 8)" "$SMC_RUN" --stats "$2") ;;
    auto) PFX=(env -u SMCR_SHORT_FLOWS SMCR_PRELOAD_LIB="$LIB" "${DBG[@]}" "$SMC_RUN" --stats "$2") ;;
    pol) PFX=(env SMCR_PRELOAD_LIB="$LIB" "${DBG[@]}" SMCR_POLICY_RULES="deny port $3" "$SMC_RUN" --stats "$2") ;;
  esac
}
# verdict MODE CLIENT_STATS RC: ok | FAILED | VOID (the mode not proven by the client's counters)
verdict() {
  [ "$3" -eq 0 ] || { echo FAILED; return; }
  case "$1" in
    tcp) echo ok ;;
    smc) if [ "$(stat_in "$2" smc_active)" -gt 0 ] && [ "$(stat_in "$2" fallback_total)" -eq 0 ]; then echo ok; else echo VOID; fi ;;
    auto) local fa; fa=$(stat_in "$2" fallback_total)
          if [ "$(stat_in "$2" smc_active)" -gt 0 ] && [ "$(stat_in "$2" fallback.short_flow)" -eq "$fa" ]; then echo ok; else echo VOID; fi ;;
    pol) local fb; fb=$(stat_in "$2" fallback_total)
         if [ "$(stat_in "$2" smc_active)" -eq 0 ] && [ "$fb" -gt 0 ] && [ "$(stat_in "$2" fallback.policy)" -eq "$fb" ]; then echo ok; else echo VOID; fi ;;
    run) if [ "$(cat "$2/proof" 2>/dev/null)" = ok ]; then echo ok; else echo VOID; fi ;;
  esac
}
counters() {  # counters DIR: the non-zero connection counters, one line
  cat "$1"/smcr-*.txt 2>/dev/null | awk '$1 ~ /^(smc_active|smc_passive|fallback|aborts|handovers|rehomed|adopted|exec_adopted|lgr_created|lgr_reused)/ { s[$1] += $2 }
    END { for (k in s) if (s[k]) printf "%s=%d ", k, s[k] }'
}

declare -A VALS BAD   # VALS[key.mode] = "v1 v2 ..."; BAD[key.mode] = "VOID FAILED ..."
RUNS="$OUTDIR/runs.tsv"
printf 'rep\tbench\tmode\tverdict\tsecs\tforeign_cpu_pct\tsteal_pct\tmetrics\tclient_counters\tserver_counters\n' >"$RUNS"
# finish_run NAME MODE RC DIR metric=value...: verdict, explanation, record
finish_run() {
  local name=$1 mode=$2 rc=$3 d=$4 v kv k val; shift 4
  v=$(verdict "$mode" "$d/cli" "$rc")
  local cc sc; cc=$(counters "$d/cli") sc=$(counters "$d/srv")
  if [ "$v" != ok ]; then
    echo "bench: $name [$mode] rep $REP: $v (rc=$rc$( [ "$rc" -eq 124 ] && echo ', timed out'))" >&2
    echo "bench:   client counters: ${cc:-none}; server counters: ${sc:-none}" >&2
    for f in "$d"/client.err "$d"/client.out "$d"/server.out "$d"/error.log; do
      [ -s "$f" ] && { echo "--- tail of $f" >&2; tail -8 "$f" | tr '\r' '\n' | tail -8 >&2; }
    done
    if [ "$KEEP" = 0 ]; then mkdir -p "$OUTDIR/failed"; cp -r "$d" "$OUTDIR/failed/" 2>/dev/null; echo "bench:   logs copied to $OUTDIR/failed/$(basename "$d")" >&2; fi
  fi
  for kv in "$@"; do
    k=${kv%%=*} val=${kv#*=}
    if [ "$v" = ok ] && [[ $val =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then VALS[$k.$mode]+="$val "
    elif [ "$v" = ok ]; then BAD[$k.$mode]+="FAILED "
    else BAD[$k.$mode]+="$v "; fi
  done
  [ "$mode" != tcp ] && printf '%s\t%s\t%s\t%s\n' "$name [$mode]" "$v" "$cc" "$sc" >>"$LOG/proof.tsv"
  local el snap; el=$(awk -v a="$RUN_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'); cpu_snap; snap=$SNAP
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$REP" "$name" "$mode" "$v" "$el" \
    "$(foreign "$RUN_SNAP" "$snap" "$el")" "$(steal "$RUN_SNAP" "$snap" "$el")" "$*" "$cc" "$sc" >>"$RUNS"
}
# client_run MODE DIR PORT TIMEOUT cmd...: the client under MODE -> RC
client_run() {
  local mode=$1 d=$2 port=$3 to=$4; shift 4
  prefix "$mode" "$d/cli" "$port"
  RC=0
  timeout "$to" "${PFX[@]}" "$@" >"$d/client.out" 2>"$d/client.err" || RC=$?
}
# server_start MODE DIR PORT cmd...: the server under MODE in the background -> SRV_PID; 1 if it does not listen
server_start() {
  local mode=$1 d=$2 port=$3; shift 3
  prefix "$mode" "$d/srv" "$port"
  "${PFX[@]}" "$@" >"$d/server.out" 2>&1 &
  SRV_PID=$!
  wait_listen "$port" || { echo "bench: server [$mode] did not listen: $*" >&2; return 1; }
}
newdir() { local d="$LOG/$1-$2-r$REP"; mkdir -p "$d"; echo "$d"; }

# ---- sockperf ------------------------------------------------------------------
# (each sockperf client run costs about 2.4 s on top of -t: a fixed 2 s sleep before
# the test and 0.4 s of warm-up at its start, which the statistics leave out)
sockperf_run() {  # sockperf_run NAME MODE KIND(pp|tp) ARGS... -> D, RC
  local name=$1 mode=$2 kind=$3; shift 3
  local port; port=$(free_port); D=$(newdir "$name" "$mode")
  RC=1
  if server_start "$mode" "$D" "$port" sockperf sr --tcp -i 127.0.0.1 -p "$port"; then
    client_run "$mode" "$D" "$port" $((SECS + 30)) sockperf "$kind" --tcp -i 127.0.0.1 -p "$port" -t "$SECS" "$@"
  fi
  stop_server
}
bench_pp() {
  # --mps: sockperf's reply table holds 600k messages/s by default, and
  # SMC-R goes faster than that ("_seqN > m_maxSequenceNo").
  sockperf_run pp "$1" pp -m 14 --mps 5000000
  local o="$D/client.out"
  finish_run pp "$1" "$RC" "$D" \
    "pp_avg=$(sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' "$o" | head -1)" \
    "pp_p50=$(awk '/percentile 50.000 =/ { print $NF; exit }' "$o")" \
    "pp_p99=$(awk '/percentile 99.000 =/ { print $NF; exit }' "$o")"
}
bench_tp() {  # bench_tp MODE SIZE KEY
  sockperf_run "tp$2" "$1" tp -m "$2"
  local msgs; msgs=$(sed -n 's/.*Message Rate is \([0-9.]*\) \[msg\/sec\].*/\1/p' "$D/client.out" | head -1)
  finish_run "tp$2" "$1" "$RC" "$D" "$3=$( [ -n "$msgs" ] && awk -v m="$msgs" -v s="$2" 'BEGIN { printf "%.1f", m * s / 1e6 }')"
}

# ---- redis -----------------------------------------------------------------------
bench_redis() {  # bench_redis MODE PIPELINE [CONNECTIONS]
  local mode=$1 p=$2 c=${3:-50} name=redis n=$REQS sfx=""
  [ "$p" -gt 1 ] && { name=redis_p$p; n=$((REQS * 5)); sfx=_p$p; }
  [ "$c" != 50 ] && { name=redis_c$c; sfx=_c$c; }
  local port; port=$(free_port); D=$(newdir "$name" "$mode")
  RC=1
  if server_start "$mode" "$D" "$port" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
       --protected-mode no --maxclients $((c + 100)) --dir "$D" --logfile "$D/redis.log"; then
    client_run "$mode" "$D" "$port" 300 redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -n "$n" -d 1024 -P "$p" -t get,set -q
  fi
  stop_server
  rps() { tr '\r' '\n' <"$D/client.out" | awk -v t="$1:" '$1 == t && /requests per second/ { print $2; exit }'; }
  finish_run "$name" "$mode" "$RC" "$D" "redis_set$sfx=$(rps SET)" "redis_get$sfx=$(rps GET)"
}

# ---- memcached ---------------------------------------------------------------------
# A connection pool of a thousand in front of a cache (issue 18): memcaslap's
# default mix (9 gets to 1 set), 1 KiB values, 2 threads each side.
bench_mc() {  # bench_mc MODE CONNECTIONS
  local mode=$1 c=$2 port; port=$(free_port); D=$(newdir "mc$c" "$mode")
  RC=1
  # memcached sets RLIMIT_NOFILE (soft and hard) to its -c: room for the five
  # descriptors an SMC-R connection holds (docs/PERFORMANCE.md), or the shim
  # declines the rest for want of descriptors and they stay TCP.
  if server_start "$mode" "$D" "$port" memcached -u root -l 127.0.0.1 -p "$port" -U 0 -t 2 -c $((c * 6 + 100)); then
    client_run "$mode" "$D" "$port" $((SECS + 60)) memcaslap -s "127.0.0.1:$port" -c "$c" -T 2 -t "${SECS}s" -X 1024
  fi
  stop_server
  finish_run "mc$c" "$mode" "$RC" "$D" "mc_c$c=$(sed -n 's/^Run time: .* TPS: \([0-9]*\).*/\1/p' "$D/client.out" | tail -1)"
}

# ---- nginx + wrk -----------------------------------------------------------------
WWW="$LOG/www"; mkdir -p "$WWW"; head -c 1024 /dev/urandom >"$WWW/1k"; chmod 755 "$WWW"; chmod 644 "$WWW/1k"
nginx_conf() {  # nginx_conf DIR PORT WORKERS
  mkdir -p "$1/tmp"
  cat >"$1/nginx.conf" <<EOF
user root;
worker_processes $3;
daemon off;
master_process on;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
  server {
    listen 127.0.0.1:$2 backlog=4096;
    root $WWW;
  }
}
EOF
}
bench_nginx() {  # bench_nginx MODE WORKERS keepalive|close KEY
  local mode=$1 w=$2 how=$3 key=$4 name="nginx${2}w_$3"
  local port; port=$(free_port); D=$(newdir "$name" "$mode")
  nginx_conf "$D" "$port" "$w"
  local hdr=(); SHORT_LIVED=0; [ "$how" = close ] && { hdr=(-H "Connection: close"); SHORT_LIVED=1; }
  RC=1
  if server_start "$mode" "$D" "$port" "$NGINX" -c "$D/nginx.conf" -p "$D"; then
    sleep 0.2  # the workers are up
    client_run "$mode" "$D" "$port" $((SECS + 30)) wrk -t2 -c50 -d"${SECS}s" "${hdr[@]}" "http://127.0.0.1:$port/1k"
  fi
  stop_server QUIT
  local o="$D/client.out" rps
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$o")
  # only 2xx and (keepalive) no socket errors; a close run may see a few reads end at the server's close
  if grep -q 'Non-2xx' "$o"; then echo "bench: $name [$mode]: $(grep Non-2xx "$o")" >&2; [ "$RC" = 0 ] && RC=1; fi
  if [ "$how" = keepalive ] && grep -q 'Socket errors' "$o"; then echo "bench: $name [$mode]: $(grep 'Socket errors' "$o")" >&2; [ "$RC" = 0 ] && RC=1; fi
  [ "$how" = close ] && grep -q 'Socket errors' "$o" && echo "bench: note: $name [$mode] rep $REP: $(grep 'Socket errors' "$o")" >&2
  SHORT_LIVED=0
  finish_run "$name" "$mode" "$RC" "$D" "$key=$rps"
}

# ---- connect/request/close loop (smcr_connbench) ----------------------------------
bench_loop() {  # bench_loop MODE
  local mode=$1 port; port=$(free_port); D=$(newdir loop "$mode")
  RC=1 SHORT_LIVED=1
  if server_start "$mode" "$D" "$port" "$CB" serve "$port" 64; then
    client_run "$mode" "$D" "$port" $((SECS + 30)) "$CB" loop "$port" "$SECS" 32 64
  fi
  stop_server
  SHORT_LIVED=0
  f() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$D/client.out" | head -1; }
  finish_run loop "$mode" "$RC" "$D" "loop_rate=$(f rate)" "loop_fb_p50=$(f first_byte_p50)" \
    "loop_fb_p99=$(f first_byte_p99)" "loop_conn_p50=$(f connect_p50)"
}

# ---- accept-then-fork echo servers (tools/bench/fork_echo.py) ---------------------------
bench_fork() {  # bench_fork MODE forking|inetd|threading KEY
  local mode=$1 kind=$2 key=$3 port; port=$(free_port); D=$(newdir "$key" "$mode")
  RC=1
  if server_start "$mode" "$D" "$port" python3 "$FORK_ECHO" server "$kind" "$port"; then
    client_run "$mode" "$D" "$port" $((SECS * 4 + 60)) python3 "$FORK_ECHO" client "$port" 4 64
  fi
  stop_server TERM  # started in the background: SIGINT is ignored there
  finish_run "$key" "$mode" "$RC" "$D" "$key=$(sed -n 's/^rate=//p' "$D/client.out" | head -1)"
}

# ---- idle connections --------------------------------------------------------------
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
bench_idle() {  # bench_idle MODE
  local mode=$1 n=$IDLE_CONNS port; port=$(free_port); D=$(newdir idle "$mode")
  local cpid="" i=0 rc=0
  RC=1
  if server_start "$mode" "$D" "$port" "$CB" idle-serve "$port" "$n"; then
    prefix "$mode" "$D/cli" "$port"
    "${PFX[@]}" "$CB" idle-connect "$port" "$n" >"$D/client.out" 2>"$D/client.err" &
    cpid=$!
    until grep -qs conns= "$D/client.out" && grep -qs conns= "$D/server.out"; do
      kill -0 "$cpid" 2>/dev/null && kill -0 "$SRV_PID" 2>/dev/null || break
      sleep 0.05; i=$((i + 1)); [ $i -lt 1200 ] || { echo "bench: idle [$mode]: $n connections not up in 60 s" >&2; break; }
    done
    if grep -qs conns= "$D/client.out" && grep -qs conns= "$D/server.out"; then
      sleep 0.5
      local c0 s0 t0 c1 s1 t1
      c0=$(ticks "$cpid") s0=$(ticks "$SRV_PID") t0=$(date +%s.%N)
      sleep "$IDLE_SECS"
      c1=$(ticks "$cpid") s1=$(ticks "$SRV_PID") t1=$(date +%s.%N)
      cat "/proc/$SRV_PID/smaps_rollup" >"$D/server.smaps_rollup" 2>/dev/null
      ls "/proc/$SRV_PID/fd" 2>/dev/null | wc -l >"$D/server.fds"
      IDLE_CPU=$(awk -v c="$((c1 - c0))" -v s="$((s1 - s0))" -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" \
        'BEGIN { printf "%.2f %.2f", 100 * c / hz / (t1 - t0), 100 * s / hz / (t1 - t0) }')
      RC=0
    fi
    kill -INT "$cpid" 2>/dev/null
    timeout 20 tail -s 0.05 --pid="$cpid" -f /dev/null 2>/dev/null || kill -KILL "$cpid" 2>/dev/null
    wait "$cpid" 2>/dev/null || rc=$?
    [ "$RC" = 0 ] && RC=$rc
  fi
  stop_server
  local c s; c=$(cat "$D/client.out" 2>/dev/null) s=$(cat "$D/server.out" 2>/dev/null)
  g() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
  per() { awk -v a="$(g "$1" "$3")" -v b="$(g "$2" "$3")" -v n="$n" 'BEGIN { if (a != "" && b != "") printf "%.1f", (a - b) / n }'; }
  [ "$RC" = 0 ] || IDLE_CPU="x x"
  finish_run idle "$mode" "$RC" "$D" \
    "idle_setup=$(awk -v s="$(g connect_secs "$c")" -v n="$n" 'BEGIN { if (s > 0) printf "%.0f", n / s }')" \
    "idle_cpu_cli=${IDLE_CPU% *}" "idle_cpu_srv=${IDLE_CPU#* }" \
    "idle_rss_cli=$(per rss_after rss_before "$c")" "idle_rss_srv=$(per rss_after rss_before "$s")" \
    "idle_pss=$(awk -v a="$(per pss_anon_shmem_after pss_anon_shmem_before "$c")" -v b="$(per pss_anon_shmem_after pss_anon_shmem_before "$s")" 'BEGIN { if (a != "" && b != "") printf "%.1f", a + b }')" \
    "idle_shm=$(awk -v m="$(g memfd_mapped_after "$c")" -v n="$n" 'BEGIN { if (m != "") printf "%.1f", m / n }')"
}

# ---- program start: smc_run vs plain LD_PRELOAD ------------------------------------
# START_N starts of /bin/true each way, alternating: `LD_PRELOAD=<shim> /bin/true`
# ("tcp" column: the plain preload issue 15 compares with) and `smc_run /bin/true`
# (same shim, same environment otherwise), each timed by this shell as a loop
# of short programs sees it (fork, exec(s), exit, wait; $EPOCHREALTIME). Rows:
# the median start each way, and smc_run's own cost: the median of the
# start-by-start differences. Proof that both ways run the program with the
# shim mapped: one more, untimed start of each that reads /proc/self/maps.
START_N=${BENCH_START_N:-200}
bench_start() {  # bench_start run
  local mode=$1 i t0 t1 t2 n=$START_N; D=$(newdir start "$mode"); mkdir -p "$D/cli"
  [ "$QUICK" = 1 ] && [ -z "${BENCH_START_N:-}" ] && n=100
  RC=0
  for ((i = 0; i < n; i++)); do
    t0=$EPOCHREALTIME
    LD_PRELOAD="$LIB" /bin/true || RC=1
    t1=$EPOCHREALTIME
    SMCR_PRELOAD_LIB="$LIB" "$SMC_RUN" /bin/true || RC=1
    t2=$EPOCHREALTIME
    echo "$t0 $t1 $t2"
  done >"$D/times"
  local p s
  p=$(LD_PRELOAD="$LIB" grep -c libsmcr_preload /proc/self/maps 2>"$D/client.err")
  s=$(SMCR_PRELOAD_LIB="$LIB" "$SMC_RUN" grep -c libsmcr_preload /proc/self/maps 2>>"$D/client.err")
  echo "plain maps the shim: ${p:-0} mapping(s); smc_run: ${s:-0}" >"$D/client.out"
  [ "${p:-0}" -gt 0 ] && [ "${s:-0}" -gt 0 ] && echo ok >"$D/cli/proof"
  [ "${p:-0}" -gt 0 ] || RC=1
  med() { awk -v c="$1" '{ printf "%.3f\n", c == 3 ? ($3 - $2 - ($2 - $1)) * 1000 : ($(c + 1) - $c) * 1000 }' "$D/times" |
          sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  finish_run start tcp "$RC" "$D" "start_ms=$(med 1)"
  finish_run start "$mode" "$RC" "$D" "start_ms=$(med 2)" "start_over=$(med 3)"
}

# ---- PostgreSQL + pgbench ----------------------------------------------------------
# The postmaster accepts and forks a backend per connection, then closes its
# copy: under smc_run each connection is SMC-R, and moves to its backend with
# a link of its own (rehomed, adopted; no relay, no handovers). One
# cluster per benchmark run (initdb), as nobody (postgres refuses root), on a
# Unix socket of its own for the setup; each run starts the server afresh.
PG_BIN="" PG_SKIP="" PG_DIR="$LOG/pg"
for d in "$(pg_config --bindir 2>/dev/null)" /usr/lib/postgresql/*/bin; do
  [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && PG_BIN=$d
done
AS_PG=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
pg_init() {  # once; sets PG_SKIP to the reason when it cannot run
  [ -n "$PG_SKIP" ] || [ -d "$PG_DIR/data" ] && return
  if [ -z "$PG_BIN" ]; then PG_SKIP="PostgreSQL not installed (no postgres/initdb in pg_config --bindir or /usr/lib/postgresql/*/bin)"
  elif ! command -v pgbench >/dev/null || ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
    PG_SKIP="needs pgbench, setpriv and the user nobody"
  else
    mkdir -p "$PG_DIR"; chown nobody "$PG_DIR"
    local port; port=$(free_port)
    if ! "${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust --no-sync >"$PG_DIR/initdb.log" 2>&1; then
      PG_SKIP="initdb failed (see $PG_DIR/initdb.log)"
    else
      "${AS_PG[@]}" "$PG_BIN/postgres" -D "$PG_DIR/data" -p "$port" -k "$PG_DIR" -c listen_addresses= -c fsync=off >"$PG_DIR/init.log" 2>&1 &
      local pid=$!
      pg_ready "$port" && pgbench -i -q -s 8 -h "$PG_DIR" -p "$port" -U postgres postgres >>"$PG_DIR/init.log" 2>&1 ||
        PG_SKIP="pgbench -i failed (see $PG_DIR/init.log)"
      kill -INT "$pid"; wait "$pid" 2>/dev/null
    fi
  fi
  [ -n "$PG_SKIP" ] && echo "bench: pg: skipped: $PG_SKIP" >&2
}
# The listener is up before recovery ends; asked over the Unix socket, which no counter sees.
pg_ready() { local i=0; until pg_isready -q -h "$PG_DIR" -p "$1" -U postgres; do sleep 0.05; i=$((i+1)); [ $i -lt 400 ] || return 1; done; }
bench_pg() {  # bench_pg MODE select|tpcb KEY
  pg_init; [ -z "$PG_SKIP" ] || return 0
  local mode=$1 port; port=$(free_port); D=$(newdir "pg_$2" "$mode")
  local args=(); [ "$2" = select ] && args=(-S)
  mkdir -p "$D/srv"; chmod 1777 "$D/srv"  # the server's counters, written as nobody
  RC=1
  if server_start "$mode" "$D" "$port" "${AS_PG[@]}" "$PG_BIN/postgres" -D "$PG_DIR/data" -p "$port" -k "$PG_DIR" \
       -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off && pg_ready "$port"; then
    client_run "$mode" "$D" "$port" $((SECS + 30)) pgbench -n "${args[@]}" -c 8 -j 2 -T "$SECS" -h 127.0.0.1 -p "$port" -U postgres postgres
    grep -q '^number of failed transactions: 0 ' "$D/client.out" || { [ "$RC" = 0 ] && RC=1; }
  fi
  stop_server
  finish_run "pg_$2" "$mode" "$RC" "$D" "$3=$(awk '/^tps = / { printf "%.0f", $3; exit }' "$D/client.out")"
}

# ---- stalling clients: a stalled handshake delays nobody else ------------------------
# A single-threaded echo server under smc_run (select, then accept()) and
# STALL_N clients one after the other (connect, send, read the echo), every
# connection SMC-R: connect-to-first-byte p99 without (the TCP column) and
# with (the SMC-R column) 21 clients that offer SMC-R and then stall their
# handshake (7 silent, 7 with half a Proposal, 7 without a Confirm; the
# test's fake peer), connected first and held for the whole run (CLC
# timeout 60 s). Issue 15's target: within 2x (quick mode gates at
# BENCH_MAX_STALL_RATIO, default 3x). Both columns are SMC-R runs, each proven by its
# clients' counters.
FAKE="$root/build/tests/integration/fake_peer"
STALL_N=1000; [ "$QUICK" = 1 ] && STALL_N=300
# Quick mode's 300 clients make a p99 of their 4th-slowest: one hiccup of a
# shared CI machine moves it, so the gate there is looser than the target.
MAX_STALL_RATIO=${BENCH_MAX_STALL_RATIO:-$( [ "$QUICK" = 1 ] && echo 3 || echo 2)}
bench_stall() {  # bench_stall tcp|smc: without | with the stalling clients
  local mode=$1 phase=calm; [ "$mode" = smc ] && phase=stalled
  local port; port=$(free_port); D=$(newdir stall "$mode")
  local stallers=() b i
  RC=1; SHORT_LIVED=1
  export SMCR_CLC_TIMEOUT_MS=60000
  if [ ! -x "$FAKE" ]; then
    echo "bench: stall: $FAKE not built" >&2
  elif server_start smc "$D" "$port" python3 "$root/tools/bench/stall_server.py" "$port"; then
    if [ "$phase" = stalled ]; then
      for b in silent half-proposal no-confirm; do
        for i in 1 2 3 4 5 6 7; do "$FAKE" client "$port" "$b" >/dev/null 2>&1 & stallers+=($!); done
      done
      sleep 1  # all connected and stalled before the first normal client
    fi
    client_run smc "$D" "$port" 300 python3 "$root/tools/bench/connect_clients.py" "$port" "$STALL_N"
    grep -q "^served=$STALL_N " "$D/client.out" || { [ "$RC" = 0 ] && RC=1; }
  fi
  if [ ${#stallers[@]} -gt 0 ]; then kill "${stallers[@]}" 2>/dev/null; wait "${stallers[@]}" 2>/dev/null; fi
  unset SMCR_CLC_TIMEOUT_MS
  stop_server
  SHORT_LIVED=0
  # The TCP column is SMC-R too: proven here, as finish_run proves the other.
  if [ "$mode" = tcp ] && [ "$RC" = 0 ] && [ "$(verdict smc "$D/cli" 0)" != ok ]; then
    echo "bench: stall [calm] rep $REP: not every connection was SMC-R" >&2; RC=1
  fi
  local p99; p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' "$D/client.out")
  finish_run stall "$mode" "$RC" "$D" "stall_p99=$p99"
}

# ---- the runs, interleaved ---------------------------------------------------------
# The benchmarks: "function args" (each runs once per mode per repetition).
BENCHES=(
  "pp"                         "tcp smc"
  "tp 64000 tp64k"             "tcp smc"
  "tp 1024 tp1k"               "tcp smc"
  "redis 1"                    "tcp smc"
  "redis 16"                   "tcp smc"
  "redis 1 1000"               "tcp smc"
  "mc 1000"                    "tcp smc"
  "nginx 1 keepalive ngx1"     "tcp smc"
  "nginx 2 keepalive ngx2"     "tcp smc"
  "nginx 1 close ngx_close"    "tcp smc auto pol"
  "loop"                       "tcp smc auto pol"
  "idle"                       "tcp smc"
  "start"                      "run"
  "stall"                      "tcp smc"
  "fork threading fork_threading" "tcp smc"
  "fork forking fork_forking"   "tcp smc"
  "fork inetd fork_inetd"       "tcp smc"
  "pg select pg_select"        "tcp smc"
  "pg tpcb pg_tpcb"            "tcp smc"
)
cpu_snap; ALL_SNAP=$SNAP
echo "bench: $( [ "$QUICK" = 1 ] && echo 'QUICK mode, ')$REPS repetition(s), -t $SECS s, redis -n $REQS, $IDLE_CONNS idle connections over $IDLE_SECS s; logs in $LOG"
for ((REP = 1; REP <= REPS; REP++)); do
  for ((b = 0; b < ${#BENCHES[@]}; b += 2)); do
    read -r fn args <<<"${BENCHES[b]}"
    want "$fn" || continue
    [ "$QUICK" = 1 ] && [ -z "$ONLY" ] && { [ "$fn" = pg ] || [ "$fn" = fork ] || [ "$fn" = mc ] || [ "$args" = "1 1000" ]; } && continue  # see -q
    for mode in ${BENCHES[b + 1]}; do
      echo "bench: rep $REP/$REPS: $fn $args [$mode]"
      set -- $args
      RUN_T0=$(date +%s.%N); cpu_snap; RUN_SNAP=$SNAP
      "bench_$fn" "$mode" "$@"
    done
  done
done

# ---- table -------------------------------------------------------------------------
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) printf "%s", v[(NR + 1) / 2]; else { m = sprintf("%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2); sub(/0+$/, "", m); sub(/\.$/, "", m); printf "%s", m } }'; }
cell() {  # cell KEY.MODE: the median, or "VOID k/n" / "FAILED k/n" when any run was not ok
  local bad=${BAD[$1]:-} good=${VALS[$1]:-} nb ng
  nb=$(wc -w <<<"$bad"); ng=$(wc -w <<<"$good")
  if [ "$nb" -gt 0 ]; then  # "VOID k/n", "FAILED k/n", or both: "VOID 2+FAILED 1/3"
    local nv nf; nv=$(grep -o VOID <<<"$bad" | wc -l) nf=$(grep -o FAILED <<<"$bad" | wc -l)
    if [ "$nf" = 0 ]; then echo "VOID $nv/$((nb + ng))"
    elif [ "$nv" = 0 ]; then echo "FAILED $nf/$((nb + ng))"
    else echo "VOID $nv+FAILED $nf/$((nb + ng))"; fi
  elif [ "$ng" -gt 0 ]; then median <<<"$good"
  else echo "-"; fi
}
isnum() { [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; }
# ROWS: KEY|SMC-MODE|LABEL|BETTER|GATE (lat: SMC-R/TCP must stay <= MAX_LAT_RATIO; rate: >= MIN_RATE_RATIO;
# short: >= MIN_SHORT_RATIO; start: the SMC-R cell, a difference with plain in the same run, <= MAX_START_MS)
ROWS=(
  "pp_avg|smc|sockperf ping-pong 14 B avg (us)|lower|-"
  "pp_p50|smc|sockperf ping-pong 14 B p50 (us)|lower|lat"
  "pp_p99|smc|sockperf ping-pong 14 B p99 (us)|lower|-"
  "tp64k|smc|sockperf throughput 64000 B (MB/s)|higher|rate"
  "tp1k|smc|sockperf throughput 1024 B (MB/s)|higher|rate"
  "redis_set|smc|redis SET -c50 -d1024 (req/s)|higher|rate"
  "redis_get|smc|redis GET -c50 -d1024 (req/s)|higher|rate"
  "redis_set_p16|smc|redis SET -c50 -d1024 -P16 (req/s)|higher|rate"
  "redis_get_p16|smc|redis GET -c50 -d1024 -P16 (req/s)|higher|rate"
  "redis_set_c1000|smc|redis SET -c1000 -d1024 (req/s)|higher|rate"
  "redis_get_c1000|smc|redis GET -c1000 -d1024 (req/s)|higher|rate"
  "mc_c1000|smc|memcached + memcaslap -c1000 1KiB (ops/s)|higher|rate"
  "ngx1|smc|nginx 1w + wrk -c50 keepalive 1KiB (req/s)|higher|rate"
  "ngx2|smc|nginx 2w + wrk -c50 keepalive 1KiB (req/s)|higher|rate"
  "ngx_close|smc|nginx 1w + wrk Connection: close (conn/s)|higher|short"
  "ngx_close|auto|  same, smc_run default: short-flow guard (conn/s)|higher|rate"
  "ngx_close|pol|  same, policy 'deny port' -> TCP (conn/s)|higher|rate"
  "loop_rate|smc|connect/request/close loop (conn/s)|higher|short"
  "loop_rate|auto|  same, smc_run default: short-flow guard (conn/s)|higher|rate"
  "loop_rate|pol|  same, policy 'deny port' -> TCP (conn/s)|higher|rate"
  "loop_conn_p50|smc|connect() p50 (us)|lower|-"
  "loop_fb_p50|smc|connect() to first reply byte p50 (us)|lower|-"
  "loop_fb_p99|smc|connect() to first reply byte p99 (us)|lower|-"
  "loop_fb_p50|pol|  same p50, policy 'deny port' -> TCP (us)|lower|-"
  "idle_setup|smc|idle: opening $IDLE_CONNS conns (conn/s)|higher|-"
  "idle_cpu_cli|smc|idle: client CPU% over ${IDLE_SECS}s|lower|-"
  "idle_cpu_srv|smc|idle: server CPU% over ${IDLE_SECS}s|lower|-"
  "idle_rss_cli|smc|idle: client RSS per conn (KiB)|lower|-"
  "idle_rss_srv|smc|idle: server RSS per conn (KiB)|lower|-"
  "idle_pss|smc|idle: Pss anon+shmem, cli+srv, per conn (KiB)|lower|-"
  "idle_shm|smc|idle: RMB memfd mapped per conn (KiB)|lower|-"
  "start_ms|run|start /bin/true: LD_PRELOAD vs smc_run (ms)|lower|-"
  "start_over|run|  smc_run's own cost, median difference (ms)|lower|start"
  "stall_p99|smc|connect-to-first-byte p99, beside 21 stalled CLCs (ms)|lower|stall"
  "fork_threading|smc|ThreadingTCPServer echo (no fork), 4 x 64 MiB (MB/s)|higher|-"
  "fork_forking|smc|ForkingTCPServer echo, 4 x 64 MiB (MB/s)|higher|-"
  "fork_inetd|smc|inetd-style fork+exec cat echo, 4 x 64 MiB (MB/s)|higher|-"
  "pg_select|smc|pgbench -S -c8 -j2 select-only (tps)|higher|-"
  "pg_tpcb|smc|pgbench -c8 -j2 TPC-B (tps)|higher|-"
)
TABLE="$OUTDIR/table.txt" TSV="$OUTDIR/results.tsv"
RUN_EL=$(awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cpu_snap; FOREIGN=$(foreign "$ALL_SNAP" "$SNAP" "$RUN_EL") STEAL=$(steal "$ALL_SNAP" "$SNAP" "$RUN_EL")
MAXF=$(awk -F'\t' 'NR > 1 && $6 + 0 > m { m = $6 + 0; r = $2 " [" $3 "] rep " $1 } END { printf "%d%% (%s)", m, r }' "$RUNS")
GATE_FAILS=()
{
  echo "smcr bench on $(hostname): $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r)"
  echo "$(date -u +%Y-%m-%dT%H:%MZ); tree $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain -- core preload 2>/dev/null | grep -q . && echo ' + uncommitted changes in core/ preload/')"
  echo "medians of $REPS interleaved run(s) per cell; -t $SECS s, redis -n $REQS (-P16: $((REQS * 5))), $IDLE_CONNS idle conns"
  echo "other load: processes outside this benchmark used ~${FOREIGN}% of the machine's CPU during it (worst run: $MAXF); steal ${STEAL}%"
  printf '%-46s %12s %12s %10s\n' "" "TCP" "SMC-R" "SMC-R/TCP"
} >"$TABLE"
printf 'key\tsmc_mode\tlabel\tbetter\ttcp_median\tsmc_median\tratio\ttcp_values\tsmc_values\n' >"$TSV"
for r in "${ROWS[@]}"; do
  IFS='|' read -r key sm label better gate <<<"$r"
  t=$(cell "$key.tcp") s=$(cell "$key.$sm") ratio="-"
  [ "$t$s" = -- ] && continue  # not run (-s)
  if isnum "$t" && isnum "$s" && awk -v t="$t" 'BEGIN { exit !(t > 0) }'; then
    ratio=$(awk -v t="$t" -v s="$s" 'BEGIN { printf "%.2fx", s / t }')
  fi
  printf '%-46s %12s %12s %10s   %s is better\n' "$label" "$t" "$s" "$ratio" "$better" >>"$TABLE"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$sm" "$label" "$better" "$t" "$s" "${ratio%x}" \
    "${VALS[$key.tcp]:-}${BAD[$key.tcp]:-}" "${VALS[$key.$sm]:-}${BAD[$key.$sm]:-}" >>"$TSV"
  # gates (enforced in quick mode)
  if [[ $s == VOID* || $s == FAILED* ]]; then GATE_FAILS+=("$label: SMC-R side $s")
  elif [[ $t == VOID* || $t == FAILED* ]]; then GATE_FAILS+=("$label: TCP side $t")
  elif [ "$gate" = start ]; then
    isnum "$s" && awk -v x="$s" -v m="$MAX_START_MS" 'BEGIN { exit !(x > m) }' &&
      GATE_FAILS+=("$label: smc_run starts a program $s ms after plain LD_PRELOAD (> $MAX_START_MS ms)")
  elif [ "$ratio" != - ]; then
    x=${ratio%x}
    [ "$gate" = lat ] && awk -v x="$x" -v m="$MAX_LAT_RATIO" 'BEGIN { exit !(x > m) }' && GATE_FAILS+=("$label: SMC-R/TCP $ratio > ${MAX_LAT_RATIO}x")
    [ "$gate" = rate ] && awk -v x="$x" -v m="$MIN_RATE_RATIO" 'BEGIN { exit !(x < m) }' && GATE_FAILS+=("$label: SMC-R/TCP $ratio < ${MIN_RATE_RATIO}x")
    [ "$gate" = short ] && awk -v x="$x" -v m="$MIN_SHORT_RATIO" 'BEGIN { exit !(x < m) }' && GATE_FAILS+=("$label: SMC-R/TCP $ratio < ${MIN_SHORT_RATIO}x")
    [ "$gate" = stall ] && awk -v x="$x" -v m="$MAX_STALL_RATIO" 'BEGIN { exit !(x > m) }' && GATE_FAILS+=("$label: with the stalling clients $ratio of the p99 without (> ${MAX_STALL_RATIO}x)")
  fi
done
{
  echo "SMC-R cells count only runs whose client's counters show smc_active > 0 and fallback_total == 0;"
  echo "policy cells only runs with smc_active == 0 and every fallback a policy one; default cells only"
  echo "runs with smc_active > 0 and every fallback a short-flow one (else VOID k/n). In the short-lived"
  echo "rows SMC-R means every connection (SMCR_SHORT_FLOWS=0); 'default' is smc_run as it comes."
  echo "'VOID k/n' / 'FAILED k/n': k of n runs were not proven / failed (details above and in $RUNS)."
  if [ -n "${VALS[start_ms.run]:-}${BAD[start_ms.run]:-}" ]; then
    echo "start rows: /bin/true started alternately with the shim preloaded directly (TCP column) and by"
    echo "smc_run (SMC-R column), both shown to map the shim; its own cost gated at ${MAX_START_MS} ms in quick mode."
  fi
  if [ -n "${VALS[stall_p99.tcp]:-}${BAD[stall_p99.tcp]:-}" ]; then
    echo "stall row: both columns SMC-R, $STALL_N clients; TCP column without, SMC-R column with 21 clients"
    echo "stalled in their CLC handshake; gated at ${MAX_STALL_RATIO}x in quick mode."
  fi
  if [ -n "$PG_SKIP" ]; then echo "pgbench rows skipped: $PG_SKIP"
  elif [ -n "${VALS[pg_select.tcp]:-}${BAD[pg_select.tcp]:-}${VALS[pg_tpcb.tcp]:-}${BAD[pg_tpcb.tcp]:-}" ]; then
    echo "pgbench rows: PostgreSQL forks a backend per connection; under smc_run each connection moves to"
    echo "its backend (rehomed in the postmaster's counters, adopted in the backends'): no byte is relayed."
  fi
} >>"$TABLE"
echo
cat "$TABLE"
echo
echo "proof: counters of the smc_run runs (client; server), summed over the repetitions:"
[ -s "$LOG/proof.tsv" ] && awk -F'\t' '
  { k = $1; if (!(k in runs)) order[n++] = k; runs[k]++; if ($2 != "ok") bad[k] = bad[k] " " $2
    for (side = 3; side <= 4; side++) { m = split($side, kv, " ")
      for (i = 1; i <= m; i++) { split(kv[i], p, "="); key = k SUBSEP side SUBSEP p[1]
        if (!(key in sum)) names[k, side] = names[k, side] " " p[1]; sum[key] += p[2] } } }
  END { for (j = 0; j < n; j++) { k = order[j]; line = sprintf("  %-26s %d run(s)%s:", k, runs[k], bad[k] ? " (" substr(bad[k], 2) ")" : "")
      for (side = 3; side <= 4; side++) { m = split(names[k, side], nm, " "); line = line (side == 4 ? ";" : "")
        for (i = 1; i <= m; i++) line = line " " nm[i] "=" sum[k SUBSEP side SUBSEP nm[i]] }
      print line } }' "$LOG/proof.tsv" | tee -a "$TABLE"
echo "(aborts: connections closed with unread data, the SMC-R analog of a TCP RST; wrk leaves requests in flight when it stops)" | tee -a "$TABLE"

# ---- chart ---------------------------------------------------------------------------
PNG="$OUTDIR/bench.png"
if command -v gnuplot >/dev/null 2>&1; then
  # SMC-R relative to TCP, oriented so that > 1 means SMC-R is better (1/ratio for lower-is-better rows)
  awk -F'\t' 'NR > 1 { lab = $3; gsub(/"/, "", lab); if ($2 == "smc" || $2 == "run") of[$1] = lab; else lab = of[$1] (($2 == "pol") ? " [policy: TCP]" : " [default]") }
    NR > 1 && $7 ~ /^[0-9.]+$/ && $7 > 0 {
      rel = ($4 == "lower") ? 1 / $7 : $7
      printf "%d\t\"%s\"\t%.4f\t%d\n", n++, lab, rel, ($2 == "pol") ? 2 : ($2 == "auto") ? 3 : 1 }' "$TSV" >"$OUTDIR/chart.dat"
  if [ -s "$OUTDIR/chart.dat" ]; then
    gnuplot 2>"$LOG/gnuplot.err" <<EOF
set terminal pngcairo size 1500,900 font ",10"
set output "$PNG"
set title "smcr: SMC-R relative to loopback TCP, medians of $REPS run(s), $(nproc) CPUs, kernel $(uname -r)\\n> 1 = SMC-R better; green: smc_run default (short-flow guard); grey: a policy that keeps the flow on TCP" noenhanced
set style fill solid 0.8
set boxwidth 0.7
set logscale y 2
set yrange [0.01:20]
set grid ytics
set xtics rotate by -55 left noenhanced
set bmargin 20
set rmargin 22
set linetype 1 lc rgb "#3070b0"
set linetype 2 lc rgb "#a0a0a0"
set linetype 3 lc rgb "#60a060"
set ylabel "SMC-R vs TCP (higher-is-better: SMC/TCP; lower-is-better: TCP/SMC)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black"
unset key
plot "$OUTDIR/chart.dat" using 1:3:4:xtic(2) with boxes lc variable, \
     "" using 1:3:(sprintf("%.2f", \$3)) with labels offset 0,0.7 font ",8"
EOF
    if [ -s "$PNG" ]; then echo "bench: chart: $PNG"; else echo "bench: gnuplot failed: $(head -3 "$LOG/gnuplot.err")" >&2; fi
  fi
else
  echo "bench: gnuplot not installed (apt-get install gnuplot-nox, or scripts/install-deps.sh): no chart"
fi
echo "bench: table: $TABLE, medians: $TSV, every run: $RUNS"
ELAPSED=$(awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
echo "bench: total runtime ${ELAPSED} s"

if ((${#GATE_FAILS[@]})); then
  echo "bench: $( [ "$QUICK" = 1 ] && echo 'QUICK CHECK FAILED' || echo 'would fail the quick check'):" >&2
  printf '  %s\n' "${GATE_FAILS[@]}" >&2
  [ "$QUICK" = 1 ] && exit 1
fi
[ "$FOREIGN" -ge 10 ] && echo "bench: warning: other processes used ~${FOREIGN}% of the CPUs during the benchmark: figures are disturbed (see foreign_cpu_pct in $RUNS)" >&2
[ "$QUICK" = 1 ] && echo "bench: quick check passed"
exit 0
