// The shim's process calls: exec*, fork, posix_spawn/posix_spawnp, system,
// popen, and _exit/_Exit.
//
// exec. A connection handed over from the parent (core/handoff.h) is a
// plain stream socket the new program can use as it is (inetd-style servers
// dup it onto 0 and 1 and exec). One the parent still holds would carry its
// readiness bytes, never data, so before an exec the descriptors that survive
// it wait for the handover; if it does not come they are replaced by a
// socket that reads end-of-file, rather than handing the new program bytes
// that are not the peer's.

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/connection.h"
#include "core/handoff.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/dup3_retry.h"
#include "preload/epoll.h"
#include "preload/exec_carry.h"
#include "preload/exec_inherit.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/takeover.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

// C++ helpers of the exec family (C++ linkage, not exported).
// Returns the environment to exec with: `envp`, or a copy naming the TCP
// sockets of handed-over connections that survive the exec
// (preload/exec_inherit.h), which `env` keeps.
// The program: `file` (found on PATH when `search_path`), or `fd`.
char* const* prepare_exec(const char* file, bool search_path, int fd_of_program, char* const envp[],
                          smcr::preload::exec_inherit::ExecEnvironment* env) {
  smcr::preload::epoll_before_exec();
  smcr::preload::settle_all_accepting();
  std::vector<std::pair<int, int>> handed_over;
  smcr::preload::exec_inherit::surviving(&handed_over);
  // A vfork() child shares its parent's memory: it carries nothing. Nor
  // does a program that will not load the shim (it would hold descriptors
  // it cannot use): a relay serves it.
  bool vfork_child = in_vfork_child();
  bool may_carry = smcr::preload::exec_carry::enabled() && !vfork_child;
  // What a vfork child keeps, its parent relays (it cannot: its threads end
  // with the exec).
  if (vfork_child) {
    bool any = false;
    fd_table().for_each_conn([&](int) { any = true; });
    using smcr::preload::exec_carry::NewProgram;
    NewProgram program =
        any ? smcr::preload::exec_carry::new_program(file, search_path, fd_of_program, envp) : NewProgram::kMissing;
    // An exec that will fail (CPython tries each directory of PATH) changes nothing.
    if (program != NewProgram::kMissing)
      smcr::preload::exec_inherit::relay_for_vfork_exec(
          &handed_over, program == NewProgram::kWithShim && smcr::preload::exec_carry::enabled(), &env->take_variable);
  }
  using smcr::preload::exec_carry::NewProgram;
  std::optional<NewProgram> program;  // asked once there is a connection
  std::vector<std::pair<int, Connection*>> carry;  // referenced
  // Connections the new program takes on first use, and those it inherits
  // still pending from our own exec: (owner, inode of the socket).
  std::vector<std::pair<pid_t, uint64_t>> pending;
  smcr::preload::exec_inherit::surviving_pending(&pending);
  fd_table().for_each_conn([&](int fd) {
    Connection* c = fd_table().get(fd);
    if (!c) return;
    if (!program) program = smcr::preload::exec_carry::new_program(file, search_path, fd_of_program, envp);
    int fdflags = smcr::sys::fcntl(fd, F_GETFD);
    // An exec that will fail (execvp trying each directory) changes nothing.
    if (*program == NewProgram::kMissing || fdflags < 0 || (fdflags & FD_CLOEXEC)) {
      c->unref();
      return;
    }
    bool carriable = may_carry && c->exec_carriable() && *program == NewProgram::kWithShim;
    // Our parent still holds it: as a rule it waits for this exec before it
    // closes its copy (git's run-command, CPython's fork path), or goes on
    // using it while the new program never will (a descriptor leaked into
    // a helper). The program asks for it on its first use, when it has one:
    // no wait here either way.
    if (std::pair<pid_t, uint64_t> held; may_carry && *program == NewProgram::kWithShim &&
                                          smcr::preload::exec_inherit::held_by_parent(c, fd, &held)) {
      pending.push_back(held);
      c->unref();
      return;
    }
    if (c->foreign()) {
      // Carried: ours first (re-homed to this process), then into the new
      // program. Otherwise the owner relays it to the new program.
      if (!carriable) c->claim_for_exec();
      if (c->handed_over(true)) {
        if (c->tcp_fd() >= 0) handed_over.emplace_back(fd, c->tcp_fd());
        c->unref();
        return;
      }
      if (c->foreign()) {
        SMCR_LOG(1, "fd %d: exec while the parent still holds its SMC-R connection: the new program gets end-of-file",
                 fd);
        int sv[2];
        bool replaced = false;
        int err = 0;
        if (smcr::sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
          replaced = smcr::preload::dup3_retrying(sv[0], fd, 0) >= 0;
          err = errno;
          smcr::sys::close(sv[0]);
          smcr::sys::close(sv[1]);
        } else {
          err = errno;
        }
        if (!replaced) {
          // The number still holds the readiness socket, whose bytes the new
          // program would read as the peer's: it does not survive the exec.
          SMCR_LOG(0, "fd %d: no end-of-file socket for it (%s): closed across the exec", fd, strerror(err));
          smcr::sys::fcntl(fd, F_SETFD, fdflags | FD_CLOEXEC);
        }
        c->unref();
        return;
      }
    }
    if (carriable && c->exec_carriable()) {  // asked again: a claim above moved it here
      carry.emplace_back(fd, c);
      return;
    }
    c->unref();
  });
  if (!carry.empty()) smcr::preload::exec_carry::prepare(carry, env);
  env->pending_variable = smcr::preload::exec_inherit::pending_variable_for(std::move(pending));
  return smcr::preload::exec_inherit::environment_for_exec(envp, handed_over, env);
}

