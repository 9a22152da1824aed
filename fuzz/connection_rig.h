// One real SMC-R connection per fuzz input, driven by the fuzzer acting as
// its peer and as its application (cdc_sequence_fuzz, cdc_control_page_fuzz).
//
// Built as tests/unit/connection_test.cc builds one (tests/lib/shm_connection.h):
// real sealed-memfd RMBs (shm_alloc_rmb / shm_map_remote, each with its CDC
// control page), a real SEQPACKET link in a real LinkGroup (held, see
// fuzz/group_hold.h), Connection::create, attach_fds with a socketpair
// (non-blocking). The group is not handed to the engine thread:
// the fuzzer delivers every peer message itself, from its own thread
// (Connection::on_cdc, LinkGroup::dispatch, or a CDC published into the
// control page), so an input replays the same way each time. The engine
// thread still runs (close timers hold connections; retired groups are
// deleted there).
//
// An input is a configuration byte, then operations (Op) until it ends: the
// peer writes stream bytes into our RMB, sends CDCs (well-behaved or
// hostile: any sequence number, cursors behind, ahead or raw, any flags),
// scribbles over the RMB, consumes what our application sent; the
// application reads (peek, urgent, waitall), writes (urgent), shuts down,
// closes; engine events (TCP peer gone, link down or failed, timers, the
// peer's readiness socket). cdc_control_page_fuzz adds raw writes to the
// control page (torn slots, versions, garbage).
//
// A model of both byte streams is kept: bytes the peer wrote are f(position),
// bytes the application wrote are g(position). Invariants (abort on
// violation):
//  - the application never reads (nor skips, for urgent data) past the
//    furthest producer cursor the peer announced, counting only cursors
//    within one RMBE of what the application had consumed;
//  - what it reads is exactly the peer's bytes in order, wherever the peer
//    did not overwrite them or announce bytes it never wrote;
//  - every message our connection sends on the link decodes; its CDCs carry
//    the peer's token, link CDCs newer sequence numbers; its producer cursor
//    never moves back, never beyond what the application wrote, never more
//    than an RMBE beyond the furthest consumer cursor the peer gave; its
//    consumer cursor never moves back nor past what the application
//    consumed (otherwise the peer would overwrite unread bytes);
//  - the bytes it announced in the peer's RMB are the application's, in
//    order;
//  - bytes_readable never counts more than was announced;
//  - at the end of the input the peer's A ends the connection, and with the
//    application's close it is gone from its group.
#pragma once

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

#include "core/cdc.h"
#include "core/cdc_mem.h"
#include "core/connection.h"
#include "core/fabric_shm.h"
#include "core/link_group.h"
#include "core/llc.h"
#include "core/sys.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/group_hold.h"
#include "tests/lib/shm_connection.h"

