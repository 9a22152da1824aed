// One real connection (real sealed-memfd RMBs, a real SEQPACKET link, the
// real engine thread) driven by the test acting as its peer: the test writes
// into the connection's RMBE and sends raw CDC/LLC bytes, including hostile
// ones, and checks what the application would see.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <chrono>
#include <future>
#include <string>

#include "core/cdc.h"
#include "core/cdc_mem.h"
#include "core/connection.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "tests/lib/shm_connection.h"

namespace smcr {
namespace {

constexpr uint32_t kRmbSize = 16384;
constexpr uint32_t kLocalToken = 0xB001;
constexpr uint32_t kPeerToken = 0xA001;

class ConnectionTest : public ::testing::Test {
 protected:
  // false: no engine thread serves the link; the test calls the
  // connection's engine-side entry points itself (ConnectionServices).
  bool with_engine_ = true;
  void SetUp() override {
    testlib::ShmConnectionConfig cfg;
    cfg.rmb_size = kRmbSize;
    cfg.peer_rmb_size = kRmbSize;
    cfg.local_token = kLocalToken;
    cfg.peer_token = kPeerToken;
    cfg.app_sndbuf = 1;
    cfg.engine = with_engine_;
    ASSERT_TRUE(rig_.build(cfg)) << rig_.error;
  }
  void TearDown() override { rig_.teardown(); }

  // A CDC from the "peer" to our connection.
  static cdc::Message cdc_to_us(uint16_t seq, cdc::Cursor prod, cdc::Cursor cons, cdc::Flags flags = {}) {
    cdc::Message m;
    m.seq = seq;
    m.alert_token = kLocalToken;
    m.producer = prod;
    m.consumer = cons;
    m.flags = flags;
    return m;
  }
  void send_cdc(uint16_t seq, cdc::Cursor prod, cdc::Cursor cons, cdc::Flags flags = {}) {
    auto b = cdc::encode(cdc_to_us(seq, prod, cons, flags));
    ASSERT_EQ(send(peer_link_, b.data(), b.size(), 0), 44);
  }
  void send_raw(const void* p, size_t n) { ASSERT_EQ(send(peer_link_, p, n, 0), static_cast<ssize_t>(n)); }

  // Data from the "peer" into our RMBE at [4, 4+n), then its CDC.
  void peer_writes(const std::string& data, uint16_t seq) {
    memcpy(our_rmb_as_peer_.addr + 4, data.data(), data.size());
    send_cdc(seq, {0, static_cast<uint32_t>(4 + data.size())}, {0, 4});
  }

  // Waits (via the app fd's readiness, as an application would) and reads.
  ssize_t read_app(std::string* out, int timeout_ms = 2000) {
    pollfd p{app_fd_, POLLIN, 0};
    poll(&p, 1, timeout_ms);
    char buf[256];
    iovec iov{buf, sizeof buf};
    ssize_t n = conn_->recvv(&iov, 1, 0);
    if (n > 0) out->assign(buf, static_cast<size_t>(n));
    return n;
  }

  // The next CDC our connection sent to the peer (the test).
  std::optional<cdc::Message> next_cdc(int timeout_ms = 2000) {
    for (;;) {
      pollfd p{peer_link_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
      uint8_t b[64];
      ssize_t n = recv(peer_link_, b, sizeof b, 0);
      if (n != 44) return std::nullopt;
      if (b[0] == cdc::kType) return cdc::decode(std::span<const uint8_t>(b, 44));
    }
  }

  // The next LLC message of type T our connection's link sent to the peer
  // (this test), skipping everything else; nullopt after timeout_ms of silence.
  template <typename T>
  std::optional<T> next_llc(int timeout_ms = 2000) {
    for (;;) {
      pollfd p{peer_link_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) != 1) return std::nullopt;
      uint8_t r[64];
      if (recv(peer_link_, r, sizeof r, 0) != 44) return std::nullopt;
      auto m = llc::decode(std::span<const uint8_t>(r, 44));
      if (auto* t = m ? std::get_if<T>(&*m) : nullptr) return *t;
    }
  }

