#!/usr/bin/env bash
# End to end with an unmodified nginx 1.22 under smc_run: a master and two
# prefork workers that inherit one listening socket and each accept their own
# SMC-R connections, `sendfile on` (the shim copies sendfile onto SMC-R fds):
#  1. curl under smc_run downloads static files of 1 KiB .. 100 MiB, each
#     compared by SHA-256, keepalive on (several files over one connection)
#     and off (nginx closes after each response);
#  2. wrk under smc_run: load with no socket errors and only 200s;
#  3. a plain curl (no shim) still works, over TCP.
# Proof of SMC-R: the stats files of the workers and clients (smc_passive /
# smc_active, no fallback), and TCP_INFO of the connection (curl's
# size_download vs. what TCP carried is not visible to curl, so the server
# side's tx_bytes over the fabric is compared with the bytes served).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"

case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) sanitize=1 ;; *) sanitize=0 ;; esac
[ "$sanitize" = 1 ] && skip "the shim is an ASan build; it cannot be LD_PRELOADed into non-ASan nginx (run this test from the normal build)"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || skip "nginx not installed (apt-get install nginx-light)"
for tool in curl wrk sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
require_bpf

WWW="$TEST_TMP/www"; SRV_STATS="$STATS_DIR/nginx"; CLI_STATS="$STATS_DIR/clients"
mkdir -p "$WWW" "$SRV_STATS" "$CLI_STATS" "$TEST_TMP/nginx-tmp"
chmod 755 "$TEST_TMP" "$WWW"; chmod 777 "$SRV_STATS"
declare -A SIZE=([1k]=1024 [64k]=65536 [1m]=1048576 [10m]=10485760 [100m]=104857600)
for f in "${!SIZE[@]}"; do head -c "${SIZE[$f]}" /dev/urandom > "$WWW/$f"; done
chmod 644 "$WWW"/*

stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { printf "%.0f\n", s }'; }

start_nginx() {  # start_nginx keepalive_timeout
  PORT=$(free_port)
  cat > "$TEST_TMP/nginx.conf" <<EOF
user root;
worker_processes 2;
daemon off;
master_process on;
pid $TEST_TMP/nginx.pid;
error_log $TEST_TMP/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout $1;
  client_body_temp_path $TEST_TMP/nginx-tmp/body;
  proxy_temp_path $TEST_TMP/nginx-tmp/proxy;
  fastcgi_temp_path $TEST_TMP/nginx-tmp/fastcgi;
  uwsgi_temp_path $TEST_TMP/nginx-tmp/uwsgi;
  scgi_temp_path $TEST_TMP/nginx-tmp/scgi;
  server {
    listen 127.0.0.1:$PORT;
    root $WWW;
  }
}
EOF
  rm -f "$SRV_STATS"/smcr-*.txt
  bg env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$SRV_STATS" "$NGINX" -c "$TEST_TMP/nginx.conf" -p "$TEST_TMP"
  NGINX_PID=$BG_PID
  wait_port "$PORT" || { log "nginx did not start: $(cat "$TEST_TMP/error.log")"; exit 1; }
  sleep 0.3  # both workers up
}

stop_nginx() {  # graceful: workers finish and write their stats
  kill -QUIT "$NGINX_PID" 2>/dev/null
  timeout 30 tail --pid="$NGINX_PID" -f /dev/null
}

curl_smc() { SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$CLI_STATS" timeout 120 curl -sS "$@"; }

# --- keepalive on: every file over ONE connection per curl invocation
fetch_all() {  # fetch_all LABEL: every file in one curl under smc_run, each checked by SHA-256
  local args=() f rc
  for f in 1k 64k 1m 10m 100m; do args+=(-o "$TEST_TMP/got-$f" "http://127.0.0.1:$PORT/$f"); done
  rm -f "$TEST_TMP"/got-* "$CLI_STATS"/smcr-*.txt
  curl_smc "${args[@]}"; rc=$?
  check "$1: curl under smc_run fetched all files (rc=$rc)" [ "$rc" = 0 ]
  for f in 1k 64k 1m 10m 100m; do
    check "$1: $f intact (SHA-256)" [ "$(sha256sum < "$WWW/$f")" = "$(sha256sum < "$TEST_TMP/got-$f" 2>/dev/null)" ]
  done
}

start_nginx 65
fetch_all "keepalive on"
check "keepalive on: curl's one connection was SMC-R" [ "$(stat_in "$CLI_STATS" smc_active)" = 1 ]
check "keepalive on: no fallback in curl" [ "$(stat_in "$CLI_STATS" fallback_total)" = 0 ]
# wrk: 2 threads, 20 connections, 3 s, a 64 KiB file
rm -f "$CLI_STATS"/smcr-*.txt
WRK=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$CLI_STATS" timeout 60 wrk -t2 -c20 -d3s "http://127.0.0.1:$PORT/64k" 2>&1)
log "wrk: $(grep -E 'Requests/sec|Socket errors|Non-2xx' <<<"$WRK" | tr '\n' ' ')"
reqs=$(awk '/requests in/ { print $1 }' <<<"$WRK")
check "wrk under smc_run completed requests ($reqs)" [ "${reqs:-0}" -gt 100 ]
check "wrk: no socket errors, only 2xx" bash -c "! grep -qE 'Socket errors|Non-2xx' <<<\"\$0\"" "$WRK"
# (nginx closes a keepalive connection after 1000 requests; wrk reconnects)
WRK_CONNS=$(stat_in "$CLI_STATS" smc_active)
check "wrk: all its connections were SMC-R ($WRK_CONNS, no fallback: $(cat "$CLI_STATS"/smcr-*.txt | awk '$1 ~ /^fallback\./ && $2 > 0' | tr '\n' ' '))" \
  [ "$WRK_CONNS" -ge 20 -a "$(stat_in "$CLI_STATS" fallback_total)" = 0 ]
# a client without the shim: TCP, still served
plain=$(timeout 30 curl -sS "http://127.0.0.1:$PORT/1m" | sha256sum)
check "plain curl (no shim) is served over TCP" [ "$plain" = "$(sha256sum < "$WWW/1m")" ]
stop_nginx
workers=$(grep -l "^smc_passive [1-9]" "$SRV_STATS"/smcr-*.txt 2>/dev/null | wc -l)
log "nginx processes with SMC-R connections: $workers; per process: $(grep -h '^smc_passive' "$SRV_STATS"/smcr-*.txt | tr '\n' ' ')"
check "nginx workers accepted curl's and wrk's SMC-R connections (smc_passive=$(stat_in "$SRV_STATS" smc_passive) = 1 + $WRK_CONNS)" \
  [ "$(stat_in "$SRV_STATS" smc_passive)" = $(( 1 + WRK_CONNS )) ]
check "both prefork workers accepted SMC-R connections" [ "$workers" = 2 ]
check "nginx saw the plain curl fall back (peer_no_option=$(stat_in "$SRV_STATS" fallback.peer_no_option))" \
  [ "$(stat_in "$SRV_STATS" fallback.peer_no_option)" -ge 1 ]
served=$(( 1024 + 65536 + 1048576 + 10485760 + 104857600 ))
check "nginx wrote the bodies over the fabric (tx_bytes $(stat_in "$SRV_STATS" tx_bytes) >= $served)" \
  [ "$(stat_in "$SRV_STATS" tx_bytes)" -ge "$served" ]

# --- keepalive off: one connection per file
start_nginx 0
fetch_all "keepalive off"
check "keepalive off: one SMC-R connection per file" [ "$(stat_in "$CLI_STATS" smc_active)" = 5 ]
stop_nginx
check "keepalive off: nginx accepted them as SMC-R" [ "$(stat_in "$SRV_STATS" smc_passive)" = 5 ]
check "no aborted connection on either side" [ "$(stat_in "$SRV_STATS" aborts)" = 0 -a "$(stat_in "$CLI_STATS" aborts)" = 0 ]

# --- nginx as a reverse proxy: its upstream connections are SMC-R too.
# nginx registers an upstream socket in epoll before connect(); the
# readiness socket must inherit that registration (preload/epoll.h), or
# every proxied request times out (504). proxy_read_timeout 5s makes such
# a failure quick.
start_nginx 65                       # the upstream, serving the files
UP_PORT=$PORT
FRONT_PORT=$(free_port) FRONT_STATS="$STATS_DIR/front"
mkdir -p "$FRONT_STATS" "$TEST_TMP/front"; chmod 777 "$FRONT_STATS"
cat > "$TEST_TMP/front.conf" <<EOF
user root;
worker_processes 2;
daemon off;
pid $TEST_TMP/front.pid;
error_log $TEST_TMP/front-error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $TEST_TMP/front/body;
  proxy_temp_path $TEST_TMP/front/proxy;
  fastcgi_temp_path $TEST_TMP/front/fastcgi;
  uwsgi_temp_path $TEST_TMP/front/uwsgi;
  scgi_temp_path $TEST_TMP/front/scgi;
  upstream files { server 127.0.0.1:$UP_PORT; keepalive 4; }
  server {
    listen 127.0.0.1:$FRONT_PORT;
    proxy_read_timeout 5s;
    proxy_connect_timeout 5s;
    location /ka/ { proxy_pass http://files/; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /once/ { proxy_pass http://127.0.0.1:$UP_PORT/; }
  }
}
EOF
bg env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$FRONT_STATS" "$NGINX" -c "$TEST_TMP/front.conf" -p "$TEST_TMP"
FRONT_PID=$BG_PID
wait_port "$FRONT_PORT" || { log "front nginx did not start: $(cat "$TEST_TMP/front-error.log")"; exit 1; }
sleep 0.3
rm -f "$CLI_STATS"/smcr-*.txt
t0=$(date +%s)
for path in ka once; do
  for f in 1k 1m 10m; do
    rm -f "$TEST_TMP/proxied"
    code=$(curl_smc -o "$TEST_TMP/proxied" -w '%{http_code}' "http://127.0.0.1:$FRONT_PORT/$path/$f")
    check "proxy ($path upstream connection): $f is 200 and intact (code $code)" \
      [ "$code" = 200 -a "$(sha256sum < "$WWW/$f")" = "$(sha256sum < "$TEST_TMP/proxied" 2>/dev/null)" ]
  done
done
codes=$(for i in $(seq 20); do curl_smc -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$FRONT_PORT/once/1k"; done | sort | uniq -c | tr '\n' ' ')
check "proxy: 20 more requests, each on a new upstream connection, all 200 ($codes)" [ "$codes" = "     20 200 " ]
elapsed=$(( $(date +%s) - t0 ))
check "proxy: no request waited for a timeout (${elapsed}s for 26 requests)" [ "$elapsed" -lt 20 ]
kill -QUIT "$FRONT_PID" 2>/dev/null; timeout 30 tail --pid="$FRONT_PID" -f /dev/null
stop_nginx
log "front: smc_active=$(stat_in "$FRONT_STATS" smc_active) smc_passive=$(stat_in "$FRONT_STATS" smc_passive) fallbacks=$(stat_in "$FRONT_STATS" fallback_total); upstream: smc_passive=$(stat_in "$SRV_STATS" smc_passive)"
check "proxy: the front's upstream connections were SMC-R (smc_active=$(stat_in "$FRONT_STATS" smc_active) >= 21)" \
  [ "$(stat_in "$FRONT_STATS" smc_active)" -ge 21 ]
check "proxy: the upstream accepted them as SMC-R ($(stat_in "$SRV_STATS" smc_passive) = $(stat_in "$FRONT_STATS" smc_active))" \
  [ "$(stat_in "$SRV_STATS" smc_passive)" = "$(stat_in "$FRONT_STATS" smc_active)" ]
check "proxy: the clients' connections were SMC-R ($(stat_in "$FRONT_STATS" smc_passive) = $(stat_in "$CLI_STATS" smc_active) = 26)" \
  [ "$(stat_in "$FRONT_STATS" smc_passive)" = 26 -a "$(stat_in "$CLI_STATS" smc_active)" = 26 ]
check "proxy: no fallback in the front nginx" [ "$(stat_in "$FRONT_STATS" fallback_total)" = 0 ]
finish

