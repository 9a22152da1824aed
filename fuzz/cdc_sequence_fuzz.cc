// CDC sequences into a real connection: the fuzzer is the peer (its CDCs,
// well-behaved or hostile, delivered as the engine delivers them, through
// the link or the control page; its writes into our RMB) and the
// application (non-blocking reads and writes, urgent data, shutdown,
// close), with engine events in between. A model of both byte streams
// checks what the application reads and what the connection announces; see
// connection_rig.h for the input format and the invariants.
#include "fuzz/connection_rig.h"

using namespace smcr;
using namespace smcr::fuzz;

namespace {

constexpr uint8_t B = 1, P = 2, U = 4, R = 8, F = 16, D = 32, C = 64, A = 128;
using W = OpWriter;

Seeds make_seeds() {
  Seeds s;
  auto add = [&](const char* name, const W& w) { s.emplace_back(name, w.data()); };
  add("exchange", W(0).write_and_cdc(100).read(200).write(50).consume(50).write_and_cdc(20, 1).read(100, 8)
                      .cdc(kPeerCdc, 0).close(false).cdc(kPeerCdcLink, C));
  add("wrap", W(0).write_and_cdc(16000).read(16000).write_and_cdc(1000).read(2000).write_and_cdc(16380, 2)
                  .read(20000, 4).write(40000).consume(20000).cdc(kPeerCdc, 0).write(100).consume(1000)
                  .cdc(kPeerCdcMemory, 0).read(100));
  add("urgent", W(0).write_and_cdc(10).peer_write(1).cdc(kPeerCdc, U | P).read(5).read(5).read(1, 2).read(10)
                    .option(0).peer_write(3).cdc(kPeerCdcLink, U | P).read(10).write(5, 1).consume(5)
                    .cdc(kPeerCdc, 0));
  add("half_close", W(0).write_and_cdc(30).cdc(kPeerCdc, D).read(100).read(100).shutdown(1)
                        .cdc(kPeerCdcLink, C).close(false));
  add("producer_ahead", W(0).write_and_cdc(10).cdc(kPeerCdc, 0, W::kAhead << 2, {0x00, 0x50}).read(100));
  add("producer_back", W(0).write_and_cdc(100).cdc(kPeerCdc, 0, W::kBehind << 2, {50, 0}).read(100));
  add("producer_raw", W(0).write_and_cdc(10).cdc(kPeerCdc, 0, W::kRaw << 2, {2, 0, 0x10, 0}).read(100));
  add("stale_seq", W(0).write_and_cdc(10).cdc(kPeerCdc, 0, W::kSeqOlder | W::kAhead << 2, {3, 100, 0})
                       .read(100).read(100));
  add("forged_token", W(0).write_and_cdc(10).cdc(kPeerCdcLink, 0, 0x40 | W::kAhead << 2, {100, 0, 7}).read(200));
  add("unwritten", W(0).cdc(kPeerCdc, 0, W::kAhead << 2, {0, 1}).read(300).write_and_cdc(10).read(20));
  add("consumer_ahead", W(0).write(100).cdc(kPeerCdc, 0, W::kAhead << 4, {200, 0}).write(10));
  add("eyecatcher", W(0).write_and_cdc(10).scribble(0, 2, 0).read(10));
  add("scribble_data", W(0).peer_write(100).scribble(30, 20, 0xAA).write_and_cdc(0).read(200));
  add("window_full", W(0).write(40000).write(10).consume(8000).cdc(kPeerCdc, 0).write(10000).consume(16000)
                         .cdc(kPeerCdcLink, 0).write(100).option(4).option(2, 1000).write(5000));
  add("bell", W(0).event(4).write(100).consume(100).cdc(kPeerCdcMemory, 0).write_and_cdc(100, 2).read(100)
                  .write(100).consume(100).cdc(kPeerCdcMemory, B));
  add("linux_model", W(1 | 2 | 4).write_and_cdc(32000).read(32000).write_and_cdc(5000).read(6000).write(33000)
                         .consume(33000).cdc(kPeerCdc, 0).write(10));
  add("tcp_gone", W(0).write_and_cdc(10).event(0).event(3).read(10).read(10).write(5));
  add("link_failed", W(0).write_and_cdc(10).event(5).read(20).read(20).write(5));
  add("link_down", W(0).write_and_cdc(10).event(1).event(3).read(20).read(20));
  add("peer_abort", W(0).write_and_cdc(10).cdc(kPeerCdc, A).read(20).read(20).write(10));
  add("close_unread", W(0).write_and_cdc(10).close(false).cdc(kPeerCdcLink, A));
  add("writer_blocked", W(0).write_and_cdc(16000).cdc(kPeerCdc, B | R).read(5000).read(5000).option(3));
  add("failover_flag", W(0).write_and_cdc(10).cdc(kPeerCdc, F).read(10).event(6));
  add("peer_closed_write", W(8).write_and_cdc(10).cdc(kPeerCdc, C).write(100).write(100).read(100).read(1).close(false));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) { return conn_rig_initialize(argc, argv, make_seeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return conn_rig_test_one(data, size, kBasicOps);
}
