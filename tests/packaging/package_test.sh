#!/usr/bin/env bash
# packaging.install_and_deb: `cmake --install` into a temporary prefix gives
# exactly bin/{smc_run,smcr_ctl,smcr_stat}, lib/smcr/libsmcr_preload.so, the
# man pages and the README (no test programs); the installed smc_run finds the
# installed library by itself; `cpack -G DEB` makes smcr_<version>_<arch>.deb
# with the same files under /usr and a Depends line naming the libraries.
# Environment (tests/packaging/CMakeLists.txt): SMCR_BUILD_DIR, SMCR_SOURCE_DIR,
# SMCR_CMAKE, SMCR_CPACK, SMCR_VERSION, SMCR_EXPECT_CTL, SMCR_EXPECT_VERBS.
# Exit 77 (skipped) without dpkg-deb or cpack.
source "$(dirname "$0")/../lib/common.sh"

CMAKE=${SMCR_CMAKE:-cmake}
CPACK=${SMCR_CPACK:-cpack}
VERSION=${SMCR_VERSION:?}
EXPECT_CTL=${SMCR_EXPECT_CTL:-1}
EXPECT_VERBS=${SMCR_EXPECT_VERBS:-1}

command -v dpkg-deb >/dev/null 2>&1 || skip "dpkg-deb not installed"
command -v "$CPACK" >/dev/null 2>&1 || skip "cpack not found ($CPACK)"
command -v "$CMAKE" >/dev/null 2>&1 || skip "cmake not found ($CMAKE)"
# The tests' environment may point smc_run at the build tree's library; the
# point here is that the installed smc_run finds the installed one.
unset SMCR_PRELOAD_LIB

# The files a prefix must hold, relative to it (man pages: .8 or .8.gz).
expected_files() {
  echo bin/smc_run
  echo bin/smcr_stat
  [ "$EXPECT_CTL" = 1 ] && echo bin/smcr_ctl
  echo lib/smcr/libsmcr_preload.so
  # A sanitizer build marks its library so that smc_run preloads the ASan
  # runtime ahead of it without running ldd.
  case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) echo lib/smcr/libsmcr_preload.so.asan ;; esac
  echo share/doc/smcr/README.md
  local p
  for p in smc_run smcr_ctl smcr_stat; do echo "share/man/man8/$p.8$MAN_EXT"; done
}

# same_set "what" <actual list file> <expected list file>
same_set() {
  local extra missing
  extra=$(comm -23 <(sort "$2") <(sort "$3"))
  missing=$(comm -13 <(sort "$2") <(sort "$3"))
  [ -n "$extra" ] && log "$1: unexpected: $(echo $extra)"
  [ -n "$missing" ] && log "$1: missing: $(echo $missing)"
  [ -z "$extra$missing" ]
}

# ------------------------------------------------------------- cmake --install
PREFIX="$TEST_TMP/prefix"
"$CMAKE" --install "$SMCR_BUILD_DIR" --prefix "$PREFIX" >"$TEST_TMP/install.log" 2>&1
rc=$?
check "cmake --install into a temporary prefix (exit $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/  install: /' "$TEST_TMP/install.log"

MAN_EXT=""
[ -f "$PREFIX/share/man/man8/smc_run.8.gz" ] && MAN_EXT=.gz
expected_files >"$TEST_TMP/expected"
(cd "$PREFIX" && find . \( -type f -o -type l \) | sed 's|^\./||') >"$TEST_TMP/installed"
check "installed files are exactly the expected ones (no test targets)" \
  same_set "install" "$TEST_TMP/installed" "$TEST_TMP/expected"

for f in bin/smc_run bin/smcr_stat $([ "$EXPECT_CTL" = 1 ] && echo bin/smcr_ctl); do
  check "$f is executable" test -x "$PREFIX/$f"
done
check "lib/smcr/libsmcr_preload.so is a readable shared object" \
  bash -c '[ -r "$1" ] && LC_ALL=C readelf -h "$1" | grep -q "DYN (Shared object file)"' _ "$PREFIX/lib/smcr/libsmcr_preload.so"

# ------------------------------------------------------ the installed programs
check "installed smc_run --help exits 0 with its usage" \
  bash -c '"$1" --help | grep -q "usage: smc_run"' _ "$PREFIX/bin/smc_run"
check "installed smc_run runs /bin/true with SMCR_PRELOAD_LIB unset (exit 0)" \
  "$PREFIX/bin/smc_run" /bin/true
lib=$(readlink -f "$PREFIX/lib/smcr/libsmcr_preload.so")
preload=$("$PREFIX/bin/smc_run" sh -c 'printf %s "$LD_PRELOAD"' 2>/dev/null)
# The same file, by whatever path (smc_run does not canonicalize: no
# readlink on its way).
# (Last in the list: a sanitizer build puts the ASan runtime first.)
check "installed smc_run preloads the installed library ($lib; LD_PRELOAD=$preload)" \
  test -n "$lib" -a "${preload##*:}" -ef "$lib"
