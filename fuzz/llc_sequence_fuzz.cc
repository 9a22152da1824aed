// LLC message sequences into a real link group, as its peer sends them: one
// or two real SEQPACKET links (ShmLink), client or server, RFC 7609 framing
// (version 1) or Linux's SMC-Rv2 framing (version 2, a length field, longer
// messages), optionally with one real connection on the group (its RMB
// registered on both links) so that a deleted or failed link moves it (RFC
// 4.6). Messages are fed with LinkGroup::dispatch from the fuzzer's thread,
// as the engine thread would; keepalive ticks (LinkGroup::keepalive_tick,
// with a clock the input advances) send TEST LINKs that the input may echo,
// or not, or wrongly.
//
// An input is a configuration byte (bit 0: client, bit 1: version 2, bit 2:
// two links, bit 3: a connection), then operations (LlcOp) until it ends.
// Invariants (abort on violation): no crash or sanitizer report; everything
// the group (or its connection) sends the peer is one 44-byte message that
// decodes: LLC with core/llc.h's decoders for the group's version (v1
// decode, or v2 decode / decode_req_add_link), CDCs with cdc::decode, the
// shm fabric's own messages (bell, re-homing) with theirs; the connection
// ends with the peer's A at the end of the input.
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "core/cdc.h"
#include "core/cdc_mem.h"
#include "core/ready_set.h"
#include "core/connection.h"
#include "core/fabric_shm.h"
#include "core/handoff.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/sys.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/group_hold.h"

using namespace smcr;
using namespace smcr::fuzz;

