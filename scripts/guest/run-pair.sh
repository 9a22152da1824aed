#!/usr/bin/env bash
# Runs two commands in two QEMU (TCG) guests joined by one Ethernet segment, each
# with a real soft-RoCE device, for tests between two hosts (e.g. against the
# Linux kernel's own SMC, or cross-guest SMC-R).
#
#   usage: scripts/guest/run-pair.sh [--timeout S] [--mem MB] [--verbose]
#            -- SERVER_COMMAND [ARGS...] --- CLIENT_COMMAND [ARGS...]
#
# Guest A (server): eth0 10.9.1.1/24, rxe0 on eth0, GID ::ffff:10.9.1.1.
# Guest B (client): eth0 10.9.1.2/24, rxe0 on eth0, GID ::ffff:10.9.1.2.
# The NICs are virtio-net on a QEMU UDP socket netdev (127.0.0.1, two free ports),
# so neither guest has to start first. Both commands run as with run.sh (cwd, SMCR_*
# environment, read-only host root, same --timeout each), plus:
#   SMCR_GUEST_ROLE=server|client  SMCR_SELF_IP=10.9.1.x  SMCR_PEER_IP=10.9.1.y
# The two guests boot in parallel: the client must wait/retry until the server
# listens, e.g. `for i in $(seq 100); do (: >/dev/tcp/$SMCR_PEER_IP/PORT) 2>/dev/null && break;
# sleep 0.2; done`, or retry the client (perftest clients fail at once when nobody listens).
# Output lines are prefixed with [A] / [B]. Exit status: the worst of the two:
# a failure of A, else a failure of B, else 77 if either skipped, else 0.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=$HERE/run.sh
OPTS=()
while [ $# -gt 0 ]; do
  case $1 in
    --timeout|--mem|--cpus) OPTS+=("$1" "${2:?}"); shift 2 ;;
    --verbose|-v) OPTS+=(--verbose); shift ;;
    --) shift; break ;;
    *) echo "run-pair.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
A=() B=()
while [ $# -gt 0 ] && [ "$1" != --- ]; do A+=("$1"); shift; done
[ "${1:-}" = --- ] && shift
B=("$@")
if [ ${#A[@]} -eq 0 ] || [ ${#B[@]} -eq 0 ]; then
  echo "usage: run-pair.sh [--timeout S] [--mem MB] -- SERVER_CMD... --- CLIENT_CMD..." >&2
  exit 2
fi

# two free UDP ports on 127.0.0.1
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    ss -Hlun "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
}
PA=$(free_port)
PB=$(free_port)
while [ "$PB" = "$PA" ]; do PB=$(free_port); done

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
trap 'echo "run-pair.sh: interrupted" >&2; exit 130' INT TERM HUP

prefix() { sed -u "s/^/[$1] /"; }

SMCR_GUEST_ROLE=server SMCR_SELF_IP=10.9.1.1 SMCR_PEER_IP=10.9.1.2 \
  "$RUN" "${OPTS[@]}" --nic-udp "$PA:$PB" --nic-ip 10.9.1.1 --nic-mac 52:54:00:00:01:01 -- "${A[@]}" \
  > >(prefix A) 2> >(prefix A >&2) &
PIDS+=($!)
SMCR_GUEST_ROLE=client SMCR_SELF_IP=10.9.1.2 SMCR_PEER_IP=10.9.1.1 \
  "$RUN" "${OPTS[@]}" --nic-udp "$PB:$PA" --nic-ip 10.9.1.2 --nic-mac 52:54:00:00:01:02 -- "${B[@]}" \
  > >(prefix B) 2> >(prefix B >&2) &
PIDS+=($!)

wait "${PIDS[0]}"; RA=$?
wait "${PIDS[1]}"; RB=$?
PIDS=()
sleep 0.2   # let the prefixing sed processes flush
failed() { [ "$1" != 0 ] && [ "$1" != 77 ]; }
if failed "$RA"; then RC=$RA
elif failed "$RB"; then RC=$RB
elif [ "$RA" = 77 ] || [ "$RB" = 77 ]; then RC=77
else RC=0
fi
[ "$RC" = 0 ] || echo "run-pair.sh: server guest exited $RA, client guest exited $RB" >&2
exit "$RC"
