#include "preload/exec_carry.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/env.h"
#include "core/exec_carry.h"
#include "core/engine.h"
#include "core/fabric_shm.h"
#include "core/handoff.h"
#include "core/link_group.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/fd_table.h"

namespace smcr::preload::exec_carry {

using smcr::exec_carry::Header;
using smcr::exec_carry::kMagic;
using smcr::exec_carry::kMaxAppFds;
using smcr::exec_carry::kVariable;
using smcr::exec_carry::Record;
using smcr::exec_carry::descriptors;

bool enabled() {
  static const bool on = env_long("SMCR_EXEC_CARRY", 1, 0, 1) != 0;
  return on;
}

namespace {

// Connections this program took over after its exec and still relays
// nothing for: before_fork has work only while there are some.
std::atomic<int> g_carried{0};

// How long the engine thread may take to reach its pause (it never blocks;
// a machine under load may not run it for a while).
constexpr int kPauseWaitMs = 5000;

bool socket_is(int fd, int family, int type) {
  int d = -1, t = -1;
  socklen_t len = sizeof d;
  if (sys::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &d, &len) != 0) return false;
  len = sizeof t;
  if (sys::getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &len) != 0) return false;
  return (d == family || (family == AF_INET && d == AF_INET6)) && t == type;
}

bool same_file(int a, int b) {
  struct stat sa, sb;
  return sys::fstat(a, &sa) == 0 && sys::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void close_all(Record* r) {
  for (int32_t* fd : descriptors(r)) sys::close_reset(fd);
}

// Takes one connection of the record over; false (everything of it closed:
// the application's numbers read end-of-file, the peer sees the link go)
// if it cannot be.
bool adopt_one(Record r) {
  const char* why = nullptr;
  if (!socket_is(r.link_fd, AF_UNIX, SOCK_SEQPACKET)) why = "the link is not a SEQPACKET socket";
  else if (!socket_is(r.tcp_fd, AF_INET, SOCK_STREAM)) why = "no TCP socket";
  else if (!socket_is(r.app_end, AF_UNIX, SOCK_STREAM) || !socket_is(r.engine_end, AF_UNIX, SOCK_STREAM))
    why = "no readiness socket";
  else if (r.n_app_fds == 0 || r.n_app_fds > kMaxAppFds) why = "no application descriptor";
  if (!why)
    for (uint32_t i = 0; i < r.n_app_fds; ++i)
      if (!same_file(r.app_fds[i], r.app_end)) why = "an application descriptor is something else now";
  // Ours from here: close-on-exec, out of the application's range.
  for (int32_t* fd : descriptors(&r)) {
    if (*fd < 0) continue;
    int hidden = sys::dup_hidden(*fd);
    sys::close(*fd);
    *fd = hidden;
    if (hidden < 0 && !why) why = "no descriptor left";
  }
  LocalRmb rmb;
  RemoteRmb peer;
  if (!why && !shm_map_own(r.memfd, r.rmb_size, &rmb)) why = "our RMB cannot be mapped";
  if (!why) {
    peer.rkey = r.peer_rkey;
    peer.vaddr = r.peer_vaddr;
    if (!shm_map_remote(r.peer_memfd, r.peer_size, &peer, &r.peer_memfd)) {
      r.peer_memfd = -1;  // closed by shm_map_remote
      why = "the peer's RMB cannot be mapped";
    }
  }
  if (why) {
    SMCR_LOG(0, "exec: a connection carried from the program before cannot be taken over (%s): it ends", why);
    if (rmb.addr) shm_free_rmb(&rmb);
    close_all(&r);
    return false;
  }
  rmb.rkey = r.rmb_rkey;
  rmb.vaddr = r.rmb_vaddr;
  auto link = std::make_unique<ShmLink>(r.link_fd);
  LinkGroup* group = LinkGroup::make_carried(static_cast<Role>(r.role), r.peer, std::move(link), r.link_num, r.local,
                                             r.remote);
  r.link_fd = -1;  // the group's
  Connection* c = Connection::exec_adopt(r, group, rmb, peer);
  if (!c) {
    SMCR_LOG(0, "exec: a carried connection's state does not match this shim: it ends");
    delete group;
    shm_free_rmb(&rmb);
    shm_unmap_remote(&peer);
    close_all(&r);
    return false;
  }
  g_carried.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < r.n_app_fds; ++i) {
    int fd = r.app_fds[i];
    fd_table().set_kind(fd, kFdTcp);
    fd_table().add_flags(fd, kFdSettledTcp);
    if (Connection* old = fd_table().set(fd, c)) old->unref();
  }
  return true;
}