namespace {

enum LlcOp : uint8_t {
  kMsg,       // u8 slot, 44 bytes: one message on that link
  kMsgSized,  // u8 slot, u16 length (mod 512), that many bytes (a version-2 message, or a wrong size)
  kTick,      // u8 slot, u16 ms the clock advances, u8 interval (x 20 ms): the engine's keepalive tick
  kEcho,      // u8 slot, u8 how: the reply to the group's last TEST LINK (how & 1: corrupted)
  kLinkFail,  // u8 slot: the link fails (the engine's reaction to a hang-up)
  kAppWrite,  // u16 n
  kAppRead,   // u16 n
  kCdc,       // u8 slot, u8 flags, u16 seq, u16 producer offset, u16 consumer offset, u8 wraps
  kAppClose,  // u8 (1: abortive)
  kOpCount,
};

constexpr uint32_t kLocalToken = 0xC001;
constexpr uint32_t kPeerToken = 0xD001;
constexpr uint32_t kRmbSize = 16384;

class LlcRig {
 public:
  explicit LlcRig(uint8_t cfg)
      : role_((cfg & 1) ? Role::kClient : Role::kServer), v2_((cfg & 2) != 0), links_((cfg & 4) ? 2 : 1) {
    int ours[2] = {-1, -1};
    for (int i = 0; i < links_; ++i) {
      int lk[2];
      FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lk) == 0, "socketpair: %s", strerror(errno));
      ours[i] = lk[0];
      peer_[i] = lk[1];
    }
    group_ = make_held_group(role_, v2_, ours[0], ours[1]);
    now_ms_ = sys::now_ms();
    if (!(cfg & 8)) return;
    LocalRmb rmb;
    FUZZ_CHECK(shm_alloc_rmb(kRmbSize, &rmb), "shm_alloc_rmb");
    FUZZ_CHECK(shm_alloc_rmb(kRmbSize, &peer_rmb_), "shm_alloc_rmb");
    RemoteRmb view;
    FUZZ_CHECK(shm_map_remote(::dup(peer_rmb_.handle), kRmbSize, &view), "shm_map_remote");
    ConnectionSetup s;
    s.group = group_;
    s.rmbs[0] = rmb;
    s.peer_rmbs[0] = view;
    if (links_ == 2) {
      FUZZ_CHECK(group_->link_at(1)->register_alias(rmb, &s.rmbs[1]), "register_alias");
      s.peer_rmbs[1] = view;
      s.peer_rmbs[1].alias = true;  // one mapping serves both links
    }
    s.local_token = kLocalToken;
    s.peer_token = kPeerToken;
    s.rmbe_base = group_->rmbe_base();
    conn_ = Connection::create(s);
    conn_->ref();  // ours, for the input
    int sv[2];
    FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s", strerror(errno));
    conn_->attach_fds(sv[0], sv[1], /*nonblocking=*/true);
  }

  ~LlcRig() {
    if (conn_) {
      for (uint16_t k = 0; k < 3; ++k) {  // one of them is newer than what the connection took
        cdc::Message a;
        a.seq = static_cast<uint16_t>(seq_ + 1 + k * 21845);
        a.alert_token = kLocalToken;
        a.producer = a.consumer = {0, group_->rmbe_base()};
        a.flags.peer_conn_abort = true;
        conn_->on_cdc(a);
      }
      if (!app_closed_) conn_->app_close(true);
      drain();
      FUZZ_CHECK(group_->connection_count() == 0, "the connection outlived the peer's A and the application's close");
      conn_->unref();
    }
    end_held_group(group_);
    drain();
    for (int fd : peer_)
      if (fd >= 0) ::close(fd);
    if (conn_) shm_free_rmb(&peer_rmb_);
  }

  void run(Reader& in) {
    while (!in.done()) {
      step(in, static_cast<LlcOp>(in.u8() % kOpCount));
      drain();
    }
  }

 private:
  int slot(Reader& in) { return in.u8() % links_; }

  void feed(int s, std::span<const uint8_t> msg) { group_->dispatch(s, msg); }

  void step(Reader& in, LlcOp op) {
    switch (op) {
      case kMsg: {
        int s = slot(in);
        std::array<uint8_t, llc::kMessageLen> m{};
        auto b = in.bytes(m.size());
        std::copy(b.begin(), b.end(), m.begin());
        feed(s, m);
        break;
      }
      case kMsgSized: {
        int s = slot(in);
        size_t n = in.u16() % 512;
        std::vector<uint8_t> m(n, 0);
        auto b = in.bytes(n);
        std::copy(b.begin(), b.end(), m.begin());
        feed(s, m);
        break;
      }
      case kTick: {
        int s = slot(in);
        now_ms_ += in.u16();
        int64_t interval = 20 * (1 + int64_t{in.u8()});
        // As the engine: a link that is up and whose tick fails goes down.
        if (!group_->failed() && group_->link_up(s) && !group_->keepalive_tick(s, now_ms_, interval))
          group_->on_link_failure(s);
        break;
      }
      case kEcho: {
        int s = slot(in);
        uint8_t how = in.u8();
        if (!probe_) break;
        llc::TestLink t;
        t.reply = true;
        t.user_data = *probe_;
        if (how & 1) t.user_data[(how >> 1) % 16] ^= 0x5A;
        feed(s, LinkGroup::wire_for(group_->llc_version(), t));
        break;
      }
      case kLinkFail:
        group_->on_link_failure(slot(in));
        break;
      case kAppWrite: {
        size_t n = 1 + in.u16() % (sizeof buf_ - 1);
        if (!conn_ || app_closed_) break;
        std::memset(buf_, 'w', n);
        iovec iov{buf_, n};
        ssize_t r = conn_->sendv(&iov, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        FUZZ_CHECK(r <= static_cast<ssize_t>(n), "send returned %zd for %zu", r, n);
        break;
      }
      case kAppRead: {
        size_t n = 1 + in.u16() % (sizeof buf_ - 1);
        if (!conn_ || app_closed_) break;
        iovec iov{buf_, n};
        ssize_t r = conn_->recvv(&iov, 1, MSG_DONTWAIT);
        FUZZ_CHECK(r <= static_cast<ssize_t>(n), "recv returned %zd for %zu", r, n);
        break;
      }
      case kCdc: {
        int s = slot(in);
        uint8_t f = in.u8();
        cdc::Message m;
        m.seq = in.u16();
        uint16_t prod = in.u16(), cons = in.u16();
        uint8_t wraps = in.u8();
        m.alert_token = kLocalToken;
        m.producer = {static_cast<uint16_t>(wraps & 0x0F), prod};
        m.consumer = {static_cast<uint16_t>(wraps >> 4), cons};
        m.flags = cdc_flags_from(f);
        if (cdc::seq_newer(m.seq, seq_)) seq_ = m.seq;
        feed(s, cdc::encode(m));
        break;
      }
      case kAppClose: {
        bool abortive = in.u8() & 1;
        if (!conn_ || app_closed_) break;
        app_closed_ = true;
        conn_->app_close(abortive);
        break;
      }
      case kOpCount:
        break;
    }
  }

  // Everything sent to the peer since the last look, on every link.
  void drain() {
    for (int i = 0; i < links_; ++i) {
      for (;;) {
        ssize_t n = ::recv(peer_[i], rx_, sizeof rx_, MSG_DONTWAIT);
        if (n <= 0) break;
        check_sent(i, std::span<const uint8_t>(rx_, static_cast<size_t>(n)));
      }
    }
  }

  void check_sent(int link, std::span<const uint8_t> m) {
    FUZZ_CHECK(m.size() == llc::kMessageLen, "a %zu-byte message on link %d (type %02x)", m.size(), link,
               m.empty() ? 0 : m[0]);
    const uint8_t type = m[0];
    if (type == cdc::kType) {
      auto c = cdc::decode(m);
      FUZZ_CHECK(c.has_value(), "a CDC that does not decode on link %d", link);
      FUZZ_CHECK(c->alert_token == kPeerToken, "a CDC for token %08x", c->alert_token);
      return;
    }
    if (type == cdcmem::kBellMessageType) {
      FUZZ_CHECK(cdcmem::decode_bell(m).has_value(), "a bell message that does not decode");
      return;
    }
    // (An LLC reply to a peer's unknown request of the same type, flags in
    // byte 2, goes on to the LLC checks below.)
    if (type == readyset::kMessageType && !(m[2] & 0x80)) {
      FUZZ_CHECK(readyset::decode(m).has_value(), "a ready-set announcement that does not decode");
      return;
    }
    if (type == handoff::kRehomeMessageType) {
      FUZZ_CHECK(handoff::decode_rehome(m).has_value(), "a re-homing message that does not decode");
      return;
    }
    llc::DecodeError err = llc::DecodeError::kNone;
    std::optional<llc::Message> d;
    if (v2_) {
      FUZZ_CHECK((type >> 4) == llc::v2::kVersion, "a version-2 group sent LLC type %02x", type);
      if ((type & 0x0F) == llc::v2::kReqAddLinkType) {
        FUZZ_CHECK(llc::v2::decode_req_add_link(m, &err).has_value(), "REQ ADD LINK that does not decode: %.*s",
                   static_cast<int>(llc::to_string(err).size()), llc::to_string(err).data());
        return;
      }
      d = llc::v2::decode(m, &err);
    } else {
      d = llc::decode(m, &err);
    }
    FUZZ_CHECK(d.has_value(), "LLC %02x %02x %02x %02x sent on link %d does not decode: %.*s", m[0], m[1], m[2], m[3],
               link, static_cast<int>(llc::to_string(err).size()), llc::to_string(err).data());
    if (auto* t = std::get_if<llc::TestLink>(&*d); t && !t->reply) probe_ = t->user_data;
  }

  const Role role_;
  const bool v2_;
  const int links_;
  int peer_[2] = {-1, -1};
  LinkGroup* group_ = nullptr;
  Connection* conn_ = nullptr;
  LocalRmb peer_rmb_;
  bool app_closed_ = false;
  uint16_t seq_ = 0;
  int64_t now_ms_ = 0;
  std::optional<std::array<uint8_t, 16>> probe_;
  uint8_t buf_[20000];
  uint8_t rx_[9000];
};

