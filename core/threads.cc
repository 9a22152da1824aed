#include "core/threads.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>

namespace smcr::threads {
namespace {

// The fork gate (threads.h), used only where kForkSafeStartsOnly: threads
// between their pthread_create and their first instruction of our code, and
// whether a fork waits for them to be none (new starts wait meanwhile).
// pthread primitives, not std::: the child re-initialises them.
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
int g_starting = 0;
bool g_forking = false;

void begin_start() {
  pthread_mutex_lock(&g_mu);
  while (g_forking) pthread_cond_wait(&g_cv, &g_mu);
  ++g_starting;
  pthread_mutex_unlock(&g_mu);
}

void end_start() {
  pthread_mutex_lock(&g_mu);
  if (--g_starting == 0) pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

struct Start {
  void* (*fn)(void*);
  void* arg;
  const char* name;
};

void* run_started(void* p) {
  Start s = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  if constexpr (kForkSafeStartsOnly) end_start();
  pthread_setname_np(pthread_self(), s.name);
  return s.fn(s.arg);
}

}  // namespace

void install_fork_gate() {
  if constexpr (!kForkSafeStartsOnly) return;
  // The lock is held across fork (taken in prepare, kept): no child inherits
  // it taken by another thread.
  static const int installed = pthread_atfork(
      [] {
        pthread_mutex_lock(&g_mu);
        g_forking = true;
        while (g_starting > 0) pthread_cond_wait(&g_cv, &g_mu);
      },
      [] {
        g_forking = false;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
      },
      [] {
        // One thread here, and none of the parent's waits: start afresh.
        g_mu = PTHREAD_MUTEX_INITIALIZER;
        g_cv = PTHREAD_COND_INITIALIZER;
        g_starting = 0;
        g_forking = false;
      });
  (void)installed;
}

bool start_detached(void* (*fn)(void*), void* arg, const char* name, size_t stack_bytes) {
  install_fork_gate();  // where no constructor ran first (the core's unit tests)
  auto* start = new Start{fn, arg, name};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack_bytes) pthread_attr_setstacksize(&attr, stack_bytes);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if constexpr (kForkSafeStartsOnly) begin_start();
  pthread_t t;
  int rc = pthread_create(&t, &attr, run_started, start);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) return true;
  if constexpr (kForkSafeStartsOnly) end_start();
  delete start;
  errno = rc;  // pthread_create's error, for the caller's message
  return false;
}

}  // namespace smcr::threads
