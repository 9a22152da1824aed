// A hostile writer on the CDC control page (core/cdc_mem.h): on the shm
// fabric the peer's process writes its CDCs into a page after our RMB and
// can write anything there at any time. Inputs interleave raw writes to the
// page (bytes anywhere, a CDC into either slot with its sequence lock even
// or odd, the version word), the connection reading it (any call that takes
// the connection: pull_cdc_locked), application reads and writes, and the
// rest of cdc_sequence_fuzz's operations. The same model and invariants
// (connection_rig.h): the application never reads past what was announced,
// nor anything but the peer's bytes.
#include "fuzz/connection_rig.h"

using namespace smcr;
using namespace smcr::fuzz;

namespace {

constexpr uint8_t P = 2, U = 4, D = 32, C = 64, A = 128;
using W = OpWriter;
constexpr uint8_t kSlot1 = 1, kBump = 2, kOdd = 4;

Seeds make_seeds() {
  Seeds s;
  auto add = [&](const char* name, const W& w) { s.emplace_back(name, w.data()); };
  add("publish", W(0).write_and_cdc(100, 2).pull().read(100).write(10).write_and_cdc(50, 2).read(100));
  add("raw_slot", W(0).peer_write(50).page_slot(kSlot1 | kBump, 0).pull().read(100).peer_write(20)
                      .page_slot(kBump, 0).read(100));
  add("torn_slot", W(0).peer_write(50).page_slot(kSlot1 | kBump | kOdd, 0).pull().read(100)
                       .page_slot(kSlot1, 0, 1).page_version(3).pull().read(100));
  add("urgent_record", W(0).peer_write(10).cdc(kPeerCdcMemory, U | P).peer_write(10).cdc(kPeerCdcMemory, 0)
                           .pull().read(30).read(30, 2).read(30));
  // The urgent record of slot 1 (valid word at 4, seq/wrap/offset at 56):
  // a producer cursor announced through it alone.
  add("urgent_raw", W(0).peer_write(40).page_write(128 + 4, {1, 0, 0, 0})
                        .page_write(128 + 56, {20, 0, 0, 0, 0, 0, 9, 0}).page_slot(kSlot1 | kBump, 0)
                        .read(100).read(100));
  add("garbage", W(0).write_and_cdc(20).page_write(0, {7, 0, 0, 0}).page_write(64, {0, 0, 0, 0, 0, 0, 0, 0, 0xFE,
                     44, 0, 0, 0, 0, 0xB0, 0x01, 0, 7, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0})
                     .pull().read(100));
  add("versions", W(0).write_and_cdc(10, 2).page_version(0).pull().page_version(1).pull().read(100)
                      .page_version(0xFFFFFFFF).pull().read(10));
  add("forged_token", W(0).peer_write(10).page_slot(kSlot1 | kBump, 0, 0x40, {5}).pull().read(10));
  add("close_in_page", W(0).write_and_cdc(10, 2).page_slot(kBump, D).pull().read(20).read(20)
                           .page_slot(kSlot1 | kBump, C).pull().close(false));
  add("abort_in_page", W(0).peer_write(30).page_slot(kSlot1 | kBump, A).read(100).read(100));
  add("window_in_page", W(0).write(20000).page_slot(kSlot1 | kBump, 0, 2 << 4, {0, 0x20}).write(100)
                            .consume(16000).cdc(kPeerCdcMemory, 0).write(5000).consume(5000));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) { return conn_rig_initialize(argc, argv, make_seeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return conn_rig_test_one(data, size, kAllOps);
}