// The environment variable `name` in envp, or null.
const char* env_value(char* const envp[], const char* name) {
  size_t len = std::strlen(name);
  for (char* const* e = envp; e && *e; ++e)
    if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') return *e + len + 1;
  return nullptr;
}

// The file execvp would run: `file` itself if it names a path.
std::string find_on_path(const char* file, char* const envp[]) {
  if (std::strchr(file, '/')) return file;
  const char* path = env_value(envp, "PATH");
  std::string dirs = path ? path : "/bin:/usr/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + file;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

// A dynamically linked ELF (it has an interpreter, ld.so, which preloads),
// or a script whose interpreter is one; not set-user-ID or set-group-ID
// unless we are root already (secure mode ignores the preload).
bool dynamic_program(const std::string& path, int depth) {
  int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  struct stat st;
  unsigned char head[4096];
  ssize_t n = sys::fstat(fd, &st) == 0 ? ::pread(fd, head, sizeof head, 0) : -1;
  bool ok = false;
  if (n >= 4 && (st.st_mode & (S_ISUID | S_ISGID)) && getuid() != 0) {
    ok = false;
  } else if (n > 2 && head[0] == '#' && head[1] == '!' && depth < 2) {
    std::string line(reinterpret_cast<char*>(head) + 2, static_cast<size_t>(n - 2));
    line = line.substr(0, line.find('\n'));
    size_t b = line.find_first_not_of(" \t");
    size_t e = b == std::string::npos ? b : line.find_first_of(" \t", b);
    if (b != std::string::npos) ok = dynamic_program(line.substr(b, e == std::string::npos ? e : e - b), depth + 1);
  } else if (n >= static_cast<ssize_t>(sizeof(Elf64_Ehdr)) && std::memcmp(head, ELFMAG, SELFMAG) == 0 &&
             head[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr eh;
    std::memcpy(&eh, head, sizeof eh);
    for (uint16_t i = 0; i < eh.e_phnum && i < 64; ++i) {
      Elf64_Phdr ph;
      if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + uint64_t{i} * eh.e_phentsize)) !=
          static_cast<ssize_t>(sizeof ph))
        break;
      if (ph.p_type == PT_INTERP) ok = true;
    }
  }
  sys::close(fd);
  return ok;
}

// The file this library was loaded from.
const char* own_path() {
  static const std::string path = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&own_path), &info) && info.dli_fname ? std::string(info.dli_fname)
                                                                              : std::string();
  }();
  return path.c_str();
}

}  // namespace

NewProgram new_program(const char* file, bool search_path, int fd, char* const envp[]) {
  std::string path;
  if (fd >= 0) path = "/proc/self/fd/" + std::to_string(fd);
  else if (file) path = search_path ? find_on_path(file, envp) : std::string(file);
  if (path.empty() || ::access(path.c_str(), X_OK) != 0) return NewProgram::kMissing;
  const char* preload = env_value(envp, "LD_PRELOAD");
  const char* self = own_path();
  if (!preload || !*self || !std::strstr(preload, self) || !dynamic_program(path, 0)) return NewProgram::kWithoutShim;
  return NewProgram::kWithShim;
}

void before_fork() {
  if (g_carried.load(std::memory_order_relaxed) == 0) return;
  auto conns = exec_inherit::connections_where([](int, Connection* c) { return c->carried() && !c->foreign(); });
  for (auto& [c, fds] : conns) {
    uint32_t token = c->local_token();
    if (!exec_inherit::relay_numbers(c, fds)) {
      SMCR_LOG(1, "conn %08x: a fork shares it, and it cannot be relayed: the children cannot use it", token);
      continue;
    }
    g_carried.fetch_sub(1, std::memory_order_relaxed);
    SMCR_LOG(1, "conn %08x: this carried connection is shared by a fork: relayed from here on", token);
  }
}

bool adopt_taken(const Record& r) { return adopt_one(r); }

void adopt_from_environment() {
  const char* v = ::getenv(kVariable);
  if (!v) return;
  int memfd = std::atoi(v);
  ::unsetenv(kVariable);
  struct stat st;
  if (memfd < 0 || sys::fstat(memfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Header)) ||
      st.st_size > (1 << 20)) {
    SMCR_LOG(0, "exec: %s=%s names no description of carried connections: ignored", kVariable, v);
    return;
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  ssize_t got = ::pread(memfd, bytes.data(), bytes.size(), 0);
  sys::close(memfd);
  Header h;
  if (got != static_cast<ssize_t>(bytes.size())) return;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kMagic || h.record_bytes != sizeof(Record) || h.count > 64 ||
      sizeof h + uint64_t{h.count} * sizeof(Record) + h.counters_bytes != bytes.size()) {
    SMCR_LOG(0, "exec: the carried connections were described by another build of the shim: they end");
    return;  // their descriptors stay as they are: the application's numbers read end-of-file
  }
  std::string text = bytes.substr(sizeof h + h.count * sizeof(Record));
  add_counters(text.c_str());
  for (uint32_t i = 0; i < h.count; ++i) {
    Record r;
    std::memcpy(static_cast<void*>(&r), bytes.data() + sizeof h + i * sizeof(Record), sizeof r);
    if (r.magic != kMagic || r.bytes != sizeof(Record)) continue;
    adopt_one(r);
  }
}

