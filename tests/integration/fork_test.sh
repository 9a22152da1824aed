#!/usr/bin/env bash
# fork() with live SMC-R connections (README "fork and exec"): a connection
# belongs to the process that made it.
#  - a child that only closes what it inherited and exits (a BGSAVE-style
#    child, or one about to exec) leaves the parent's connection intact;
#  - a child's read and write on an inherited SMC-R fd the parent still
#    holds work as on TCP (the parent relays the connection), and the
#    parent's stream goes on, also while a blocking read or write of the
#    parent is asleep on it (the classic forking client);
#  - a child makes SMC-R connections of its own (new engine, new groups);
#  - the parent's stream stays intact throughout (compared byte for byte).
# Handing a connection to a child (core/handoff.h): accept-then-fork servers
# whose parent closes its copy -- Python's socketserver.ForkingTCPServer, a
# parent that closes only after its child started reading, and inetd-style
# dup2 onto 0/1 + exec of cat -- serve SMC-R clients whole (SHA-256), with
# the server counting one handover per connection and no aborts.
# Children that wait with epoll, poll or select before (and between) their
# reads, under a CPU load, read exactly the bytes the client sent.
# The same scripts over plain TCP are the positive control for the data checks.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf

# wait_exit PID SECONDS WHAT: waits for PID, a background child of this
# shell (bg), to exit: returns as soon as it has (0), or after SECONDS with
# a log line and 124 if it has not (it is then left to the cleanup). The
# test waits for its servers this way, never for a fixed time. The deadline
# is a sleep exec'd in place of its subshell and ended with SIGKILL: a shell
# of ours killed by SIGTERM would run the EXIT trap (cleanup) in there.
wait_exit() {
  local pid=$1 deadline
  (exec sleep "$2") & deadline=$!
  wait -n "$pid" "$deadline"
  kill -KILL "$deadline" 2>/dev/null; wait "$deadline" 2>/dev/null
  if kill -0 "$pid" 2>/dev/null; then log "$3 (pid $pid) did not exit within $2 s"; return 124; fi
  return 0
}

SCRIPT='
import errno, os, socket, sys
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def echo(s, n, seed):
    data = bytes((i * 131 + seed) & 255 for i in range(65536))
    for _ in range(n):
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            b = s.recv(len(data) - len(got))
            if not b: raise SystemExit("EOF")
            got += b
        if got != data: raise SystemExit("data differs")
s = socket.create_connection((host, port))
echo(s, 16, 1)
pid = os.fork()
if pid == 0:
    try:
        s.sendall(b"x")
        result = "child_io=" + ("ok" if s.recv(1) == b"x" else "differs")
    except OSError as e:
        result = "child_io=" + errno.errorcode.get(e.errno, str(e.errno))
    own = socket.create_connection((host, port))
    echo(own, 8, 2)
    own.close()
    s.close()
    print(result, "child_own_conn=ok", flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
echo(s, 16, 3)
s.close()
print("parent_after_child=ok child_status=%d" % status, flush=True)
'

# script_run plain|smc SCRIPT CONNS ARG -> OUT: SCRIPT against an echo
# server for CONNS connections, both under smc_run or neither.
script_run() {
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap "$ECHO_TOOL" server --port "$port" --max-conns "$3"
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$($wrap timeout 120 python3 -c "$2" 127.0.0.1 "$port" "$4" 2>&1)
  wait_exit "$spid" 30 "the echo server"
  log "$1 $4: $(tr '\n' ' ' <<<"$OUT")"
}
run() { script_run "$1" "$SCRIPT" 2 "$1"; }  # run plain|smc -> OUT

# exec with an SMC-R fd left open: the new program (no shim state) must see
# end-of-file, not hang and not garbage; the server sees the connection end.
EXEC_SCRIPT='
import os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"ping"); assert s.recv(4) == b"ping"
fd = s.detach()
os.set_inheritable(fd, True)
os.execv(sys.executable, [sys.executable, "-c",
  "import os,select,sys; fd=int(sys.argv[1]); r,_,_=select.select([fd],[],[],10); print(\"exec_read=%r\" % (os.read(fd, 16) if r else \"timeout\"))",
  str(fd)])
'

run plain
check "plain TCP: parent and child streams intact, the child's echo on the parent's connection too" \
  bash -c 'grep -q "child_io=ok child_own_conn=ok" <<<"$0" && grep -q "parent_after_child=ok child_status=0" <<<"$0"' "$OUT"

run smc
check "SMC-R: the child's own new connection works" grep -q "child_own_conn=ok" <<<"$OUT"
check "SMC-R: the child's echo on the parent's connection, which the parent still holds, works (relayed by the parent: $(stat_sum handovers))" \
  bash -c 'grep -q "child_io=ok" <<<"$0" && [ "$1" -ge 1 ]' "$OUT" "$(stat_sum handovers)"
check "SMC-R: the parent's stream is intact after the child closed its copy and exited" \
  grep -q "parent_after_child=ok child_status=0" <<<"$OUT"
