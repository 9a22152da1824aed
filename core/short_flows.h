// Keeps connections to a destination on TCP while its recent SMC-R
// connections were all short-lived, or did not become SMC-R at all.
//
// An SMC-R connection costs more to set up than a TCP one (the CLC handshake
// over the TCP connection, then the link's first messages) and saves per
// message afterwards; a connection that carries one or two requests and
// closes is slower than TCP (a connect/request/close loop at about 0.75x,
// nginx under wrk `Connection: close` at about 0.25x). The client decides: a
// connect() without the option on its SYN is plain TCP at no cost, and the
// server follows the SYN. So each process keeps, per destination (address
// and port), how many of its last connections there ended short (a
// connection that fell back to TCP counts as short: the opt-in and the
// record read bought nothing). After kShortStreak of them in a row, connect()
// keeps new connections to it on TCP for kVerdictMs after the last one
// ended. Then one connection probes with SMC-R while the others stay on TCP
// for another kVerdictMs: a short probe renews the verdict, a long one (a
// workload that turned long-lived) ends it. Any SMC-R connection that ends
// long clears the verdict at once.
//
// Lock-free (one atomic word per slot, lossy under races: a heuristic) and
// async-signal-safe; no allocation. SMCR_SHORT_FLOWS=N sets what "short"
// means (fewer than N writes and under 64 KiB moved both ways; default 8);
// 0 turns the guard off.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace smcr::shortflows {

inline constexpr unsigned kShortStreak = 4;
inline constexpr int64_t kVerdictMs = 1000;
inline constexpr uint64_t kShortMaxBytes = 64 * 1024;

// A destination's key (never 0), or 0 when this is turned off or `peer` is
// not an IPv4/IPv6 address.
uint32_t destination_key(const sockaddr* peer, socklen_t len);

// connect() to the destination with this key: keep it on plain TCP?
bool keep_on_tcp(uint32_t key, int64_t now_ms);

// An SMC-R connection to the destination ended (its application closed it)
// after `writes` data-moving writes and `bytes` moved both ways.
void ended(uint32_t key, uint64_t writes, uint64_t bytes, int64_t now_ms);

// What ended() calls short.
bool is_short(uint64_t writes, uint64_t bytes);

// Forgets every destination (tests).
void reset_for_test();

}  // namespace smcr::shortflows
