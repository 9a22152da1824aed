#!/usr/bin/env bash
# stdio on sockets (fdopen, fgets/fputs/fprintf/fread/fwrite/fflush/fclose,
# dprintf/vdprintf), close_range and closefrom: a C client and server
# (stdio_tool.c) over plain TCP and under smc_run, 10 MiB each way compared
# byte for byte; then smc_run itself: no helper process at start, and
# --stats for a missing directory, a process killed by SIGTERM and a process
# running as another user.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
TOOL="$SMCR_BUILD_DIR/tests/integration/stdio_tool"
TOOL_FORTIFY="$SMCR_BUILD_DIR/tests/integration/stdio_tool_fortify"
BYTES=$((10 * 1024 * 1024))

# The instrument: the fortified build really calls glibc's _chk entry points
# (dprintf and vdprintf among them), the other the plain ones.
for sym in __dprintf_chk __vdprintf_chk __fprintf_chk fdopen close_range closefrom; do
  check "stdio_tool_fortify calls $sym" bash -c "nm -D '$TOOL_FORTIFY' | grep -qw '$sym'"
done
for sym in dprintf vdprintf fgets fread fdopen; do
  check "stdio_tool calls $sym" bash -c "nm -D '$TOOL' | grep -qw '$sym'"
done

passed() { [ "$1" = 0 ] && grep -q "ok=1" <<<"$2"; }  # passed RC OUTPUT

# run_stdio plain|smc SERVER CLIENT: sets SOUT, COUT, SRC, CRC.
run_stdio() {
  local wrap=under_smc
  [ "$1" = plain ] && wrap=env
  local port port2
  port=$(free_port)
  port2=$(free_port)
  [ "$port2" = "$port" ] && port2=$((port + 1))
  reset_stats
  # The shim's log (SMCR_DEBUG=1, lines "smcr[pid]: ...") is kept apart
  # and shown only when a side fails: a reset seen once in CI left nothing
  # to read.
  SMCR_DEBUG=1 $wrap timeout 120 "$2" server "$port" "$port2" "$BYTES" >"$TEST_TMP/server.all" 2>&1 &
  local spid=$!
  wait_port "$port" || log "server did not start"
  SMCR_DEBUG=1 $wrap timeout 120 "$3" client "$port" "$port2" "$BYTES" >"$TEST_TMP/client.all" 2>&1
  CRC=$?
  wait "$spid"
  SRC=$?
  SOUT=$(grep -v '^smcr\[' "$TEST_TMP/server.all")
  COUT=$(grep -v '^smcr\[' "$TEST_TMP/client.all")
  log "$1 ($(basename "$2") server, $(basename "$3") client): client rc=$CRC, server rc=$SRC"
  sed 's/^/  /' <<<"$COUT"$'\n'"$SOUT"
  if [ "$CRC" != 0 ] || [ "$SRC" != 0 ]; then
    log "the shim's log, last 40 lines of each side:"
    grep '^smcr\[' "$TEST_TMP/client.all" | tail -40 | sed 's/^/  client /'
    grep '^smcr\[' "$TEST_TMP/server.all" | tail -40 | sed 's/^/  server /'
  fi
}

run_stdio plain "$TOOL_FORTIFY" "$TOOL"
check "plain TCP: stdio client intact both ways, EOF after close_range/closefrom, exit flush" \
  passed "$CRC" "$COUT"
check "plain TCP: stdio server intact, EOF after the client's fclose" passed "$SRC" "$SOUT"

for pair in "$TOOL_FORTIFY $TOOL" "$TOOL $TOOL_FORTIFY"; do
  set -- $pair
  run_stdio smc "$1" "$2"
  what="SMC-R ($(basename "$1") server)"
  check "$what: stdio client intact both ways (10 MiB), EOF after close_range and closefrom, exit flush" \
    passed "$CRC" "$COUT"
  check "$what: stdio server intact, EOF after the client's fclose" passed "$SRC" "$SOUT"
  # All four connections SMC-R: the last two were made after the server's
  # close_range(3, ~0U) and closefrom(3), so the shim's own descriptors
  # survived them.
  check "$what: all 4 connections SMC-R on both sides, no fallback" \
    [ "$(stat_sum smc_active)" = 4 -a "$(stat_sum smc_passive)" = 4 -a "$(stat_sum fallback_total)" = 0 ]
  check "$what: the engines counted the payload ($(stat_sum tx_bytes) bytes sent)" \
    [ "$(stat_sum tx_bytes)" -ge $((2 * BYTES)) ]
done

# --- close_range in a vfork()ed child: CPython's subprocess vforks and calls
# close_range(3.., ~0U) there. The child shares the parent's memory: the
# shim must not close the parent's connections from it.
VFORK='
import os, socket, subprocess, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
data = os.urandom(1 << 20)
got = bytearray()
for i in range(4):
    s.sendall(data[i << 18:(i + 1) << 18])
    subprocess.run(["/bin/true"], check=True)   # vfork, close_range, exec
    while len(got) < (i + 1) << 18:
        b = s.recv(1 << 20)
        if not b: break
        got += b
s.shutdown(socket.SHUT_WR)
print("echo=%s" % ("ok" if bytes(got) == data else "BAD(%d)" % len(got)))
'
for mode in plain smc; do
  wrap=under_smc
  [ $mode = plain ] && wrap=env
  reset_stats
  port=$(free_port)
  bg $wrap "$ECHO_TOOL" server --port "$port" --max-conns 1
  spid=$BG_PID
  wait_port "$port"
  OUT=$($wrap timeout 60 python3 -c "$VFORK" "$port" 2>&1 | tail -1)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$mode, subprocess (vfork + close_range) between echoes: $OUT"
  check "$mode: echo intact across subprocess.run (vfork + close_range in the child)" [ "$OUT" = echo=ok ]
