// The LD_PRELOAD shim: libc's socket calls, interposed. A TCP socket that
// both ends opted in to SMC-R (the eBPF option in SYN and SYN-ACK) runs the
// CLC handshake inside connect()/accept() and then has its fd number taken
// over by the engine's readiness socket (see core/connection.h); every other
// fd goes straight to libc after one fd-table lookup.
//
// Engine I/O never calls these exported symbols (core/sys.h uses raw
// syscalls), so the shim cannot recurse into itself.
//
// This file holds what the interposer files share (declared in
// preload/interpose_internal.h, which lists the files by family of calls)
// and the library's load and unload.

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "bpf/option.h"
#include "core/connection.h"
#include "core/env.h"
#include "core/handoff.h"
#include "core/link_group.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/sys.h"
#include "core/threads.h"
#include "preload/exec_carry.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/takeover.h"

namespace smcr::preload {

FdTable& fd_table() {
  static FdTable* t = new FdTable();
  return *t;
}

}  // namespace smcr::preload

namespace smcr::preload::interpose {

RealFunctions g_real;

// This process's pid, kept across fork(): a vfork()/posix_spawn child runs
// in its parent's memory (counters included) until it execs or exits, and
// must not write them as its own (see _exit).
std::atomic<pid_t> g_own_pid{0};
void note_own_pid() {
  g_own_pid.store(static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid)), std::memory_order_relaxed);
  static const int atfork = pthread_atfork(nullptr, nullptr, [] {
    g_own_pid.store(static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid)), std::memory_order_relaxed);
  });
  (void)atfork;
}

// A vfork() child (CPython's subprocess, for one) runs in this process's
// memory, the fd table included, but has descriptors of its own: what it
// closes or duplicates changes only its numbers, so it must leave the table
// alone (a close through the table would end the parent's connection, a
// dup2 onto 0 would make the parent's stdin that connection). Asked only
// where the table has something for the numbers: a plain socket's close
// costs no system call.
std::atomic<bool> g_interposers_ready{false};

bool in_vfork_child() {
  return static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid)) != g_own_pid.load(std::memory_order_relaxed);
}
bool table_knows(int fd) {
  return fd_table().has_conn(fd) || fd_table().kind(fd) != smcr::preload::kFdUnknown;
}

__attribute__((constructor(101))) void resolve_all() {
  smcr::threads::install_fork_gate();  // first: see its comment
  smcr::snapshot_env();  // before the program can clear its environment
  smcr::preload::exec_inherit::adopt_from_environment();
  smcr::preload::exec_carry::adopt_from_environment();
  smcr::preload::exec_inherit::take_from_environment();
  smcr::preload::exec_inherit::pending_from_environment();
  // A policy that does not parse: refuse to run rather than guess (smc_run
  // checks this before starting the program).
  std::string policy_error;
  if (!smcr::policy::active(&policy_error) && !policy_error.empty()) {
    std::string msg = "smcr: policy: " + policy_error + "\n";
    smcr::sys::write(2, msg.data(), msg.size());
    _exit(2);
  }
#define SMCR_RESOLVE(name) real_function(g_real.name, #name);
  SMCR_INTERPOSED(SMCR_RESOLVE)
#undef SMCR_RESOLVE
  note_own_pid();
  // The two cached map descriptors sat at the application's lowest free
  // numbers: its next socket got 5 where TCP's got 4.
  smcr::bpfopt::set_fd_placer(smcr::sys::hide_fd, smcr::sys::forget_own_fd);
  smcr::stats_enabled();  // its one-time lookup done now, not in an _exit
  fd_table();              // allocated now, not inside a caller's syscall()
  g_interposers_ready.store(true, std::memory_order_release);
}

bool enabled() {
  static const bool on = [] {
    const char* v = smcr::env("SMCR_ENABLE");
    return !(v && strcmp(v, "0") == 0);
  }();
  return on;
}

// The fd whose client handshake this thread runs inside connect() (-1):
// a signal handler that reads it must not wait for its own thread.
thread_local constinit int t_inline_clc_fd = -1;

// Waits while another thread's connect() runs `fd`'s client CLC inline
// (kFdClcInline): read there, the TCP socket would hand the application
// the server's Accept, or a blocking read would sleep on a socket that the
// takeover then moves away from the number. The wait is the rest of a
// handshake whose server has answered (connect() waits inline only then),
// bounded by the CLC timeout.
void await_inline_clc(int fd) {
  if (fd == t_inline_clc_fd) return;
  while (fd_table().flags(fd) & smcr::preload::kFdClcInline) {
    timespec pause{0, 50000};
    nanosleep(&pause, nullptr);
  }
  // Pairs with the release fence before connect() clears the flag: what the
  // handshake installed (the connection, the kind) is visible now.
  std::atomic_thread_fence(std::memory_order_acquire);
}

__attribute__((destructor)) void at_exit() {
  // exit() flushes stdio buffers only after the library destructors (this
  // one) have run: streams on SMC-R connections are flushed first, while
  // their connections are still open.
  flush_socket_streams_at_exit();
  smcr::preload::flush_relays_at_exit(2000);
  // Close open SMC-R connections as the kernel closes TCP sockets at exit,
  // so peers see EOF after the last byte rather than a reset.
  fd_table().for_each_conn([](int fd) {
    // Not ConnRef: a forked child must not wait for handovers at exit
    // (process_exit leaves inherited connections alone).
    if (Connection* c = fd_table().get(fd)) {
      c->process_exit();
      c->unref();
    }
  });
  // Connections a forked child still holds outlive us there.
  smcr::handoff::finish_offers_at_exit(1000);
  smcr::LinkGroup::farewell_at_exit(1000);
  smcr::write_stats_file();
}

}  // namespace smcr::preload::interpose
