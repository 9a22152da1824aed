#!/usr/bin/env bash
# git's own daemon and client under smc_run, against plain TCP: clones of a
# 10 MB repository over git://. Both ends fork and exec with the connection
# still held, the two ways real programs do:
# - git daemon forks for each client and execs `git daemon --serve` with the
#   connection as its stdin and stdout; the parent closes its copy only once
#   the exec succeeded (run-command waits for it). Before, the child waited
#   2 s for a parent that waited for it, then gave the new program
#   end-of-file: every clone failed.
# - git clone forks index-pack (and others) while its own thread reads the
#   connection, which it never marked close-on-exec; index-pack never uses
#   it. Before, each of those execs waited 2 s for the parent to let go.
# Now the program asks for the connection on its first use
# (SMCR_EXEC_PENDING, counted as exec_pending): the daemon's child takes
# it over, index-pack never asks. No timing is asserted; the clone times
# are logged beside plain TCP's.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into git" ;; esac
require_bpf
command -v git >/dev/null || skip "git not installed"
[ -x "$(git --exec-path)/git-daemon" ] || skip "git-daemon not installed (Debian ships it in the git package)"

G="$TEST_TMP/git"
mkdir -p "$G/work"
git init -q --bare "$G/repo.git"
touch "$G/repo.git/git-daemon-export-ok"
(
  cd "$G/work" && git init -q && for i in $(seq 1 50); do head -c 200000 /dev/urandom >"f$i"; done &&
    git add . && git -c user.email=t@t -c user.name=t commit -qm data && git push -q "$G/repo.git" HEAD:master
) || { log "FAIL: could not make the repository"; exit 1; }
HEAD=$(git --git-dir="$G/repo.git" rev-parse master)
CLONES=4

# git_run plain|smc: clones $CLONES times; sets OKS (intact clones) and TIMES.
git_run() {
  local wrap=(env) port i c t0
  [ "$1" = smc ] && wrap=(env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR")
  port=$(free_port)
  "${wrap[@]}" git daemon --reuseaddr --listen=127.0.0.1 --port="$port" --base-path="$G" --export-all "$G" \
    >"$G/daemon-$1.log" 2>&1 &
  local dpid=$!
  wait_port "$port" || log "git daemon did not start: $(head -3 "$G/daemon-$1.log")"
  OKS=0 TIMES=""
  for i in $(seq 1 "$CLONES"); do
    c="$G/clone-$1-$i"
    t0=$(date +%s%N)
    if "${wrap[@]}" timeout 60 git clone -q "git://127.0.0.1:$port/repo.git" "$c" >"$G/clone-$1-$i.log" 2>&1 &&
      [ "$(git -C "$c" rev-parse HEAD)" = "$HEAD" ] && git -C "$c" fsck --full --no-progress >>"$G/clone-$1-$i.log" 2>&1 &&
      [ "$(ls "$c" | wc -l)" = 50 ]; then
      OKS=$((OKS + 1))
    else
      sed 's/^/    /' "$G/clone-$1-$i.log" | head -5
    fi
    TIMES+="$(( ($(date +%s%N) - t0) / 1000000 )) ms "
  done
  kill "$dpid" 2>/dev/null
  wait "$dpid" 2>/dev/null
  log "$1: $OKS/$CLONES clones intact, each in $TIMES"
}

git_run plain
check "plain TCP: every clone intact" [ "$OKS" = "$CLONES" ]
reset_stats
git_run smc
check "under smc_run: every clone intact (HEAD, fsck --full, 50 files)" [ "$OKS" = "$CLONES" ]
check "every clone's connection SMC-R at both ends, no fallback (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary))" \
  [ "$(stat_sum smc_active)" = "$CLONES" -a "$(stat_sum smc_passive)" = "$CLONES" -a "$(stat_sum fallback_total)" = 0 ]
check "the daemon's children took their connections on first use, index-pack's were left alone (exec_pending $(stat_sum exec_pending), exec_adopted $(stat_sum exec_adopted))" \
  [ "$(stat_sum exec_pending)" -ge $((2 * CLONES)) -a "$(stat_sum exec_adopted)" -ge "$CLONES" ]
check "no aborts, no protocol violations ($(stat_sum aborts), $(stat_sum protocol_violations))" \
  [ "$(stat_sum aborts)" = 0 -a "$(stat_sum protocol_violations)" = 0 ]
finish
