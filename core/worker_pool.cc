#include "core/worker_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <cstring>

#include "core/threads.h"

namespace smcr::workers {
namespace {

// How long an idle thread waits for the next job before it ends; where
// the shim's threads must not end (threads.h), it waits for ever.
constexpr auto kIdleLife = std::chrono::seconds(3);

struct Job {
  std::function<void()> fn;
  const char* name;
};

struct Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> jobs;
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
  const char* named = kDefaultName;  // set by threads::start_detached
  std::unique_lock<std::mutex> lock(p->mu);
  for (;;) {
    if (p->jobs.empty()) {
      ++p->idle;
      bool woken = true;
      if constexpr (threads::kForkSafeStartsOnly) p->cv.wait(lock, [p] { return !p->jobs.empty(); });
      else woken = p->cv.wait_for(lock, kIdleLife, [p] { return !p->jobs.empty(); });
      --p->idle;
      if (!woken) break;
    }
    std::shared_ptr<Job> job = std::move(p->jobs.front());
    p->jobs.pop_front();
    lock.unlock();
    if (std::strcmp(named, job->name) != 0) {  // one system call, only when it changes
      pthread_setname_np(pthread_self(), job->name);
      named = job->name;
    }
    job->fn();
    job.reset();  // its captures go now, not when the next job comes
    lock.lock();
  }
  p->threads.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

bool run(std::function<void()> fn, const char* name) {
  Pool* p = pool();
  auto job = std::make_shared<Job>(Job{std::move(fn), name});
  {
    std::lock_guard<std::mutex> lock(p->mu);
    p->jobs.push_back(job);
    // Idle threads outnumbering the queued jobs: one of them takes it.
    if (p->idle >= static_cast<int>(p->jobs.size())) {
      p->cv.notify_one();
      return true;
    }
  }
  p->threads.fetch_add(1, std::memory_order_relaxed);
  bool started = threads::start_detached(
      [](void* pool) -> void* {
        work(static_cast<Pool*>(pool));
        return nullptr;
      },
      p, kDefaultName);
  if (started) return true;
  p->threads.fetch_sub(1, std::memory_order_relaxed);
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
