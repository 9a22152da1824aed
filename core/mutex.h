// Mutexes the compiler checks. Members marked SMCR_GUARDED_BY(mu) and
// functions marked SMCR_REQUIRES(mu) are proven by clang's -Wthread-safety
// analysis (scripts/check-thread-safety.sh, run in CI) to be used only with
// `mu` held, instead of trusting a "_locked" suffix.
//
// The annotations are abseil's (absl/base/thread_annotations.h, header only);
// the mutex is std::mutex underneath, not absl::Mutex: the shim is loaded
// into programs that do not carry abseil's shared libraries, and a forked
// child re-initialises some of the shim's mutexes in place
// (Connection::adopt_rehomed), which absl::Mutex does not promise to
// survive.
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#define SMCR_GUARDED_BY(x) ABSL_GUARDED_BY(x)
#define SMCR_REQUIRES(...) ABSL_EXCLUSIVE_LOCKS_REQUIRED(__VA_ARGS__)
#define SMCR_ACQUIRED_AFTER(...) ABSL_ACQUIRED_AFTER(__VA_ARGS__)
// For lock types of their own (Connection's): what a function takes or lets go.
#define SMCR_ACQUIRE(...) ABSL_EXCLUSIVE_LOCK_FUNCTION(__VA_ARGS__)
#define SMCR_RELEASE(...) ABSL_UNLOCK_FUNCTION(__VA_ARGS__)
#define SMCR_TRY_ACQUIRE(...) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(__VA_ARGS__)
#define SMCR_SCOPED_LOCKABLE ABSL_SCOPED_LOCKABLE
// A function whose locking the analysis cannot follow; each use says why.
#define SMCR_NO_THREAD_SAFETY_ANALYSIS ABSL_NO_THREAD_SAFETY_ANALYSIS

namespace smcr {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { m_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { m_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return m_.try_lock(); }

  // Condition-variable waits with this mutex held (held again on return).
  template <typename Predicate>
  void wait(std::condition_variable& cv, Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> l(m_, std::adopt_lock);
    cv.wait(l, done);
    l.release();
  }
  template <typename Predicate>
  bool wait_for(std::condition_variable& cv, std::chrono::milliseconds timeout, Predicate done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> l(m_, std::adopt_lock);
    bool ok = cv.wait_for(l, timeout, done);
    l.release();
    return ok;
  }

 private:
  std::mutex m_;
};

// std::lock_guard for Mutex, which the analysis understands.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& m) ABSL_EXCLUSIVE_LOCK_FUNCTION(m) : m_(m) { m_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { m_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& m_;
};

}  // namespace smcr
