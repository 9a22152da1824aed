// A real link group over real SEQPACKET links (ShmLink), made for one fuzz
// input and held (as a handshake holds one) so that nothing the input does
// can end it under the fuzzer: a group whose links all fail and that nobody
// uses retires at once, and the engine thread deletes it. end_held_group
// takes its links down and drops the hold, so the engine deletes it then:
// the fuzzer never deletes a group itself.
#pragma once

#include <cstring>
#include <memory>

#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "fuzz/fuzz_common.h"

namespace smcr::fuzz {

// `link_fd1` < 0: one link. The peer is unique to this group (its Peer ID,
// the remote link identity), so that only this group is found for it.
inline LinkGroup* make_held_group(Role role, bool linux_v2, int link_fd0, int link_fd1) {
  static uint64_t serial = 0;
  ++serial;
  clc::PeerId peer{};
  std::memcpy(peer.data(), &serial, sizeof serial);
  LinkIdentity remote;
  remote.gid[0] = 0xFE;
  std::memcpy(remote.gid.data() + 8, &serial, sizeof serial);
  remote.mac = {0x02, 0, 0, 0, 0, 0x01};
  remote.qpn = static_cast<uint32_t>(serial & 0xFFFFFF) | 1;
  auto* g = new LinkGroup(role, peer, std::make_unique<ShmLink>(link_fd0), 1, LinkIdentity{}, remote);
  if (linux_v2) g->set_linux_v2();
  if (link_fd1 >= 0) {
    LinkIdentity remote2 = remote;
    remote2.qpn ^= 0x800000;
    FUZZ_CHECK(g->add_link(std::make_unique<ShmLink>(link_fd1), 2, LinkIdentity{}, remote2) == 1, "add_link");
  }
  LinkGroup::register_group(g);
  LinkGroup* held = role == Role::kServer
                        ? LinkGroup::acquire_for_server(peer, true, linux_v2 ? &remote.gid : nullptr)
                        : LinkGroup::acquire_for_client(peer, remote.gid, remote.mac, remote.qpn);
  FUZZ_CHECK(held == g, "the new group was not found in the registry");
  return g;
}

// Every link down, then the hold dropped: the group retires and the engine
// thread deletes it. `g` must not be used afterwards.
inline void end_held_group(LinkGroup* g) {
  for (int slot = 0; slot < g->link_slots(); ++slot) g->on_link_failure(slot);
  g->release_hold();
}

}  // namespace smcr::fuzz
