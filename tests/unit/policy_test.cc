// The operator's policy: parsing (errors name the line) and decisions.
#include "core/policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

namespace smcr::policy {
namespace {

Policy parsed(std::string_view text) {
  Policy p;
  std::string err;
  EXPECT_TRUE(parse(text, "test", false, &p, &err)) << err;
  return p;
}

std::string error_of(std::string_view text, bool semicolons = false) {
  Policy p;
  std::string err;
  EXPECT_FALSE(parse(text, "f", semicolons, &p, &err));
  return err;
}

sockaddr_in v4(const char* a) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  inet_pton(AF_INET, a, &s.sin_addr);
  return s;
}

sockaddr_in6 v6(const char* a) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  inet_pton(AF_INET6, a, &s.sin6_addr);
  return s;
}

const sockaddr* sa(const sockaddr_in& s) { return reinterpret_cast<const sockaddr*>(&s); }
const sockaddr* sa(const sockaddr_in6& s) { return reinterpret_cast<const sockaddr*>(&s); }

TEST(Policy, EmptyAllowsEverything) {
  Policy p = parsed("# nothing but a comment\n\n");
  auto a = v4("10.0.0.1");
  EXPECT_TRUE(allows(p, 80, sa(a), "x"));
}

TEST(Policy, FirstMatchingRuleWins) {
  Policy p = parsed("deny port 22\nallow port 1-1024\ndefault deny\n");
  auto a = v4("10.0.0.1");
  EXPECT_FALSE(allows(p, 22, sa(a), "x"));
  EXPECT_TRUE(allows(p, 80, sa(a), "x"));
  EXPECT_FALSE(allows(p, 8080, sa(a), "x")) << "default deny";
}

TEST(Policy, PortListsAndRanges) {
  Policy p = parsed("allow port 80,443,8000-8099\ndefault deny");
  EXPECT_TRUE(allows(p, 443, nullptr, "x"));
  EXPECT_TRUE(allows(p, 8050, nullptr, "x"));
  EXPECT_FALSE(allows(p, 8100, nullptr, "x"));
}

TEST(Policy, AddressPrefixesV4V6AndMapped) {
  Policy p = parsed("deny addr 10.1.0.0/16\ndeny addr fd00::/8\n");
  auto in = v4("10.1.2.3"), out = v4("10.2.0.1");
  auto mapped = v6("::ffff:10.1.9.9"), six = v6("fd12::1"), other6 = v6("2001:db8::1");
  EXPECT_FALSE(allows(p, 1, sa(in), "x"));
  EXPECT_TRUE(allows(p, 1, sa(out), "x"));
  EXPECT_FALSE(allows(p, 1, sa(mapped), "x")) << "an IPv4-mapped peer is that IPv4 peer";
  EXPECT_FALSE(allows(p, 1, sa(six), "x"));
  EXPECT_TRUE(allows(p, 1, sa(other6), "x"));
}

TEST(Policy, AllSelectorsOfARuleMustMatch) {
  Policy p = parsed("allow program redis-server port 6379\ndefault deny");
  EXPECT_TRUE(allows(p, 6379, nullptr, "redis-server"));
  EXPECT_TRUE(allows(p, 6379, nullptr, "sh", "redis-server")) << "the executable's name counts too";
  EXPECT_FALSE(allows(p, 6380, nullptr, "redis-server"));
  EXPECT_FALSE(allows(p, 6379, nullptr, "nginx"));
}

TEST(Policy, ListenerMayAllowWhenOnlySomePeersAreDenied) {
  Policy p = parsed("deny addr 10.0.0.0/8\nallow");
  EXPECT_TRUE(may_allow(p, 80, "x"));
  Policy q = parsed("deny port 80\nallow");
  EXPECT_FALSE(may_allow(q, 80, "x"));
  Policy r = parsed("allow addr 192.168.0.0/16 port 80\ndefault deny");
  EXPECT_TRUE(may_allow(r, 80, "x"));
  EXPECT_FALSE(may_allow(r, 81, "x"));
}

TEST(Policy, InlineRulesUseSemicolons) {
  Policy p;
  std::string err;
  ASSERT_TRUE(parse("deny port 22; allow port 80 ;default deny", "env", true, &p, &err)) << err;
  EXPECT_EQ(p.rules.size(), 2u);
  EXPECT_FALSE(p.default_allow);
}

TEST(Policy, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("allow port 80\n\nfrobnicate\n"), "f:3: unknown keyword 'frobnicate' (expected allow, deny or default)");
  EXPECT_EQ(error_of("allow port 99999"), "f:1: bad port list '99999' (N or N-M, comma separated, 0..65535)");
  EXPECT_EQ(error_of("allow port 90-80"), "f:1: bad port list '90-80' (N or N-M, comma separated, 0..65535)");
  EXPECT_EQ(error_of("allow port 80,"), "f:1: bad port list '80,' (N or N-M, comma separated, 0..65535)");
  EXPECT_EQ(error_of("deny addr 10.0.0.0/33"), "f:1: bad address '10.0.0.0/33' (IPv4 or IPv6, optional /prefix)");
  EXPECT_EQ(error_of("deny addr"), "f:1: 'addr' needs a value");
  EXPECT_EQ(error_of("deny port 1 port 2"), "f:1: port given twice in one rule");
  EXPECT_EQ(error_of("deny host x"), "f:1: unknown selector 'host' (expected port, addr or program)");
  EXPECT_EQ(error_of("default maybe"), "f:1: expected 'default allow' or 'default deny'");
  EXPECT_EQ(error_of("allow; bogus", true), "f:2: unknown keyword 'bogus' (expected allow, deny or default)");
}

}  // namespace
}  // namespace smcr::policy
