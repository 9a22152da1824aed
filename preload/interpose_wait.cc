// The shim's readiness waits: epoll_ctl/epoll_wait/epoll_pwait/epoll_pwait2
// (preload/epoll.h does the work), poll/ppoll and select/pselect, with the
// fortified poll forms.

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include <atomic>

#include "preload/epoll.h"
#include "preload/fd_table.h"
#include "preload/interpose_internal.h"
#include "preload/own_listeners.h"

// The helpers every interposer file shares (interpose_internal.h).
using namespace smcr::preload::interpose;

namespace {

// A poll or select that starts while another thread's connect() runs the
// fd's client CLC inline would wait on the TCP socket, which the takeover
// then moves away from the number: the kernel would go on watching it (the
// peer's close seen only when the application closed its own end). Such a
// wait starts after the handshake, as a read does (ConnRef).
void await_inline_clc_before_wait(int fd) {
  if (fd_table().flags(fd) & smcr::preload::kFdClcInline) await_inline_clc(fd);
}

// poll() and select() wait for readability without asking epoll. The
// verbs links among their fds are noted in `probes`.
void before_poll(const struct pollfd* fds, nfds_t n, smcr::preload::LinkProbes* probes) {
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    await_inline_clc_before_wait(fds[i].fd);
    if (fds[i].events & (POLLIN | POLLRDNORM)) smcr::preload::epoll_fd_polled(fds[i].fd, probes);
  }
}

void before_select(int nfds, const fd_set* readfds, const fd_set* writefds, smcr::preload::LinkProbes* probes) {
  if (!readfds && !writefds) return;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    bool read = readfds && FD_ISSET(fd, readfds);
    if (read || (writefds && FD_ISSET(fd, writefds))) await_inline_clc_before_wait(fd);
    if (read) smcr::preload::epoll_fd_polled(fd, probes);
  }
}

long long timespec_ns(const struct timespec* ts) {
  if (!ts) return -1;
  if (ts->tv_sec < 0 || ts->tv_nsec < 0) return 0;  // the real call reports EINVAL
  return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

// A zero-timeout look with the arguments of a poll/ppoll, for
// poll_probed_links.
struct PollLook {
  int (*real_ppoll)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
  struct pollfd* fds;
  nfds_t n;
  const sigset_t* mask;
  static int run(void* self) {
    auto* l = static_cast<PollLook*>(self);
    struct timespec zero {0, 0};
    return l->real_ppoll(l->fds, l->n, &zero, l->mask);
  }
};

// The same for select/pselect: the sets are the caller's until a look
// finds something (then they hold its answer, as the real call's would).
struct SelectLook {
  int (*real_pselect)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
  int nfds;
  fd_set *readfds, *writefds, *exceptfds;
  fd_set r{}, w{}, e{};
  const sigset_t* mask;
  SelectLook(int n, fd_set* rd, fd_set* wr, fd_set* ex, const sigset_t* m, decltype(real_pselect) fn)
      : real_pselect(fn), nfds(n), readfds(rd), writefds(wr), exceptfds(ex), mask(m) {
    if (rd) r = *rd;
    if (wr) w = *wr;
    if (ex) e = *ex;
  }
  static int run(void* self) {
    auto* l = static_cast<SelectLook*>(self);
    fd_set r = l->r, w = l->w, e = l->e;
    struct timespec zero {0, 0};
    int k = l->real_pselect(l->nfds, l->readfds ? &r : nullptr, l->writefds ? &w : nullptr,
                            l->exceptfds ? &e : nullptr, &zero, l->mask);
    if (k != 0) {
      if (l->readfds) *l->readfds = r;
      if (l->writefds) *l->writefds = w;
      if (l->exceptfds) *l->exceptfds = e;
    }
    return k;
  }
};

}  // namespace

extern "C" {
// The interposed libc entry points: the only symbols the shim exports
// (preload/exports.map; everything else is compiled hidden).
#pragma GCC visibility push(default)

// --- epoll, and the other ways to wait for readiness (preload/epoll.h).
int epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev) {
  REAL(epoll_ctl);
  if (refuse_own_fd(epfd) || refuse_own_fd(fd)) return -1;
  int rc = smcr::preload::epoll_ctl_hook(real_epoll_ctl, epfd, op, fd, ev);
  if (rc != 0) return rc;
  uint8_t kind = fd_table().kind(fd);
  if (kind == smcr::preload::kFdSmcListener) {
    smcr::preload::own::epoll_watch(epfd, op, fd, ev ? ev->events : 0);
  } else if (kind == smcr::preload::kFdTcp && !fd_table().has_conn(fd) &&
             !(fd_table().flags(fd) & smcr::preload::kFdSettledTcp)) {
    int saved = errno;
    smcr::preload::epoll_note_before_takeover(epfd, op, fd, ev);
    errno = saved;
  }
  return rc;
}