  // The engine handles a link's messages in order: once our TEST LINK is
  // answered, everything sent before it has been processed.
  void barrier() {
    llc::TestLink t;
    t.user_data[0] = 0xBA;
    auto b = llc::encode(t);
    send_raw(b.data(), b.size());
    auto reply = next_llc<llc::TestLink>();
    ASSERT_TRUE(reply && reply->reply) << "no TEST LINK reply";
  }

  void expect_reset() {
    std::string s;
    ssize_t n = read_app(&s);
    EXPECT_EQ(n, -1);
    EXPECT_EQ(errno, ECONNRESET);
  }

  testlib::ShmConnection rig_;
  // The rig's parts by the names the tests use.
  LocalRmb& ours_ = rig_.ours;
  LocalRmb& peers_ = rig_.peers;
  RemoteRmb& our_rmb_as_peer_ = rig_.ours_as_peer;  // what the peer (this test) sees of our RMB
  LinkGroup*& group_ = rig_.group;
  Connection*& conn_ = rig_.conn;
  int& peer_link_ = rig_.peer_link[0];
  int& app_fd_ = rig_.app_fd;
};

TEST_F(ConnectionTest, DeliversPeerDataAndSignalsReadiness) {
  peer_writes("hello", 1);
  std::string got;
  EXPECT_EQ(read_app(&got), 5);
  EXPECT_EQ(got, "hello");
}

TEST_F(ConnectionTest, SendsDataIntoPeerRmbeWithCdc) {
  const char msg[] = "ping";
  iovec iov{const_cast<char*>(msg), 4};
  EXPECT_EQ(conn_->sendv(&iov, 1, 0), 4);
  auto m = next_cdc();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->seq, 1);  // RFC: the first CDC carries sequence number 1
  EXPECT_EQ(m->alert_token, kPeerToken);
  EXPECT_EQ(m->producer, (cdc::Cursor{0, 8}));
  EXPECT_EQ(memcmp(peers_.addr + 4, "ping", 4), 0);
}

TEST_F(ConnectionTest, WindowFullSetsWriterBlockedAndEagain) {
  std::string big(kRmbSize, 'x');
  iovec iov{big.data(), big.size()};
  EXPECT_EQ(conn_->sendv(&iov, 1, 0), static_cast<ssize_t>(kRmbSize - 4));
  auto m = next_cdc();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->flags.writer_blocked);
  EXPECT_EQ(m->producer, (cdc::Cursor{1, 4}));  // full window: wrap + 1, same offset
  EXPECT_EQ(conn_->sendv(&iov, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd p{app_fd_, POLLOUT, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "app fd must not poll writable while the window is full";
  // The peer consumes everything: writable again.
  send_cdc(1, {0, 4}, {1, 4});
  EXPECT_EQ(poll(&p, 1, 2000), 1);
  EXPECT_GT(conn_->sendv(&iov, 1, 0), 0);
}

TEST_F(ConnectionTest, StaleSequenceNumberIsDiscarded) {
  peer_writes("abc", 5);
  send_cdc(4, {0, 4 + 100}, {0, 4});  // older: must not be processed
  barrier();
  std::string got;
  EXPECT_EQ(read_app(&got), 3);
  EXPECT_EQ(conn_->bytes_readable(), 0u);
}

TEST_F(ConnectionTest, ProducerBeyondRmbeAborts) {
  send_cdc(1, {0, kRmbSize + 10}, {0, 4});
  expect_reset();
  auto m = next_cdc();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->flags.peer_conn_abort);
}

TEST_F(ConnectionTest, ProducerWritingPastTheWindowAborts) {
  send_cdc(1, {2, 100}, {0, 4});  // two wraps ahead: more than the RMBE holds
  expect_reset();
}

TEST_F(ConnectionTest, ProducerMovingBackwardsAborts) {
  peer_writes("abcdef", 1);
  send_cdc(2, {0, 6}, {0, 4});
  // The abort answers the second CDC; only then is the outcome settled (a
  // read between the two messages would legitimately return the 6 bytes).
  auto m = next_cdc();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->flags.peer_conn_abort);
  expect_reset();
}

TEST_F(ConnectionTest, ConsumerBeyondOurProducerAborts) {
  send_cdc(1, {0, 4}, {0, 500});  // we never wrote 496 bytes
  expect_reset();
}

TEST_F(ConnectionTest, ForgedTokenTouchesNothing) {
  cdc::Message m;
  m.seq = 1;
  m.alert_token = 0xDEAD;
  m.producer = {0, 1000};
  auto b = cdc::encode(m);
  send_raw(b.data(), b.size());
  peer_writes("ok", 2);
  std::string got;
  EXPECT_EQ(read_app(&got), 2);
  EXPECT_EQ(got, "ok");
}

TEST_F(ConnectionTest, UnknownMandatoryLlcTakesTheLinkDown) {
  uint8_t msg[44] = {0x05, 44};
  send_raw(msg, sizeof msg);
  expect_reset();
}

TEST_F(ConnectionTest, OptionalUnknownLlcIsDiscarded) {
  uint8_t msg[44] = {0x85, 44};
  send_raw(msg, sizeof msg);
  peer_writes("still fine", 1);
  std::string got;
  EXPECT_EQ(read_app(&got), 10);
}

TEST_F(ConnectionTest, WrongSizeMessageTakesTheLinkDown) {
  uint8_t msg[10] = {0xFE, 10};
  send_raw(msg, sizeof msg);
  expect_reset();
}

TEST_F(ConnectionTest, TestLinkIsAnswered) {
  llc::TestLink t;
  for (int i = 0; i < 16; ++i) t.user_data[i] = static_cast<uint8_t>(i + 1);
  auto b = llc::encode(t);
  send_raw(b.data(), b.size());
  auto reply = next_llc<llc::TestLink>();
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->reply);
  EXPECT_EQ(reply->user_data, t.user_data);
}