// --- seeds ------------------------------------------------------------------

class OpW {
 public:
  explicit OpW(uint8_t cfg) { w_.u8(cfg); }
  OpW& msg(int s, std::span<const uint8_t> m) {
    w_.u8(kMsg).u8(static_cast<uint8_t>(s)).bytes(m.first(std::min<size_t>(m.size(), 44)));
    return *this;
  }
  OpW& sized(int s, std::span<const uint8_t> m) {
    w_.u8(kMsgSized).u8(static_cast<uint8_t>(s)).u16(static_cast<uint16_t>(m.size())).bytes(m);
    return *this;
  }
  OpW& tick(int s, uint16_t ms, uint8_t interval = 49) {
    w_.u8(kTick).u8(static_cast<uint8_t>(s)).u16(ms).u8(interval);
    return *this;
  }
  OpW& echo(int s, uint8_t how = 0) {
    w_.u8(kEcho).u8(static_cast<uint8_t>(s)).u8(how);
    return *this;
  }
  OpW& fail(int s) {
    w_.u8(kLinkFail).u8(static_cast<uint8_t>(s));
    return *this;
  }
  OpW& write(uint16_t n) {
    w_.u8(kAppWrite).u16(static_cast<uint16_t>(n - 1));
    return *this;
  }
  OpW& read(uint16_t n) {
    w_.u8(kAppRead).u16(static_cast<uint16_t>(n - 1));
    return *this;
  }
  OpW& cdc(int s, uint8_t flags, uint16_t seq, uint16_t prod, uint16_t cons, uint8_t wraps = 0) {
    w_.u8(kCdc).u8(static_cast<uint8_t>(s)).u8(flags).u16(seq).u16(prod).u16(cons).u8(wraps);
    return *this;
  }
  OpW& close(bool abortive) {
    w_.u8(kAppClose).u8(abortive ? 1 : 0);
    return *this;
  }
  const std::vector<uint8_t>& data() const { return w_.data(); }