namespace smcr::fuzz {

// One RMBE's geometry: stream positions (bytes since the connection began)
// and the cursors that name them.
struct Ring {
  uint32_t size = 0, base = 0, cap = 0;
  Ring() = default;
  Ring(uint32_t s, uint32_t b) : size(s), base(b), cap(s - b) {}
  uint32_t offset(uint64_t pos) const { return base + static_cast<uint32_t>(pos % cap); }
  cdc::Cursor cursor(uint64_t pos) const {
    return {static_cast<uint16_t>(pos / cap), offset(pos)};
  }
  // The position `c` names nearest to `ref` (a cursor's wrap count has 16
  // bits); nullopt when its offset is outside the data area.
  std::optional<uint64_t> position(const cdc::Cursor& c, uint64_t ref) const {
    if (c.offset < base || c.offset >= size) return std::nullopt;
    const uint64_t period = uint64_t{65536} * cap;
    const uint64_t v = uint64_t{c.wrap} * cap + (c.offset - base);
    const uint64_t origin = ref - ref % period;
    auto dist = [ref](uint64_t x) { return x > ref ? x - ref : ref - x; };
    uint64_t best = origin + v;
    if (origin >= period && dist(origin - period + v) < dist(best)) best = origin - period + v;
    if (dist(origin + period + v) < dist(best)) best = origin + period + v;
    return best;
  }
};

// The streams' contents: distinct for positions an RMBE apart.
inline uint8_t rx_byte(uint64_t pos) { return static_cast<uint8_t>(((pos + 1) * 0x9E3779B97F4A7C15ull) >> 56); }
inline uint8_t tx_byte(uint64_t pos) { return static_cast<uint8_t>(((pos + 7) * 0xC2B2AE3D27D4EB4Full) >> 56); }

struct ConnConfig {
  uint32_t rmb_size = 16384;
  uint32_t peer_rmb_size = 16384;
  uint32_t base = 4;  // 4: RFC 7609's eyecatcher; 0: Linux's model
  bool oob_inline = false;
  // bit 0: base 0; bit 1: our RMB 32 KiB; bit 2: the peer's 32 KiB;
  // bit 3: SO_OOBINLINE from the start.
  static ConnConfig from(uint8_t b) {
    ConnConfig c;
    c.base = (b & 1) ? 0 : 4;
    c.rmb_size = (b & 2) ? 32768 : 16384;
    c.peer_rmb_size = (b & 4) ? 32768 : 16384;
    c.oob_inline = (b & 8) != 0;
    return c;
  }
};

// The operations, by their byte modulo the count a target uses:
// cdc_sequence_fuzz kBasicOps, cdc_control_page_fuzz kAllOps.
enum Op : uint8_t {
  kPeerWrite,        // u16 n: the peer writes up to n stream bytes (within its window)
  kPeerCdc,          // CdcSpec: delivered with Connection::on_cdc
  kPeerCdcLink,      // CdcSpec (+ token): through LinkGroup::dispatch, as the engine delivers it
  kPeerCdcMemory,    // CdcSpec: published into our control page (cdcmem::publish)
  kPeerWriteAndCdc,  // u16 n, u8 via: a well-behaved write and its CDC
  kPeerConsume,      // u16 n: the peer reads (and checks) what our application sent
  kPeerScribble,     // u16 offset, u8 n, u8 value: the peer overwrites our RMB (eyecatcher too)
  kAppRead,          // u16 n, u8 flags (1 peek, 2 oob, 4 waitall, 8 two iovecs)
  kAppWrite,         // u16 n, u8 flags (1 oob, 2 two iovecs)
  kAppShutdown,      // u8 how
  kAppClose,         // u8 (1: abortive)
  kAppOption,        // u8 which, u16 value
  kEngineEvent,      // u8 which
  kBasicOps,
  // Hostile writes to the control page (cdc_control_page_fuzz):
  kPageWrite = kBasicOps,  // u16 offset, u8 n, n bytes
  kPageSlot,               // u8 ctl, CdcSpec: a CDC written raw into a slot (ctl: 1 slot, 2 bump version, 4 lock odd)
  kPageVersion,            // u32: the version word
  kPagePull,               // the connection takes its lock (and reads the page)
  kAllOps,
};

// CdcSpec: u8 flags (B P U R F D C A from bit 0), u8 modes (bits 0-1 seq:
// next, same, older by 1+u8, raw u16; bits 2-3 producer: what the peer
// wrote, that minus u16, plus u16 (announced, never written), raw u16 wrap +
// u16 offset; bits 4-5 consumer, likewise from what the peer consumed;
// bit 6: a forged alert token (link delivery only), u8.

class ConnRig {
 public:
  static constexpr uint32_t kLocalToken = 0xB001;
  static constexpr uint32_t kPeerToken = 0xA001;

  explicit ConnRig(const ConnConfig& cfg) {
    rx_.ring = Ring(cfg.rmb_size, cfg.base);
    tx_.ring = Ring(cfg.peer_rmb_size, cfg.base);
    rx_.dirty.assign(cfg.rmb_size, 0);
    testlib::ShmConnectionConfig c;
    c.rmb_size = cfg.rmb_size;
    c.peer_rmb_size = cfg.peer_rmb_size;
    c.local_token = kLocalToken;
    c.peer_token = kPeerToken;
    c.rmbe_base = cfg.base;
    c.map_ours_for_peer = false;  // the peer writes through ours_.addr
    c.hold_ref = true;            // ours, for the input: the object outlives its release
    c.make_group = [](int link_fd0, int link_fd1) { return make_held_group(Role::kServer, false, link_fd0, link_fd1); };
    FUZZ_CHECK(rig_.build(c), "%s", rig_.error.c_str());
    if (cfg.oob_inline) conn_->set_oob_inline(true);
    oob_inline_ = cfg.oob_inline;
    std::memcpy(eyecatcher_, ours_.addr, 4);
  }