check "SMC-R: all three connections were SMC-R (parent's, child's, and the server side)" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 ]
check "SMC-R: no connection was aborted" [ "$(stat_sum aborts)" = 0 ]
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
OUT=$(under_smc timeout 60 python3 -c "$EXEC_SCRIPT" 127.0.0.1 "$port" 2>&1)
wait_exit "$spid" 30 "the exec case's echo server"; srv_rc=$?
log "exec: $OUT"
check "exec: the SMC-R fd reads end-of-file in the new program" grep -q "exec_read=b''" <<<"$OUT"
check "exec: the server's side of the connection ended (server exited)" [ "$srv_rc" = 0 ]
# --- parent and child on one connection at once ----------------------------
# The classic forking client: one process reads the connection while the
# other writes it. The parent is asleep inside a blocking call on it when
# the child's first use asks it to relay: the call goes on on the relay's
# stream (Connection::resume_on_relay_stream), in order, and neither
# process gets an error. (Before, the child got EOPNOTSUPP after 2 s.)
BOTH_SCRIPT='
import hashlib, os, select, socket, sys, time
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.create_connection((host, port))
if mode.startswith("parent_reads"):
    wait = mode.split(":")[1]   # how the parent waits: in recv, or in poll/select/epoll first
    lines = 2000
    want = b"".join(b"%08d\n" % i for i in range(lines))
    pid = os.fork()
    if pid == 0:
        try:
            for i in range(lines):
                s.sendall(b"%08d\n" % i)
                if i % 100 == 0: time.sleep(0.01)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            print("child_error=%s" % e, flush=True); os._exit(1)
        os._exit(0)
    if wait == "epollet": s.setblocking(False)
    ep = select.epoll() if wait.startswith("epoll") else None
    if ep: ep.register(s.fileno(), select.EPOLLIN | (select.EPOLLET if wait == "epollet" else 0))
    got, eof, until = b"", False, time.time() + 30
    while not eof and time.time() < until:
        if wait == "poll":
            p = select.poll(); p.register(s, select.POLLIN); p.poll(5000)
        elif wait == "select":
            select.select([s], [], [], 5)
        elif ep and not ep.poll(5):
            continue
        while True:   # small reads: any reordering shows
            try:
                b = s.recv(7)
            except BlockingIOError:
                break
            if not b: eof = True
            got += b
            if wait != "epollet" or not b: break
    _, status = os.waitpid(pid, 0)
    print("%s=%s child_status=%d" % (mode, "ok" if got == want else "BAD(%d/%d)" % (len(got), len(want)), status), flush=True)
else:
    data = os.urandom(8 << 20)
    pid = os.fork()
    if pid == 0:
        got = bytearray()
        try:
            while len(got) < len(data):
                b = s.recv(1 << 16)
                if not b: break
                got += b
        except OSError as e:
            print("child_error=%s" % e, flush=True); os._exit(1)
        os._exit(0 if hashlib.sha256(got).digest() == hashlib.sha256(data).digest() else 3)
    s.sendall(data)   # asleep once the window is full: the child reads the echo
    s.shutdown(socket.SHUT_WR)
    _, status = os.waitpid(pid, 0)
    print("%s=ok child_status=%d" % (mode, status), flush=True)
'
both_run() { script_run "$1" "$BOTH_SCRIPT" 1 "$2"; }  # both_run plain|smc MODE -> OUT
# Each wait the parent may be in when the relay starts: asleep in recv()
# or send(), or in poll, select or epoll (level and edge) before its read;
# three runs each, the child's writes paced so that the relay starts
# mid-stream.
for mode in parent_reads:recv parent_reads:poll parent_reads:select parent_reads:epoll parent_reads:epollet parent_writes; do
  both_run plain $mode
  check "plain TCP $mode: the child's use and the parent's call both whole" grep -q "^$mode=ok child_status=0" <<<"$OUT"
  for run in 1 2 3; do
    both_run smc $mode
    check "SMC-R $mode (run $run): the child's use and the parent's call both whole, in order, relayed by the parent ($(stat_sum handovers))" \
      bash -c 'grep -q "^$2=ok child_status=0" <<<"$0" && [ "$1" -ge 1 ]' "$OUT" "$(stat_sum handovers)" "$mode"
    check "SMC-R $mode (run $run): the connection was SMC-R at both ends, not aborted" \
      [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum aborts)" = 0 ]
  done
