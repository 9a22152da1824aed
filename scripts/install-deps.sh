#!/usr/bin/env bash
# Installs the Debian 12 packages smcr needs to build, test, demo and bench.
# Idempotent: runs `apt-get update` and `apt-get install` only when something
# is missing. Needs root (or sudo) when it has to install anything.
# Also stops and disables the redis-server system service if apt started it
# (it would hold port 6379; our tests and demo start their own servers).
#   usage: scripts/install-deps.sh
set -euo pipefail

PKGS=(
  build-essential g++ cmake pkg-config
  libbpf-dev bpftool clang-14 llvm-14 libclang-rt-14-dev libelf-dev zlib1g-dev
  libibverbs-dev libabsl-dev
  g++-12-aarch64-linux-gnu   # scripts/check-aarch64.sh (ctest static.aarch64)
  libgtest-dev googletest
  redis-server redis-tools sockperf
  tcl   # redis' own Tcl suite (scripts/redis-tests.sh)
  nginx-light curl wrk iperf3
  gnuplot-nox
  file man-db
  python3 iproute2 procps
  # nginx's own test suite (tests/third_party/nginx-tests, scripts/nginx-tests.sh):
  # the dynamic modules nginx -V names, and the Perl modules and servers its
  # tests talk to.
  libnginx-mod-mail libnginx-mod-stream libnginx-mod-stream-geoip libnginx-mod-http-geoip
  libnginx-mod-http-image-filter libnginx-mod-http-perl libnginx-mod-http-xslt-filter
  libio-socket-ssl-perl libnet-ssleay-perl libfcgi-perl libscgi-perl libcache-memcached-perl
  libcache-memcached-fast-perl libprotocol-websocket-perl libgd-perl memcached
  # memcached's load generator (memcaslap) for bench.sh's thousand-connection row
  libmemcached-tools
  # an accept-fork-exec server (tests/apps/sshd_test.sh)
  openssh-server openssh-client
  # proxies in front of nginx (tests/apps/proxies_test.sh)
  haproxy apache2 varnish squid
  # CPython's own socket suites for Debian's python3 (scripts/cpython-tests.sh,
  # tests/apps/cpython_tests_test.sh)
  libpython3.11-testsuite
  # the JDK's HTTP server and client, NIO and blocking sockets (tests/apps/java_http_test.sh)
  openjdk-17-jdk-headless
  # git daemon and clone: fork+exec with the connection held (tests/apps/git_test.sh)
  git
  # rsync daemon and client: parent and child on one connection (tests/apps/rsync_test.sh)
  rsync
)

export DEBIAN_FRONTEND=noninteractive

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -E); fi
fi

installed() {  # installed pkg : true if dpkg has it fully installed
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
for p in "${PKGS[@]}"; do
  installed "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: missing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
    echo "install-deps: not root and no sudo; install them by hand" >&2
    exit 1
  fi
  "${SUDO[@]}" apt-get update -qq
  # Check every name exists in the archive before installing, so that the
  # error names the package instead of failing the whole transaction vaguely.
  unknown=()
  for p in "${missing[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ { print $2 }')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then unknown+=("$p"); fi
  done
  if ((${#unknown[@]})); then
    echo "install-deps: not available from the configured apt sources: ${unknown[*]}" >&2
    exit 1
  fi
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # apt starts these as services on install: they would hold ports 80,
  # 6379 and 11211 that tests use (and sshd 22); the tests start their own.
  for svc in nginx:nginx-light redis-server:redis-server memcached:memcached ssh:openssh-server; do
    installed "${svc#*:}" || continue
    name=${svc%%:*}
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      "${SUDO[@]}" systemctl stop "$name" >/dev/null 2>&1 || true
      "${SUDO[@]}" systemctl disable "$name" >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
      "${SUDO[@]}" service "$name" stop >/dev/null 2>&1 || true
    fi
    if [ "$name" != nginx ] && command -v update-rc.d >/dev/null 2>&1; then
      "${SUDO[@]}" update-rc.d "$name" disable >/dev/null 2>&1 || true
    fi
  done
  echo "install-deps: installed ${#missing[@]} package(s)"
else
  echo "install-deps: all ${#PKGS[@]} packages present"
fi

# Even when nothing was installed now, a system redis may be running from an
# earlier install; stop it if it is the packaged service (never a test's own).
if [ -f /run/redis/redis-server.pid ] && kill -0 "$(cat /run/redis/redis-server.pid)" 2>/dev/null; then
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    "${SUDO[@]}" systemctl stop redis-server >/dev/null 2>&1 || true
  elif command -v service >/dev/null 2>&1; then
    "${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
  fi
fi
exit 0
