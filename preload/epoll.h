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
// a wake-up is never lost.
//
// Only what the interposition can see is parked: a connection registered
// in one epoll set, for EPOLLIN, without EPOLLONESHOT or EPOLLEXCLUSIVE. A
// connection that poll()/select() looks at, or an epoll set nested in
// another or polled, goes back to being armed as usual for good.
#pragma once

#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

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
// poll/select (and friends) are about to wait for `fd` to become readable.
void epoll_fd_polled(int fd);

}  // namespace smcr::preload