  ~ConnRig() {
    // The peer aborts; one of three sequence numbers a third of the space
    // apart is newer than whatever the connection last took.
    refresh_page();
    for (uint16_t k = 0; k < 3; ++k) {
      cdc::Message a;
      a.seq = static_cast<uint16_t>(peer_seq_ + 1 + k * 21845);
      a.alert_token = kLocalToken;
      a.producer = rx_.ring.cursor(rx_.consumed);
      a.consumer = tx_.ring.cursor(tx_.peer_cons);
      a.flags.peer_conn_abort = true;
      conn_->on_cdc(a);
    }
    if (!app_closed_) {
      conn_->app_close(true);
      app_closed_ = true;
    }
    drain();
    FUZZ_CHECK(group_->connection_count() == 0, "the connection outlived the peer's A and the application's close");
    conn_->unref();
    conn_ = nullptr;  // the application closed it above: teardown must not again
    end_held_group(group_);
    rig_.teardown();
    if (bell_ >= 0) ::close(bell_);
  }

  // Runs the input's operations; `ops`: how many of Op the target uses.
  void run(Reader& in, int ops) {
    while (!in.done()) {
      refresh_page();
      Op op = static_cast<Op>(in.u8() % ops);
      if (tracing()) std::fprintf(stderr, "op %d\n", op);
      step(in, op);
      drain();
    }
  }

  // FUZZ_TRACE=1: each operation and what came of it, on stderr (to read a
  // reproducer).
  static bool tracing() {
    static const bool on = std::getenv("FUZZ_TRACE") != nullptr;
    return on;
  }

 private:
  struct RxModel {  // the peer's stream into our RMB
    Ring ring;
    uint64_t written = 0;       // the peer's bytes end here (or its announcement of unwritten ones)
    uint64_t announced_hi = 0;  // the furthest producer cursor announced, within an RMBE of `consumed`
    uint64_t consumed = 0;      // the connection's consumer cursor, as the application's reads moved it
    uint64_t known_cons = 0;    // the consumer cursor our connection last told the peer
    std::vector<uint8_t> dirty; // by RMB offset: not the stream byte of the position it holds
  };
  struct TxModel {  // our application's stream into the peer's RMB
    Ring ring;
    uint64_t written = 0;     // bytes the application's writes took
    uint64_t announced = 0;   // the producer cursor our connection announced
    uint64_t peer_cons = 0;   // what the peer consumed (or skipped by its consumer cursors)
    uint64_t claimed_hi = 0;  // the furthest consumer cursor the peer gave that our connection could take
  };

  void step(Reader& in, Op op) {
    switch (op) {
      case kPeerWrite:
        peer_write(in.u16());
        break;
      case kPeerCdc:
      case kPeerCdcLink:
      case kPeerCdcMemory: {
        bool forged = false;
        cdc::Message m = read_cdc(in, &forged);
        deliver(m, op == kPeerCdc ? 0 : op == kPeerCdcLink ? 1 : 2, forged);
        break;
      }
      case kPeerWriteAndCdc: {
        peer_write(in.u16());
        uint8_t via = in.u8();
        cdc::Message m;
        m.seq = ++peer_seq_;
        m.alert_token = kLocalToken;
        m.producer = rx_.ring.cursor(rx_.written);
        m.consumer = tx_.ring.cursor(tx_.peer_cons);
        deliver(m, via % 3, false);
        break;
      }
      case kPeerConsume:
        peer_consume(in.u16());
        break;
      case kPeerScribble: {
        uint16_t at = in.u16();
        uint8_t n = in.u8(), value = in.u8();
        if (app_closed_) break;  // the RMB may be gone (the connection released it)
        uint32_t from = at % rx_.ring.size;
        uint32_t to = std::min<uint32_t>(rx_.ring.size, from + n);
        std::memset(ours_.addr + from, value, to - from);
        std::fill(rx_.dirty.begin() + from, rx_.dirty.begin() + to, 1);
        break;
      }
      case kAppRead:
        app_read(in.u16(), in.u8());
        break;
      case kAppWrite:
        app_write(in.u16(), in.u8());
        break;
      case kAppShutdown: {
        int how = in.u8() % 3;  // SHUT_RD, SHUT_WR, SHUT_RDWR
        if (app_closed_) break;
        FUZZ_CHECK(conn_->shutdown(how) == 0, "shutdown(%d): %s", how, strerror(errno));
        if (how != SHUT_WR) shut_rd_ = true;
        break;
      }
      case kAppClose: {
        bool abortive = in.u8() & 1;
        if (app_closed_) break;
        app_closed_ = true;
        conn_->app_close(abortive);
        break;
      }
      case kAppOption:
        app_option(in.u8(), in.u16());
        break;
      case kEngineEvent:
        engine_event(in.u8());
        break;
      case kPageWrite: {
        uint16_t at = in.u16() % cdcmem::kControlBytes;
        auto b = in.bytes(in.u8());
        if (app_closed_) break;
        size_t n = std::min(b.size(), cdcmem::kControlBytes - at);
        std::memcpy(ours_.control + at, b.data(), n);
        keep_ringing_count_clear();
        break;
      }
      case kPageSlot: {
        uint8_t ctl = in.u8();
        bool forged = false;
        cdc::Message m = read_cdc(in, &forged);
        if (app_closed_) break;
        uint8_t* slot = ours_.control + ((ctl & 1) ? cdcmem::layout::kSlot1 : cdcmem::layout::kSlot0);
        auto wire = cdc::encode(m);
        std::memcpy(slot + cdcmem::layout::kCdcInSlot, wire.data(), wire.size());
        std::atomic_ref<uint32_t> lock(*reinterpret_cast<uint32_t*>(slot));
        lock.store((ctl & 4) ? (lock.load() | 1u) : (lock.load() & ~1u) + 2);
        if (ctl & 2) version_word().fetch_add(1);
        break;
      }
      case kPageVersion: {
        uint32_t v = in.u32();
        if (app_closed_) break;
        version_word().store(v);
        break;
      }
      case kPagePull:
        if (!app_closed_) (void)conn_->state();
        break;
      case kAllOps:
        break;
    }
  }

