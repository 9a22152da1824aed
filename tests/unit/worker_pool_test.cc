// The pool behind threaded handshakes (core/worker_pool.h): threads are
// reused, grow with concurrent jobs, end when idle, take no signals, and a
// forked child starts with none of its parent's.
#include "core/worker_pool.h"

#include <gtest/gtest.h>
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
#include <thread>

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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (workers::threads() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(workers::threads(), 0);
}

}  // namespace
}  // namespace smcr