done
# --- handing connections to forked children ---------------------------------
SERVERS=$(cat "$SMCR_SOURCE_DIR/tests/integration/fork_servers.py")
CLIENT=$(cat "$SMCR_SOURCE_DIR/tests/integration/fork_client.py")
SIZES="1 100000 3000000 20000000"
# Carrying a connection into an exec'd program (core/exec_carry.h) has the
# forked child start an engine thread before its exec. In the ASan build
# that thread can hang at its first malloc (GCC 12's libasan intercepts no
# fork(): an allocator lock a parent thread held at the fork stays taken),
# so the exec cannot pause it and the connection is lost (1 run in ~4 under
# two parallel test loads). There the exec'd programs get the relay instead
# (SMCR_EXEC_CARRY=0), which starts no thread in the child.
if [ "${SMCR_SANITIZE:-OFF}" = ON ]; then EXEC_CARRY=(SMCR_EXEC_CARRY=0); else EXEC_CARRY=(); fi
# The most CDCs one adopting child sent on the link rather than through
# memory (cdc_sent - cdc_in_memory, over the stats files with adopted > 0).
child_link_cdcs() {
  awk '$1 == "adopted" { a[FILENAME] = $2 } $1 == "cdc_sent" { s[FILENAME] = $2 }
       $1 == "cdc_in_memory" { m[FILENAME] = $2 }
       END { most = 0; for (f in a) if (a[f] > 0 && s[f] - m[f] > most) most = s[f] - m[f]; print most }' \
    "$STATS_DIR"/smcr-*.txt
}
handoff_run() {  # handoff_run plain|smc KIND -> HOUT (one line per client)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  # The server's connection events (SMCR_DEBUG=1), shown when an echo fails.
  bg $wrap env "${EXEC_CARRY[@]}" SMCR_DEBUG=1 python3 -c "$SERVERS" "$2" "$port" 4 2>"$TEST_TMP/handoff.err"
  local spid=$BG_PID
  wait_port "$port" || { log "$2 server did not start"; HOUT=; return 1; }
  HOUT=$(for size in $SIZES; do $wrap timeout 60 python3 -c "$CLIENT" "$port" "$size" 2>&1 | tail -1; done)
  wait_exit "$spid" 30 "the $2 server"
  log "$1 $2: $(tr '\n' ' ' <<<"$HOUT")"
  if [ "$(grep -c '^echo=ok$' <<<"$HOUT")" != 4 ]; then
    log "$1 $2: the server's log (connection events):"
    grep -v '^\s*$' "$TEST_TMP/handoff.err" | tail -40 | sed 's/^/  /'
  fi
}
# read_then_exec: the child reads before it execs, so the connection is its
# own by then; without carrying (the ASan build) the exec'd program could
# not use it (README, exec).
# exit_early: the parent calls os._exit as soon as it has forked the last
# child, which has not touched its connection yet.
# exec_wait: the parent closes its copy only once the child's exec
# succeeded (git daemon); the program takes the connection on its first use.
# Without carrying (the ASan build) it reads end-of-file (README, exec).
# exec_hold: the parent holds its copy until the program (run as nobody)
# ends, as a CGI server does: relayed by the parent once the program has
# waited 250 ms for it.
chmod 711 "$TEST_TMP"; chmod 1777 "$STATS_DIR"   # nobody's counters reach the stats directory
KINDS="forkingmixin late_close exit_early inetd_exec exec_wait exec_hold read_then_exec"
[ ${#EXEC_CARRY[@]} -gt 0 ] && KINDS="forkingmixin late_close exit_early inetd_exec"
for kind in $KINDS; do
  handoff_run plain "$kind"
  check "plain TCP $kind: every echo intact" [ "$(grep -c '^echo=ok$' <<<"$HOUT")" = 4 ]
  handoff_run smc "$kind"
  check "SMC-R $kind: every echo intact (1 B .. 20 MB, with half-close)" [ "$(grep -c '^echo=ok$' <<<"$HOUT")" = 4 ]
  check "SMC-R $kind: all 4 connections were SMC-R at both ends" \
    [ "$(stat_sum smc_active)" = 4 -a "$(stat_sum smc_passive)" = 4 ]
  if [ "$kind" = exit_early ]; then
    check "SMC-R $kind: each connection moved to its child, the last one re-homed by the parent's _exit, no relay ($(stat_sum rehomed) re-homed, $(stat_sum handovers) relayed)" \
      [ "$(stat_sum rehomed)" = 4 -a "$(stat_sum handovers)" = 0 ]
  elif [ "$kind" = forkingmixin ]; then
    # The child owns its connection: its own link to the client, no relay.
    check "SMC-R $kind: each connection moved to its child, no relay ($(stat_sum rehomed) re-homed, $(stat_sum rehomed_peer) moved by the client, $(stat_sum handovers) relayed)" \
      [ "$(stat_sum rehomed)" = 4 -a "$(stat_sum rehomed_peer)" = 4 -a "$(stat_sum handovers)" = 0 ]
    # ForkingMixIn's children end with os._exit(), which runs no library
    # destructor: their counters are written by the shim's _exit.
    check "SMC-R $kind: every child counted its adoption, though it ended with _exit ($(stat_sum adopted))" \
      [ "$(stat_sum adopted)" = 4 ]
    # A moved connection's CDCs go through memory (core/cdc_mem.h) once its
    # new owner has the peer's bell, which the peer sends again on the move
    # (its first one may reach the parent after the fork, a timing this
    # test does not force): only the close's few go on the link. A child
    # without it posts every CDC on the link (hundreds for 20 MB), an
    # engine wake-up on each side.
    most=$(child_link_cdcs)
    check "SMC-R $kind: every child's CDCs went through memory (most on the link in one child: $most)" [ "$most" -le 16 ]
  elif [ "$kind" = exec_hold ]; then
    check "SMC-R $kind: every program (as nobody) asked for its connection on first use, and the parent, still holding it, relayed it ($(stat_sum exec_pending) asked, $(stat_sum handovers) relayed)" \
      [ "$(stat_sum exec_pending)" = 4 -a "$(stat_sum handovers)" = 4 ]
  elif [ ${#EXEC_CARRY[@]} -gt 0 ]; then
    check "SMC-R $kind (ASan build, SMCR_EXEC_CARRY=0): the server relays each connection to its exec'd child ($(stat_sum handovers))" [ "$(stat_sum handovers)" = 4 ]
  else
    # late_close: within the 250 ms the program waits, as a rule; a loaded
    # machine may delay the parent's close past them (then relayed).
    # exec: the connection ends up in the program the child execs, no
    # relay, no process between (core/exec_carry.h): moved to the child and
    # carried across its exec when the parent let go before it (re-homed),
    # or, when the parent still held it at the exec, asked for by the
    # program on its first use and passed to it (SMCR_EXEC_PENDING).
    check "SMC-R $kind: each connection carried into the exec'd program, no relay ($(stat_sum rehomed) re-homed first, $(stat_sum exec_carried) carried, $(stat_sum exec_adopted) taken over after exec, $(stat_sum handovers) relayed)" \
      [ "$(stat_sum exec_carried)" = 4 -a "$(stat_sum exec_adopted)" = 4 -a "$(stat_sum handovers)" = 0 ]
    [ "$kind" = exec_wait ] &&
      check "SMC-R $kind: every program took its connection on first use, its parent still holding it at the exec ($(stat_sum exec_pending))" \
        [ "$(stat_sum exec_pending)" = 4 ]
  fi
  check "SMC-R $kind: no connection was aborted ($(stat_sum aborts))" [ "$(stat_sum aborts)" = 0 ]
done
# --- the parent killed mid-stream ---------------------------------------------
# A connection moved to its child is the child's alone: the parent that
# accepted it may die (SIGKILL: no exit handler) while every child streams,
# as a TCP socket lives on in the child. Killed once every child has its
# connection (a parent killed in the middle of handing one over loses it:
# README, fork()).
kill_run() {  # kill_run plain|smc [killed|inetd_killed] -> KOUT (one line per client)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local kind=${2:-killed}
  local port ready="$TEST_TMP/kill_ready.$1"; port=$(free_port)
  rm -f "$ready" "$ready".*
  reset_stats
  bg $wrap python3 -c "$SERVERS" "$kind" "$port" 4 "$ready"
  wait_port "$port" || { log "server did not start"; KOUT=; return 1; }
  local out="$TEST_TMP/kill_out.$1" pids=() i
  for i in 1 2 3 4; do
    $wrap timeout 60 python3 -c "$CLIENT" "$port" 30000000 0.03 >"$out.$i" 2>&1 &   # about a second
    pids+=($!)
  done
  wait_file "$ready" 20 || log "$1 $kind: the server had not accepted all 4 connections after 20 s"
  # The kill comes once every child has read from its connection (it owns
  # it) and streams on, or (exec'd cat) every new program has taken its
  # connection over: the child's marker file, or the counters (rewritten by
  # the engine within 250 ms), polled with a deadline; no fixed sleep after.
  local t=0
  if [ "$kind" = killed ]; then
    until [ "$(ls "$ready".* 2>/dev/null | wc -l)" -ge 4 ] || [ $t -ge 400 ]; do sleep 0.05; t=$((t + 1)); done
    [ $t -lt 400 ] || log "$1 $kind: only $(ls "$ready".* 2>/dev/null | wc -l) of 4 children had read after 20 s"
  elif [ "$1" = smc ]; then
    until [ "$(stat_sum exec_adopted)" -ge 4 ] || [ $t -ge 400 ]; do sleep 0.05; t=$((t + 1)); done
    [ $t -lt 400 ] || log "$1 $kind: only $(stat_sum exec_adopted) of 4 exec'd children had taken over after 20 s"
  fi
  local parent; parent=$(listener_pid "$port")
  kill -9 "$parent" 2>/dev/null
  local streaming=0
  for i in 1 2 3 4; do kill -0 "${pids[$((i - 1))]}" 2>/dev/null && streaming=$((streaming + 1)); done
  wait "${pids[@]}"
  KILLED_MIDSTREAM="parent=$parent clients_still_streaming=$streaming"
  KOUT=$(for i in 1 2 3 4; do tail -1 "$out.$i"; done)
  log "$1 $kind, parent killed ($KILLED_MIDSTREAM): $(tr '\n' ' ' <<<"$KOUT")"
}
kill_run plain
check "plain TCP: every child's echo intact after its parent was killed" [ "$(grep -c '^echo=ok$' <<<"$KOUT")" = 4 ]
# In an ASan build the four children take over so slowly that the first
# clients end before the last child reads (the kill then finds 1 or 2
# still streaming), and one of them was reset in 1 of 3 CI runs of this
# session and the last (issue 15). Run from the normal build.
if ! skipped_under_asan "SMC-R, parent killed mid-stream: its premise does not hold at ASan speed, and a reset seen there is open (issue 15)"; then
  kill_run smc
  check "SMC-R: the parent ($KILLED_MIDSTREAM) was killed while every client still streamed" \
    grep -q "parent=[0-9][0-9]* clients_still_streaming=4" <<<"$KILLED_MIDSTREAM"
  check "SMC-R: every child's echo intact (30 MB each) after its parent was killed mid-stream" \
    [ "$(grep -c '^echo=ok$' <<<"$KOUT")" = 4 ]
  check "SMC-R: those connections moved to the children ($(stat_sum smc_active) SMC-R, $(stat_sum rehomed_peer) moved by the clients, $(stat_sum aborts) aborts)" \
    [ "$(stat_sum smc_active)" = 4 -a "$(stat_sum rehomed_peer)" = 4 -a "$(stat_sum aborts)" = 0 ]
fi
# The same for inetd-style children that exec'd cat with the connection on
# 0 and 1: carried into cat, the connection owes nothing to the parent.
kill_run plain inetd_killed
check "plain TCP: every exec'd child's echo intact after the parent was killed" [ "$(grep -c '^echo=ok$' <<<"$KOUT")" = 4 ]
if ! skipped_under_asan "SMC-R, inetd-style parent killed mid-stream: as above, the premise does not hold at ASan speed"; then
  kill_run smc inetd_killed
  check "SMC-R: the inetd-style parent ($KILLED_MIDSTREAM) was killed while every client still streamed" \
    grep -q "parent=[0-9][0-9]* clients_still_streaming=4" <<<"$KILLED_MIDSTREAM"
  check "SMC-R: every exec'd child's echo intact (30 MB each) after its parent was killed mid-stream" \
    [ "$(grep -c '^echo=ok$' <<<"$KOUT")" = 4 ]
  check "SMC-R: those connections were carried into cat ($(stat_sum smc_active) SMC-R, $(stat_sum exec_adopted) taken over after exec, $(stat_sum handovers) relayed, $(stat_sum aborts) aborts)" \
    [ "$(stat_sum smc_active)" = 4 -a "$(stat_sum exec_adopted)" = 4 -a "$(stat_sum handovers)" = 0 -a "$(stat_sum aborts)" = 0 ]
fi

# --- both ends hand the connection to a child at once ---------------------------
# The server accepts and forks, the client connects and forks, both parents
# close their copy: each end's child claims its side at about the same
# moment, and each parent asks its peer to move the connection while the
# peer asks the same. Whatever each end does (moves it, or relays it when
# the other's request crossed its own), every echo is intact.
both_run() {  # both_run plain|smc -> BOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap python3 -c "$SERVERS" echo_child "$port" 10
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; BOUT=; return 1; }
  BOUT=$(for i in $(seq 10); do $wrap timeout 60 python3 -c "$CLIENT" "$port" 2000000 0 fork 2>&1 | tail -1; done)
  wait_exit "$spid" 30 "the echo_child server"
  log "$1 both ends forked: $(sort <<<"$BOUT" | uniq -c | tr '\n' ' ')"
}
both_run plain
check "plain TCP, both ends handing over at once: every echo intact" [ "$(grep -c '^echo=ok$' <<<"$BOUT")" = 10 ]
# Not in an ASan build: GCC 12's libasan does not intercept fork(), so a
# child forked while another thread of its parent is inside the ASan
# allocator deadlocks at its first malloc. Here the client forks while the
# shim's CLC thread may still be allocating: the client's child hung in
# Python's at-fork lock re-initialisation (gdb: __sanitizer::Mutex::Lock
# under PyThread_allocate_lock), its parent was killed by the timeout, and
# the server's child saw the link to it fail (2-3 of 10 connections). From
# the normal build: 10/10 intact, also beside two busy loops.
if ! skipped_under_asan "SMC-R, both ends handing over at once: ASan's allocator is not fork-safe with threads (GCC 12's libasan intercepts no fork(): a client child forked during the shim's CLC thread's malloc deadlocks)"; then
  both_run smc
  check "SMC-R, both ends handing over at once: every echo intact (2 MB each)" [ "$(grep -c '^echo=ok$' <<<"$BOUT")" = 10 ]
  check "... all SMC-R, each moved or relayed at both ends, no abort ($(stat_sum smc_active) SMC-R, $(stat_sum rehomed) re-homed, $(stat_sum handovers) relayed, $(stat_sum aborts) aborts)" \
    [ "$(stat_sum smc_active)" = 10 -a $(( $(stat_sum rehomed) + $(stat_sum handovers) )) = 20 -a "$(stat_sum aborts)" = 0 ]
fi

# --- the parent killed while it hands a connection over ------------------------
# Fault injection (SMCR_TEST_DIE_IN_REHOME): the accepting parent kills itself
# in the middle of moving a connection to its child. After the peer moved it
# ("after_answer"), the child has everything it needs (state and link end
# came before the request): it takes the connection over and the echo is
# intact. Before the peer was asked ("before_ask"), the connection is lost
# (its link died with the parent): both ends see it end within seconds, and
# neither hangs nor gets EOPNOTSUPP. Plain TCP cannot be killed in that
# window: no comparison.
die_run() {  # die_run POINT -> DOUT (the client's line), DSECS
  local port ready="$TEST_TMP/die_ready.$1"; port=$(free_port)
  rm -f "$ready" "$ready".*
  reset_stats
  SMCR_TEST_DIE_IN_REHOME=$1 bg under_smc python3 -c "$SERVERS" killed "$port" 1 "$ready" 2>"$TEST_TMP/die_err.$1"
  wait_port "$port" || { log "server did not start"; DOUT=; return 1; }
  local t0=$SECONDS
  # The last line that says something: the writer thread's traceback may
  # come after the main thread's and end with an empty line.
  DOUT=$(under_smc timeout 60 python3 -c "$CLIENT" "$port" 3000000 2>&1 | grep -v '^[[:space:]]*$' | tail -1)
  DSECS=$((SECONDS - t0))
  # The child ends with its connection, whatever became of it. Not this
  # shell's child (its parent was killed): polled, with a deadline.
  local t=0
  while pgrep -f "python3 -c.*killed $port" >/dev/null && [ $t -lt 400 ]; do sleep 0.05; t=$((t + 1)); done
  DCHILD_LEFT=$(pgrep -f "python3 -c.*killed $port" | wc -l)
  DERR=$(grep -o "[A-Za-z]*Error: .*" "$TEST_TMP/die_err.$1" | head -1)
  log "parent killed $1: client: $DOUT (${DSECS} s); processes of the server left: $DCHILD_LEFT; child: ${DERR:-no error}"
}
die_run after_answer
check "killed after the peer moved the connection: the child took it over, echo intact ($DOUT)" \
  [ "$DOUT" = "echo=ok" ]
check "... adopted by the child ($(stat_sum adopted)), moved by the client ($(stat_sum rehomed_peer)), no abort" \
  [ "$(stat_sum adopted)" = 1 -a "$(stat_sum rehomed_peer)" = 1 -a "$(stat_sum aborts)" = 0 ]
check "... and the child ended" [ "$DCHILD_LEFT" = 0 ]
die_run before_ask
check "killed before the peer was asked: the client's connection ends ($DOUT) within 20 s (${DSECS} s), no hang" \
  [ -n "$DOUT" -a "$DOUT" != "echo=ok" -a "$DSECS" -lt 20 ]
check "... and the child ended: it saw the connection end (${DERR:-EOF}), not EOPNOTSUPP" \
  bash -c '[ "$1" = 0 ] && ! grep -qi "not supported" <<<"$2"' _ "$DCHILD_LEFT" "$DERR"
# --- addresses after exec (sshd re-executes itself per connection) -----------
# The exec'd program holds the handed-over stream: getpeername, getsockname
# and SO_DOMAIN/SO_PROTOCOL (Python's socket(fileno=) asks them) must be the
# TCP connection's, as over TCP (sshd logs and authorizes `from=` by them).
ADDR_SERVER='
import os, signal, socket, sys
port = int(sys.argv[1])
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port)); l.listen(4)
c, _ = l.accept()
if os.fork() == 0:
    l.close()
    os.dup2(c.fileno(), 0); os.dup2(c.fileno(), 1); c.close()
    os.execv(sys.executable, [sys.executable, "-c", """
import os, socket
s = socket.socket(fileno=os.dup(0))
peer, local = s.getpeername(), s.getsockname()
os.write(1, ("family=%d type=%d proto=%d peer=%s:%d local=%s:%d" % (s.family, s.type, s.proto, peer[0], peer[1], local[0], local[1])).encode())
"""])
c.close()
try:
    while True: os.wait()
except ChildProcessError:
    pass
'
ADDR_CLIENT='
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
got = b""
while True:
    b = s.recv(1000)
    if not b: break
    got += b
me, srv = s.getsockname(), s.getpeername()
want = "family=%d type=%d proto=%d peer=%s:%d local=%s:%d" % (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, me[0], me[1], srv[0], srv[1])
print("exec_addresses=%s (%s)" % ("ok" if got.decode(errors="replace") == want else "BAD", got.decode(errors="replace")))
'
addr_run() {  # addr_run plain|smc -> AOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap env "${EXEC_CARRY[@]}" python3 -c "$ADDR_SERVER" "$port"
  local spid=$BG_PID
  wait_port "$port" || { log "address server did not start"; AOUT=; return 1; }
  AOUT=$($wrap timeout 60 python3 -c "$ADDR_CLIENT" "$port" 2>&1 | tail -1)
  wait_exit "$spid" 30 "the address server"
  log "$1 exec addresses: $AOUT"
}
addr_run plain
check "plain TCP: the exec'd program sees the TCP connection's family, protocol and addresses" grep -q "^exec_addresses=ok" <<<"$AOUT"
addr_run smc
check "SMC-R: the exec'd program sees the TCP connection's family, protocol and addresses" grep -q "^exec_addresses=ok" <<<"$AOUT"
if [ ${#EXEC_CARRY[@]} -gt 0 ]; then
  check "SMC-R (ASan build, SMCR_EXEC_CARRY=0): that connection was SMC-R and relayed ($(stat_sum smc_passive) passive, $(stat_sum handovers) relayed)" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum handovers)" = 1 ]
else
  check "SMC-R: that connection was SMC-R and carried into the exec'd program ($(stat_sum smc_passive) passive, $(stat_sum exec_adopted) taken over after exec, $(stat_sum handovers) relayed)" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum exec_adopted)" = 1 -a "$(stat_sum handovers)" = 0 ]
fi
# --- later children do not inherit earlier relays ------------------------------
# An accept-then-fork server forks its n-th child while it relays the n-1
# before (PostgreSQL: a backend per connection, all alive at once). Each
# child counts its descriptors while the earlier connections stay open: with
# TCP the count stays flat; the relays' descriptors (four or five each)
# must not pile up in every later child (a few hundred connections ran a
# RLIMIT_NOFILE 1024 child out of them).
FDS_SERVER='
import os, signal, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port)); l.listen(16)
for _ in range(n):
    c, _ = l.accept()
    if os.fork() == 0:
        l.close()
        c.sendall(b"fds=%d\n" % len(os.listdir("/proc/self/fd")))
        while c.recv(4096): pass   # until the client closes
        sys.exit(0)
    c.close()