  cdc::Message read_cdc(Reader& in, bool* forged) {
    uint8_t f = in.u8(), modes = in.u8();
    cdc::Message m;
    m.flags = cdc_flags_from(f);
    switch (modes & 3) {
      case 0: m.seq = ++peer_seq_; break;
      case 1: m.seq = peer_seq_; break;
      case 2: m.seq = static_cast<uint16_t>(peer_seq_ - 1 - in.u8()); break;
      default: m.seq = peer_seq_ = in.u16(); break;
    }
    m.producer = read_cursor(in, (modes >> 2) & 3, rx_.ring, rx_.written);
    m.consumer = read_cursor(in, (modes >> 4) & 3, tx_.ring, tx_.peer_cons);
    *forged = modes & 0x40;
    m.alert_token = *forged ? kLocalToken + 1 + in.u8() : kLocalToken;
    return m;
  }

  static cdc::Cursor read_cursor(Reader& in, int mode, const Ring& ring, uint64_t at) {
    switch (mode) {
      case 0: return ring.cursor(at);
      case 1: return ring.cursor(at - std::min<uint64_t>(at, in.u16()));
      case 2: return ring.cursor(at + in.u16());
      default: {
        cdc::Cursor c;
        c.wrap = in.u16();
        c.offset = in.u16();
        return c;
      }
    }
  }

  // via: 0 Connection::on_cdc, 1 LinkGroup::dispatch, 2 our control page.
  void deliver(const cdc::Message& m, int via, bool forged) {
    if (via == 2 && app_closed_) via = 1;  // the control page may be gone with the RMB
    if (forged && via != 1) return;        // only the link can carry another connection's token here
    if (!forged) note_peer_cdc(m);
    if (via == 0) {
      conn_->on_cdc(m);
    } else if (via == 1) {
      auto wire = cdc::encode(m);
      group_->dispatch(0, std::span<const uint8_t>(wire.data(), wire.size()));
    } else {
      cdcmem::publish(ours_.control, m);
    }
  }

  // A CDC of the peer's the connection may process: what its cursors allow.
  void note_peer_cdc(const cdc::Message& m) {
    announce(m.producer);
    claim(m.consumer);
  }

  void announce(const cdc::Cursor& producer) {
    auto a = rx_.ring.position(producer, rx_.consumed);
    if (!a || *a <= rx_.consumed || *a - rx_.consumed > rx_.ring.cap) return;
    rx_.announced_hi = std::max(rx_.announced_hi, *a);
    if (*a > rx_.written) {
      // Announced but never written: whatever the RMB holds there.
      if (*a - rx_.written >= rx_.ring.cap) {
        std::fill(rx_.dirty.begin(), rx_.dirty.end(), 1);
      } else {
        for (uint64_t p = rx_.written; p < *a; ++p) rx_.dirty[rx_.ring.offset(p)] = 1;
      }
      rx_.written = *a;
    }
  }

  void claim(const cdc::Cursor& consumer) {
    auto c = tx_.ring.position(consumer, tx_.peer_cons);
    if (!c || *c > tx_.written) return;  // beyond what was written: the connection must refuse it
    tx_.claimed_hi = std::max(tx_.claimed_hi, *c);
    // The peer says it consumed up to there: those bytes are not checked,
    // and the connection may write over them.
    tx_.peer_cons = std::max(tx_.peer_cons, *c);
  }

