#!/usr/bin/env bash
# smcr_stat: live link groups, links and connections of processes under smc_run.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
STAT="$SMCR_BUILD_DIR/tools/smcr_stat"

PORT=$(free_port)
bg under_smc "$ECHO_TOOL" server --port "$PORT"
wait_port "$PORT"; SPID=$(listener_pid "$PORT")
bg under_smc python3 -c "
import socket, time
ss = [socket.create_connection(('127.0.0.1', $PORT)) for _ in range(3)]
for s in ss:
    s.sendall(b'hello'); assert s.recv(5) == b'hello'
time.sleep(20)"
# Until the three have echoed (on a loaded machine the server may still be
# on its way to the second when the third is ACTIVE).
for _ in $(seq 200); do
  OUT=$("$STAT" --raw --pid "$SPID" 2>/dev/null) && [ "$(grep -c '^  conn .*state=ACTIVE .*tx_bytes=5 rx_bytes=5' <<<"$OUT")" = 3 ] && break
  sleep 0.05
done
log "smcr_stat --raw --pid $SPID:"; echo "$OUT"
check "smcr_stat reports the server process" grep -q "^process pid=$SPID comm=echo_tool" <<<"$OUT"
check "one server link group holding the 3 connections" grep -q "^group role=server .*connections=3 .*state=up" <<<"$OUT"
check "its link is on the shm fabric and up" grep -q "^  link num=1 state=up .*fabric=shm .*state=up" <<<"$OUT"
check "3 ACTIVE connections with addresses and byte counts" \
  [ "$(grep -c "^  conn .*state=ACTIVE local=127.0.0.1:$PORT peer=127.0.0.1:[0-9]* .*tx_bytes=5 rx_bytes=5" <<<"$OUT")" = 3 ]
check "counters line" grep -q "^counters smc_active 0 smc_passive 3 " <<<"$OUT"
ALL=$("$STAT" --raw)
check "without --pid both ends are listed" [ "$(grep -c '^process pid=' <<<"$ALL")" -ge 2 ]

# The default: tables of connections, links, and fallbacks.
TABLE=$("$STAT" --pid "$SPID")
log "smcr_stat --pid $SPID:"; echo "$TABLE"
check "table header" grep -q "^ *PID  COMM  *LOCAL  *PEER  *FABRIC  STATE  *TX  *RX  *RMB  LINK$" <<<"$TABLE"
check "table: the 3 connections, on shm, ACTIVE, 5 bytes each way, 256 KiB RMBs" \
  [ "$(awk -v pid="$SPID" -v local="127.0.0.1:$PORT" \
        '$1 == pid && $2 == "echo_tool" && $3 == local && $4 ~ /^127\.0\.0\.1:[0-9]+$/ && $5 == "shm" &&
         $6 == "ACTIVE" && $7 == 5 && $8 == 5 && $9 == 262144 && $10 == 1' <<<"$TABLE" | wc -l)" = 3 ]
check "table: the server group's link 1 is up on shm and carries the 3 connections" \
  grep -Eq "^ *$SPID  server  [0-9a-f]{16}  up  *1  *up  *shm  *-  *3$" <<<"$TABLE"
check "table: totals for the server" grep -q "^Totals: smc_active 0  smc_passive 3  fallback_total 0$" <<<"$TABLE"
check "table: no fallbacks" grep -q "^Fallbacks to TCP by reason: none$" <<<"$TABLE"
ALL_TABLE=$("$STAT")
check "table without --pid: the client's 3 connections too" \
  [ "$(awk -v peer="127.0.0.1:$PORT" '$4 == peer && $5 == "shm" && $6 == "ACTIVE"' <<<"$ALL_TABLE" | wc -l)" = 3 ]

# --json: one document for every process; the server's part in detail.
JSON=$("$STAT" --json)
check "--json parses" bash -c 'python3 -m json.tool >/dev/null' <<<"$JSON"
check "--json: the server's group with 3 ACTIVE connections, numbers as numbers" \
  python3 - "$JSON" "$SPID" "$PORT" <<'PY'
import json, sys
doc, pid, port = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
[p] = [p for p in doc['processes'] if p['pid'] == pid]
assert p['comm'] == 'echo_tool', p['comm']
[g] = p['groups']
assert g['role'] == 'server' and g['connection_count'] == 3 and g['link_count'] == 1, g
assert [(l['fabric'], l['state']) for l in g['links']] == [('shm', 'up')], g['links']
conns = g['connections']
assert len(conns) == 3, conns
for c in conns:
    assert c['state'] == 'ACTIVE' and c['local'] == '127.0.0.1:' + port, c
    assert c['tx_bytes'] == 5 and c['rx_bytes'] == 5 and c['rmb'] == 262144, c
    assert isinstance(c['token'], str), c
assert p['counters']['smc_passive'] == 3 and p['counters']['fallback_total'] == 0, p['counters']
PY

# --prometheus: text exposition format 0.0.4.
PROM=$("$STAT" --prometheus)
check "--prometheus: HELP and TYPE of smcr_smc_passive_total" \
  bash -c 'grep -q "^# HELP smcr_smc_passive_total ." <<<"$1" && grep -q "^# TYPE smcr_smc_passive_total counter$" <<<"$1"' _ "$PROM"
check "--prometheus: smc_passive 3 for the server" \
  grep -qx "smcr_smc_passive_total{pid=\"$SPID\",comm=\"echo_tool\"} 3" <<<"$PROM"
check "--prometheus: 3 ACTIVE connections for the server" \
  grep -qx "smcr_connections{pid=\"$SPID\",comm=\"echo_tool\",state=\"ACTIVE\"} 3" <<<"$PROM"
check "--prometheus: the server's link is up on shm" \
  grep -Eq "^smcr_link_up\{pid=\"$SPID\",comm=\"echo_tool\",role=\"server\",.*link=\"1\",.*fabric=\"shm\",device=\"\"\} 1$" <<<"$PROM"
check "--prometheus: 5 bytes each way on each of the server's connections" \
  [ "$(grep -Ec "^smcr_connection_(tx|rx)_bytes_total\{pid=\"$SPID\",comm=\"echo_tool\",local=\"127.0.0.1:$PORT\",peer=\"127.0.0.1:[0-9]+\"\} 5$" <<<"$PROM")" = 6 ]
# Every line is a HELP, a TYPE or a sample of the family last typed, and no
# family is typed twice (each family's samples must be together).
check "--prometheus: well-formed exposition" python3 - "$PROM" <<'PY'
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r'^(%s)(?:\{(?:%s(?:,%s)*)?\})? [0-9]+$' % (name, label, label))
typed, current, samples = set(), None, 0
for line in sys.argv[1].splitlines():
    if re.match(r'^# HELP %s \S' % name, line):
        continue
    m = re.match(r'^# TYPE (%s) (counter|gauge)$' % name, line)
    if m:
        assert m.group(1) not in typed, line
        typed.add(m.group(1))
        current = m.group(1)
        continue
    m = sample.match(line)
    assert m and m.group(1) == current, line
    samples += 1
assert samples > 0
PY

check "unknown option: usage on stderr, exit 2, nothing on stdout" \
  bash -c '"$1" --bogus >"$2/out" 2>"$2/err"; [ $? = 2 ] && grep -q "^usage: smcr_stat" "$2/err" && [ ! -s "$2/out" ]' _ "$STAT" "$TEST_TMP"
if command -v runuser >/dev/null && runuser -u nobody -- test -x "$STAT"; then
  check "another user gets no answer from root's processes" bash -c "! runuser -u nobody -- $STAT --pid $SPID >/dev/null 2>&1"
fi
finish
