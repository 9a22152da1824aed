#!/usr/bin/env bash
# OpenSSH's sshd under smc_run: it accepts, forks, and the child re-executes
# sshd with the connection on 0 and 1 (a connection carried across exec,
# core/exec_carry.h), which forks its sandboxed child for the network. As
# over plain TCP in the same run: the session
# sees the client's address in SSH_CONNECTION, the server logs it, a key
# restricted with from="127.0.0.1" is accepted and one restricted to another
# address refused, and 8 MB come through intact; the counters show SMC-R
# at both ends and the handover.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into non-ASan programs" ;; esac
[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null || skip "openssh-server/ssh not installed (scripts/install-deps.sh)"
[ "$(id -u)" = 0 ] || skip "sshd needs root here (privilege separation)"
require_bpf
mkdir -p /run/sshd
K="$TEST_TMP/ssh"; mkdir -p "$K"; chmod 700 "$K"
ssh-keygen -q -t ed25519 -N '' -f "$K/host"
ssh-keygen -q -t ed25519 -N '' -f "$K/local_key"
ssh-keygen -q -t ed25519 -N '' -f "$K/other_key"
{ echo "from=\"127.0.0.1\" $(cat "$K/local_key.pub")"; echo "from=\"192.0.2.1\" $(cat "$K/other_key.pub")"; } > "$K/authorized_keys"
chmod 600 "$K/authorized_keys"
port=$(free_port)
cat > "$K/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $K/host
AuthorizedKeysFile $K/authorized_keys
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile $K/sshd.pid
LogLevel VERBOSE
CFG
SSH_OPTS=(-p "$port" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR)
run() {  # run plain|smc -> OUT (session), REFUSED (rc of the other key), SLOG (server log)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  reset_stats
  $wrap /usr/sbin/sshd -D -e -f "$K/sshd_config" > "$TEST_TMP/sshd.$1.log" 2>&1 &
  local spid=$!
  wait_port "$port" || log "sshd did not start: $(cat "$TEST_TMP/sshd.$1.log")"
  # The session prints SSH_CONNECTION and the sha256 of 8 MB, then the 8 MB.
  $wrap timeout 60 ssh "${SSH_OPTS[@]}" -i "$K/local_key" root@127.0.0.1 \
    'f=$(mktemp); head -c 8000000 /dev/urandom > $f; echo "conn=$SSH_CONNECTION"; sha256sum < $f | cut -c1-64; cat $f; rm -f $f' \
    > "$TEST_TMP/ssh.$1.out" 2>"$TEST_TMP/ssh.$1.err"
  OUT=$(head -1 "$TEST_TMP/ssh.$1.out")
  REMOTE_SHA=$(sed -n 2p "$TEST_TMP/ssh.$1.out")
  LOCAL_SHA=$(tail -c 8000000 "$TEST_TMP/ssh.$1.out" | sha256sum | cut -d' ' -f1)
  $wrap timeout 30 ssh "${SSH_OPTS[@]}" -i "$K/other_key" root@127.0.0.1 true 2>/dev/null; REFUSED=$?
  # $! is smc_run's shell when wrapped: the listener itself must go too
  # (it outlived every test run before).
  local lpid; lpid=$(listener_pid "$port")
  kill "$spid" ${lpid:+"$lpid"} 2>/dev/null; timeout 10 tail --pid="$spid" -f /dev/null
  [ -n "$lpid" ] && timeout 10 tail --pid="$lpid" -f /dev/null
  sleep 0.3
  SLOG=$(cat "$TEST_TMP/sshd.$1.log")
  log "$1: session: $OUT; 8 MB sha local ${LOCAL_SHA:0:12} remote ${REMOTE_SHA:0:12}; other key rc=$REFUSED; $(grep -m1 'Accepted publickey' <<<"$SLOG")"
}
for mode in plain smc; do
  run "$mode"
  check "$mode: SSH_CONNECTION names the client 127.0.0.1 and the server port" grep -Eq "^conn=127\.0\.0\.1 [1-9][0-9]* 127\.0\.0\.1 $port$" <<<"$OUT"
  check "$mode: sshd logs the client's address" grep -Eq "Accepted publickey for root from 127\.0\.0\.1 port [1-9]" <<<"$SLOG"
  check "$mode: the from=\"127.0.0.1\" key was accepted, 8 MB intact" [ -n "$REMOTE_SHA" -a "$LOCAL_SHA" = "$REMOTE_SHA" ]
  check "$mode: the key restricted to another address was refused" [ "$REFUSED" != 0 ]
done
# Each connection moves to the forked sshd, is carried into the sshd it
# exec's (core/exec_carry.h), and is relayed there once that sshd forks its
# sandboxed child (which cannot run the shim): the listener relays nothing.
check "smc: the sessions were SMC-R at both ends ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive), carried into the re-executed sshd ($(stat_sum exec_adopted)) and relayed there for its sandboxed child ($(stat_sum handovers))" \
  [ "$(stat_sum smc_active)" -ge 2 -a "$(stat_sum smc_passive)" -ge 2 -a "$(stat_sum exec_adopted)" -ge 2 -a "$(stat_sum handovers)" -ge 2 ]
finish
