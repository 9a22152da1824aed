// The pool behind threaded handshakes, handovers and relays
// (core/worker_pool.h): threads are reused, grow with concurrent jobs, are
// named after their job, end when idle (not in an ASan build), take no
// signals, a forked child starts with none of its parent's, and a fork
// while the parent's pool is starting threads leaves a child that can start
// its own (core/threads.h).
#include "core/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/threads.h"

namespace smcr {
namespace {

pthread_t run_and_wait() {
  std::promise<pthread_t> ran;
  auto got = ran.get_future();
  EXPECT_TRUE(workers::run([&ran] { ran.set_value(pthread_self()); }));
  return got.get();
}

TEST(WorkerPool, SequentialJobsReuseOneThread) {
  std::set<pthread_t> seen;
  for (int i = 0; i < 20; ++i) {
    seen.insert(run_and_wait());
    // Let the thread go back to waiting before the next job comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_GE(workers::threads(), 1);
}

TEST(WorkerPool, ConcurrentJobsGetThreadsOfTheirOwn) {
  constexpr int kJobs = 6;
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  std::set<pthread_t> threads;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(workers::run([&] {
      std::unique_lock<std::mutex> lock(mu);
      threads.insert(pthread_self());
      ++started;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      --started;
      cv.notify_all();
    }));
  }
  std::unique_lock<std::mutex> lock(mu);
  // Every job blocks until all have started: only possible with a thread each.
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started == kJobs; }));
  EXPECT_EQ(threads.size(), static_cast<size_t>(kJobs));
  release = true;
  cv.notify_all();
  // The jobs use this frame's mutex: they must be done before it goes.
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started == 0; }));
}

TEST(WorkerPool, ThreadsTakeNoSignals) {
  std::promise<bool> blocked;
  auto got = blocked.get_future();
  ASSERT_TRUE(workers::run([&blocked] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    blocked.set_value(sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1 &&
                      sigismember(&mask, SIGUSR1) == 1);
  }));
  EXPECT_TRUE(got.get());
}

TEST(WorkerPool, AForkedChildStartsEmptyAndRunsJobs) {
  run_and_wait();  // the parent has a thread
  ASSERT_GE(workers::threads(), 1);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (workers::threads() != 0) _exit(2);
    std::promise<void> ran;
    auto got = ran.get_future();
    if (!workers::run([&ran] { ran.set_value(); })) _exit(3);
    if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready) _exit(4);
    _exit(workers::threads() == 1 ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: child inherited threads, 3: no thread, 4: job never ran, 5: thread count";
}

TEST(WorkerPool, IdleThreadsEnd) {
  run_and_wait();
  ASSERT_GE(workers::threads(), 1);
  if constexpr (threads::kForkSafeStartsOnly) {
    // ASan build: they never end (a thread's end is not fork-safe there).
    int before = workers::threads();
    std::this_thread::sleep_for(std::chrono::seconds(4));
    EXPECT_EQ(workers::threads(), before);
    return;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (workers::threads() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(workers::threads(), 0);
}

TEST(WorkerPool, ThreadsAreNamedAfterTheirJob) {
  auto name_of_job = [](const char* name) {
    std::promise<std::string> got;
    auto f = got.get_future();
    EXPECT_TRUE(workers::run(
        [&got] {
          char buf[16] = {};
          prctl(PR_GET_NAME, buf);
          got.set_value(buf);
        },
        name));
    return f.get();
  };
  EXPECT_EQ(name_of_job("smcr-handover"), "smcr-handover");
  EXPECT_EQ(name_of_job(workers::kDefaultName), "smcr-clc");
}

// An accept-then-fork server forks while the shim's threads of earlier
// connections start; each child starts a thread of its own to take its
// connection over. Under GCC 12's ASan a child forked while a parent thread
// was starting inherited the runtime's thread registry lock taken and hung
// in its first pthread_create (integration.fork, ~1 run in 50): the fork
// gate of core/threads.h. (Thread ends are covered by the pool's threads
// never ending in that build: IdleThreadsEnd.)
TEST(WorkerPool, ChildrenForkedWhileThreadsStartCanStartTheirOwn) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    int running = 0;
  } shared;
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  // Starts threads without pause, each blocked until the end of the test.
  std::thread starter([&] {
    while (!stop.load() && started.load() < 2000) {
      bool ok = threads::start_detached(
          [](void* p) -> void* {
            auto* sh = static_cast<Shared*>(p);
            std::unique_lock<std::mutex> lock(sh->mu);
            ++sh->running;
            sh->cv.wait(lock, [sh] { return sh->release; });
            --sh->running;
            sh->cv.notify_all();
            return nullptr;
          },
          &shared, "smcr-test", 64 * 1024);
      if (!ok) break;
      started.fetch_add(1);
    }
  });
  // The starter is the test's own std::thread, outside the gate: a child
  // forked while it begins inherits libasan's allocator lock its start
  // takes (pthread_getattr_np's calloc) and hangs on it (child 0, nearly
  // every run). Only the shim's own starts are under test. (The starter's
  // first start also installs the fork gate: the forks come after it.)
  while (started.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  int hung = 0, failed = 0;
  for (int i = 0; i < 150 && !::testing::Test::HasFailure(); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 + (i * 137) % 800));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);
      std::promise<void> ran;
      auto got = ran.get_future();
      if (!workers::run([&ran] { ran.set_value(); })) _exit(3);
      _exit(got.wait_for(std::chrono::seconds(10)) == std::future_status::ready ? 0 : 4);
    }
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    pid_t r = 0;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (r == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++hung;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      ADD_FAILURE() << "child " << i << ": "
                    << (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status)));
    }
  }
  stop.store(true);
  starter.join();
  {
    // The threads use this frame's state: they must be done before it goes.
    std::unique_lock<std::mutex> lock(shared.mu);
    shared.release = true;
    shared.cv.notify_all();
    shared.cv.wait_for(lock, std::chrono::seconds(30), [&] { return shared.running == 0; });
  }
  // Those that had not yet counted themselves running: let them pass too.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(started.load(), 0);
  EXPECT_EQ(hung, 0) << "children that hung starting a thread";
  EXPECT_EQ(failed, 0) << "children that ended otherwise than with their job done";
}

}  // namespace
}  // namespace smcr
