#include "core/worker_pool.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace smcr::workers {
namespace {

// How long an idle thread waits for the next job before it ends.
constexpr auto kIdleLife = std::chrono::seconds(3);

struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<std::function<void()>>> jobs;
  int idle = 0;
  std::atomic<int> threads{0};
};

// Replaced, never reset, in a forked child: the parent's threads may have
// held its lock or waited on its condition variable at the fork, and the
// child's copy of them is not safe to touch. (The old one is leaked: a
// few hundred bytes per fork.)
std::atomic<Pool*> g_pool{nullptr};

Pool* pool() {
  static const int atfork = pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool); });
  (void)atfork;
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return p;
  Pool* fresh = new Pool;
  if (g_pool.compare_exchange_strong(p, fresh)) return fresh;
  delete fresh;
  return p;
}

void work(Pool* p) {
  pthread_setname_np(pthread_self(), "smcr-clc");
  std::unique_lock<std::mutex> lock(p->mu);
  for (;;) {
    if (p->jobs.empty()) {
      ++p->idle;
      bool woken = p->cv.wait_for(lock, kIdleLife, [p] { return !p->jobs.empty(); });
      --p->idle;
      if (!woken) break;
    }
    std::shared_ptr<std::function<void()>> job = std::move(p->jobs.front());
    p->jobs.pop_front();
    lock.unlock();
    (*job)();
    job.reset();  // its captures go now, not when the next job comes
    lock.lock();
  }
  p->threads.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

bool run(std::function<void()> fn) {
  Pool* p = pool();
  auto job = std::make_shared<std::function<void()>>(std::move(fn));
  {
    std::lock_guard<std::mutex> lock(p->mu);
    p->jobs.push_back(job);
    // Idle threads outnumbering the queued jobs: one of them takes it.
    if (p->idle >= static_cast<int>(p->jobs.size())) {
      p->cv.notify_one();
      return true;
    }
  }
  // The thread inherits a mask with every signal blocked: none of the
  // application's lands on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  bool started = true;
  try {
    p->threads.fetch_add(1, std::memory_order_relaxed);
    std::thread(work, p).detach();
  } catch (const std::system_error&) {
    p->threads.fetch_sub(1, std::memory_order_relaxed);
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (started) return true;
  // No thread: take the job back unless a thread that became idle took it.
  std::lock_guard<std::mutex> lock(p->mu);
  for (auto it = p->jobs.begin(); it != p->jobs.end(); ++it) {
    if (*it == job) {
      p->jobs.erase(it);
      return false;
    }
  }
  return true;
}

int threads() { return pool()->threads.load(std::memory_order_relaxed); }

}  // namespace smcr::workers