  void peer_write(uint16_t want) {
    if (app_closed_) return;
    uint64_t in_flight = rx_.written - rx_.known_cons;
    if (in_flight >= rx_.ring.cap) return;
    uint64_t n = std::min<uint64_t>(want, rx_.ring.cap - in_flight);
    for (uint64_t p = rx_.written; p < rx_.written + n; ++p) {
      uint32_t off = rx_.ring.offset(p);
      ours_.addr[off] = rx_byte(p);
      rx_.dirty[off] = 0;
    }
    rx_.written += n;
  }

  void peer_consume(uint16_t want) {
    uint64_t avail = tx_.announced > tx_.peer_cons ? tx_.announced - tx_.peer_cons : 0;
    uint64_t n = std::min<uint64_t>(want, avail);
    for (uint64_t p = tx_.peer_cons; p < tx_.peer_cons + n; ++p) {
      uint8_t got = peers_.addr[tx_.ring.offset(p)];
      FUZZ_CHECK(got == tx_byte(p), "the peer's RMB holds %02x at stream position %llu (offset %u), the application wrote %02x",
                 got, static_cast<unsigned long long>(p), tx_.ring.offset(p), tx_byte(p));
    }
    tx_.peer_cons += n;
  }

  bool eyecatcher_intact() const { return rx_.ring.base == 0 || std::memcmp(ours_.addr, eyecatcher_, 4) == 0; }

  void app_read(uint16_t len, uint8_t fl) {
    if (app_closed_) return;
    const size_t want = 1 + len % (sizeof buf_ - 1);
    int flags = MSG_DONTWAIT;
    if (fl & 1) flags |= MSG_PEEK;
    if (fl & 2) flags |= MSG_OOB;
    if (fl & 4) flags |= MSG_WAITALL;
    iovec iov[2] = {{buf_, want}, {nullptr, 0}};
    int cnt = 1;
    if ((fl & 8) && want > 1) {
      iov[0].iov_len = want / 3;
      iov[1] = {buf_ + want / 3, want - want / 3};
      cnt = 2;
    }
    // A read that starts at the urgent byte (not in line) skips it, a peek
    // too (connection.cc says so): the model follows.
    bool skip = false;
    if (!(flags & MSG_OOB)) skip = conn_->at_urgent_mark() && !oob_inline_ && !shut_rd_ && eyecatcher_intact();
    ssize_t n = conn_->recvv(iov, cnt, flags);
    int err = errno;
    if (tracing())
      std::fprintf(stderr, "  read %zu flags %x skip %d -> %zd (errno %d) consumed %llu announced %llu written %llu\n", want,
                   flags, skip, n, n < 0 ? err : 0, static_cast<unsigned long long>(rx_.consumed),
                   static_cast<unsigned long long>(rx_.announced_hi), static_cast<unsigned long long>(rx_.written));
    if (flags & MSG_OOB) {
      FUZZ_CHECK(n <= 1, "recv(MSG_OOB) returned %zd", n);
      return;
    }
    if (skip) rx_.consumed += 1;
    FUZZ_CHECK(n <= static_cast<ssize_t>(want), "recv returned %zd for %zu", n, want);
    FUZZ_CHECK(n >= 0 || err == EAGAIN || err == ECONNRESET || err == EPIPE, "recv: unexpected errno %d", err);
    if (n <= 0) {
      FUZZ_CHECK(rx_.consumed <= rx_.announced_hi || rx_.consumed == 0,
                 "the urgent byte skipped at %llu was never announced (furthest %llu)",
                 static_cast<unsigned long long>(rx_.consumed - 1), static_cast<unsigned long long>(rx_.announced_hi));
      return;
    }
    const uint64_t start = rx_.consumed;
    FUZZ_CHECK(start + static_cast<uint64_t>(n) <= rx_.announced_hi,
               "read %zd bytes at stream position %llu, beyond the furthest producer cursor announced (%llu)", n,
               static_cast<unsigned long long>(start), static_cast<unsigned long long>(rx_.announced_hi));
    for (ssize_t i = 0; i < n; ++i) {
      uint64_t p = start + static_cast<uint64_t>(i);
      if (p >= rx_.written || rx_.dirty[rx_.ring.offset(p)]) continue;
      FUZZ_CHECK(buf_[i] == rx_byte(p), "read %02x at stream position %llu (offset %u), the peer wrote %02x", buf_[i],
                 static_cast<unsigned long long>(p), rx_.ring.offset(p), rx_byte(p));
    }
    if (!(flags & MSG_PEEK)) rx_.consumed += static_cast<uint64_t>(n);
  }

