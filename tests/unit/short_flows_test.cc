// The short-flow guard's per-destination history (core/short_flows.h).
#include "core/short_flows.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace sf = smcr::shortflows;

namespace {

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

uint32_t key_of(const sockaddr_in& a) { return sf::destination_key(reinterpret_cast<const sockaddr*>(&a), sizeof a); }

class ShortFlows : public ::testing::Test {
 protected:
  void SetUp() override { sf::reset_for_test(); }
  // One short-lived SMC-R connection to `key` ended at `ms`.
  void short_end(uint32_t key, int64_t ms) { sf::ended(key, 1, 300, ms); }
};

TEST_F(ShortFlows, KeysNameAddressAndPort) {
  auto a = v4("10.0.0.1", 80), b = v4("10.0.0.1", 81), c = v4("10.0.0.2", 80);
  EXPECT_NE(key_of(a), 0u);
  EXPECT_EQ(key_of(a), key_of(v4("10.0.0.1", 80)));
  EXPECT_NE(key_of(a), key_of(b));
  EXPECT_NE(key_of(a), key_of(c));
  sockaddr_in6 six{};
  six.sin6_family = AF_INET6;
  six.sin6_port = htons(80);
  six.sin6_addr = in6addr_loopback;
  EXPECT_NE(sf::destination_key(reinterpret_cast<const sockaddr*>(&six), sizeof six), 0u);
  // Not an IP address, or truncated: no history.
  sockaddr un{};
  un.sa_family = AF_UNIX;
  EXPECT_EQ(sf::destination_key(&un, sizeof un), 0u);
  EXPECT_EQ(sf::destination_key(reinterpret_cast<const sockaddr*>(&a), sizeof(sa_family_t)), 0u);
  EXPECT_EQ(sf::destination_key(nullptr, 0), 0u);
}

TEST_F(ShortFlows, WhatIsShort) {
  EXPECT_TRUE(sf::is_short(0, 0));
  EXPECT_TRUE(sf::is_short(7, sf::kShortMaxBytes - 1));
  EXPECT_FALSE(sf::is_short(8, 100));                 // eight writes: a conversation
  EXPECT_FALSE(sf::is_short(1, sf::kShortMaxBytes));  // one bulk transfer
}

TEST_F(ShortFlows, AStreakOfShortEndsKeepsTheDestinationOnTcp) {
  uint32_t k = key_of(v4("10.0.0.1", 80));
  EXPECT_FALSE(sf::keep_on_tcp(k, 1000));
  for (unsigned i = 0; i + 1 < sf::kShortStreak; ++i) {
    short_end(k, 1000);
    EXPECT_FALSE(sf::keep_on_tcp(k, 1000)) << "after " << i + 1 << " short ends";
  }
  short_end(k, 1000);
  EXPECT_TRUE(sf::keep_on_tcp(k, 1000));
  EXPECT_TRUE(sf::keep_on_tcp(k, 1000 + sf::kVerdictMs - 1));
  // Another destination, another port: unaffected.
  EXPECT_FALSE(sf::keep_on_tcp(key_of(v4("10.0.0.1", 81)), 1000));
  EXPECT_FALSE(sf::keep_on_tcp(0, 1000));
}

TEST_F(ShortFlows, ALongEndClearsTheVerdict) {
  uint32_t k = key_of(v4("10.0.0.1", 80));
  for (unsigned i = 0; i < sf::kShortStreak; ++i) short_end(k, 1000);
  ASSERT_TRUE(sf::keep_on_tcp(k, 1001));
  sf::ended(k, 100, 10 << 20, 1002);  // a probe, or one opened before, ended long
  EXPECT_FALSE(sf::keep_on_tcp(k, 1003));
  // The streak starts again from nothing.
  for (unsigned i = 0; i + 1 < sf::kShortStreak; ++i) short_end(k, 1004);
  EXPECT_FALSE(sf::keep_on_tcp(k, 1005));
}

TEST_F(ShortFlows, AnOldVerdictLetsOneProbeThrough) {
  uint32_t k = key_of(v4("10.0.0.1", 80));
  for (unsigned i = 0; i < sf::kShortStreak; ++i) short_end(k, 1000);
  int64_t later = 1000 + sf::kVerdictMs;
  EXPECT_FALSE(sf::keep_on_tcp(k, later)) << "the first connect after the verdict aged probes with SMC-R";
  EXPECT_TRUE(sf::keep_on_tcp(k, later)) << "the others stay on TCP while the probe runs";
  EXPECT_TRUE(sf::keep_on_tcp(k, later + sf::kVerdictMs - 1));
  // A short probe renews the verdict from its end.
  short_end(k, later + 10);
  EXPECT_TRUE(sf::keep_on_tcp(k, later + 10 + sf::kVerdictMs - 1));
  // A probe that never ends: one more probe per verdict period.
  int64_t much_later = later + 10 + sf::kVerdictMs;
  EXPECT_FALSE(sf::keep_on_tcp(k, much_later));
  EXPECT_TRUE(sf::keep_on_tcp(k, much_later + 1));
}

TEST_F(ShortFlows, ACollidingDestinationTakesTheSlotOver) {
  // Find a second key in the same slot (1024 slots).
  uint32_t a = key_of(v4("10.0.0.1", 80)), b = 0;
  for (uint16_t port = 1; port && !b; ++port) {
    uint32_t k = key_of(v4("10.0.9.9", port));
    if (k != a && k % 1024 == a % 1024) b = k;
  }
  ASSERT_NE(b, 0u);
  for (unsigned i = 0; i < sf::kShortStreak; ++i) short_end(a, 1000);
  ASSERT_TRUE(sf::keep_on_tcp(a, 1000));
  EXPECT_FALSE(sf::keep_on_tcp(b, 1000)) << "b has no history of its own";
  short_end(b, 1000);
  EXPECT_FALSE(sf::keep_on_tcp(a, 1000)) << "a's history was replaced: SMC-R again, the safe side";
  EXPECT_FALSE(sf::keep_on_tcp(b, 1000));
}

}  // namespace
