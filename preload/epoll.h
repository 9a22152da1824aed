// epoll, interposed for SMC-R fds on the shared-memory fabric: a message
// between two busy processes costs no system call on either side.
//
// Without it each message rings the receiver's readiness socket (a send on
// the writer's side, a receive to empty it on the reader's), about what a
// TCP loopback send and receive cost. With it, a connection that a reader
// has emptied stays unarmed ("parked", core/connection.h ReadinessDeferral)
// while no thread of the epoll set sleeps: the peer writes into memory and
// does not ring, and epoll_wait finds the data by looking at the parked
// connections before, and for a bounded while instead of, sleeping. Before
// a thread sleeps in the kernel every parked connection is armed again, so
// a wake-up is never lost. With a ready set (core/ready_set.h) a parked
// connection stays armed for the set's shared page instead: any number
// park, and the peer's writer wakes a sleeping thread through the set's
// bell (docs/ARCHITECTURE.md, "Ready sets").
//
// An event loop that deletes and adds its registrations around every request
// (redis's ae) would still make a system call per epoll_ctl: such a
// registration becomes virtual (its interest kept here, the kernel's
// registration the shim's own, made once), and epoll_ctl on it is answered
// in memory (docs/ARCHITECTURE.md, "Virtual registrations").
//
// Only what the interposition can see is parked: a connection registered
// in one epoll set, for EPOLLIN, without EPOLLONESHOT or EPOLLEXCLUSIVE. A
// connection that poll()/select() looks at, or an epoll set nested in
// another or polled, goes back to being armed as usual for good.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include <utility>
#include <vector>

namespace smcr::preload {

using EpollCtlFn = int (*)(int, int, int, struct epoll_event*);
using EpollPwait2Fn = int (*)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*);
using EpollPwaitFn = int (*)(int, struct epoll_event*, int, int, const sigset_t*);

int epoll_ctl_hook(EpollCtlFn real, int epfd, int op, int fd, struct epoll_event* ev);
// One wait: `timeout_ns` < 0 waits without limit. `pwait2` is used when not
// null (a timespec timeout), else `pwait` with milliseconds.
int epoll_wait_hook(EpollPwaitFn pwait, EpollPwait2Fn pwait2, int epfd, struct epoll_event* events,
                    int maxevents, long long timeout_ns, const sigset_t* mask);
// close(fd), before the fd number is reused: an epoll set's, or an SMC-R fd
// registered in one.
void epoll_forget_fd(int fd);
// `fd` stops being an SMC-R connection's number (closed, or relayed in
// place: a plain stream from now on): an epoll set's registration of it is
// the kernel's again, as the application made it, and nothing of the shim's
// answers for it or waits on it.
void epoll_release_number(int fd);
// The verbs links a poll or select waits on (one SMC-R fd per link, a
// few): the waiting thread polls their receive queues before it sleeps, as
// epoll_wait does (poll_probed_links).
struct LinkProbes {
  static constexpr size_t kMax = 4;
  int fds[kMax];
  const void* links[kMax];
  size_t n = 0;
  void note(int fd, const void* link) {
    if (!link || n == kMax) return;
    for (size_t i = 0; i < n; ++i)
      if (links[i] == link) return;
    fds[n] = fd;
    links[n++] = link;
  }
};
// poll/select (and friends) are about to wait for `fd` to become readable.
// With `probes`, an SMC-R fd on a verbs link is noted there.
void epoll_fd_polled(int fd, LinkProbes* probes = nullptr);
// A poll or select with verbs links among its fds, before it sleeps:
// `look()` (the same call with a zero timeout) first; then, adaptive and
// bounded by SMCR_EPOLL_SPIN_US and `timeout_ns` (-1: none), the links'
// receive queues polled on this thread, `look()` again whenever a message
// was delivered (it rang its connection's readiness socket) and every 16
// turns; then the links armed. Returns look()'s first non-zero answer, or
// 0: the caller sleeps in the kernel, where anything delivered while
// arming is seen at once.
int poll_probed_links(const LinkProbes& probes, long long timeout_ns, int (*look)(void*), void* arg);
// `fd` was duplicated (dup, dup2, dup3, F_DUPFD): if it is an epoll set, a
// wait on the other number would not ask us, so the set stops parking and
// its registrations go back to the kernel as the application made them.
void epoll_fd_duplicated(int fd);
// This process is about to exec (or spawn a program that inherits its
// descriptors): epoll sets the new program may inherit get the
// application's own registrations back (virtual ones carry the shim's
// data).
void epoll_before_exec();

// A reset SMC-R connection's readiness socket polls POLLHUP but cannot
// carry POLLERR (an AF_UNIX socket gets an error only from the last close
// of its other end, which the peer process may hold too): the shim adds
// POLLERR/EPOLLERR itself while the connection has an error to report.
void poll_add_errors(struct pollfd* fds, nfds_t n);

// Epoll registrations of a TCP socket made before it became SMC-R (an
// event loop that registers a socket and then connects it, as nginx's
// upstream code does). The kernel ties a registration to the file, not the
// number: after the takeover moves the TCP socket to a hidden number and
// puts the readiness socket under the application's, the set would go on
// watching the TCP socket (its EPOLLOUT, later its FIN) and never report
// the connection's data. So such registrations are recorded, taken out of
// their sets just before the takeover (the number still names the TCP
// socket), and made again on the readiness socket right after it.
using EarlyRegistrations = std::vector<std::pair<int, struct epoll_event>>;
// After a successful epoll_ctl(epfd, op, fd, ev) on a TCP socket the shim
// may still take over (kFdTcp, no connection, not kFdSettledTcp: the caller
// checks).
void epoll_note_before_takeover(int epfd, int op, int fd, const struct epoll_event* ev);
// Takes `fd`'s recorded registrations out of their sets; returns them.
EarlyRegistrations epoll_unhook_before_takeover(int fd);
// Registers `fd` (now the readiness socket) again in each set, through the
// interposition so that the epoll deferral follows it.
void epoll_rehook_after_takeover(EpollCtlFn real, int fd, const EarlyRegistrations& regs);
// `fd` stays TCP for good (or is closed): forget its registrations.
void epoll_settled(int fd);

}  // namespace smcr::preload
