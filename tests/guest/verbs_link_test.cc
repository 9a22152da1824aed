// Guest test of the verbs fabric on a real (soft-)RoCE device: two VerbsLinks
// on one port connected to each other (loopback RC on one rxe device).
//
//   verbs_link_test [LOCAL_IPV4]     default 10.9.0.1 (scripts/guest/run.sh's rxe0)
//
// Exit status: 0 PASS, 1 FAIL, 77 SKIP (no RDMA device, or built without
// rdma-core). It never passes without having moved bytes over a device.
#include <arpa/inet.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if SMCR_HAVE_VERBS
#include "core/fabric_verbs.h"
#endif

#if !SMCR_HAVE_VERBS
int main() {
  std::printf("SKIP: built without rdma-core (SMCR_HAVE_VERBS unset)\n");
  return 77;
}
#else

using smcr::kLinkMessageLen;
using smcr::VerbsLink;
using Msg = std::array<uint8_t, kLinkMessageLen>;

namespace {

int g_failures = 0;

void check(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? " ok " : "FAIL", what);
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
uint32_t get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void put64(uint8_t* p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p + 4, static_cast<uint32_t>(v));
}
uint64_t get64(const uint8_t* p) { return (uint64_t{get32(p)} << 32) | get32(p + 4); }

// Byte i of the test stream: not periodic in any power of two, so a chunk
// landing at a wrong offset is caught.
uint8_t pattern(uint64_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13 ^ (i / 251)); }

// Waits for notify_fd and drains until stop() or the deadline; false if the
// link reported failure.
template <typename Stop>
bool pump(VerbsLink& l, const std::function<void(std::span<const uint8_t>)>& cb, Stop stop, int timeout_ms) {
  auto t0 = std::chrono::steady_clock::now();
  while (!stop()) {
    if (!l.drain_messages(cb)) return false;
    if (stop()) break;
    if (ms_since(t0) > timeout_ms) return false;
    pollfd p{l.notify_fd(), POLLIN, 0};
    poll(&p, 1, 100);
  }
  return true;
}

