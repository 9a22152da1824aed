// The shared-memory fabric's rendezvous and RMB checks, with the real engine
// thread serving the real abstract socket.
#include "core/fabric_shm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/engine.h"
#include "core/sys.h"

namespace smcr {
namespace {

TEST(ShmFabric, IdentityIsLocalAndDistinguishesOtherGids) {
  const ShmIdentity& id = shm_identity();
  EXPECT_TRUE(shm_gid_is_local(id.gid));
  clc::Gid roce{};  // ::ffff:10.9.1.1, a RoCE v2 GID: not ours
  roce[10] = roce[11] = 0xff;
  roce[12] = 10;
  roce[13] = 9;
  roce[14] = 1;
  roce[15] = 1;
  EXPECT_FALSE(shm_gid_is_local(roce));
  clc::Gid other_host = id.gid;
  other_host[5] ^= 0xFF;  // another host key (boot id / netns)
  EXPECT_FALSE(shm_gid_is_local(other_host));
}

TEST(ShmFabric, RmbIsSealedAndRejectedWhenTooSmallOrUnsealed) {
  LocalRmb rmb;
  ASSERT_TRUE(shm_alloc_rmb(65536, &rmb));
  EXPECT_NE(sys::fcntl(rmb.handle, F_GET_SEALS) & F_SEAL_SHRINK, 0);
  EXPECT_NE(ftruncate(rmb.handle, 4096), 0) << "a sealed RMB must not shrink";
  RemoteRmb view;
  EXPECT_FALSE(shm_map_remote(dup(rmb.handle), 131072, &view)) << "claimed size beyond the memfd";
  EXPECT_TRUE(shm_map_remote(dup(rmb.handle), 65536, &view));
  shm_unmap_remote(&view);
  int unsealed = memfd_create("x", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(unsealed, 65536), 0);
  EXPECT_FALSE(shm_map_remote(unsealed, 65536, &view)) << "a peer could shrink an unsealed memfd under us";
  shm_free_rmb(&rmb);
}

TEST(ShmFabric, RendezvousHandsTheRmbOnlyToTheHolderOfTheAccept) {
  ASSERT_TRUE(Engine::get().serve_shm_rendezvous());
  LocalRmb server_rmb, client_rmb;
  ASSERT_TRUE(shm_alloc_rmb(16384, &server_rmb));
  ASSERT_TRUE(shm_alloc_rmb(16384, &client_rmb));
  auto& rv = ShmRendezvous::instance();
  uint32_t qpn = rv.expect(server_rmb.rkey, server_rmb.vaddr, server_rmb.handle);

  ShmHello forged;
  forged.server_qpn = qpn;
  forged.server_rkey = server_rmb.rkey;
  forged.server_vaddr = server_rmb.vaddr ^ 1;  // one bit of the 64-bit secret wrong
  int got_fd = -1;
  EXPECT_EQ(shm_connect(shm_identity().gid, forged, client_rmb.handle, sys::now_ms() + 2000, &got_fd), nullptr);
  EXPECT_EQ(got_fd, -1);

  ShmHello good = forged;
  good.server_vaddr = server_rmb.vaddr;
  good.client_qpn = 7;
  good.client_rkey = client_rmb.rkey;
  good.client_vaddr = client_rmb.vaddr;
  good.client_rmb_size = client_rmb.size;
  auto link = shm_connect(shm_identity().gid, good, client_rmb.handle, sys::now_ms() + 2000, &got_fd);
  ASSERT_NE(link, nullptr);
  ASSERT_GE(got_fd, 0);
  RemoteRmb server_view;
  ASSERT_TRUE(shm_map_remote(got_fd, 16384, &server_view));
  server_view.addr[100] = 0x5A;  // the client's write lands in the server's RMB
  EXPECT_EQ(server_rmb.addr[100], 0x5A);

  ShmRendezvous::Pending arrived;
  ASSERT_TRUE(rv.wait_arrival(qpn, sys::now_ms() + 2000, &arrived));
  EXPECT_EQ(arrived.hello.client_vaddr, client_rmb.vaddr);
  // A second client presenting the same (now consumed) secret gets nothing.
  int again = -1;
  EXPECT_EQ(shm_connect(shm_identity().gid, good, client_rmb.handle, sys::now_ms() + 2000, &again), nullptr);
  sys::close(arrived.link_fd);
  sys::close(arrived.client_rmb_fd);
  shm_unmap_remote(&server_view);
  shm_free_rmb(&server_rmb);
  shm_free_rmb(&client_rmb);
}

}  // namespace
}  // namespace smcr