try:
    while True: os.wait()
except ChildProcessError:
    pass
'
FDS_CLIENT='
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
conns, counts = [], []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(20)
    got = b""
    while not got.endswith(b"\n"): got += s.recv(100)
    counts.append(int(got.split(b"=")[1])); conns.append(s)   # held open
for s in conns: s.close()
print("child_fds=%s growth=%d" % (",".join(map(str, counts)), counts[-1] - counts[0]))
'
fds_run() {  # fds_run plain|smc -> FOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap timeout 60 python3 -c "$FDS_SERVER" "$port" 8
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; FOUT=; return 1; }
  FOUT=$($wrap timeout 60 python3 -c "$FDS_CLIENT" "$port" 8 2>&1)
  wait "$spid"
  log "$1: $FOUT"
}
fds_run plain
check "plain TCP: the 8th child holds no more descriptors than the 1st" grep -q "growth=0$" <<<"$FOUT"
fds_run smc
check "SMC-R: the 8th child holds no descriptors of the 7 handed over before it" \
  bash -c 'g=$(sed -n "s/.*growth=\(-\{0,1\}[0-9]*\)$/\1/p" <<<"$0"); [ -n "$g" ] && [ "$g" -le 1 ]' "$FOUT"
check "SMC-R: all 8 connections moved to their children ($(stat_sum rehomed)), none aborted" \
  [ "$(stat_sum rehomed)" = 8 -a "$(stat_sum aborts)" = 0 ]