if [ "$EXPECT_CTL" = 1 ]; then
  "$PREFIX/bin/smcr_ctl" >/dev/null 2>&1
  rc=$?
  check "installed smcr_ctl starts (no arguments: usage, exit 2; got $rc)" test "$rc" -eq 2
fi
"$PREFIX/bin/smcr_stat" --help >/dev/null 2>&1
rc=$?
check "installed smcr_stat starts (--help: exit 0 or 2; got $rc)" test "$rc" -eq 0 -o "$rc" -eq 2

if command -v man >/dev/null 2>&1; then
  for p in smc_run smcr_ctl smcr_stat; do
    page="$PREFIX/share/man/man8/$p.8$MAN_EXT"
    warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    check "man page $p(8) renders without warnings" test -z "$warn"
    [ -n "$warn" ] && printf '%s\n' "$warn" | sed 's/^/  man: /'
  done
else
  log "man not installed: not rendering the man pages"
fi

# ------------------------------------------------------------------ cpack DEB
PKGDIR="$TEST_TMP/pkg"
(cd "$SMCR_BUILD_DIR" && "$CPACK" -G DEB -B "$PKGDIR" --config "$SMCR_BUILD_DIR/CPackConfig.cmake") \
  >"$TEST_TMP/cpack.log" 2>&1
rc=$?
check "cpack -G DEB (exit $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/  cpack: /' "$TEST_TMP/cpack.log"
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
DEB="$PKGDIR/smcr_${VERSION}_${arch}.deb"
check "cpack made $(basename "$DEB")" test -f "$DEB"
if [ -f "$DEB" ]; then
  dpkg-deb -c "$DEB" >"$TEST_TMP/contents"
  # "-rwxr-xr-x root/root 1234 2026-11-29 21:00 ./usr/bin/smc_run"
  awk '$1 !~ /^d/ { sub(/^\.\/usr\//, "", $6); print $6 }' "$TEST_TMP/contents" >"$TEST_TMP/packaged"
  check "the package holds exactly the installed files, under /usr" \
    same_set "deb" "$TEST_TMP/packaged" "$TEST_TMP/expected"
  for f in bin/smc_run bin/smcr_stat $([ "$EXPECT_CTL" = 1 ] && echo bin/smcr_ctl); do
    check "deb: /usr/$f is executable" \
      bash -c 'awk -v f="./usr/$2" '\''$6 == f && $1 ~ /^-rwxr-xr-x/ { ok = 1 } END { exit !ok }'\'' "$1"' \
      _ "$TEST_TMP/contents" "$f"
  done

  dpkg-deb -I "$DEB" >"$TEST_TMP/info"
  deb_field() { dpkg-deb -f "$DEB" "$1"; }
  check "deb: Package: smcr" test "$(deb_field Package)" = smcr
  check "deb: Version: $VERSION" test "$(deb_field Version)" = "$VERSION"
  check "deb: Architecture: $arch" test "$(deb_field Architecture)" = "$arch"
  check "deb: Maintainer is set" test -n "$(deb_field Maintainer)"
  check "deb: Description is set" test -n "$(deb_field Description)"
  depends=$(deb_field Depends)
  log "Depends: $depends"
  # Package names only ("libc6 (>= 2.34) | foo, bar" -> libc6 foo bar). What
  # the ELF files link directly; dpkg-shlibdeps leaves out libelf1 and zlib1g
  # (smcr_ctl uses none of their symbols itself; libbpf1 depends on them).
  depnames=$(tr ',|' '\n\n' <<<"$depends" | sed 's/(.*//; s/[[:space:]]//g' | grep -v '^$')
  want=(libc6 libstdc++6)
  [ "$EXPECT_CTL" = 1 ] && want+=(libbpf1)
  for d in "${want[@]}"; do
    check "deb: Depends names $d" grep -Fqx -- "$d" <<<"$depnames"
  done
  # The verbs fabric opens libibverbs at run time (core/verbs_loader.cc): the
  # package installs and the shim runs without rdma-core.
  check "deb: Depends does not name libibverbs1" bash -c '! grep -Fqx libibverbs1 <<<"$1"' _ "$depnames"
  if [ "$EXPECT_VERBS" = 1 ]; then
    check "deb: Recommends names libibverbs1" grep -Fq libibverbs1 <<<"$(deb_field Recommends)"
  fi

  # The packaged (stripped) tree works where it lands: smc_run finds
  # ../lib/smcr relative to itself.
  dpkg-deb -x "$DEB" "$TEST_TMP/root"
  check "extracted package: usr/bin/smc_run runs /bin/true" "$TEST_TMP/root/usr/bin/smc_run" /bin/true
fi

finish