done
check "SMC-R: the connection was SMC-R and nothing was aborted" \
  [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum aborts)" = 0 ]

# --- smc_run starts the program and nothing else: no ldd, no readlink, no
# subshell (strace: the script's own exec, then the program's; no fork),
# also with --policy (the shim checks it as it loads) and with --load when
# the eBPF program is loaded (require_bpf above: its pinned link is there).
case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) asan_shim=1 ;; *) asan_shim=0 ;; esac
if [ "$asan_shim" = 1 ]; then
  # An ASan shim is marked (libsmcr_preload.so.asan) and smc_run runs ldd to
  # put the ASan runtime first: the no-helper path is the normal build's.
  log "ASan build of the shim: smc_run runs ldd for it by design; its exec count is checked in the normal build"
elif command -v strace >/dev/null 2>&1; then
  printf 'deny port 9\nallow port 1-65535\n' >"$TEST_TMP/start.policy"
  for args in "" "--stats $STATS_DIR -d" "-l --policy $TEST_TMP/start.policy"; do
    SMCR_PRELOAD_LIB="$SMCR_PRELOAD" strace -f -qq -e trace=execve,fork,vfork,clone,clone3 -o "$TEST_TMP/trace" \
      "$SMC_RUN" $args /bin/true
    execs=$(grep -c 'execve(' "$TEST_TMP/trace")
    forks=$(grep -Ec '(clone3?|v?fork)\(' "$TEST_TMP/trace")
    last=$(grep 'execve(' "$TEST_TMP/trace" | tail -1)
    case $last in *'execve("/bin/true"'*) last=true ;; esac
    check "smc_run $args: 2 execs (the script, then /bin/true) and no fork; got $execs, $forks" \
      [ "$execs" = 2 -a "$forks" = 0 -a "$last" = true ]
  done
else
  log "strace not installed: smc_run's exec count not checked"
fi

# --- --stats
# A directory that does not exist: smc_run creates it, sticky and open to all.
NEWDIR="$TEST_TMP/new/stats"
port=$(free_port)
bg env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$NEWDIR" "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID
wait_port "$port"
OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$NEWDIR" timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 1M)
timeout 30 tail --pid="$spid" -f /dev/null
check "--stats with a missing directory: created with mode 1777" [ "$(stat -c %a "$NEWDIR" 2>/dev/null)" = 1777 ]
check "--stats with a missing directory: both processes wrote their SMC-R counters" \
  [ "$(cat "$NEWDIR"/smcr-*.txt 2>/dev/null | awk '$1=="smc_active"||$1=="smc_passive"{s+=$2} END{print s+0}')" = 2 ]

# A process killed by SIGTERM (default action: no exit code runs) leaves a
# current file: the engine keeps it up to date while the process runs.
reset_stats
port=$(free_port)
bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 2
wait_port "$port"
server=$(listener_pid "$port")
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 1M)
check "SIGTERM case: the echo itself was intact" [ "$(field ok "$OUT")" = 1 ]
sleep 1  # the file is refreshed every 250 ms at most
kill -TERM "$server"
timeout 10 tail --pid="$server" -f /dev/null
check "a server killed by SIGTERM left its stats file (smcr-$server.txt)" test -f "$STATS_DIR/smcr-$server.txt"
check "the killed server's file shows its SMC-R connection and its bytes" \
  [ "$(awk '$1=="smc_passive"{print $2}' "$STATS_DIR/smcr-$server.txt" 2>/dev/null)" = 1 -a \
    "$(awk '$1=="rx_bytes"{print $2}' "$STATS_DIR/smcr-$server.txt" 2>/dev/null)" -ge 1048576 ]

# Processes that run as another user (nginx workers as nobody).
if command -v setpriv >/dev/null 2>&1; then
  chmod 711 "$TEST_TMP"  # mktemp's 0700 would keep nobody out of everything below
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  # A directory smc_run creates: nobody can write there.
  USERDIR="$TEST_TMP/userdir"
  port=$(free_port)
  bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 2
  wait_port "$port"
  OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$USERDIR" "${as_nobody[@]}" \
    timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 64K 2>"$TEST_TMP/nobody.err")
  check "as nobody: echo intact" [ "$(field ok "$OUT")" = 1 ]
  f=$(ls "$USERDIR"/smcr-*.txt 2>/dev/null | head -1)
  check "as nobody, directory made by smc_run: the file is written, owned by nobody, shows SMC-R" \
    [ -n "$f" -a "$(stat -c %u "${f:-/}")" = 65534 -a "$(awk '$1=="smc_active"{print $2}' "${f:-/dev/null}")" = 1 ]
  # A root-owned directory it cannot write: said on stderr, with the path.
  ROOTDIR="$TEST_TMP/rootdir"
  mkdir -m 755 "$ROOTDIR"
  OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$ROOTDIR" "${as_nobody[@]}" \
    timeout 60 "$ECHO_TOOL" client --port "$port" --bytes 64K 2>"$TEST_TMP/nobody.err")
  log "as nobody, root-owned directory: stderr: $(cat "$TEST_TMP/nobody.err")"
  check "as nobody, root-owned directory: echo intact" [ "$(field ok "$OUT")" = 1 ]
  check "as nobody, root-owned directory: one line on stderr names the file and the error" \
    [ "$(grep -c "cannot write stats file $ROOTDIR/smcr-[0-9]*.txt: Permission denied" "$TEST_TMP/nobody.err")" = 1 ]
else
  log "setpriv not installed: --stats as another user not checked"
fi

finish
