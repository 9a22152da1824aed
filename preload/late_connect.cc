#include "preload/late_connect.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "bpf/option.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/handshake.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/fd_table.h"

namespace smcr::preload::late {
namespace {

// How long the engine watches a handshake that does not complete: TCP gives
// up after its SYN retries (about two minutes by default) anyway.
constexpr int64_t kWatchMs = 10 * 60 * 1000;

struct Pending {
  std::mutex mu;
  bool done = false;
  int fd = -1;        // the application's number
  int watch_fd = -1;  // the engine's duplicate of the socket
  void* watch = nullptr;
  uint64_t generation = process_generation();
};

std::mutex g_mu;
std::atomic<int> g_count{0};  // registry entries: close() looks only when there are any
std::unordered_map<int, std::shared_ptr<Pending>>& registry() {
  static auto* m = new std::unordered_map<int, std::shared_ptr<Pending>>();
  return *m;
}

std::shared_ptr<Pending> find(int fd) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = registry().find(fd);
  return it == registry().end() ? nullptr : it->second;
}

void unregister(const Pending* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = registry().find(p->fd);
  if (it != registry().end() && it->second.get() == p) {
    registry().erase(it);
    g_count.fetch_sub(1, std::memory_order_relaxed);
  }
}

// The TCP state of `sock` (TCP_INFO), or -1. Unlike SO_ERROR it consumes
// nothing the application will ask for.
int tcp_state(int sock) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (sys::getsockopt(sock, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return info.tcpi_state;
}

// Decides (p->mu held) once the handshake has ended: the Decline if both
// SYNs carried the option. `sock` is the application's number or the
// engine's duplicate. True once nothing more is owed.
bool decide_locked(Pending* p, int sock) {
  if (p->done) return true;
  int state = tcp_state(sock);
  if (state == TCP_SYN_SENT) return false;  // not yet
  if (state != TCP_CLOSE && bpfopt::read_result(sock) == bpfopt::Result::kSmcBoth &&
      !decline_instead_of_proposal(sock))
    SMCR_LOG(1, "fd %d: the Decline owed after a late TCP handshake could not be sent", p->fd);
  p->done = true;
  if (fd_table().kind(p->fd) == kFdLateConnect) fd_table().set_kind(p->fd, kFdTcp);
  return true;
}

// Ends the engine's watch (p->mu held); the engine no longer uses watch_fd.
void end_watch_locked(Pending* p) {
  if (p->watch) Engine::get().end_watch(p->watch);
  p->watch = nullptr;
  if (p->watch_fd >= 0) sys::close(p->watch_fd);
  p->watch_fd = -1;
}

}  // namespace

void start(int fd) {
  count_fallback(Fallback::kLateConnect);
  auto p = std::make_shared<Pending>();
  p->fd = fd;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto [it, fresh] = registry().insert_or_assign(fd, p);
    if (fresh) g_count.fetch_add(1, std::memory_order_relaxed);
  }
  fd_table().set_kind(fd, kFdLateConnect);
  std::lock_guard<std::mutex> lock(p->mu);
  p->watch_fd = sys::dup_hidden(fd);
  if (p->watch_fd < 0) return;  // no engine watch: the application's first call settles it
  std::weak_ptr<Pending> weak = p;
  p->watch = Engine::get().watch_writable(p->watch_fd, sys::now_ms() + kWatchMs, [weak](bool expired) {
    std::shared_ptr<Pending> q = weak.lock();
    if (!q) return true;
    std::lock_guard<std::mutex> step_lock(q->mu);
    if (q->done) return true;
    bool decided = decide_locked(q.get(), q->watch_fd);
    if (!decided && !expired) return false;
    q->done = true;
    // The engine ends this watch itself when the step returns true; the
    // duplicate is closed once it is no longer the engine's (forget()).
    q->watch = nullptr;
    return true;
  });
}

void settle(int fd) {
  std::shared_ptr<Pending> p = find(fd);
  if (!p) {
    if (fd_table().kind(fd) == kFdLateConnect) fd_table().set_kind(fd, kFdTcp);
    return;
  }
  if (p->generation != process_generation()) return;  // a forked child's copy: its parent's engine decides
  std::lock_guard<std::mutex> lock(p->mu);
  if (decide_locked(p.get(), fd)) {
    end_watch_locked(p.get());
    unregister(p.get());
  }
}

void forget(int fd) {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::shared_ptr<Pending> p = find(fd);
  if (!p) return;
  std::lock_guard<std::mutex> lock(p->mu);
  p->done = true;
  end_watch_locked(p.get());
  unregister(p.get());
}

}  // namespace smcr::preload::late