 private:
  Writer w_;
};

std::array<uint8_t, 16> some_data() {
  std::array<uint8_t, 16> d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(0xA0 + 3 * i);
  return d;
}

std::array<uint8_t, 44> v1(const llc::Message& m) { return llc::encode(m); }
std::vector<uint8_t> v2(const llc::Message& m) { return llc::v2::encode(m); }

llc::TestLink test_link(bool reply = false) {
  llc::TestLink t;
  t.reply = reply;
  t.user_data = some_data();
  return t;
}
llc::ConfirmRkey confirm_rkey(uint32_t rkey, bool reply = false) {
  llc::ConfirmRkey k;
  k.reply = reply;
  k.rkey = rkey;
  k.vaddr = 0x00007F0011223340ull;
  return k;
}
llc::DeleteRkey delete_rkey(std::initializer_list<uint32_t> rkeys, bool reply = false) {
  llc::DeleteRkey d;
  d.reply = reply;
  for (uint32_t k : rkeys) d.rkeys[d.count++] = k;
  return d;
}
llc::DeleteLink delete_link(uint8_t link, bool all = false, bool reply = false) {
  llc::DeleteLink d;
  d.reply = reply;
  d.all_links = all;
  d.orderly = all;
  d.link_num = all ? 0 : link;
  d.reason_code = llc::DeleteLink::kReasonLostPath;
  return d;
}
llc::AddLink add_link(bool with_rtokens) {
  llc::AddLink a;
  for (size_t i = 0; i < a.sender_mac.size(); ++i) a.sender_mac[i] = static_cast<uint8_t>(0x02 + i);
  for (size_t i = 0; i < a.sender_gid.size(); ++i) a.sender_gid[i] = static_cast<uint8_t>(0x30 + i);
  a.sender_qpn = 0x00ABCDEF;
  a.link_num = 2;
  a.mtu_code = 3;
  a.initial_psn = 0x123456;
  if (with_rtokens) {
    llc::AddLinkV2Ext ext;
    ext.client_target_gid = a.sender_gid;
    ext.rtokens.push_back(llc::RtokenPair{0x01020304, 0x05060708, 0x1122334455667788ull});
    a.v2_ext = ext;
  }
  return a;
}
llc::ConfirmLink confirm_link() {
  llc::ConfirmLink c;
  c.sender_qpn = 0x000102;
  c.link_num = 1;
  c.link_user_id = 0x01020304;
  c.max_links = 2;
  return c;
}

std::vector<uint8_t> raw(std::initializer_list<uint8_t> head, size_t size = 44) {
  std::vector<uint8_t> m(size, 0);
  std::copy(head.begin(), head.end(), m.begin());
  return m;
}

