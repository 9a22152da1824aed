#!/usr/bin/env bash
# Proxies in front of nginx, every process under smc_run, against the same
# setup over plain TCP: haproxy (HTTP mode; TCP mode with splice-auto; one
# thread, SO_LINGER 0 on its server connections), Apache httpd (the
# prefork MPM, and the event MPM's worker threads around its epoll
# listener; static files and mod_proxy_http), varnish (jemalloc, whose
# start-up reads its settings with syscall(): it deadlocked in the shim's
# syscall() before that waited for the shim's own start-up) and squid as a
# reverse proxy (it sets O_NONBLOCK right after accept(); where the Confirm
# arrived meanwhile the connection missed it, and squid's next read blocked
# the whole server: wrk's "Connection: close" run never ended). Through each front: ten 4 MiB
# downloads compared byte for byte, then wrk with keepalive and with
# "Connection: close". Required: the same intact counts and no non-2xx
# answer in either mode, and SMC-R on both hops (the clients', and the
# proxies' own connections to nginx) with no protocol violation.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into non-ASan programs" ;; esac
require_bpf
for tool in nginx haproxy apache2 varnishd squid curl wrk; do
  command -v "$tool" >/dev/null || skip "$tool not installed (scripts/install-deps.sh)"
done
MODS=/usr/lib/apache2/modules
[ -f "$MODS/mod_mpm_prefork.so" ] && [ -f "$MODS/mod_mpm_event.so" ] && [ -f "$MODS/mod_proxy_http.so" ] ||
  skip "Apache's prefork, event and proxy modules not found in $MODS"
id www-data >/dev/null 2>&1 || skip "no www-data user for Apache's children"

W=$(mktemp -d /tmp/smcr-proxies.XXXXXX)
trap 'rm -rf "$W"; cleanup' EXIT
chmod 755 "$W"
mkdir -p "$W/www" "$W/tmp" "$W/logs"
head -c $((4 << 20)) /dev/urandom >"$W/www/4m"
head -c 65536 /dev/urandom >"$W/www/64k"
chmod 755 "$W/www"; chmod 644 "$W/www/"*
WANT=$(sha256sum <"$W/www/4m" | cut -c1-64)
NPORT=$(free_port); HPORT=$(free_port); TPORT=$(free_port); APORT=$(free_port); EPORT=$(free_port)
VPORT=$(free_port); SPORT=$(free_port)

cat >"$W/nginx.conf" <<EOF
user root;
worker_processes 1;
daemon off;
master_process on;
pid $W/nginx.pid;
error_log $W/logs/nginx.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $W/tmp/body;
  proxy_temp_path $W/tmp/proxy;
  fastcgi_temp_path $W/tmp/fastcgi;
  uwsgi_temp_path $W/tmp/uwsgi;
  scgi_temp_path $W/tmp/scgi;
  server { listen 127.0.0.1:$NPORT backlog=1024; root $W/www; }
}
EOF
cat >"$W/haproxy.cfg" <<EOF
global
  maxconn 2000
  nbthread 1
defaults
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe_http
  mode http
  bind 127.0.0.1:$HPORT
  default_backend be_http
backend be_http
  mode http
  server s1 127.0.0.1:$NPORT
frontend fe_tcp
  mode tcp
  option splice-auto
  bind 127.0.0.1:$TPORT
  default_backend be_tcp
backend be_tcp
  mode tcp
  server s1 127.0.0.1:$NPORT
EOF
# httpd_conf MPM PORT: Apache's configuration with that MPM.
httpd_conf() {
  cat <<EOF
ServerRoot $W
ServerName localhost
Listen 127.0.0.1:$2
PidFile $W/httpd-$1.pid
ErrorLog $W/logs/httpd-$1.log
LogLevel warn
User www-data
Group www-data
LoadModule mpm_$1_module $MODS/mod_mpm_$1.so
LoadModule authz_core_module $MODS/mod_authz_core.so
LoadModule proxy_module $MODS/mod_proxy.so
LoadModule proxy_http_module $MODS/mod_proxy_http.so
DocumentRoot $W/www
<Directory $W/www>
  Require all granted
</Directory>
ProxyPass /px/ http://127.0.0.1:$NPORT/
KeepAlive On
MaxKeepAliveRequests 0
EnableSendfile On
StartServers 4
EOF
}
cat >"$W/varnish.vcl" <<EOF
vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "$NPORT"; }
sub vcl_recv { return (pass); }
EOF
cat >"$W/squid.conf" <<EOF
http_port 127.0.0.1:$SPORT accel
cache_peer 127.0.0.1 parent $NPORT 0 no-query originserver name=nginx
http_access allow all
cache_peer_access nginx allow all
cache deny all
pid_filename $W/squid.pid
access_log none
cache_log $W/squid.log
workers 1
shutdown_lifetime 1 seconds
EOF
httpd_conf prefork "$APORT" >"$W/httpd-prefork.conf"
httpd_conf event "$EPORT" >"$W/httpd-event.conf"

