#!/usr/bin/env bash
# Smoke test of the soft-RoCE guest, run INSIDE the guest:
#   scripts/guest/run.sh -- bash tests/guest/smoke.sh
# Checks: rxe0 is listed by ibv_devices and PORT_ACTIVE in ibv_devinfo; the GID
# table has a RoCE v2 IPv4-mapped GID for 10.9.0.1; an ib_write_bw loopback
# (server + client on rxe0, -x <that GID index>) completes; the port's packet
# counters grew. Prints how long it took. Exits 0 only if every check passed.
set -uo pipefail

DEV=${SMCR_SMOKE_DEV:-rxe0}
IP=${SMCR_SMOKE_IP:-10.9.0.1}
PORT=${SMCR_SMOKE_PORT:-18515}
SIZE=4096 ITERS=100
T0=$(date +%s%N)
FAILS=0
ok() { echo "smoke: ok: $*"; }
bad() { echo "smoke: FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

if [ ! -d /sys/class/infiniband ]; then
  echo "smoke: FAIL: no /sys/class/infiniband: not inside the soft-RoCE guest? (run via scripts/guest/run.sh)" >&2
  exit 1
fi
PD=/sys/class/infiniband/$DEV/ports/1

# --- 1. devices -----------------------------------------------------------------
echo "== ibv_devices"
out=$(ibv_devices 2>&1); echo "$out"
grep -qw "$DEV" <<<"$out" && ok "ibv_devices lists $DEV" || bad "ibv_devices does not list $DEV"

echo "== ibv_devinfo -d $DEV"
out=$(ibv_devinfo -d "$DEV" 2>&1); echo "$out"
grep -q 'state:[[:space:]]*PORT_ACTIVE' <<<"$out" && ok "$DEV port 1 PORT_ACTIVE" || bad "$DEV port 1 not PORT_ACTIVE"

# --- 2. GID table -----------------------------------------------------------------
echo "== GID table of $DEV port 1 (index gid type netdev)"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${IP//./ })
IDX=""
for f in "$PD"/gids/*; do
  i=${f##*/}
  g=$(<"$f") || continue
  [ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
  t=$(cat "$PD/gid_attrs/types/$i" 2>/dev/null) || t="?"
  n=$(cat "$PD/gid_attrs/ndevs/$i" 2>/dev/null) || n="?"
  echo "  $i $g $t $n"
  if [ -z "$IDX" ] && [ "$g" = "$want" ] && [ "$t" = "RoCE v2" ]; then IDX=$i; fi
done
if [ -n "$IDX" ]; then
  ok "RoCE v2 IPv4-mapped GID for $IP ($want) at index $IDX"
else
  bad "no RoCE v2 GID $want for $IP"
fi

# --- 3. ib_write_bw loopback ----------------------------------------------------------
counter() {  # counter NAME: hw_counters/NAME, or counters/NAME, or empty
  local f
  for f in "$PD/hw_counters/$1" "$PD/counters/$1"; do
    [ -r "$f" ] && { cat "$f"; return; }
  done
}
CNT=(sent_pkts rcvd_pkts port_xmit_data port_rcv_data)
declare -A before after
for c in "${CNT[@]}"; do before[$c]=$(counter "$c"); done

if [ -n "$IDX" ]; then
  echo "== ib_write_bw loopback on $DEV, -x $IDX, -s $SIZE -n $ITERS"
  tmp=$(mktemp -d)
  t1=$(date +%s%N)
  timeout 60 ib_write_bw -d "$DEV" -i 1 -x "$IDX" -s "$SIZE" -n "$ITERS" -F -p "$PORT" >"$tmp/server" 2>&1 &
  spid=$!
  # wait for the server's TCP listener (its out-of-band exchange)
  for _ in $(seq 200); do
    ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  timeout 60 ib_write_bw -d "$DEV" -i 1 -x "$IDX" -s "$SIZE" -n "$ITERS" -F -p "$PORT" "$IP" >"$tmp/client" 2>&1
  crc=$?
  wait "$spid"; src=$?
  bw_ms=$(ms_since "$t1")
  echo "-- server (exit $src):"; cat "$tmp/server"
  echo "-- client (exit $crc):"; cat "$tmp/client"
  rm -rf "$tmp"
  if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
    ok "ib_write_bw loopback completed in ${bw_ms} ms"
  else
    bad "ib_write_bw failed (client exit $crc, server exit $src) after ${bw_ms} ms"
  fi
else
  bad "ib_write_bw not run (no GID index)"
fi

# --- 4. counters ----------------------------------------------------------------------
for c in "${CNT[@]}"; do after[$c]=$(counter "$c"); done
echo "== port counters (before -> after)"
grew=0 seen=0
for c in "${CNT[@]}"; do
  [ -n "${before[$c]}" ] || continue
  seen=$((seen + 1))
  echo "  $c: ${before[$c]} -> ${after[$c]}"
  [ "${after[$c]}" -gt "${before[$c]}" ] && grew=$((grew + 1))
done
if [ "$seen" = 0 ]; then
  bad "no port counters found under $PD/{hw_counters,counters}"
elif [ "$grew" = "$seen" ]; then
  ok "all $seen port counters increased"
else
  bad "only $grew of $seen port counters increased"
fi
if [ -n "${before[sent_pkts]}" ] && [ $((after[sent_pkts] - before[sent_pkts])) -lt "$ITERS" ]; then
  bad "sent_pkts grew by less than $ITERS"
fi

echo "smoke: took $(ms_since "$T0") ms in the guest"
if [ "$FAILS" = 0 ]; then
  echo "smoke: PASS"
  exit 0
fi
echo "smoke: $FAILS check(s) FAILED" >&2
exit 1
