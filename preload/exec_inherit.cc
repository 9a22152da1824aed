#include "preload/exec_inherit.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdio>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/exec_carry.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/fd_table.h"

namespace smcr::preload::exec_inherit {
namespace {

constexpr char kVariable[] = "SMCR_EXEC_TCP";

// Few descriptors ever come this way (an inetd child's 0 and 1): a small
// table, read without a lock (a lookup runs in getpeername, maybe in a signal
// handler), changed under one.
struct Pair {
  std::atomic<int> fd{-1};
  std::atomic<int> tcp{-1};
};
std::array<Pair, 64> g_pairs;
std::mutex g_mu;

bool socket_option(int fd, int name, int* out) {
  socklen_t len = sizeof *out;
  return sys::getsockopt(fd, SOL_SOCKET, name, out, &len) == 0;
}

bool is_stream_unix(int fd) {
  int domain = 0, type = 0;
  return socket_option(fd, SO_DOMAIN, &domain) && domain == AF_UNIX && socket_option(fd, SO_TYPE, &type) &&
         type == SOCK_STREAM;
}

bool is_tcp(int fd) {
  int domain = 0, protocol = 0;
  return socket_option(fd, SO_DOMAIN, &domain) && (domain == AF_INET || domain == AF_INET6) &&
         socket_option(fd, SO_PROTOCOL, &protocol) && protocol == IPPROTO_TCP;
}

// g_mu held.
bool add_locked(int fd, int tcp) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) < 0) {
      p.tcp.store(tcp, std::memory_order_relaxed);
      p.fd.store(fd, std::memory_order_release);
      fd_table().set_kind(fd, kFdExecInherited);
      return true;
    }
  return false;
}

// g_mu held. Closes `tcp` unless another descriptor still refers to it.
void release_tcp_locked(int tcp) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) >= 0 && p.tcp.load(std::memory_order_relaxed) == tcp) return;
  sys::close(tcp);
}

}  // namespace

void adopt_from_environment() {
  const char* v = ::getenv(kVariable);
  if (!v) return;
  std::vector<std::pair<int, int>> items;  // (fd, tcp)
  for (const char* p = v; *p;) {
    int fd = -1, tcp = -1, used = 0;
    if (std::sscanf(p, "%d:%d%n", &fd, &tcp, &used) != 2) break;
    if (fd >= 0 && tcp >= 0 && fd != tcp) items.emplace_back(fd, tcp);
    p += used;
    if (*p == ',') ++p;
  }
  ::unsetenv(kVariable);
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < items.size(); ++i) {
    int tcp = items[i].second;
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen = seen || items[j].second == tcp;
    if (seen) continue;
    if (!is_tcp(tcp)) {
      SMCR_LOG(1, "exec: %s names fd %d, not a TCP socket: ignored", kVariable, tcp);
      continue;
    }
    // Out of the application's range and close-on-exec: only a later exec
    // that passes it on (environment_for_exec) lets it through again.
    int hidden = sys::dup_hidden(tcp);
    sys::close(tcp);
    if (hidden < 0) continue;
    bool used = false;
    for (auto [fd, t] : items)
      if (t == tcp && is_stream_unix(fd) && add_locked(fd, hidden)) {
        used = true;
        SMCR_LOG(1, "exec: fd %d is a handed-over SMC-R connection; its TCP socket answers for it", fd);
      }
    if (!used) sys::close(hidden);
  }
}

void adopt_pair(int fd, int tcp) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!add_locked(fd, tcp)) release_tcp_locked(tcp);
}

int tcp_fd(int fd) {
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_acquire) == fd) return p.tcp.load(std::memory_order_relaxed);
  return -1;
}

void forget(int fd) {
  if (fd_table().kind(fd) != kFdExecInherited) return;
  std::lock_guard<std::mutex> lock(g_mu);
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) == fd) {
      int tcp = p.tcp.load(std::memory_order_relaxed);
      p.fd.store(-1, std::memory_order_release);
      release_tcp_locked(tcp);
    }
  fd_table().set_kind(fd, kFdUnknown);
}

void duplicated(int from, int to) {
  if (from == to || fd_table().kind(from) != kFdExecInherited) return;
  forget(to);
  std::lock_guard<std::mutex> lock(g_mu);
  int tcp = -1;
  for (Pair& p : g_pairs)
    if (p.fd.load(std::memory_order_relaxed) == from) tcp = p.tcp.load(std::memory_order_relaxed);
  if (tcp >= 0) add_locked(to, tcp);
}

void surviving(std::vector<std::pair<int, int>>* pairs) {
  for (Pair& p : g_pairs) {
    int fd = p.fd.load(std::memory_order_acquire);
    if (fd < 0) continue;
    int flags = sys::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) pairs->emplace_back(fd, p.tcp.load(std::memory_order_relaxed));
  }
}

char* const* environment_for_exec(char* const envp[], const std::vector<std::pair<int, int>>& pairs,
                                  ExecEnvironment* storage) {
  if (!pairs.empty()) {
    storage->variable = std::string(kVariable) + "=";
    std::vector<std::pair<int, int>> passed;  // TCP socket -> its inheritable duplicate
    bool named_any = false;
    for (auto [fd, tcp] : pairs) {
      int dup = -1;
      for (auto [from, to] : passed)
        if (from == tcp) dup = to;
      if (dup < 0) {
        int base = sys::hidden_fd_base();
        dup = sys::fcntl(tcp, F_DUPFD, base > 0 ? base : 3);  // without FD_CLOEXEC
        if (dup < 0) continue;
        passed.emplace_back(tcp, dup);
        storage->inheritable.push_back(dup);
      }
      if (storage->variable.back() != '=') storage->variable += ',';
      storage->variable += std::to_string(fd) + ":" + std::to_string(dup);
      named_any = true;
    }
    if (!named_any) storage->variable.clear();
  }
  if (storage->variable.empty() && storage->carry_variable.empty()) return envp;
  auto named = [](const char* e, const char* name) {
    size_t len = std::strlen(name);
    return std::strncmp(e, name, len) == 0 && e[len] == '=';
  };
  for (char* const* e = envp; e && *e; ++e)
    if (!named(*e, kVariable) && !named(*e, smcr::exec_carry::kVariable)) storage->envp.push_back(*e);
  if (!storage->variable.empty()) storage->envp.push_back(storage->variable.data());
  if (!storage->carry_variable.empty()) storage->envp.push_back(storage->carry_variable.data());
  storage->envp.push_back(nullptr);
  return storage->envp.data();
}

void exec_failed(ExecEnvironment* storage) {
  int saved = errno;  // the failed exec's
  for (int fd : storage->inheritable) sys::close(fd);
  errno = saved;
  storage->inheritable.clear();
}

}  // namespace smcr::preload::exec_inherit