Seeds make_seeds() {
  Seeds s;
  auto add = [&](const char* name, const OpW& w) { s.emplace_back(name, w.data()); };
  const uint32_t kA = 0x0A0B0C0D, kB = 0x11223344;
  add("v1_server_rkeys", OpW(0).msg(0, v1(test_link())).msg(0, v1(confirm_rkey(kA))).msg(0, v1(confirm_rkey(kA)))
                             .msg(0, v1(delete_rkey({kA, kB}))).msg(0, v1(delete_rkey({kA}, true)))
                             .msg(0, v1(confirm_rkey(kB, true))).msg(0, v1(delete_link(1))));
  add("v1_client", OpW(1).msg(0, v1(add_link(false))).msg(0, v1(confirm_link())).msg(0, v1(test_link(true)))
                       .msg(0, v1(delete_link(3))).msg(0, v1(delete_link(1))).msg(0, v1(test_link())));
  add("v2_server", OpW(2).sized(0, raw({0x25, 44, 0, 0, 1})).sized(0, v2(test_link()))
                       .sized(0, v2(confirm_rkey(kA))).sized(0, v2(confirm_rkey(kA)))
                       .sized(0, v2(delete_rkey({kA, kB}))).sized(0, raw({0x2A, 44, 0, 0, 9, 9}))
                       .msg(0, v1(test_link())).sized(0, raw({0x22, 88, 0, 0}, 88)));
  add("v2_client_add_link", OpW(3).sized(0, v2(add_link(true))).sized(0, v2(add_link(false)))
                                .sized(0, v2(delete_link(0, true))));
  add("failover", OpW(1 | 4 | 8).write(100).cdc(0, 0, 1, 4 + 50, 4).msg(0, v1(delete_link(1))).read(100)
                      .cdc(1, 16, 1, 4 + 50, 4 + 100).cdc(1, 0, 2, 4 + 80, 4 + 100).read(100).write(10)
                      .tick(1, 60000).echo(1).msg(1, v1(delete_link(0, true))));
  add("server_two_links", OpW(4 | 8).write(10).msg(0, v1(delete_link(2))).msg(1, v1(test_link()))
                              .msg(0, v1(test_link())).cdc(0, 0, 1, 10, 14).fail(0).read(10));
  add("keepalive", OpW(0).tick(0, 60000).echo(0).tick(0, 60000).echo(0, 1).tick(0, 1).msg(0, v1(test_link())));
  add("keepalive_silent", OpW(1 | 8).tick(0, 60000).tick(0, 3000).read(10).write(10));
  add("odd_types", OpW(0).msg(0, raw({0x85, 44})).msg(0, cdc::encode(cdc::Message{1, 0xDEAD, {0, 1000}, {0, 4}, {}}))
                       .msg(0, cdcmem::encode_bell(0xC001)).msg(0, handoff::encode_rehome(handoff::Rehome{0xC001, 7}))
                       .msg(0, raw({0x05, 44})).sized(0, raw({0xFE, 10}, 10)));
  add("v1_conn", OpW(8).cdc(0, 0, 1, 4 + 100, 4).read(200).write(300).cdc(0, 8, 2, 4 + 100, 4 + 300)
                     .msg(0, v1(confirm_rkey(kA))).msg(0, v1(delete_rkey({kA}))).cdc(0, 64, 3, 4 + 100, 4 + 300)
                     .close(false).msg(0, v1(delete_link(0, true))));
  add("v2_conn", OpW(2 | 8).cdc(0, 0, 1, 100, 0).read(100).write(50).sized(0, raw({0x25, 44}))
                     .sized(0, v2(delete_rkey({kB}))).cdc(0, 128, 2, 100, 50));
  add("client_v2_two_links", OpW(1 | 2 | 4 | 8).write(10).sized(0, v2(delete_link(1))).read(10)
                                 .sized(1, v2(test_link())).tick(1, 5000).echo(1));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  write_seeds_if_asked(argc, argv, make_seeds);
  process_setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Reader in(data, size);
  LlcRig rig(in.u8());
  rig.run(in);
  return 0;
}