# run_mode plain|smc: prints "FRONT intact=N/10 non2xx=K" per front and wrk's rates.
run_mode() {
  local mode=$1 wrap=(env)
  if [ "$mode" = smc ]; then
    rm -rf "$W/stats"; mkdir -p "$W/stats"; chmod 1777 "$W/stats"
    wrap=(env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$W/stats")
  fi
  # Apache's parent signals its whole process group when it stops: its own.
  setsid "${wrap[@]}" nginx -c "$W/nginx.conf" -p "$W" &
  local npid=$!
  "${wrap[@]}" haproxy -f "$W/haproxy.cfg" -db >"$W/logs/haproxy-$mode.log" 2>&1 &
  local hpid=$!
  setsid "${wrap[@]}" apache2 -f "$W/httpd-prefork.conf" -DFOREGROUND &
  local apid=$!
  setsid "${wrap[@]}" apache2 -f "$W/httpd-event.conf" -DFOREGROUND &
  local epid=$!
  rm -rf "$W/varnish-$mode"
  "${wrap[@]}" varnishd -F -a "127.0.0.1:$VPORT" -f "$W/varnish.vcl" -n "$W/varnish-$mode" -s malloc,64m \
    >"$W/logs/varnish-$mode.log" 2>&1 &
  local vpid=$!
  "${wrap[@]}" squid -N -f "$W/squid.conf" >"$W/logs/squid-$mode.log" 2>&1 &
  local spid=$!
  for p in "$NPORT" "$HPORT" "$TPORT" "$APORT" "$EPORT" "$VPORT" "$SPORT"; do wait_port "$p" 20; done
  local front url ok i got out
  for front in haproxy-http haproxy-tcp apache-prefork-file apache-prefork-proxy apache-event-file apache-event-proxy \
    varnish squid; do
    case $front in
      haproxy-http) url="http://127.0.0.1:$HPORT" ;;
      haproxy-tcp) url="http://127.0.0.1:$TPORT" ;;
      apache-prefork-file) url="http://127.0.0.1:$APORT" ;;
      apache-prefork-proxy) url="http://127.0.0.1:$APORT/px" ;;
      apache-event-file) url="http://127.0.0.1:$EPORT" ;;
      apache-event-proxy) url="http://127.0.0.1:$EPORT/px" ;;
      varnish) url="http://127.0.0.1:$VPORT" ;;
      squid) url="http://127.0.0.1:$SPORT" ;;
    esac
    ok=0
    for i in $(seq 10); do
      got=$("${wrap[@]}" timeout 30 curl -s "$url/4m" | sha256sum | cut -c1-64)
      [ "$got" = "$WANT" ] && ok=$((ok + 1))
    done
    out=$("${wrap[@]}" timeout 60 wrk -t2 -c20 -d2s "$url/64k" 2>&1;
          "${wrap[@]}" timeout 60 wrk -t2 -c20 -d2s -H "Connection: close" "$url/64k" 2>&1)
    # wrk prints its rate only for a run that ended: "wrk runs=2".
    echo "$front intact=$ok/10 non2xx=$(sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' <<<"$out" | awk '{s+=$1} END {print s+0}') wrk runs=$(grep -c 'Requests/sec' <<<"$out")"
    echo "  $mode $front wrk keepalive, close: $(grep 'Requests/sec' <<<"$out" | awk '{printf "%s ", $2}')" >&2
  done
  kill "$hpid" "$vpid" "$spid" 2>/dev/null
  kill -TERM "$(cat "$W/httpd-prefork.pid" 2>/dev/null)" "$(cat "$W/httpd-event.pid" 2>/dev/null)" 2>/dev/null
  kill -QUIT "$(cat "$W/nginx.pid" 2>/dev/null)" 2>/dev/null
  for p in "$hpid" "$apid" "$epid" "$npid" "$vpid" "$spid"; do timeout 20 tail --pid="$p" -f /dev/null; done
}

PLAIN=$(run_mode plain)
log "plain TCP: $(tr '\n' ';' <<<"$PLAIN")"
check "plain TCP: every download intact through every front, no non-2xx answer" \
  [ "$(grep -c 'intact=10/10 non2xx=0 wrk runs=2$' <<<"$PLAIN")" = 8 ]
OUT=$(run_mode smc)
log "smc_run: $(tr '\n' ';' <<<"$OUT")"
check "smc_run: as over plain TCP, front by front ($(tr '\n' ';' <<<"$OUT"))" [ "$OUT" = "$PLAIN" ]
sum() { cat "$W/stats"/smcr-*.txt 2>/dev/null | awk -v k="$1" '$1 == k { s += $2 } END { printf "%.0f\n", s }'; }
# Per process: the proxies' files count both hops.
hop2=$(for f in "$W/stats"/smcr-*.txt; do
  awk '$1 == "smc_active" { a = $2 } $1 == "smc_passive" { p = $2 } END { if (a > 0 && p > 0) print "both" }' "$f"
done | grep -c both)
check "smc_run: SMC-R on both hops (active $(sum smc_active), passive $(sum smc_passive); $hop2 proxy processes made and took SMC-R connections)" \
  [ "$(sum smc_active)" -gt 200 -a "$(sum smc_passive)" -gt 200 -a "$hop2" -ge 2 ]
check "smc_run: no protocol violation ($(sum protocol_violations)), fallbacks only by design ($(cat "$W/stats"/smcr-*.txt | awk '$1 ~ /^fallback\./ && $2 > 0 { s[$1] += $2 } END { for (k in s) printf "%s=%d ", k, s[k] }'))" \
  [ "$(sum protocol_violations)" = 0 -a "$(sum fallback_total)" -le "$(( $(sum fallback.own_listener) + $(sum fallback.peer_no_option) + $(sum fallback.peer_not_clc) ))" ]
finish