# --- a forked child that waits (epoll, poll, select) before it reads ----------
# PostgreSQL's backends: accept, fork, the parent closes its copy, the child
# waits for readability and then reads. Every byte the child reads must be
# one the client sent: once, a child that registered the inherited fd with
# epoll or polled it processed the parent's CDCs on its stale copy of the
# connection and rang a doorbell byte ('r') into what became its data stream.
# Many connections at once, each with its own delay before its first bytes,
# so that the child's first wait falls before, during and after the handover;
# with a CPU load in the background, compared with plain TCP.
POLL_SERVER='
import os, random, select, socket, sys, time
ports, n = [int(p) for p in sys.argv[1:4]], int(sys.argv[4])
class Waiter:
    def __init__(self, fd, how):
        self.fd, self.how = fd, how
        if how == "epoll": self.p = select.epoll(); self.p.register(fd, select.EPOLLIN)
        elif how == "poll": self.p = select.poll(); self.p.register(fd, select.POLLIN)
    def wait(self):
        if self.how == "epoll": return bool(self.p.poll(10))
        if self.how == "poll": return bool(self.p.poll(10000))
        return bool(select.select([self.fd], [], [], 10)[0])
def serve(c, how):
    w = Waiter(c.fileno(), how)
    first = c.recv(1)
    if first == b"H":      # "hello", 0.1 s, "world": the child reports what it read
        got = b""
        while len(got) < 10 and w.wait():
            b = c.recv(10 - len(got))
            if not b: break
            got += b
            w = Waiter(c.fileno(), how)   # registered anew after a read, too
        c.sendall(b"child read " + got.hex().encode() + b"\n")
    else:                  # requests (4-byte numbers), each answered with 1000 bytes
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf, seen = b"", []
        while w.wait():
            b = c.recv(4096)
            if not b: break
            buf += b
            while len(buf) >= 4:
                k = int.from_bytes(buf[:4], "big"); buf = buf[4:]; seen.append(k)
                c.sendall(k.to_bytes(4, "big") + bytes([k & 255]) * 1000)
        c.sendall(b"child saw %d requests, first %r, %d stray bytes\n" % (len(seen), seen[:4], len(buf)))
    c.close()