TEST_F(ConnectionTest, OverwrittenEyecatcherAbortsOnRead) {
  our_rmb_as_peer_.addr[0] = 0;
  peer_writes("x", 1);
  expect_reset();
}

TEST_F(ConnectionTest, PeerDoneGivesEofAfterData) {
  memcpy(our_rmb_as_peer_.addr + 4, "last", 4);
  cdc::Flags f;
  f.peer_done_writing = true;
  send_cdc(1, {0, 8}, {0, 4}, f);
  std::string got;
  EXPECT_EQ(read_app(&got), 4);
  EXPECT_EQ(read_app(&got), 0);
  EXPECT_EQ(conn_->state(), CloseState::kAppCloseWait1);
}

Connection* g_sigpipe_conn = nullptr;
volatile sig_atomic_t g_sigpipe_handler_send = 0;  // 1: sent; -errno: failed

void send_again_on_sigpipe(int) {
  char b = 'z';
  iovec iov{&b, 1};
  g_sigpipe_handler_send = g_sigpipe_conn->sendv(&iov, 1, MSG_NOSIGNAL) < 0 ? -errno : 1;
}

// As with TCP, a SIGPIPE handler may use the socket whose write raised it
// (log through it, close it): the signal comes after the connection is
// unlocked. Raised under its lock, this handler's send deadlocked.
TEST_F(ConnectionTest, SigpipeHandlerMayUseTheSocket) {
  cdc::Flags f;
  f.peer_conn_abort = true;
  send_cdc(1, {0, 4}, {0, 4}, f);
  barrier();
  struct sigaction sa {}, old{};
  sa.sa_handler = send_again_on_sigpipe;
  ASSERT_EQ(sigaction(SIGPIPE, &sa, &old), 0);
  g_sigpipe_conn = conn_;
  char b = 'x';
  iovec iov{&b, 1};
  errno = 0;
  EXPECT_EQ(conn_->sendv(&iov, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);  // the reset is reported once, no signal
  EXPECT_EQ(g_sigpipe_handler_send, 0);
  EXPECT_EQ(conn_->sendv(&iov, 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);  // the handler's own failure did not change it
  EXPECT_EQ(g_sigpipe_handler_send, -EPIPE);
  sigaction(SIGPIPE, &old, nullptr);
}

TEST_F(ConnectionTest, PeerVanishingResetsAfterBufferedData) {
  peer_writes("tail", 1);
  std::string got;
  pollfd p{app_fd_, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  close(peer_link_);
  peer_link_ = -1;
  // Wait for the engine to notice the hangup (the app fd hangs up too).
  for (int i = 0; i < 200 && !(p.revents & POLLHUP); ++i) {
    poll(&p, 1, 10);
  }
  EXPECT_EQ(read_app(&got), 4);
  EXPECT_EQ(got, "tail");
  expect_reset();
}

// The engine enters a connection's TCP socket in its epoll set only after
// a while (Engine::watch_tcp): a peer whose TCP end closes before that, with
// no SMC-R close, is still found (the registration reports the hang-up at
// once), and the application sees the end after the grace period.
TEST_F(ConnectionTest, PeerTcpClosingBeforeTheWatchRegistersIsStillSeen) {
  int tcp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tcp), 0);
  conn_->set_tcp_fd(tcp[0]);  // the connection closes it
  Engine::get().watch_tcp(conn_, tcp[0]);
  close(tcp[1]);
  pollfd p{app_fd_, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "the peer's TCP end was never noticed";
  std::string got;
  EXPECT_EQ(read_app(&got), 0) << "the peer had read everything: end of file, as TCP's FIN";
}

// What a connection asked of the engine, recorded instead of done.
class RecordedServices : public ConnectionServices {
 public:
  void arm_timer(Connection*) override { ++timers; }
  void watch_tcp(Connection*, int) override { ++watches; }
  void unwatch_tcp(Connection*) override { ++unwatches; }
  void add_group(LinkGroup*) override { ++groups; }
  int timers = 0, watches = 0, unwatches = 0, groups = 0;
};

size_t threads_of_this_process() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// A connection is driven without the engine thread: the test delivers its
// CDCs, its TCP peer's end and its timer itself, as the engine would, and
// sees what the engine was asked to do.
class ConnectionWithoutEngineTest : public ConnectionTest {
 protected:
  void SetUp() override {
    with_engine_ = false;
    set_connection_services(&services_);
    threads_before_ = threads_of_this_process();
    ConnectionTest::SetUp();
  }
  void TearDown() override {
    ConnectionTest::TearDown();
    set_connection_services(nullptr);
  }
  RecordedServices services_;
  size_t threads_before_ = 0;
};

TEST_F(ConnectionWithoutEngineTest, CdcsTimerAndPeerGoneComeFromTheTest) {
  memcpy(our_rmb_as_peer_.addr + 4, "hello", 5);
  conn_->on_cdc(cdc_to_us(1, {0, 9}, {0, 4}));
  std::string got;
  ASSERT_EQ(read_app(&got, 0), 5) << "the CDC made the data readable at once, no thread between";
  EXPECT_EQ(got, "hello");

  conn_->on_tcp_peer_gone();
  EXPECT_EQ(services_.timers, 1) << "the grace timer for the peer's SMC-R close was asked for";
  int64_t deadline = conn_->timer_deadline();
  ASSERT_GT(deadline, 0);
  conn_->on_timer(deadline);
  // No C came within the grace and the peer had read everything: its end
  // reads as its close, as over TCP.
  EXPECT_EQ(read_app(&got, 0), 0);
  EXPECT_EQ(threads_of_this_process(), threads_before_) << "no engine thread was started";
}

// The engine thread never waits for an application thread that holds the
// connection (a blocking read or write can hold it for seconds): the peer's
// TCP end and the timer it arms are parked like CDCs and processed by the
// holder as it lets go.
TEST_F(ConnectionTest, EngineEventsDoNotWaitForTheConnectionsHolder) {
  using namespace std::chrono_literals;
  conn_->lock();
  auto gone = std::async(std::launch::async, [&] { conn_->on_tcp_peer_gone(); });
  EXPECT_EQ(gone.wait_for(10s), std::future_status::ready) << "on_tcp_peer_gone waited for the holder";
  EXPECT_EQ(conn_->timer_deadline(), 0) << "processed before the holder let go";
  conn_->unlock();
  gone.wait();
  int64_t deadline = conn_->timer_deadline();
  ASSERT_GT(deadline, 0) << "the grace timer is armed once the holder let go";

  conn_->lock();
  auto timer = std::async(std::launch::async, [&] { conn_->on_timer(deadline); });
  EXPECT_EQ(timer.wait_for(10s), std::future_status::ready) << "on_timer waited for the holder";
  conn_->unlock();
  timer.wait();
  // No C came within the grace and the peer had read everything: its end
  // reads as its close (end of file), as over TCP.
  pollfd p{app_fd_, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  std::string got;
  EXPECT_EQ(read_app(&got), 0);
}

TEST_F(ConnectionTest, ReceiverSendsWindowUpdateWhenWriterBlocked) {
  std::string data(1000, 'd');
  memcpy(our_rmb_as_peer_.addr + 4, data.data(), data.size());
  cdc::Flags f;
  f.writer_blocked = true;
  send_cdc(1, {0, 1004}, {0, 4}, f);
  std::string got;
  EXPECT_GT(read_app(&got), 0);
  auto m = next_cdc();
  ASSERT_TRUE(m) << "a blocked writer must get a consumer update (RFC 4.5.1 c)";
  EXPECT_EQ(m->consumer.offset, 4u + static_cast<uint32_t>(got.size()));
}

}  // namespace
}  // namespace smcr

namespace smcr {
namespace {

// A peer that exits with our messages still unread in its queue leaves the
// kernel's ECONNRESET on our link, reported ahead of its own last messages:
// its data and its C must still be delivered (then EOF, not a reset).
TEST_F(ConnectionTest, PeerExitingWithUnreadMessagesStillDeliversItsClose) {
  const char msg[] = "unread";
  iovec iov{const_cast<char*>(msg), 6};
  ASSERT_EQ(conn_->sendv(&iov, 1, 0), 6);  // its CDC stays unread by the peer
  memcpy(our_rmb_as_peer_.addr + 4, "bye", 3);
  cdc::Flags f;
  f.peer_conn_closed = true;
  send_cdc(1, {0, 7}, {0, 4}, f);
  close(peer_link_);
  peer_link_ = -1;
  std::string got;
  EXPECT_EQ(read_app(&got), 3);
  EXPECT_EQ(got, "bye");
  EXPECT_EQ(read_app(&got), 0) << "EOF, not ECONNRESET: the peer closed properly";
}

}  // namespace
}  // namespace smcr

namespace smcr {
namespace {

// RFC 3.5.5.2.2: an RMB that goes away is announced with DELETE RKEY; an
// RKey the receiver never had gets a negative reply with its bit set.
TEST_F(ConnectionTest, DeleteRkeyForAnUnknownRkeyIsAnsweredNegatively) {
  llc::DeleteRkey d;
  d.count = 2;
  d.rkeys[0] = 0x11111111;  // never announced to us
  d.rkeys[1] = 0x22222222;
  auto b = llc::encode(d);
  send_raw(b.data(), b.size());
  auto reply = next_llc<llc::DeleteRkey>();
  ASSERT_TRUE(reply) << "no DELETE RKEY reply";
  EXPECT_TRUE(reply->reply);
  EXPECT_TRUE(reply->negative);
  EXPECT_EQ(reply->error_mask, 0xC0);
}

// An aborted connection's RMB may still be written by the peer: it is not
// reused but deleted, and the peer is told.
TEST_F(ConnectionTest, AbortedConnectionAnnouncesItsRmbWithDeleteRkey) {
  uint32_t rkey = ours_.rkey;
  cdc::Flags f;
  f.peer_conn_abort = true;
  send_cdc(1, {0, 4}, {0, 4}, f);
  barrier();
  conn_->app_close(false);
  conn_ = nullptr;
  auto d = next_llc<llc::DeleteRkey>();
  ASSERT_TRUE(d) << "no DELETE RKEY after the connection ended";
  EXPECT_FALSE(d->reply);
  EXPECT_EQ(d->count, 1);
  EXPECT_EQ(d->rkeys[0], rkey);
  EXPECT_EQ(group_->pooled_rmbs(), 0u);
}

// RFC 3.5.2: RMBs belong to the link group. After an orderly close (both C)
// neither side writes the RMBE again: the group keeps ours, still known to
// the peer (no DELETE RKEY), with a cleared control page, for its next
// connection of that size.
TEST_F(ConnectionTest, OrderlyClosedConnectionLeavesItsRmbInTheGroupsPool) {
  uint8_t* control = ours_.control;
  ASSERT_NE(control, nullptr);
  conn_->app_close(false);
  conn_ = nullptr;
  cdc::Flags f;
  f.peer_conn_closed = true;
  send_cdc(1, {0, 4}, {0, 4}, f);
  barrier();
  EXPECT_FALSE(next_llc<llc::DeleteRkey>(300)) << "a pooled RMB must stay registered";
  EXPECT_EQ(group_->pooled_rmbs(), 1u);
  std::array<LocalRmb, kMaxGroupLinks> again{};
  ASSERT_TRUE(group_->take_pooled_rmb(kRmbSize, &again));
  EXPECT_EQ(again[0].rkey, ours_.rkey);
  EXPECT_EQ(again[0].addr, ours_.addr);
  for (size_t i = 0; i < cdcmem::kControlBytes; ++i) ASSERT_EQ(control[i], 0) << "control byte " << i;
  EXPECT_FALSE(group_->take_pooled_rmb(kRmbSize, &again)) << "one RMB, taken once";
  shm_free_rmb(&again[0]);
}

// Our application closed first and our C went on the link; the page then
// says the peer's C may come through memory alone, and a timer of the engine
// finds it there (no message on the link): the connection ends and its RMB
// is pooled.
TEST_F(ConnectionTest, AfterOurCloseThePeersCloseIsFoundInMemory) {
  uint8_t* control = ours_.control;
  ASSERT_NE(control, nullptr);
  EXPECT_FALSE(cdcmem::close_in_memory_welcome(control, kLocalToken));
  conn_->app_close(false);
  conn_ = nullptr;
  auto ours = next_cdc();
  ASSERT_TRUE(ours && ours->flags.peer_conn_closed) << "our C goes on the link: the peer's application is open";
  EXPECT_TRUE(cdcmem::close_in_memory_welcome(control, kLocalToken));
  EXPECT_FALSE(cdcmem::close_in_memory_welcome(control, kLocalToken + 1)) << "the word names this connection";
  ASSERT_EQ(group_->connection_count(), 1u);
  cdc::Flags f;
  f.peer_conn_closed = true;
  cdcmem::publish(control, cdc_to_us(1, {0, 4}, ours->producer, f));
  for (int i = 0; i < 200 && group_->connection_count() != 0; ++i) usleep(5000);
  EXPECT_EQ(group_->connection_count(), 0u) << "the timer did not find the C in memory";
  EXPECT_EQ(group_->pooled_rmbs(), 1u);
}

// The other side of it: the peer closed first and welcomed our C in memory;
// our application's close publishes it in the peer's page and posts nothing.
// Without the word, the same close goes on the link (the test above).
TEST_F(ConnectionTest, OurCloseAnsweringAPeerThatWelcomedItStaysInMemory) {
  ASSERT_NE(peers_.control, nullptr);
  cdcmem::welcome_close_in_memory(peers_.control, kPeerToken);
  cdc::Flags f;
  f.peer_conn_closed = true;
  send_cdc(1, {0, 4}, {0, 4}, f);
  barrier();
  conn_->app_close(false);
  conn_ = nullptr;
  EXPECT_FALSE(next_cdc(300)) << "our C went on the link";
  uint32_t seen = 0;
  cdc::Message got;
  cdcmem::UrgentRecord urgent;
  ASSERT_TRUE(cdcmem::fetch(peers_.control, &seen, &got, &urgent));
  EXPECT_TRUE(got.flags.peer_conn_closed);
  EXPECT_EQ(got.alert_token, kPeerToken);
  EXPECT_EQ(group_->connection_count(), 0u);
}

}  // namespace
}  // namespace smcr

namespace smcr {
namespace {

// Found by cdc_sequence_fuzz. After our D (shutdown SHUT_WR) and the peer's
// C the connection waits in AppFinCloseWait for the application's close; our
// C has not gone. An abortive close there (SO_LINGER 0) was dropped as if C
// had been sent: no A, no timer, and the connection stayed in its group for
// good.
TEST_F(ConnectionTest, AbortiveCloseAfterOurDoneAndThePeersCloseEndsTheConnection) {
  ASSERT_EQ(conn_->shutdown(SHUT_WR), 0);
  auto d = next_cdc();
  ASSERT_TRUE(d && d->flags.peer_done_writing);
  cdc::Flags f;
  f.peer_conn_closed = true;
  send_cdc(1, {0, 4}, {0, 4}, f);
  barrier();
  ASSERT_EQ(conn_->state(), CloseState::kAppFinCloseWait);
  conn_->app_close(true);
  conn_ = nullptr;
  auto a = next_cdc();
  ASSERT_TRUE(a) << "no A after the abortive close";
  EXPECT_TRUE(a->flags.peer_conn_abort);
  cdc::Flags fa;
  fa.peer_conn_abort = true;
  send_cdc(2, {0, 4}, {0, 4}, fa);
  barrier();
  EXPECT_EQ(group_->connection_count(), 0u);
}

// The same state, and data after the peer's C (a protocol violation): the
// connection aborts with A, its consumer cursor where the application left
// it. It sent nothing, and the application's later close then posted a C
// whose consumer cursor counted the discarded bytes as read.
TEST_F(ConnectionTest, ProtocolViolationAfterThePeersCloseStillAborts) {
  ASSERT_EQ(conn_->shutdown(SHUT_WR), 0);
  ASSERT_TRUE(next_cdc());
  memcpy(our_rmb_as_peer_.addr + 4, "hello", 5);
  cdc::Flags f;
  f.peer_conn_closed = true;
  send_cdc(1, {0, 9}, {0, 4}, f);
  barrier();
  ASSERT_EQ(conn_->state(), CloseState::kAppFinCloseWait);
  send_cdc(2, {0, 14}, {0, 4});  // more data after C
  auto a = next_cdc();
  ASSERT_TRUE(a) << "no A after the protocol violation";
  EXPECT_TRUE(a->flags.peer_conn_abort);
  EXPECT_FALSE(a->flags.peer_conn_closed);
  EXPECT_EQ(a->consumer, (cdc::Cursor{0, 4})) << "the unread bytes were not consumed";
}

}  // namespace
}  // namespace smcr