// The exec failed: what prepare_exec set up is undone.
void undo_prepare_exec(smcr::preload::exec_inherit::ExecEnvironment* env) {
  smcr::preload::exec_carry::exec_failed(env);
  smcr::preload::exec_inherit::exec_failed(env);
}

std::vector<char*> collect_args(const char* arg0, va_list ap, char*** envp) {
  std::vector<char*> args{const_cast<char*>(arg0)};
  while (args.back()) args.push_back(va_arg(ap, char*));
  if (envp) *envp = va_arg(ap, char**);
  return args;
}

// posix_spawn's file actions that duplicate an SMC-R connection's number
// into the new program (posix_spawn_file_actions_adddup2: Rust's Command,
// CPython's subprocess and os.posix_spawn with a socket as stdin/stdout):
// the program inherits the connection even from a close-on-exec number.
// Few, and only while an actions object lives.
struct SpawnDup {
  const posix_spawn_file_actions_t* actions;
  int fd;
};
std::mutex g_spawn_dups_mu;
std::vector<SpawnDup>& spawn_dups() {
  static auto* v = new std::vector<SpawnDup>;
  return *v;
}
void forget_spawn_dups(const posix_spawn_file_actions_t* actions) {
  std::lock_guard<std::mutex> lock(g_spawn_dups_mu);
  std::erase_if(spawn_dups(), [actions](const SpawnDup& d) { return d.actions == actions; });
}
std::vector<int> spawn_dup_sources(const posix_spawn_file_actions_t* actions) {
  std::vector<int> fds;
  if (!actions) return fds;
  std::lock_guard<std::mutex> lock(g_spawn_dups_mu);
  for (const SpawnDup& d : spawn_dups())
    if (d.actions == actions) fds.push_back(d.fd);
  return fds;
}

// A program spawned without a fork the shim sees (posix_spawn, system(),
// popen(): glibc clones and execs on its own) inherits this process's
// descriptors as they are. The connections it would inherit are relayed
// first (preload/exec_inherit.h, relay_for_spawn), and its environment names
// their TCP sockets, as an exec's would; `spawn(envp)` starts it. With
// `swap_environ` (system, popen: they take `environ`) the process' environment
// is the new one while it starts, only when there is something to name.
// `dup_sources`: numbers the spawn's file actions duplicate into the program.
template <typename Spawn>
auto spawn_inheriting(const char* file, bool search_path, char* const envp[], bool swap_environ, Spawn spawn,
                      const std::vector<int>& dup_sources = {}) {
  smcr::preload::exec_carry::before_fork();
  smcr::preload::epoll_before_exec();
  smcr::preload::settle_all_accepting();
  bool any = false;
  fd_table().for_each_conn([&](int) { any = true; });
  smcr::preload::exec_inherit::ExecEnvironment env;
  // Numbers still pending from our own exec go along.
  std::vector<std::pair<pid_t, uint64_t>> pending;
  smcr::preload::exec_inherit::surviving_pending(&pending, dup_sources);
  if (any) {
    using smcr::preload::exec_carry::NewProgram;
    NewProgram program = smcr::preload::exec_carry::new_program(file, search_path, -1, envp);
    // A spawn that will fail changes nothing.
    if (program != NewProgram::kMissing)
      smcr::preload::exec_inherit::relay_for_spawn(
          program == NewProgram::kWithShim && smcr::preload::exec_carry::enabled(), &env.take_variable, &pending,
          dup_sources);
  }
  env.pending_variable = smcr::preload::exec_inherit::pending_variable_for(std::move(pending));
  std::vector<std::pair<int, int>> pairs;  // these and earlier ones, as an exec names them
  smcr::preload::exec_inherit::surviving(&pairs);
  char* const* spawn_envp = smcr::preload::exec_inherit::environment_for_exec(envp, pairs, &env);
  char** saved = environ;
  bool swapped = swap_environ && spawn_envp != envp;
  if (swapped) environ = const_cast<char**>(spawn_envp);
  auto rc = spawn(spawn_envp);
  int saved_errno = errno;
  if (swapped && environ == spawn_envp) environ = saved;
  smcr::preload::exec_inherit::exec_failed(&env);  // our inheritable copies; the child has its own
  errno = saved_errno;
  return rc;
}

}  // namespace

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