listeners = {}
for port, how in zip(ports, ("epoll", "poll", "select")):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(64)
    listeners[l] = how
kids = []
while len(kids) < 3 * n:
    for l in select.select(list(listeners), [], [], 30)[0]:
        c, _ = l.accept()
        pid = os.fork()
        if pid == 0:
            for x in listeners: x.close()
            # The child waits before its first read, after a moment of its
            # own: the first bytes of the client come before or after.
            time.sleep(random.random() * 0.06)
            Waiter(c.fileno(), listeners[l]).wait()
            serve(c, listeners[l])
            sys.exit(0)   # not os._exit: the shim writes its counters at exit
        c.close()
        kids.append(pid)
bad = sum(os.waitpid(k, 0)[1] != 0 for k in kids)
print("server children_failed=%d" % bad, flush=True)
'
POLL_CLIENT='
import random, socket, sys, threading, time
ports, n = [int(p) for p in sys.argv[1:4]], int(sys.argv[4])
results = {p: [] for p in ports}
def hello_world(port, s):
    time.sleep(random.random() * 0.06)
    s.sendall(b"H"); s.sendall(b"hello"); time.sleep(0.1); s.sendall(b"world")
    got = b""
    try:
        while not got.endswith(b"\n"):
            b = s.recv(100)
            if not b: break
            got += b
    except OSError as e: got += repr(e).encode()
    results[port].append(got == b"child read " + b"helloworld".hex().encode() + b"\n" or got)
    s.close()