std::optional<uint64_t> ctr(const smcr::VerbsPort& p, const char* n) { return smcr::verbs_port_counter(p, n); }

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* ip = argc > 1 ? argv[1] : "10.9.0.1";
  sockaddr_in local{};
  local.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip, &local.sin_addr) != 1) {
    std::printf("FAIL: bad address %s\n", ip);
    return 1;
  }
  std::string why;
  auto t0 = std::chrono::steady_clock::now();
  auto port = smcr::verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&local), &why);
  double discover_ms = ms_since(t0);
  if (!port) {
    if (why.rfind("no RDMA device", 0) == 0) {
      std::printf("SKIP: no RDMA device\n");
      return 77;
    }
    std::printf("FAIL: no port for %s: %s\n", ip, why.c_str());
    return 1;
  }
  char gid[64];
  inet_ntop(AF_INET6, port->gid.data(), gid, sizeof gid);
  std::printf("port: %s port %u gid_index %d%s gid %s netdev %s mac %02x:%02x:%02x:%02x:%02x:%02x mtu_code %u "
              "tclass %u (discovery %.1f ms)\n",
              port->device.c_str(), port->port, port->gid_index, port->gid_index_from_env ? " (SMCR_GID_INDEX)" : "",
              gid, port->netdev.c_str(), port->mac[0], port->mac[1], port->mac[2], port->mac[3], port->mac[4],
              port->mac[5], port->active_mtu_code, smcr::verbs_traffic_class(), discover_ms);

  std::printf("discovery\n");
  {
    t0 = std::chrono::steady_clock::now();
    auto again = smcr::verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&local), &why);
    std::printf("  second lookup (contexts cached) %.2f ms\n", ms_since(t0));
    check(again && again->context == port->context && again->gid_index == port->gid_index,
          "second lookup reuses the cached device context");
    sockaddr_in6 mapped{};
    mapped.sin6_family = AF_INET6;
    mapped.sin6_addr.s6_addr[10] = 0xff;
    mapped.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&mapped.sin6_addr.s6_addr[12], &local.sin_addr, 4);
    auto p6 = smcr::verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&mapped), &why);
    check(p6 && p6->gid_index == port->gid_index && p6->device == port->device,
          "v4-mapped IPv6 local address selects the same GID");
    sockaddr_in lo{};
    lo.sin_family = AF_INET;
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string why_lo;
    auto plo = smcr::verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&lo), &why_lo);
    std::printf("  127.0.0.1 -> %s\n", plo ? "found?!" : why_lo.c_str());
    if (getenv("SMCR_IB_DEVICE") && getenv("SMCR_GID_INDEX")) {
      check(plo && plo->gid_index == port->gid_index, "SMCR_IB_DEVICE + SMCR_GID_INDEX are trusted for any address");
    } else {
      check(!plo && why_lo.find("no RoCE v2 GID for 127.0.0.1") != std::string::npos,
            "127.0.0.1 has no RoCE v2 GID, and says so");
    }
    // An IPv6 local address selects its own RoCE v2 GID: the link-local one
    // at index 0 on rxe (fe80:: from the netdev's MAC).
    char g0[64] = {};
    FILE* f = std::fopen(("/sys/class/infiniband/" + port->device + "/ports/1/gids/0").c_str(), "r");
    if (f && std::fscanf(f, "%63s", g0) == 1 && !getenv("SMCR_GID_INDEX")) {
      sockaddr_in6 ll{};
      ll.sin6_family = AF_INET6;
      if (inet_pton(AF_INET6, g0, &ll.sin6_addr) == 1 && ll.sin6_addr.s6_addr[0] == 0xfe) {
        std::string why6;
        auto p6ll = smcr::verbs_port_for_local_address(reinterpret_cast<sockaddr*>(&ll), &why6);
        std::printf("  %s -> %s\n", g0, p6ll ? ("gid_index " + std::to_string(p6ll->gid_index)).c_str() : why6.c_str());
        check(p6ll && p6ll->gid_index == 0 && p6ll->gid == std::to_array(ll.sin6_addr.s6_addr),
              "IPv6 link-local local address selects its RoCE v2 GID (index 0)");
      }
    }
    if (f) std::fclose(f);
    check(port->gid[10] == 0xff && port->gid[11] == 0xff && std::memcmp(&port->gid[12], &local.sin_addr, 4) == 0,
          "chosen GID is the IPv4-mapped GID of the address");
  }

  std::printf("counters before:\n%s", smcr::verbs_port_counters(*port).c_str());
  const char* kXmitData = "port_xmit_data";
  const char* kRcvData = "port_rcv_data";
  auto xd0 = ctr(*port, kXmitData), rd0 = ctr(*port, kRcvData);
  auto sp0 = ctr(*port, "sent_pkts"), rp0 = ctr(*port, "rcvd_pkts");

  std::printf("links\n");
  t0 = std::chrono::steady_clock::now();
  auto a = VerbsLink::create(*port, &why);
  if (!a) {
    std::printf("FAIL: create A: %s\n", why.c_str());
    return 1;
  }
  auto b = VerbsLink::create(*port, &why);
  if (!b) {
    std::printf("FAIL: create B: %s\n", why.c_str());
    return 1;
  }
  double create_ms = ms_since(t0);
  std::printf("  A qpn 0x%06x psn 0x%06x  B qpn 0x%06x psn 0x%06x  (create both %.1f ms)\n", a->qpn(), a->psn(),
              b->qpn(), b->psn(), create_ms);
  std::printf("  ECE: %s (supported=%d vendor 0x%x options 0x%x)\n", a->ece_status().c_str(), a->ece_supported(),
              a->ece().vendor_id, a->ece().options);
  if (a->ece_supported()) {
    // Both ends offer everything they support, as an ECE responder would reduce.
    check(a->set_ece(b->ece(), &why) && b->set_ece(a->ece(), &why), "set_ece before RTR");
  } else {
    check(!a->set_ece(smcr::VerbsEce{0x15b3, 1}, &why) &&
              why.find("ECE not supported by " + port->device) != std::string::npos,
          "set_ece refused with the reason when unsupported");
  }
  check(a->psn() <= 0xFFFFFF && b->psn() <= 0xFFFFFF, "PSNs are 24-bit");
  uint8_t mtu = std::min(a->mtu_code(), b->mtu_code());
  t0 = std::chrono::steady_clock::now();
  bool ca = a->connect(b->gid(), b->qpn(), b->psn(), mtu, &why);
  if (!ca) std::printf("  connect A: %s\n", why.c_str());
  bool cb = b->connect(a->gid(), a->qpn(), a->psn(), mtu, &why);
  if (!cb) std::printf("  connect B: %s\n", why.c_str());
  check(ca && cb, "INIT -> RTR -> RTS both ways");
  std::printf("  connect both %.1f ms\n", ms_since(t0));
  check(!a->connect(b->gid(), b->qpn(), b->psn(), 6, &why), "reserved MTU code 6 refused");
  if (auto q = a->query_qp()) {
    std::printf("  A QP: state %s path_mtu %u tclass %u sgid_index %u hop_limit %u dest_qpn 0x%06x timeout %u "
                "retry_cnt %u rnr_retry %u max_inline %u\n",
                q->state, q->path_mtu_code, q->traffic_class, q->sgid_index, q->hop_limit, q->dest_qpn, q->timeout,
                q->retry_cnt, q->rnr_retry, q->max_inline_data);
    check(std::strcmp(q->state, "RTS") == 0 && q->path_mtu_code == mtu && q->dest_qpn == b->qpn() &&
              q->sgid_index == port->gid_index && q->traffic_class == smcr::verbs_traffic_class(),
          "QP holds RTS, path MTU, dest QPN, sgid index and traffic class");
  } else {
    check(false, "ibv_query_qp");
  }
  if (!ca || !cb) return 1;

  // ------------------------------------------------------------- 1 MiB of RDMA WRITEs
  std::printf("bulk: 1 MiB A -> B through a 64 KiB RMB, CDC-like message after each write\n");
  smcr::LocalRmb rmb_a, rmb_b;
  check(a->alloc_rmb(65536, &rmb_a) && b->alloc_rmb(65536, &rmb_b), "register_rmb 64 KiB on each link");
  bool zeroed = true;
  for (uint32_t i = 0; i < rmb_b.size; ++i) zeroed &= rmb_b.addr[i] == 0;
  check(zeroed && (reinterpret_cast<uintptr_t>(rmb_b.addr) & 4095) == 0, "RMB zeroed and page-aligned");
  smcr::RemoteRmb peer_b{rmb_b.rkey, rmb_b.vaddr, rmb_b.size, nullptr};
  check(!a->write_remote(peer_b, 65530, "0123456789", 10), "write past the RMB end refused");

  constexpr uint64_t kTotal = 1u << 20;
  const uint32_t kRmb = rmb_b.size;
  std::atomic<uint64_t> consumed{0};  // bytes B verified (credits back to A)
  std::atomic<uint64_t> verified{0};
  std::atomic<bool> bad{false};
  std::atomic<uint32_t> cdc_seen{0};
  // B: verify each chunk when its message arrives, then return a credit.
  std::thread b_thread([&] {
    auto on_msg = [&](std::span<const uint8_t> m) {
      if (m.size() != kLinkMessageLen || m[0] != 0xFE) {
        bad = true;
        return;
      }
      uint32_t seq = get32(&m[4]), off = get32(&m[8]), len = get32(&m[12]);
      uint64_t pos = get64(&m[16]);
      if (seq != cdc_seen.load() + 1 || off + static_cast<uint64_t>(len) > kRmb || pos != verified.load()) {
        bad = true;
        return;
      }
      cdc_seen = seq;
      for (uint32_t i = 0; i < len; ++i) {
        if (rmb_b.addr[off + i] != pattern(pos + i)) {
          std::printf("  mismatch at stream byte %" PRIu64 " (rmb offset %u)\n", pos + i, off + i);
          bad = true;
          return;
        }
      }
      verified += len;
      Msg credit{};
      credit[0] = 0xFD;
      put64(&credit[16], verified.load());
      if (!b->post_message(credit)) bad = true;
    };
    bool ok = pump(*b, on_msg, [&] { return bad.load() || verified.load() >= kTotal; }, 60000);
    if (!ok) bad = true;
  });
  auto on_credit = [&](std::span<const uint8_t> m) {
    if (m.size() == kLinkMessageLen && m[0] == 0xFD) consumed = get64(&m[16]);
  };
  t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> src;
  uint64_t sent = 0;
  uint32_t seq = 0;
  uint32_t off = 0;
  // Chunk sizes cycle through small (inline), odd and large writes.
  const uint32_t kSizes[] = {8192, 13, 4096, 200, 16384, 1, 7000, 300, 12345, 64};
  size_t size_i = 0;
  bool a_ok = true;
  while (sent < kTotal && !bad && a_ok) {
    uint32_t want = static_cast<uint32_t>(std::min<uint64_t>(kSizes[size_i++ % 10], kTotal - sent));
    want = std::min(want, kRmb - off);  // no wrap inside a write, as the CDC code splits
    // Window: never overwrite bytes B has not verified yet.
    a_ok = pump(*a, on_credit, [&] { return bad.load() || sent + want - consumed.load() <= kRmb; }, 30000);
    if (!a_ok || bad) break;
    src.resize(want);
    for (uint32_t i = 0; i < want; ++i) src[i] = pattern(sent + i);
    if (!a->write_remote(peer_b, off, src.data(), want)) {
      a_ok = false;
      break;
    }
    Msg cdc{};
    cdc[0] = 0xFE;
    put32(&cdc[4], ++seq);
    put32(&cdc[8], off);
    put32(&cdc[12], want);
    put64(&cdc[16], sent);
    // The source buffer is rewritten right away: only correct if the write
    // was staged (or inlined) at post time.
    std::memset(src.data(), 0xAA, want);
    if (!a->post_message(cdc)) {
      a_ok = false;
      break;
    }
    sent += want;
    off = (off + want) % kRmb;
  }
  b_thread.join();
  // Collect the last credits so the next phase starts with empty queues.
  if (a_ok && !bad) a_ok = pump(*a, on_credit, [&] { return consumed.load() >= kTotal; }, 10000);
  double bulk_ms = ms_since(t0);
  check(a_ok && !bad && verified.load() == kTotal, "1 MiB written and verified in order");
  std::printf("  %" PRIu64 " bytes in %u writes, %.1f ms (%.1f MB/s); A: %s\n", verified.load(), seq, bulk_ms,
              bulk_ms > 0 ? verified.load() / bulk_ms / 1000.0 : 0.0, a->failed() ? a->failure_reason().c_str() : "ok");
  auto ac = a->counters();
  std::printf("  A counters: bytes_written %" PRIu64 " writes %" PRIu64 " (inline %" PRIu64 ") msgs_sent %" PRIu64
              " posts %" PRIu64 " msgs_recv %" PRIu64 " send_completions %" PRIu64 " sq_full_waits %" PRIu64
              " cq_events %" PRIu64 "\n",
              ac.bytes_written, ac.writes_posted, ac.writes_inline, ac.messages_sent, ac.posts, ac.messages_received,
              ac.send_completions, ac.sq_full_waits, ac.cq_events);
  check(ac.bytes_written == kTotal && ac.writes_inline > 0 && ac.writes_inline < ac.writes_posted,
        "both inline and staged writes were used");
  // Each WRITE was followed by its CDC: they went as one chain, one post.
  check(ac.writes_posted > 0 && ac.posts == ac.messages_sent, "each WRITE posted in one chain with the SEND after it");

  // Port counters: payload only grows them, so a delta >= payload is the check.
  std::printf("counters after bulk:\n%s", smcr::verbs_port_counters(*port).c_str());
  auto xd1 = ctr(*port, kXmitData), rd1 = ctr(*port, kRcvData);
  auto sp1 = ctr(*port, "sent_pkts"), rp1 = ctr(*port, "rcvd_pkts");
  if (xd0 && xd1 && rd0 && rd1) {
    // IBTA PMA: PortXmitData/PortRcvData count 4-octet words.
    std::printf("  port_xmit_data +%" PRIu64 " words, port_rcv_data +%" PRIu64 " words (payload %" PRIu64 " B)\n",
                *xd1 - *xd0, *rd1 - *rd0, kTotal);
    check((*xd1 - *xd0) * 4 >= kTotal && (*rd1 - *rd0) * 4 >= kTotal, "port_xmit/rcv_data grew by >= payload");
  } else if (sp0 && sp1 && rp0 && rp1) {
    // rxe has no PMA (no process_mad): no port_*_data. Its hw_counters count
    // packets; a path-MTU-sized packet carries at most 256 << (mtu-1) bytes.
    uint64_t mtu_bytes = 128u << mtu;
    uint64_t min_pkts = (kTotal + mtu_bytes - 1) / mtu_bytes;
    std::printf("  port_xmit_data not provided; sent_pkts +%" PRIu64 " rcvd_pkts +%" PRIu64
                " (payload needs >= %" PRIu64 " packets of %" PRIu64 " B)\n",
                *sp1 - *sp0, *rp1 - *rp0, min_pkts, mtu_bytes);
    check(*sp1 - *sp0 >= min_pkts && *rp1 - *rp0 >= min_pkts, "sent_pkts/rcvd_pkts grew by >= payload packets");
  } else {
    check(false, "neither port_*_data nor sent/rcvd_pkts counters readable");
  }

  // ------------------------------------------------------------- many small messages
  std::printf("messages: 10000 each way, A side posted by two threads\n");
  constexpr uint32_t kN = 10000;
  std::atomic<bool> mbad{false};
  std::atomic<uint32_t> got_at_b{0}, got_at_a{0};
  uint32_t next_b[2] = {0, 0};
  uint32_t next_a = 0;
  auto on_b = [&](std::span<const uint8_t> m) {
    // From A's two senders: per-sender order must hold.
    if (m.size() != kLinkMessageLen || m[0] != 0xC1 || m[1] > 1) {
      mbad = true;
      return;
    }
    uint32_t s = get32(&m[4]);
    if (s != next_b[m[1]]++ || m[43] != static_cast<uint8_t>(s)) mbad = true;
    ++got_at_b;
  };
  auto on_a = [&](std::span<const uint8_t> m) {
    if (m.size() != kLinkMessageLen || m[0] != 0xC2 || get32(&m[4]) != next_a++) mbad = true;
    ++got_at_a;
  };
  t0 = std::chrono::steady_clock::now();
  auto sender = [&](VerbsLink& l, uint8_t tag, uint8_t id, uint32_t first, uint32_t count) {
    for (uint32_t i = first; i < first + count && !mbad; ++i) {
      Msg m{};
      m[0] = tag;
      m[1] = id;
      put32(&m[4], i - first);
      m[43] = static_cast<uint8_t>(i - first);
      if (!l.post_message(m)) {
        mbad = true;
        return;
      }
    }
  };
  std::thread s_a0(sender, std::ref(*a), 0xC1, 0, 0, kN / 2);
  std::thread s_a1(sender, std::ref(*a), 0xC1, 1, 0, kN / 2);
  std::thread s_b(sender, std::ref(*b), 0xC2, 0, 0, kN);
  std::thread r_b([&] {
    if (!pump(*b, on_b, [&] { return mbad.load() || got_at_b.load() >= kN; }, 120000)) mbad = true;
  });
  std::thread r_a([&] {
    if (!pump(*a, on_a, [&] { return mbad.load() || got_at_a.load() >= kN; }, 120000)) mbad = true;
  });
  s_a0.join();
  s_a1.join();
  s_b.join();
  r_b.join();
  r_a.join();
  double msg_ms = ms_since(t0);
  check(!mbad && got_at_b == kN && got_at_a == kN, "10000 messages each way, in order, intact");
  ac = a->counters();
  auto bc = b->counters();
  std::printf("  %.1f ms (%.1f us/message/direction); A sent %" PRIu64 " recv %" PRIu64 " send_completions %" PRIu64
              " sq_full_waits %" PRIu64 " cq_events %" PRIu64 "; B sent %" PRIu64 " recv %" PRIu64
              " send_completions %" PRIu64 " sq_full_waits %" PRIu64 "\n",
              msg_ms, msg_ms * 1000.0 / kN, ac.messages_sent, ac.messages_received, ac.send_completions,
              ac.sq_full_waits, ac.cq_events, bc.messages_sent, bc.messages_received, bc.send_completions,
              bc.sq_full_waits);
  check(ac.send_completions > 0 && bc.send_completions >= kN / VerbsLink::kSignalEvery - 1,
        "SQ slots reclaimed through signaled completions (> SQ depth posted)");

  // ------------------------------------------------------------- wait_message + queued extras
  std::printf("wait_message\n");
  for (uint8_t i = 0; i < 3; ++i) {
    Msg m{};
    m[0] = 0xD0;
    m[1] = i;
    a->post_message(m);
  }
  uint8_t out[kLinkMessageLen];
  t0 = std::chrono::steady_clock::now();
  bool w1 = b->wait_message(out, 5000);
  double first_ms = ms_since(t0);
  // Let the other two arrive before draining, so wait_message had to queue.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<uint8_t> rest;
  bool d_ok = b->drain_messages([&](std::span<const uint8_t> m) { rest.push_back(m[1]); });
  for (int i = 0; i < 50 && rest.size() < 2 && d_ok; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d_ok = b->drain_messages([&](std::span<const uint8_t> m) { rest.push_back(m[1]); });
  }
  check(w1 && out[0] == 0xD0 && out[1] == 0 && d_ok && rest == std::vector<uint8_t>({1, 2}),
        "wait_message returns the first; drain delivers the rest in order");
  std::printf("  first after %.2f ms\n", first_ms);
  check(!b->wait_message(out, 300), "wait_message times out when nothing comes");

  // Remote staging release must not break later traffic.
  a->release_remote_rmb(&peer_b);
  b->free_local_rmb(&rmb_b);
  check(rmb_b.addr == nullptr && rmb_b.handle == -1, "free_local_rmb resets the LocalRmb");
  check(b->alloc_rmb(32768, &rmb_b), "register_rmb again after free (slot reuse)");

  // ------------------------------------------------------------- link failure
  std::printf("failure: A's QP forced to ERR\n");
  check(a->force_error_for_test(), "ibv_modify_qp(A, ERR)");
  t0 = std::chrono::steady_clock::now();
  bool a_drain = pump(*a, [](std::span<const uint8_t>) {}, [] { return false; }, 5000);
  double a_fail_ms = ms_since(t0);
  check(!a_drain && a->failed() && a_fail_ms < 5000, "A's drain reports failure");
  std::printf("  A failed after %.1f ms: %s\n", a_fail_ms, a->failure_reason().c_str());
  check(!a->post_message(Msg{}), "post_message on a failed link fails");
  // B only learns when it sends: its SEND exhausts the transport retries.
  t0 = std::chrono::steady_clock::now();
  Msg ping{};
  ping[0] = 0xEE;
  bool posted = b->post_message(ping);
  bool b_drain = pump(*b, [](std::span<const uint8_t>) {}, [] { return false; }, 15000);
  double b_fail_ms = ms_since(t0);
  check(posted && !b_drain && b->failed() && b_fail_ms < 15000, "B's drain reports failure after its next send");
  std::printf("  B failed after %.1f ms: %s\n", b_fail_ms, b->failure_reason().c_str());

  std::printf("counters at end:\n%s", smcr::verbs_port_counters(*port).c_str());
  a->free_local_rmb(&rmb_a);
  a.reset();
  b.reset();
  if (g_failures) {
    std::printf("FAIL: %d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
#endif
