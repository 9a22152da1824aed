// The close state machine against RFC 7609 4.8 (digest 9.14).
#include "core/close.h"

#include <gtest/gtest.h>

namespace smcr {
namespace {

using S = CloseState;
using E = CloseEvent;

CloseState run(CloseState s, std::initializer_list<CloseEvent> events, uint32_t* actions = nullptr,
               CloseContext ctx = {}) {
  uint32_t all = 0;
  for (CloseEvent e : events) {
    CloseTransition t = close_transition(s, e, ctx);
    EXPECT_TRUE(t.valid) << to_string(s) << " event " << static_cast<int>(e);
    all |= t.actions;
    s = t.next;
    if (e == E::kAppClose) ctx.app_closed = true;
    if (e == E::kPeerClosed) ctx.peer_closed = true;
  }
  if (actions) *actions = all;
  return s;
}

TEST(Close, ActiveCloseThenPeerClose) {
  uint32_t a;
  EXPECT_EQ(run(S::kActive, {E::kAppClose}, &a), S::kPeerCloseWait1);
  EXPECT_TRUE(a & kActSendClose);
  EXPECT_TRUE(a & kActStartTimer);
  CloseContext ctx;
  ctx.app_closed = true;
  CloseTransition t = close_transition(S::kPeerCloseWait1, E::kPeerClosed, ctx);
  EXPECT_EQ(t.next, S::kClosed);
  EXPECT_TRUE(t.actions & kActReleaseRmbe);
}

TEST(Close, ShutdownWriteThenPeerDoneThenPeerCloseThenClose) {
  uint32_t a;
  EXPECT_EQ(run(S::kActive, {E::kAppShutdownWrite}, &a), S::kPeerCloseWait1);
  EXPECT_TRUE(a & kActSendDone);
  EXPECT_FALSE(a & kActSendClose);
  EXPECT_EQ(run(S::kPeerCloseWait1, {E::kPeerDone}), S::kPeerCloseWait2);
  EXPECT_EQ(run(S::kPeerCloseWait2, {E::kPeerClosed}), S::kAppFinCloseWait);
  EXPECT_EQ(run(S::kAppFinCloseWait, {E::kAppClose}, &a), S::kClosed);
  EXPECT_TRUE(a & kActSendClose);
  EXPECT_TRUE(a & kActReleaseRmbe);
}

TEST(Close, PassiveDoneThenShutdownThenClose) {
  uint32_t a;
  EXPECT_EQ(run(S::kActive, {E::kPeerDone}, &a), S::kAppCloseWait1);
  EXPECT_TRUE(a & kActWakeReaders);
  EXPECT_EQ(run(S::kAppCloseWait1, {E::kAppShutdownWrite}, &a), S::kAppCloseWait2);
  EXPECT_TRUE(a & kActSendDone);
  EXPECT_EQ(run(S::kAppCloseWait2, {E::kAppClose}, &a), S::kPeerFinCloseWait);
  EXPECT_TRUE(a & kActSendClose);
  EXPECT_EQ(run(S::kPeerFinCloseWait, {E::kPeerClosed}, &a), S::kClosed);
  EXPECT_TRUE(a & kActReleaseRmbe);
}

TEST(Close, PeerClosedFirstThenLocalCloseEndsImmediately) {
  uint32_t a;
  EXPECT_EQ(run(S::kActive, {E::kPeerClosed, E::kAppClose}, &a), S::kClosed);
  EXPECT_TRUE(a & kActSendClose);
  EXPECT_TRUE(a & kActReleaseRmbe);
}

TEST(Close, CloseWithUnreadDataAborts) {
  CloseContext ctx;
  ctx.unread_data = true;
  CloseTransition t = close_transition(S::kActive, E::kAppClose, ctx);
  EXPECT_EQ(t.next, S::kPeerAbortWait);
  EXPECT_TRUE(t.actions & kActSendAbort);
  EXPECT_TRUE(t.actions & kActResetTcp);
  EXPECT_FALSE(t.actions & kActSendClose);
}

TEST(Close, PeerCloseWithPendingSendResets) {
  CloseContext ctx;
  ctx.pending_send = true;
  CloseTransition t = close_transition(S::kActive, E::kPeerClosed, ctx);
  EXPECT_TRUE(t.actions & kActSendAbort);
}

TEST(Close, PassiveAbortFromAnyStateBeforeC) {
  for (S s : {S::kActive, S::kPeerCloseWait1, S::kPeerCloseWait2, S::kAppFinCloseWait, S::kAppCloseWait1,
              S::kAppCloseWait2}) {
    CloseTransition t = close_transition(s, E::kPeerAbort, {});
    EXPECT_EQ(t.next, S::kClosed) << to_string(s);
    EXPECT_TRUE(t.actions & kActSendAbort) << to_string(s);
    // Received bytes stay readable ahead of the reset, as with TCP.
    EXPECT_FALSE(t.actions & kActPurge) << to_string(s);
  }
  // After our C we may send nothing more, not even A.
  CloseTransition t = close_transition(S::kPeerFinCloseWait, E::kPeerAbort, {});
  EXPECT_EQ(t.next, S::kClosed);
  EXPECT_FALSE(t.actions & kActSendAbort);
}

// AppFinCloseWait: we sent D, the peer its C; ours has not gone. An abortive
// close (SO_LINGER 0, or a protocol violation of the peer's) sends A and ends
// by the peer's A or the timer, and a close with unread data resets, as in
// the other states before our C. (Found by cdc_sequence_fuzz: the abort was
// dropped, and the connection stayed in AppFinCloseWait for good.)
TEST(Close, AppFinCloseWaitMayStillAbort) {
  uint32_t a;
  EXPECT_EQ(run(S::kAppFinCloseWait, {E::kAppAbort}, &a), S::kPeerAbortWait);
  EXPECT_TRUE(a & kActSendAbort);
  EXPECT_TRUE(a & kActStartTimer);
  CloseContext ctx;
  ctx.unread_data = true;
  CloseTransition t = close_transition(S::kAppFinCloseWait, E::kAppClose, ctx);
  EXPECT_EQ(t.next, S::kPeerAbortWait);
  EXPECT_TRUE(t.actions & kActSendAbort);
  EXPECT_FALSE(t.actions & kActSendClose);
}

TEST(Close, ActiveAbortWaitsForPeerAbortOrTimer) {
  uint32_t a;
  EXPECT_EQ(run(S::kActive, {E::kAppAbort}, &a), S::kPeerAbortWait);
  EXPECT_TRUE(a & kActStartTimer);
  EXPECT_EQ(close_transition(S::kPeerAbortWait, E::kPeerAbort, {}).next, S::kClosed);
  CloseTransition t = close_transition(S::kPeerAbortWait, E::kTimeout, {});
  EXPECT_EQ(t.next, S::kClosed);
  EXPECT_TRUE(t.actions & kActReleaseRmbe);
  // Everything else is ignored while waiting for A.
  EXPECT_FALSE(close_transition(S::kPeerAbortWait, E::kPeerClosed, {}).valid);
}

TEST(Close, PeerCloseWaitTimeoutResetsTcpAndFreesRmbe) {
  for (S s : {S::kPeerCloseWait1, S::kPeerCloseWait2, S::kPeerFinCloseWait}) {
    CloseTransition t = close_transition(s, E::kTimeout, {});
    EXPECT_EQ(t.next, S::kClosed);
    EXPECT_TRUE(t.actions & kActResetTcp);
    EXPECT_TRUE(t.actions & kActReleaseRmbe);
  }
  EXPECT_FALSE(close_transition(S::kActive, E::kTimeout, {}).valid);
}

TEST(Close, SimultaneousCloseBothFollowPath3) {
  CloseContext ctx;
  ctx.app_closed = true;
  EXPECT_EQ(run(S::kActive, {E::kAppClose}), S::kPeerCloseWait1);
  EXPECT_EQ(close_transition(S::kPeerCloseWait1, E::kPeerClosed, ctx).next, S::kClosed);
}

TEST(Close, WriteAndReadClosedPredicates) {
  EXPECT_FALSE(local_write_closed(S::kActive));
  EXPECT_FALSE(local_write_closed(S::kAppCloseWait1));
  EXPECT_TRUE(local_write_closed(S::kPeerCloseWait1));
  EXPECT_FALSE(peer_write_closed(S::kActive));
  EXPECT_FALSE(peer_write_closed(S::kPeerCloseWait1));
  EXPECT_TRUE(peer_write_closed(S::kPeerCloseWait2));
  EXPECT_TRUE(peer_write_closed(S::kAppCloseWait1));
}

}  // namespace
}  // namespace smcr