  void app_write(uint16_t len, uint8_t fl) {
    if (app_closed_) return;
    const size_t want = 1 + len % (sizeof buf_ - 1);
    for (size_t i = 0; i < want; ++i) buf_[i] = tx_byte(tx_.written + i);
    int flags = MSG_DONTWAIT | MSG_NOSIGNAL;
    if (fl & 1) flags |= MSG_OOB;
    iovec iov[2] = {{buf_, want}, {nullptr, 0}};
    int cnt = 1;
    if ((fl & 2) && want > 1) {
      iov[0].iov_len = want / 2;
      iov[1] = {buf_ + want / 2, want - want / 2};
      cnt = 2;
    }
    ssize_t n = conn_->sendv(iov, cnt, flags);
    if (tracing()) std::fprintf(stderr, "  write %zu flags %x -> %zd (errno %d)\n", want, flags, n, n < 0 ? errno : 0);
    FUZZ_CHECK(n <= static_cast<ssize_t>(want), "send returned %zd for %zu", n, want);
    if (n > 0) tx_.written += static_cast<uint64_t>(n);
  }

  void app_option(uint8_t which, uint16_t value) {
    if (app_closed_) return;
    switch (which % 10) {
      case 0:
      case 1:
        oob_inline_ = which % 10 == 0;
        conn_->set_oob_inline(oob_inline_);
        break;
      case 2:
        conn_->set_send_limit(value);
        break;
      case 3: {
        uint32_t r = conn_->bytes_readable();
        uint64_t most = rx_.announced_hi > rx_.consumed ? rx_.announced_hi - rx_.consumed : 0;
        FUZZ_CHECK(r <= most, "bytes_readable %u, but only %llu announced beyond what was consumed", r,
                   static_cast<unsigned long long>(most));
        break;
      }
      case 4:
        FUZZ_CHECK(conn_->bytes_writable() <= tx_.ring.cap, "bytes_writable beyond the peer's RMBE");
        break;
      case 5:
        (void)conn_->take_socket_error(0);
        break;
      case 6:
        (void)conn_->describe();
        break;
      case 7:
        (void)conn_->socket_error_pending();
        break;
      case 8:
        (void)conn_->reported_rcvbuf();
        (void)conn_->reported_sndbuf();
        break;
      default:
        (void)conn_->state();
        break;
    }
  }

  void engine_event(uint8_t which) {
    switch (which % 8) {
      case 0:
        conn_->on_tcp_peer_gone();
        break;
      case 1:
        conn_->on_link_down(0);
        break;
      case 2:
        conn_->on_link_failure();
        break;
      case 3:  // every armed timer (close wait, TCP grace) expires
        conn_->on_timer(sys::now_ms() + 24 * 3600 * 1000);
        break;
      case 4: {  // the peer's readiness socket: our CDCs may go through its control page only
        if (bell_ >= 0 || app_closed_) break;
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) break;
        bell_ = sv[0];
        conn_->set_peer_bell(sv[1]);
        break;
      }
      case 5:  // the engine's reaction to the link failing
        group_->on_link_failure(0);
        break;
      case 6: {  // an LLC exchange on the link (the answer is checked by drain)
        llc::TestLink t;
        t.user_data[0] = which;
        auto wire = llc::encode(t);
        group_->dispatch(0, std::span<const uint8_t>(wire.data(), wire.size()));
        break;
      }
      default:
        conn_->on_timer(sys::now_ms());
        break;
    }
  }

  // Everything our connection sent the peer since the last look: link
  // messages in order, then the newest CDC in the peer's control page.
  void drain() {
    uint8_t b[256];
    for (;;) {
      ssize_t n = ::recv(peer_link_, b, sizeof b, MSG_DONTWAIT);
      if (n <= 0) break;
      FUZZ_CHECK(n == 44, "a %zd-byte message on the link", n);
      std::span<const uint8_t> msg(b, 44);
      if (b[0] == cdc::kType) {
        auto m = cdc::decode(msg);
        FUZZ_CHECK(m.has_value(), "a CDC on the link that does not decode");
        our_cdc(*m, true);
      } else if (b[0] == cdcmem::kBellMessageType) {
        FUZZ_CHECK(cdcmem::decode_bell(msg).has_value(), "a bell message that does not decode");
      } else {
        FUZZ_CHECK(llc::decode(msg).has_value(), "an LLC message %02x on the link that does not decode", b[0]);
      }
    }
    cdc::Message m;
    cdcmem::UrgentRecord u;
    if (cdcmem::fetch(peers_.control, &peer_page_seen_, &m, &u)) our_cdc(m, false);
    if (bell_ >= 0) {
      char junk[64];
      while (::recv(bell_, junk, sizeof junk, MSG_DONTWAIT) > 0) {
      }
    }
  }

