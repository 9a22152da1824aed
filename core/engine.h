// The per-process engine thread: it waits (epoll, no polling when idle) on
// every link's notification fd and the shared-memory rendezvous socket,
// dispatches CDC/LLC messages, runs close timers, and tears down link groups.
// Application threads never wait for it: they copy data themselves and block
// on their own fd (see connection.h).
#pragma once

#include <atomic>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <functional>
#include <string_view>

#include "core/connection_services.h"

namespace smcr {

class LinkGroup;
class Connection;

class Engine final : public ConnectionServices {
 public:
  // Starts the thread on first use (again in a forked child). Usable without
  // one (its watches wait for it), but see thread_running.
  static Engine& get();
  // Whether this process's engine thread runs: false when the system would
  // not give one (then no new connection may become SMC-R: nothing would
  // serve its link).
  bool thread_running() const;
  void add_group(LinkGroup* g) override;
  // Called when the group's last connection is gone: the engine stops
  // watching it and frees it on its own thread.
  void retire_group(LinkGroup* g);
  void arm_timer(Connection* c) override;
  // Watches the connection's idle TCP socket for the peer's FIN/RST (its
  // process died or its kernel reset the connection); unwatch_tcp before the
  // socket is closed.
  void watch_tcp(Connection* c, int tcp_fd) override;
  void unwatch_tcp(Connection* c) override;
  // Calls `step(false)` on the engine thread whenever `fd` is readable or
  // hung up, and `step(true)` once `deadline_ms` (sys::now_ms) has passed. `step` returns true when it is
  // done with `fd` (an expired step must); the watch then ends. `fd` must
  // stay open until then.
  // Returns a handle for end_watch.
  void* watch_readable(int fd, int64_t deadline_ms, std::function<bool(bool expired)> step);
  // The same for `fd` writable (EPOLLOUT), or hung up or in error.
  void* watch_writable(int fd, int64_t deadline_ms, std::function<bool(bool expired)> step);
  // Ends a watch_readable watch that has not ended yet (no further step;
  // `step` is destroyed on the engine thread, after any step in progress).
  void end_watch(void* handle);
  // An application thread polling a link left messages (or a failure) for
  // the engine (LinkGroup::app_poll): the engine drains every link soon.
  static void kick_links();
  // Makes sure the shared-memory rendezvous listener is being served.
  bool serve_shm_rendezvous();
  // exec (core/exec_carry.h): the engine thread stops between two batches,
  // so that nothing of a connection the exec carries along is read here any
  // more. False if it did not stop within timeout_ms (then not paused).
  // Without a thread in this process there is nothing to stop.
  static bool pause_for_exec(int timeout_ms);
  // The exec failed: the thread goes on.
  static void resume_after_exec();
  // Runs `task` on this process's engine thread and waits up to timeout_ms
  // for it to end (false: no thread, or not in time; the task still runs).
  // For a vfork() child, which shares this process's memory but cannot
  // start a thread that outlives its exec.
  static bool run_on_engine_thread(std::function<void()> task, int timeout_ms);
  // Answers "tcp <inode>" on the diagnostics socket (smcr-diag-<pid>): a
  // process that received a stream this one relays asks for its TCP socket.
  // `lookup` returns a descriptor the engine sends and closes, or -1.
  static void set_tcp_lookup(int (*lookup)(uint64_t inode));
  // Answers "take <inode>" and "relay <inode>" from a program spawned from
  // here (core/exec_carry.h) on `fd`, on the engine thread: it must not
  // wait. `fd` is closed after it returns (it keeps a duplicate to answer
  // later).
  static void set_take_handler(void (*handler)(uint64_t inode, int fd, bool relay));
  // The abstract address of process `pid`'s diagnostics socket
  // (smcr-diag-<pid>), its length in *len.
  static sockaddr_un diagnostics_address(pid_t pid, socklen_t* len);
  // Sends `request` (one line: "take <inode>", "relay <inode>", "tcp
  // <inode>") to process `pid`'s diagnostics socket, with `proof_fd`
  // attached when >= 0 (the socket asked about: a process of another user
  // is answered only for a socket it holds). The connected socket to read
  // the answer from (SO_RCVTIMEO/SO_SNDTIMEO `timeout_ms`), or -1 (errno;
  // *failed_step, if given, names the step: "connect" or "send").
  static int ask_process(pid_t pid, std::string_view request, int proof_fd, int timeout_ms,
                         const char** failed_step = nullptr);

 private:
  Engine() = default;
  // This process's engine if its thread runs, else null.
  static Engine* get_if_started();
  void make_impl();
  bool start_thread();
  void loop();
  void* watch(int fd, uint32_t events, int64_t deadline_ms, std::function<bool(bool expired)> step);
  struct Impl;
  Impl* impl_ = nullptr;
  // process_generation() of the process whose thread runs (0: none): get() needs
  // neither a lock nor getpid() (a system call) once it is started.
  std::atomic<uint64_t> started_generation_{0};
  uint64_t impl_generation_ = 0;       // whose impl_ this is (under get()'s lock)
  uint64_t thread_failure_said_ = 0;   // the generation whose missing thread was logged

};

}  // namespace smcr