int execve(const char* path, char* const argv[], char* const envp[]) {
  REAL(execve);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(path, false, -1, envp, &env);
  int rc = real_execve(path, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  REAL(execvpe);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(file, true, -1, envp, &env);
  int rc = real_execvpe(file, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  REAL(fexecve);
  smcr::preload::exec_inherit::ExecEnvironment env;
  char* const* exec_envp = prepare_exec(nullptr, false, fd, envp, &env);
  int rc = real_fexecve(fd, argv, exec_envp);
  undo_prepare_exec(&env);
  return rc;
}

// A connection carried across exec into this program is relayed once the
// program forks (preload/exec_carry.h, before_fork): its children may use
// it where the shim cannot run.
pid_t fork() {
  REAL(fork);
  smcr::preload::exec_carry::before_fork();
  return real_fork();
}

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  REAL(posix_spawn);
  return spawn_inheriting(
      path, false, envp, false, [&](char* const* e) { return real_posix_spawn(pid, path, actions, attr, argv, e); },
      spawn_dup_sources(actions));
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  REAL(posix_spawnp);
  return spawn_inheriting(
      file, true, envp, false, [&](char* const* e) { return real_posix_spawnp(pid, file, actions, attr, argv, e); },
      spawn_dup_sources(actions));
}

int posix_spawn_file_actions_init(posix_spawn_file_actions_t* actions) {
  REAL(posix_spawn_file_actions_init);
  forget_spawn_dups(actions);  // the memory of an earlier object, maybe
  return real_posix_spawn_file_actions_init(actions);
}

int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t* actions) {
  REAL(posix_spawn_file_actions_destroy);
  forget_spawn_dups(actions);
  return real_posix_spawn_file_actions_destroy(actions);
}

int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t* actions, int fd, int newfd) {
  REAL(posix_spawn_file_actions_adddup2);
  int rc = real_posix_spawn_file_actions_adddup2(actions, fd, newfd);
  uint8_t kind = fd_table().kind(fd);
  if (rc == 0 && fd != newfd &&
      (fd_table().has_conn(fd) || kind == smcr::preload::kFdAccepting || kind == smcr::preload::kFdTakePending)) {
    std::lock_guard<std::mutex> lock(g_spawn_dups_mu);
    spawn_dups().push_back({actions, fd});
  }
  return rc;
}

int system(const char* command) {
  REAL(system);
  if (!command) return real_system(command);  // "is there a shell?"
  return spawn_inheriting("/bin/sh", false, environ, true, [&](char* const*) { return real_system(command); });
}

FILE* popen(const char* command, const char* type) {
  REAL(popen);
  return spawn_inheriting("/bin/sh", false, environ, true, [&](char* const*) { return real_popen(command, type); });
}

// glibc's execv/execvp/execl* reach execve through internal aliases, past
// this shim: each is routed here instead.
int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }
int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }

int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = collect_args(arg, ap, nullptr);
  va_end(ap);
  return execve(path, args.data(), environ);
}

int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = collect_args(arg, ap, nullptr);
  va_end(ap);
  return execvpe(file, args.data(), environ);
}

int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char** envp = nullptr;
  std::vector<char*> args = collect_args(arg, ap, &envp);
  va_end(ap);
  return execve(path, args.data(), envp);
}

// _exit runs no library destructor, so the counters would be as the
// engine last wrote them (at most 250 ms old): an accept-then-fork server's
// child (Python's ForkingMixIn) ends this way moments after taking its
// connection over. Its connections need nothing more: a close already sent
// its CDC, and the kernel closes the rest as TCP's; but one passed to another
// process that has yet to claim it (a forked child that sends its connection
// to its parent over SCM_RIGHTS, then calls os._exit) is waited for, and one
// a forked child holds unclaimed (a parent that accepts, forks and calls
// os._exit) is re-homed to it first, as exit() does.
void _exit(int status) {
  if (g_own_pid.load(std::memory_order_relaxed) == static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid))) {
    smcr::handoff::await_passed_offers_at_exit();
    smcr::write_stats_file_from_exit();
  }
  smcr::sys::raw_syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

void _Exit(int status) { _exit(status); }

#pragma GCC visibility pop
}  // extern "C"
