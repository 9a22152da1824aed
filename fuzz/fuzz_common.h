// Shared by the stateful fuzz targets: reading an input as a sequence of
// operations, writing one (the seed generators), invariant checks that
// abort (so libFuzzer reports them), and the per-process setup.
//
// Seeds: every stateful target takes `--write-seeds=DIR` (before libFuzzer's
// own flags are looked at), writes its seed inputs there and exits; the
// checked-in corpora under fuzz/corpus/<target>/ come from that.
#pragma once

#include <signal.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/cdc.h"
#include "core/engine.h"

namespace smcr::fuzz {

// A CDC's flags from one input byte, bit by bit.
inline cdc::Flags cdc_flags_from(uint8_t f) {
  cdc::Flags flags;
  flags.writer_blocked = f & 1;
  flags.urgent_pending = f & 2;
  flags.urgent_present = f & 4;
  flags.request_update = f & 8;
  flags.failover_validation = f & 16;
  flags.peer_done_writing = f & 32;
  flags.peer_conn_closed = f & 64;
  flags.peer_conn_abort = f & 128;
  return flags;
}

[[noreturn]] inline void violated(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void violated(const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "\n==== INVARIANT VIOLATED at %s:%d: %s\n     ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::abort();
}

#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) ::smcr::fuzz::violated(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

// Reads an input front to back; past its end every value reads as zero
// (done() says when to stop).
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool done() const { return left_ == 0; }
  uint8_t u8() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  uint16_t u16() {
    uint16_t lo = u8();
    return static_cast<uint16_t>(lo | u8() << 8);
  }
  uint32_t u32() {
    uint32_t lo = u16();
    return lo | static_cast<uint32_t>(u16()) << 16;
  }
  // Up to n bytes (fewer at the end of the input).
  std::span<const uint8_t> bytes(size_t n) {
    if (n > left_) n = left_;
    std::span<const uint8_t> s(p_, n);
    p_ += n;
    left_ -= n;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

// Builds an input (the seed generators): the mirror image of Reader.
class Writer {
 public:
  Writer& u8(uint8_t v) {
    out_.push_back(v);
    return *this;
  }
  Writer& u16(uint16_t v) { return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8)); }
  Writer& u32(uint32_t v) { return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16)); }
  Writer& bytes(std::span<const uint8_t> b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  const std::vector<uint8_t>& data() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

using Seeds = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

// Called from LLVMFuzzerInitialize: --write-seeds=DIR writes `make()`'s
// inputs into DIR (created if missing) and exits.
inline void write_seeds_if_asked(int* argc, char*** argv, Seeds (*make)()) {
  static const char kFlag[] = "--write-seeds=";
  for (int i = 1; i < *argc; ++i) {
    const char* a = (*argv)[i];
    if (std::strncmp(a, kFlag, sizeof kFlag - 1) != 0) continue;
    std::string dir = a + sizeof kFlag - 1;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    for (const auto& [name, bytes] : make()) {
      std::string path = dir + "/" + name;
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(1);
      }
      std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
    }
    std::exit(0);
  }
}

// Once per process: a write to a socket whose peer has gone must fail with
// EPIPE, not kill the fuzzer; the engine thread (close timers, group
// retirement) runs as in the shim.
inline void process_setup() {
  ::signal(SIGPIPE, SIG_IGN);
  (void)Engine::get();
}

}  // namespace smcr::fuzz
