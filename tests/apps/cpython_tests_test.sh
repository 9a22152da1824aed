#!/usr/bin/env bash
# ctest wrapper of scripts/cpython-tests.sh: CPython's own suites for
# sockets, readiness and the protocols built on them (HTTP, FTP, POP3, SMTP,
# IMAP, XML-RPC, logging's socket handlers, asyncio, ssl), over plain TCP
# and under smc_run, compared test by test; no difference, and SMC-R
# carrying connections. Debian's python3 with its test package
# (libpython3.11-testsuite, scripts/install-deps.sh) where it is there.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes) skip "the shim is an ASan build; it cannot be preloaded into python3" ;; esac
require_bpf
PY=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import test.regrtest, test.test_socket' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || skip "no python3 with its test package (Debian: libpython3.11-testsuite)"
OUT=$(SMCR_PRELOAD_LIB="$SMCR_PRELOAD" bash "$SMCR_SOURCE_DIR/scripts/cpython-tests.sh" -p "$PY" \
  test_socket test_selectors test_epoll test_poll test_select test_socketserver test_httplib test_httpservers \
  test_urllib2_localnet test_wsgiref test_xmlrpc test_docxmlrpc test_ftplib test_poplib test_smtplib \
  test_imaplib test_telnetlib test_logging test_ssl test_asyncio 2>&1)
rc=$?
echo "$OUT"
[ $rc = 77 ] && skip "$(tail -1 <<<"$OUT")"
flaky=$(sed -n 's/^cpython-tests: flaky (differed once, agreed when run again): //p' <<<"$OUT")
check "cpython-tests ($PY): the same results under smc_run as over plain TCP in every suite${flaky:+ (flaky, agreed when run again: $flaky)}" \
  grep -q "^cpython-tests: the same results under smc_run" <<<"$OUT"
n=$(sed -n 's/^cpython-tests: the same results .*; \([0-9]*\) SMC-R connections$/\1/p' <<<"$OUT")
check "cpython-tests: SMC-R carried connections (${n:-0} made by the suites' clients)" [ "${n:-0}" -gt 100 ]
finish