def requests(port, s):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"R")
    extra = b""
    try:
        for k in range(1, 101):
            s.sendall(k.to_bytes(4, "big"))
            want = k.to_bytes(4, "big") + bytes([k & 255]) * 1000
            got = b""
            while len(got) < len(want):
                b = s.recv(len(want) - len(got))
                if not b: break
                got += b
            if got != want:
                results[port].append(b"reply %d differs: %r" % (k, got[:8])); return
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b: break
            extra += b
    except OSError as e:
        results[port].append(repr(e).encode()); return
    results[port].append(extra == b"child saw 100 requests, first [1, 2, 3, 4], 0 stray bytes\n" or extra[:200])
# Connected one after the other (the server does the handshakes in turn),
# then each talks on a thread of its own.
ts = []
for i in range(n):
    for p in ports:
        s = socket.create_connection(("127.0.0.1", p)); s.settimeout(20)
        ts.append(threading.Thread(target=requests if i == 0 else hello_world, args=(p, s)))
        ts[-1].start()
for t in ts: t.join()
for p, how in zip(ports, ("epoll", "poll", "select")):
    bad = [r for r in results[p] if r is not True]
    print("%s intact=%d/%d" % (how, len(results[p]) - len(bad), n), *[repr(r) for r in bad[:3]], flush=True)