  void our_cdc(const cdc::Message& m, bool from_link) {
    FUZZ_CHECK(m.alert_token == kPeerToken, "our CDC names token %08x", m.alert_token);
    if (from_link && !m.flags.failover_validation) {
      FUZZ_CHECK(!link_seq_seen_ || cdc::seq_newer(m.seq, link_seq_), "our link CDC seq %u after %u", m.seq, link_seq_);
      link_seq_ = m.seq;
      link_seq_seen_ = true;
    }
    auto t = tx_.ring.position(m.producer, tx_.announced);
    FUZZ_CHECK(t.has_value(), "our producer cursor %u/%u is outside the peer's RMBE", m.producer.wrap, m.producer.offset);
    FUZZ_CHECK(*t >= tx_.announced, "our producer cursor moved back from %llu to %llu",
               static_cast<unsigned long long>(tx_.announced), static_cast<unsigned long long>(*t));
    FUZZ_CHECK(*t <= tx_.written, "our producer cursor %llu is beyond what the application wrote (%llu)",
               static_cast<unsigned long long>(*t), static_cast<unsigned long long>(tx_.written));
    FUZZ_CHECK(*t <= tx_.claimed_hi + tx_.ring.cap,
               "our producer cursor %llu is more than an RMBE beyond the peer's furthest consumer cursor %llu",
               static_cast<unsigned long long>(*t), static_cast<unsigned long long>(tx_.claimed_hi));
    tx_.announced = *t;
    auto c = rx_.ring.position(m.consumer, rx_.known_cons);
    FUZZ_CHECK(c.has_value(), "our consumer cursor %u/%u is outside our RMBE", m.consumer.wrap, m.consumer.offset);
    FUZZ_CHECK(*c >= rx_.known_cons, "our consumer cursor moved back from %llu to %llu",
               static_cast<unsigned long long>(rx_.known_cons), static_cast<unsigned long long>(*c));
    FUZZ_CHECK(*c <= rx_.consumed, "our consumer cursor %llu is beyond what the application consumed (%llu)",
               static_cast<unsigned long long>(*c), static_cast<unsigned long long>(rx_.consumed));
    rx_.known_cons = *c;
  }

  std::atomic_ref<uint32_t> version_word() { return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(ours_.control)); }

  // A count of the peer's rings in progress that is not zero makes each
  // write that fills the window wait up to 200 ms for it (connection.cc,
  // make_unwritable_locked: by design); the hostile writer leaves it alone
  // so that inputs stay fast.
  void keep_ringing_count_clear() { cdcmem::ringing(ours_.control).store(0); }

  // The CDCs the connection could read from its control page now (either
  // slot whose word is not busy: the words may name any publish, the version
  // word may be anything), with their urgent records. Each is read with
  // cdcmem::fetch from a copy in which that slot holds the publish after the
  // reader's and the other slot nothing newer.
  void refresh_page() {
    if (app_closed_) return;
    for (uint32_t parity = 0; parity < 2; ++parity) {
      std::memcpy(page_copy_, ours_.control, sizeof page_copy_);
      const size_t at[2] = {cdcmem::layout::kSlot0, cdcmem::layout::kSlot1};
      uint32_t word;
      std::memcpy(&word, page_copy_ + at[parity], sizeof word);
      if (word & 1u) continue;  // being written: never read
      uint32_t seen = parity + 1, next = (parity + 2) << 1, none = 0;
      std::memcpy(page_copy_ + at[parity], &next, sizeof next);
      std::memcpy(page_copy_ + at[parity ^ 1], &none, sizeof none);
      std::memcpy(page_copy_, &seen, sizeof seen);  // the version word (checked in LLVMFuzzerInitialize)
      cdc::Message m;
      cdcmem::UrgentRecord u;
      if (!cdcmem::fetch(page_copy_, &seen, &m, &u)) continue;
      note_peer_cdc(m);
      if (u.valid) announce(u.producer);
    }
  }

  testlib::ShmConnection rig_;
  // The rig's parts by the names the operations use.
  LocalRmb& ours_ = rig_.ours;
  LocalRmb& peers_ = rig_.peers;
  LinkGroup*& group_ = rig_.group;
  Connection*& conn_ = rig_.conn;
  int& peer_link_ = rig_.peer_link[0];
  int bell_ = -1;
  bool app_closed_ = false;
  bool shut_rd_ = false;
  bool oob_inline_ = false;
  uint8_t eyecatcher_[4] = {};
  uint16_t peer_seq_ = 0;
  uint16_t link_seq_ = 0;
  bool link_seq_seen_ = false;
  uint32_t peer_page_seen_ = 0;
  RxModel rx_;
  TxModel tx_;
  alignas(64) uint8_t page_copy_[cdcmem::kControlBytes];
  uint8_t buf_[40000];
};

