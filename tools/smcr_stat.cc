// smcr_stat: what the shim is doing in every process that runs under
// smc_run (in the spirit of smc-tools' smcss): link groups, links (fabric,
// device, QP, counters), SMC-R connections (addresses, state, bytes, RMBs)
// and the fallback counters. Each process's engine answers on an abstract
// Unix socket "smcr-diag-<pid>"; only the same user or root gets an answer.
//   usage: smcr_stat [--pid PID]
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

namespace {

std::set<int> diag_pids() {
  std::set<int> pids;
  std::ifstream in("/proc/net/unix");
  std::string line;
  const std::string tag = "@smcr-diag-";
  while (std::getline(in, line)) {
    size_t at = line.find(tag);
    if (at != std::string::npos) pids.insert(atoi(line.c_str() + at + tag.size()));
  }
  return pids;
}

bool query(int pid, std::string* out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "smcr-diag-%d", pid);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), offsetof(sockaddr_un, sun_path) + 1 + n) != 0) {
    close(fd);
    return false;
  }
  char buf[65536];
  for (;;) {
    ssize_t k = read(fd, buf, sizeof buf);
    if (k <= 0) break;
    out->append(buf, static_cast<size_t>(k));
  }
  close(fd);
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  int only = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
      only = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: smcr_stat [--pid PID]\n");
      return 2;
    }
  }
  int shown = 0;
  for (int pid : diag_pids()) {
    if (only && pid != only) continue;
    std::string report;
    if (!query(pid, &report)) {
      fprintf(stderr, "smcr_stat: pid %d did not answer (another user's process, or it exited)\n", pid);
      continue;
    }
    fputs(report.c_str(), stdout);
    ++shown;
  }
  if (shown == 0) {
    fprintf(stderr, "smcr_stat: no process under smc_run with an active SMC-R engine%s\n",
            only ? " with that pid" : "");
    return 1;
  }
  return 0;
}
