// One real SMC-R connection over the shm fabric, for the unit tests and the
// fuzzers that act as its peer: real SEQPACKET links (one message a
// datagram, as a QP delivers them) in a real LinkGroup, real sealed-memfd
// RMBs with their CDC control pages, Connection::create and attach_fds with
// a real readiness socketpair. The peer's ends are left to the caller.
//
// No gtest here: the fuzzers build it too. build() says what failed in
// `error`; callers turn that into ASSERT_TRUE(...) << error or FUZZ_CHECK.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "core/connection.h"
#include "core/engine.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"

// Not smcr::testing: inside namespace smcr that name would hide gtest's.
namespace smcr::testlib {

// False (errno) when the socketpair fails.
inline bool open_link(int* ours, int* peer) {
  int lk[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk) != 0) return false;
  *ours = lk[0];
  *peer = lk[1];
  return true;
}

// Registered nowhere and served by no engine thread until the caller says
// so; the group owns `link_fd` from here on.
inline LinkGroup* new_group(Role role, int link_fd, const clc::PeerId& peer = {}, const LinkIdentity& remote = {}) {
  return new LinkGroup(role, peer, std::make_unique<ShmLink>(link_fd), 1, LinkIdentity{}, remote);
}

struct ShmConnectionConfig {
  uint32_t rmb_size = 16384;
  uint32_t peer_rmb_size = 16384;
  uint32_t local_token = 0;
  uint32_t peer_token = 0;
  uint32_t rmbe_base = 4;
  // 2: a second link for failover, with our RMB registered on it as an
  // alias and the one mapping of the peer's RMB serving both.
  int links = 1;
  // Whether the peer gets a mapping of our RMB (ours_as_peer); a peer in the
  // same process can also write through ours.addr.
  bool map_ours_for_peer = true;
  // > 0: SO_SNDBUF of the application's end, set before attach_fds.
  int app_sndbuf = 0;
  // A reference of the caller's, taken before anything else can release the
  // connection: the object then outlives its end.
  bool hold_ref = false;
  // The engine thread serves the group; otherwise the caller delivers the
  // peer's messages itself, in its own order.
  bool engine = false;
  // Our ends of the links (link_fd1 < 0: one link) to the group; null: a
  // server's group from new_group, the second link added as link number 2.
  LinkGroup* (*make_group)(int link_fd0, int link_fd1) = nullptr;
};

struct ShmConnection {
  int peer_link[kMaxGroupLinks] = {-1, -1};  // the peer's ends, by link slot
  LocalRmb ours;                             // the connection's from build() on
  LocalRmb peers;                            // the peer's, which our connection writes
  RemoteRmb ours_as_peer;                    // our RMB as the peer maps it
  LinkGroup* group = nullptr;
  Connection* conn = nullptr;
  int app_fd = -1;
  std::string error;

  ShmConnection() = default;
  ShmConnection(const ShmConnection&) = delete;
  ShmConnection& operator=(const ShmConnection&) = delete;

  bool build(const ShmConnectionConfig& cfg) {
    if (cfg.links < 1 || cfg.links > kMaxGroupLinks) return fail("links: 1 or 2", false);
    int our_link[kMaxGroupLinks] = {-1, -1};
    for (int i = 0; i < cfg.links; ++i)
      if (!open_link(&our_link[i], &peer_link[i])) return fail("socketpair (link)");
    if (!shm_alloc_rmb(cfg.rmb_size, &ours)) return fail("shm_alloc_rmb (ours)");
    if (!shm_alloc_rmb(cfg.peer_rmb_size, &peers)) return fail("shm_alloc_rmb (the peer's)");
    RemoteRmb peer_view;  // the peer's RMB as our connection writes it
    if (!shm_map_remote(::dup(peers.handle), cfg.peer_rmb_size, &peer_view)) return fail("shm_map_remote (the peer's)");
    if (cfg.map_ours_for_peer && !shm_map_remote(::dup(ours.handle), cfg.rmb_size, &ours_as_peer))
      return fail("shm_map_remote (ours)");
    if (cfg.make_group) {
      group = cfg.make_group(our_link[0], our_link[1]);
    } else {
      group = new_group(Role::kServer, our_link[0]);
      if (our_link[1] >= 0 && group->add_link(std::make_unique<ShmLink>(our_link[1]), 2, {}, {}) != 1)
        return fail("add_link", false);
    }
    if (!group) return fail("make_group", false);
    ConnectionSetup s;
    s.group = group;
    s.rmbs[0] = ours;
    s.peer_rmbs[0] = peer_view;
    if (cfg.links > 1) {
      if (!group->link_at(1)->register_alias(ours, &s.rmbs[1])) return fail("register_alias", false);
      s.peer_rmbs[1] = peer_view;
      s.peer_rmbs[1].alias = true;
    }
    s.local_token = cfg.local_token;
    s.peer_token = cfg.peer_token;
    s.rmbe_base = cfg.rmbe_base;
    conn = Connection::create(s);
    if (cfg.hold_ref) conn->ref();
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return fail("socketpair (application)");
    app_fd = sv[0];
    if (cfg.app_sndbuf > 0) ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &cfg.app_sndbuf, sizeof cfg.app_sndbuf);
    conn->attach_fds(sv[0], sv[1], /*nonblocking=*/true);
    if (cfg.engine) Engine::get().add_group(group);
    return true;
  }

  // Aborts a connection the caller has not closed (it sets conn to null once
  // it has) and drops the peer's side. The group is not touched: the engine
  // deletes it once it has retired, or the caller owns it.
  void teardown() {
    if (conn) conn->app_close(true);
    conn = nullptr;
    for (int& fd : peer_link) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    shm_unmap_remote(&ours_as_peer);
    shm_free_rmb(&peers);
  }

 private:
  bool fail(const char* what, bool with_errno = true) {
    error = with_errno ? std::string(what) + ": " + std::strerror(errno) : what;
    return false;
  }
};

}  // namespace smcr::testlib