void prepare(const std::vector<std::pair<int, Connection*>>& carry, exec_inherit::ExecEnvironment* env) {
  // The application's numbers of each connection.
  std::vector<std::pair<Connection*, std::vector<int>>> conns;
  for (auto [fd, c] : carry) {
    auto it = std::find_if(conns.begin(), conns.end(), [conn = c](const auto& e) { return e.first == conn; });
    if (it == conns.end()) {
      conns.push_back({c, {fd}});
    } else {
      it->second.push_back(fd);
      c->unref();  // one reference per connection is enough here
    }
  }
  if (!Engine::pause_for_exec(kPauseWaitMs)) {
    SMCR_LOG(0, "exec: the engine did not pause: connections are not carried into the new program");
    for (auto& e : conns) e.first->unref();
    return;
  }
  env->engine_paused = true;
  std::vector<Record> records;
  std::vector<int> dups;  // env->inheritable once the description is written
  int base = sys::hidden_fd_base();
  for (auto& [c, fds] : conns) {
    Record r;
    if (fds.size() > static_cast<size_t>(kMaxAppFds) || !c->exec_carry_begin(&r)) {
      c->unref();
      continue;
    }
    // Inheritable duplicates, out of the application's range while it runs.
    bool ok = true;
    size_t first = dups.size();
    for (int32_t* fd : descriptors(&r)) {
      if (*fd < 0) continue;
      int dup = sys::fcntl(*fd, F_DUPFD, base > 0 ? base : 3);
      if (dup < 0) {
        ok = false;
        break;
      }
      dups.push_back(dup);
      *fd = dup;
    }
    if (!ok) {
      for (size_t i = first; i < dups.size(); ++i) sys::close(dups[i]);
      dups.resize(first);
      c->exec_carry_cancel();
      c->unref();
      continue;
    }
    for (int fd : fds) r.app_fds[r.n_app_fds++] = fd;
    records.push_back(r);
    env->carried.push_back(c);
  }
  if (records.empty()) {
    Engine::resume_after_exec();
    env->engine_paused = false;
    return;
  }
  counters().exec_carried.fetch_add(records.size(), std::memory_order_relaxed);
  std::string text = format_counters();
  Header h;
  h.count = static_cast<uint32_t>(records.size());
  h.counters_bytes = static_cast<uint32_t>(text.size());
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(Record));
  bytes += text;
  int memfd = static_cast<int>(smcr::sys::raw_syscall(SYS_memfd_create, "smcr-exec", 0));  // inherited by the new program
  if (memfd >= 0 && (base <= 0 || memfd < base)) {
    int high = base > 0 ? sys::fcntl(memfd, F_DUPFD, base) : -1;
    if (high >= 0) {
      sys::close(memfd);
      memfd = high;
    }
  }
  if (memfd < 0 || sys::write(memfd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    SMCR_LOG(0, "exec: cannot describe the carried connections (%s): they stay here", strerror(errno));
    if (memfd >= 0) sys::close(memfd);
    for (int fd : dups) sys::close(fd);
    exec_carry::exec_failed(env);
    return;
  }
  env->inheritable.insert(env->inheritable.end(), dups.begin(), dups.end());
  env->carry_memfd = memfd;
  env->carry_variable = std::string(kVariable) + "=" + std::to_string(memfd);
  SMCR_LOG(1, "exec: %zu SMC-R connection(s) carried into the new program", records.size());
}

void exec_failed(exec_inherit::ExecEnvironment* env) {
  int saved = errno;
  if (!env->carried.empty())
    counters().exec_carried.fetch_sub(env->carried.size(), std::memory_order_relaxed);
  for (Connection* c : env->carried) {
    c->exec_carry_cancel();
    c->unref();
  }
  env->carried.clear();
  if (env->engine_paused) Engine::resume_after_exec();
  env->engine_paused = false;
  if (env->carry_memfd >= 0) sys::close(env->carry_memfd);
  env->carry_memfd = -1;
  env->carry_variable.clear();
  errno = saved;
}

}  // namespace smcr::preload::exec_carry