// Builds inputs for the seed corpora, operation by operation.
class OpWriter {
 public:
  explicit OpWriter(uint8_t config) { w_.u8(config); }
  // CdcSpec modes: seq | producer << 2 | consumer << 4 (0: well-behaved).
  static constexpr uint8_t kSeqNext = 0, kSeqSame = 1, kSeqOlder = 2, kSeqRaw = 3;
  static constexpr uint8_t kAt = 0, kBehind = 1, kAhead = 2, kRaw = 3;
  OpWriter& peer_write(uint16_t n) { return op(kPeerWrite).u16(n); }
  OpWriter& write_and_cdc(uint16_t n, uint8_t via = 0) { return op(kPeerWriteAndCdc).u16(n).u8(via); }
  // A CDC at the peer's current cursors, with `flags`; `extra` supplies the
  // arguments the modes ask for (see CdcSpec).
  OpWriter& cdc(Op how, uint8_t flags, uint8_t modes = 0, std::initializer_list<uint8_t> extra = {}) {
    return op(how).u8(flags).u8(modes).raw(extra);
  }
  OpWriter& consume(uint16_t n) { return op(kPeerConsume).u16(n); }
  OpWriter& scribble(uint16_t at, uint8_t n, uint8_t value) { return op(kPeerScribble).u16(at).u8(n).u8(value); }
  OpWriter& read(uint16_t n, uint8_t flags = 0) { return op(kAppRead).u16(static_cast<uint16_t>(n - 1)).u8(flags); }
  OpWriter& write(uint16_t n, uint8_t flags = 0) { return op(kAppWrite).u16(static_cast<uint16_t>(n - 1)).u8(flags); }
  OpWriter& shutdown(uint8_t how) { return op(kAppShutdown).u8(how); }
  OpWriter& close(bool abortive) { return op(kAppClose).u8(abortive ? 1 : 0); }
  OpWriter& option(uint8_t which, uint16_t value = 0) { return op(kAppOption).u8(which).u16(value); }
  OpWriter& event(uint8_t which) { return op(kEngineEvent).u8(which); }
  OpWriter& page_write(uint16_t at, std::initializer_list<uint8_t> bytes) {
    return op(kPageWrite).u16(at).u8(static_cast<uint8_t>(bytes.size())).raw(bytes);
  }
  OpWriter& page_slot(uint8_t ctl, uint8_t flags, uint8_t modes = 0, std::initializer_list<uint8_t> extra = {}) {
    return op(kPageSlot).u8(ctl).u8(flags).u8(modes).raw(extra);
  }
  OpWriter& page_version(uint32_t v) { return op(kPageVersion).u32(v); }
  OpWriter& pull() { return op(kPagePull); }
  OpWriter& u8(uint8_t v) {
    w_.u8(v);
    return *this;
  }
  OpWriter& u16(uint16_t v) {
    w_.u16(v);
    return *this;
  }
  OpWriter& u32(uint32_t v) {
    w_.u32(v);
    return *this;
  }
  OpWriter& raw(std::initializer_list<uint8_t> bytes) {
    for (uint8_t b : bytes) w_.u8(b);
    return *this;
  }
  const std::vector<uint8_t>& data() const { return w_.data(); }

 private:
  OpWriter& op(Op o) { return u8(o); }
  Writer w_;
};

// The version word is the control page's first (cdc_mem.cc's layout, which
// refresh_page relies on): checked once.
inline void check_page_layout() {
  alignas(64) static uint8_t page[cdcmem::kControlBytes] = {};
  uint32_t v = 0x5A5A0001;
  std::memcpy(page, &v, sizeof v);
  FUZZ_CHECK(cdcmem::version(page) == v, "the control page's version word is not at offset 0");
}

// The connection fuzzers' libFuzzer entry points: each input is a fresh
// connection run through the operations `ops` allows.
inline int conn_rig_initialize(int* argc, char*** argv, Seeds (*make_seeds)()) {
  write_seeds_if_asked(argc, argv, make_seeds);
  process_setup();
  check_page_layout();
  return 0;
}

inline int conn_rig_test_one(const uint8_t* data, size_t size, int ops) {
  if (size == 0) return 0;
  Reader in(data, size);
  ConnRig rig(ConnConfig::from(in.u8()));
  rig.run(in, ops);
  return 0;
}

}  // namespace smcr::fuzz