'
POLL_RUNS=25   # connections per way of waiting: one request loop, the rest hello/world
poll_run() {  # poll_run plain|smc RUNS -> POUT (a line per way of waiting)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local ports t0=$SECONDS; ports="$(free_port) $(free_port) $(free_port)"
  reset_stats
  bg $wrap timeout 90 python3 -c "$POLL_SERVER" $ports "$2"
  local spid=$BG_PID p
  for p in $ports; do wait_port "$p" || { log "server did not start"; POUT=; return 1; }; done
  POUT=$($wrap timeout 90 python3 -c "$POLL_CLIENT" $ports "$2" 2>&1)
  wait "$spid"
  log "$1 ($((SECONDS - t0)) s): $(tr '\n' ' ' <<<"$POUT")"
}
# A CPU load makes the races of the handover likelier.
bg timeout 120 nice sh -c 'while :; do :; done'
load_pid=$BG_PID
poll_run plain 10
for how in epoll poll select; do
  check "plain TCP, child waits with $how: every byte the client's" grep -q "^$how intact=10/10\$" <<<"$POUT"
done
poll_run smc "$POLL_RUNS"
for how in epoll poll select; do
  check "SMC-R, child waits with $how: every byte the client's, nothing more (hello/world x$((POLL_RUNS - 1)), 100 requests)" \
    grep -q "^$how intact=$POLL_RUNS/$POLL_RUNS\$" <<<"$POUT"
done
check "SMC-R, waiting children: all $((3 * POLL_RUNS)) connections SMC-R and moved to their children ($(stat_sum smc_passive), $(stat_sum rehomed))" \
  [ "$(stat_sum smc_active)" = $((3 * POLL_RUNS)) -a "$(stat_sum smc_passive)" = $((3 * POLL_RUNS)) -a "$(stat_sum rehomed)" = $((3 * POLL_RUNS)) ]
check "SMC-R, waiting children: no abort, no protocol violation" \
  [ "$(stat_sum aborts)" = 0 -a "$(stat_sum protocol_violations)" = 0 ]
kill "$load_pid" 2>/dev/null
finish