int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  return epoll_pwait(epfd, ev, max, timeout, nullptr);
}

int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  REAL(epoll_pwait);
  smcr::preload::own::Serving serving;
  serving.epoll_set(epfd);
  return smcr::preload::epoll_wait_hook(real_epoll_pwait, nullptr, epfd, ev, max,
                                        timeout < 0 ? -1 : timeout * 1000000LL, mask);
}

// Newer than the rest (glibc 2.35): looked up when first called, so that the
// shim still loads where libc lacks it.
int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* ts, const sigset_t* mask) {
  using Fn = smcr::preload::EpollPwait2Fn;
  static std::atomic<Fn> slot{nullptr};
  Fn real = slot.load(std::memory_order_relaxed);
  if (!real) {
    real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "epoll_pwait2"));
    if (!real) {
      errno = ENOSYS;
      return -1;
    }
    slot.store(real, std::memory_order_relaxed);
  }
  if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) return real(epfd, ev, max, ts, mask);
  REAL(epoll_pwait);
  smcr::preload::own::Serving serving;
  serving.epoll_set(epfd);
  long long ns = ts ? ts->tv_sec * 1000000000LL + ts->tv_nsec : -1;
  return smcr::preload::epoll_wait_hook(real_epoll_pwait, real, epfd, ev, max, ns, mask);
}

int poll(struct pollfd* fds, nfds_t n, int timeout) {
  REAL(poll);
  smcr::preload::LinkProbes probes;
  before_poll(fds, n, &probes);
  smcr::preload::own::Serving serving;
  serving.poll_set(fds, n);
  int rc = 0;
  if (probes.n > 0) {
    REAL(ppoll);
    PollLook look{real_ppoll, fds, n, nullptr};
    rc = smcr::preload::poll_probed_links(probes, timeout < 0 ? -1 : timeout * 1000000LL, PollLook::run, &look);
  }
  if (rc == 0) rc = real_poll(fds, n, timeout);
  if (rc > 0) smcr::preload::poll_add_errors(fds, n);
  return rc;
}

int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* ts, const sigset_t* mask) {
  REAL(ppoll);
  smcr::preload::LinkProbes probes;
  before_poll(fds, n, &probes);
  smcr::preload::own::Serving serving;
  serving.poll_set(fds, n);
  int rc = 0;
  if (probes.n > 0) {
    PollLook look{real_ppoll, fds, n, mask};
    rc = smcr::preload::poll_probed_links(probes, timespec_ns(ts), PollLook::run, &look);
  }
  if (rc == 0) rc = real_ppoll(fds, n, ts, mask);
  if (rc > 0) smcr::preload::poll_add_errors(fds, n);
  return rc;
}

int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return poll(fds, n, timeout);
}

int __ppoll_chk(struct pollfd* fds, nfds_t n, const struct timespec* ts, const sigset_t* mask, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return ppoll(fds, n, ts, mask);
}

int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, struct timeval* tv) {
  REAL(select);
  smcr::preload::LinkProbes probes;
  before_select(nfds, readfds, writefds, &probes);
  smcr::preload::own::Serving serving;
  serving.select_set(nfds, readfds);
  if (probes.n > 0 && nfds >= 0 && nfds <= FD_SETSIZE) {
    REAL(pselect);
    SelectLook look(nfds, readfds, writefds, exceptfds, nullptr, real_pselect);
    long long ns = -1;
    if (tv) ns = tv->tv_sec < 0 || tv->tv_usec < 0 ? 0 : tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL;
    if (int rc = smcr::preload::poll_probed_links(probes, ns, SelectLook::run, &look); rc != 0) return rc;
  }
  return real_select(nfds, readfds, writefds, exceptfds, tv);
}

int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const struct timespec* ts,
            const sigset_t* mask) {
  REAL(pselect);
  smcr::preload::LinkProbes probes;
  before_select(nfds, readfds, writefds, &probes);
  smcr::preload::own::Serving serving;
  serving.select_set(nfds, readfds);
  if (probes.n > 0 && nfds >= 0 && nfds <= FD_SETSIZE) {
    SelectLook look(nfds, readfds, writefds, exceptfds, mask, real_pselect);
    if (int rc = smcr::preload::poll_probed_links(probes, timespec_ns(ts), SelectLook::run, &look); rc != 0) return rc;
  }
  return real_pselect(nfds, readfds, writefds, exceptfds, ts, mask);
}

#pragma GCC visibility pop
}  // extern "C"
