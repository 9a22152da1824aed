#include "preload/unix_peer.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/sys.h"

namespace smcr::preload::unix_peer {
namespace {

int open_read(const char* path, int flags = 0) {
  return static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | flags));
}

std::string read_file(const char* path, size_t limit) {
  std::string out;
  int fd = open_read(path);
  if (fd < 0) return out;
  char buf[8192];
  for (ssize_t n; out.size() < limit && (n = sys::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  sys::close(fd);
  return out;
}

// The path of this library, as the maps of a process that loaded it show it.
const std::string& own_path() {
  static const std::string path = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&peer_inode), &info) && info.dli_fname) {
      char real[4096];
      if (realpath(info.dli_fname, real)) return std::string(real);
      return std::string(info.dli_fname);
    }
    return std::string();
  }();
  return path;
}

bool holds_socket(pid_t pid, uint64_t ino) {
  char dir_path[64], want[48];
  snprintf(dir_path, sizeof dir_path, "/proc/%d/fd", static_cast<int>(pid));
  int len = snprintf(want, sizeof want, "socket:[%llu]", static_cast<unsigned long long>(ino));
  bool found = false;
  int dir = -1;
  sys::for_each_dir_entry(
      dir_path,
      [&](const char* name) {
        char link[64];
        ssize_t k = ::readlinkat(dir, name, link, sizeof link);
        found = k == len && std::memcmp(link, want, static_cast<size_t>(len)) == 0;
        return !found;
      },
      &dir);
  return found;
}

bool has_shim(pid_t pid) {
  if (own_path().empty()) return false;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", static_cast<int>(pid));
  return read_file(path, 8u << 20).find(own_path()) != std::string::npos;
}

std::vector<pid_t> children() {
  std::vector<pid_t> out;
  char path[64];
  int self = static_cast<int>(::getpid());
  snprintf(path, sizeof path, "/proc/%d/task", self);
  sys::for_each_dir_entry(path, [&](const char* task) {
    char file[320];
    snprintf(file, sizeof file, "/proc/%d/task/%s/children", self, task);
    std::string list = read_file(file, 1u << 20);
    for (const char* p = list.c_str(); *p;) {
      char* end = nullptr;
      long pid = std::strtol(p, &end, 10);
      if (end == p) break;
      if (pid > 0) out.push_back(static_cast<pid_t>(pid));
      p = end;
    }
    return true;
  });
  return out;
}

}  // namespace

uint64_t peer_inode(int fd) {
  struct stat st {};
  if (sys::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  int nl = sys::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return 0;
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = AF_UNIX;
  msg.req.udiag_states = ~0u;
  msg.req.udiag_ino = static_cast<uint32_t>(st.st_ino);
  msg.req.udiag_show = UDIAG_SHOW_PEER;
  msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = ~0u;  // INET_DIAG_NOCOOKIE
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  uint64_t peer = 0;
  alignas(nlmsghdr) char buf[8192];
  if (smcr::sys::raw_syscall(SYS_sendto, nl, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) ==
      static_cast<long>(sizeof msg)) {
    timeval tv{1, 0};
    sys::setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = sys::recv(nl, buf, sizeof buf, 0);
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    if (n > 0 && NLMSG_OK(h, static_cast<uint32_t>(n)) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        h->nlmsg_len >= NLMSG_LENGTH(sizeof(unix_diag_msg))) {
      auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      int left = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (auto* a = reinterpret_cast<rtattr*>(m + 1); m->udiag_ino == st.st_ino && RTA_OK(a, left);
           a = RTA_NEXT(a, left)) {
        if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
          uint32_t v;
          std::memcpy(&v, RTA_DATA(a), sizeof v);
          peer = v;
        }
      }
    }
  }
  sys::close(nl);
  return peer;
}

pid_t shim_process_at_other_end(int fd) {
  uint64_t ino = peer_inode(fd);
  if (ino == 0) return 0;
  pid_t self = static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getpid));
  std::vector<pid_t> candidates;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (sys::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) candidates.push_back(cred.pid);
  candidates.push_back(static_cast<pid_t>(smcr::sys::raw_syscall(SYS_getppid)));
  for (pid_t child : children()) candidates.push_back(child);
  for (size_t i = 0; i < candidates.size(); ++i) {
    pid_t pid = candidates[i];
    if (pid <= 1 || pid == self || std::find(candidates.begin(), candidates.begin() + i, pid) != candidates.begin() + i)
      continue;
    if (holds_socket(pid, ino)) return has_shim(pid) ? pid : 0;
  }
  return 0;
}

}  // namespace smcr::preload::unix_peer
