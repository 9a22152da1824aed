// SMC-Rv2 negotiation (core/smc_v2.h): UEID lists, IPv4-mapped GIDs, the
// client's offer and Confirm, the server's terms and their checks, and the
// CLC encodings of what these produce.
#include "core/smc_v2.h"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace smcr::v2 {
namespace {

// configured_ueids() reads SMCR_UEID once, through smcr::env(), which takes a
// snapshot of the SMCR_* environment on its first call; both happen lazily,
// the first time a test asks. These executables link GTest::gtest_main
// (tests/unit/CMakeLists.txt), so there is no main() of ours to call setenv
// from: a namespace-scope initializer runs before gtest_main's main(), hence
// before any test, and so before the snapshot and the function-local static.
// (Nothing in smcr_core calls env() during static initialization: only the
// shim's constructor in preload/ snapshots early, and it is not linked here.)
const bool kUeidEnvSet = [] {
  setenv("SMCR_UEID", "SMCLAB-UEID-1,OTHER-UEID", 1);
  return true;
}();

clc::Ueid ueid(std::string_view name) {
  clc::Ueid u;
  u.fill(' ');
  std::memcpy(u.data(), name.data(), std::min(name.size(), u.size()));
  return u;
}

clc::Gid mapped_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return clc::Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

const clc::Gid kLinkLocalGid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};

// Parses `list`, expecting a rejection with a reason.
void expect_rejected(std::string_view list) {
  std::string why;
  auto r = parse_ueids(list, &why);
  EXPECT_FALSE(r.has_value()) << "accepted: " << list;
  EXPECT_FALSE(why.empty()) << "no reason for rejecting: " << list;
}

// --- parse_ueids ------------------------------------------------------------------

TEST(ParseUeids, SingleIsSpacePaddedTo32) {
  std::string why;
  auto r = parse_ueids("SMCLAB-UEID-1", &why);
  ASSERT_TRUE(r.has_value()) << why;
  ASSERT_EQ(r->size(), 1u);
  const clc::Ueid& u = (*r)[0];
  EXPECT_EQ(u.size(), 32u);
  EXPECT_EQ(std::string(u.begin(), u.begin() + 13), "SMCLAB-UEID-1");
  for (size_t i = 13; i < 32; ++i) EXPECT_EQ(u[i], ' ') << "byte " << i;
  EXPECT_EQ(u, ueid("SMCLAB-UEID-1"));
}

TEST(ParseUeids, CommaAndSpaceSeparated) {
  std::string why;
  auto r = parse_ueids("A1,B2 C3, D4  ,E5", &why);
  ASSERT_TRUE(r.has_value()) << why;
  EXPECT_EQ(*r, (std::vector<clc::Ueid>{ueid("A1"), ueid("B2"), ueid("C3"), ueid("D4"), ueid("E5")}));
}

TEST(ParseUeids, DuplicatesCollapse) {
  std::string why;
  auto r = parse_ueids("X1,Y2,X1 Y2,Z3", &why);
  ASSERT_TRUE(r.has_value()) << why;
  EXPECT_EQ(*r, (std::vector<clc::Ueid>{ueid("X1"), ueid("Y2"), ueid("Z3")}));
}

TEST(ParseUeids, EightAcceptedNineRejected) {
  std::string why;
  auto eight = parse_ueids("U1,U2,U3,U4,U5,U6,U7,U8", &why);
  ASSERT_TRUE(eight.has_value()) << why;
  EXPECT_EQ(eight->size(), 8u);
  EXPECT_EQ(eight->front(), ueid("U1"));
  EXPECT_EQ(eight->back(), ueid("U8"));
  expect_rejected("U1,U2,U3,U4,U5,U6,U7,U8,U9");
  // Eight distinct names, one repeated: the limit counts UEIDs, not words.
  auto repeated = parse_ueids("U1,U2,U3,U4,U5,U6,U7,U8,U1", nullptr);
  ASSERT_TRUE(repeated);
  EXPECT_EQ(repeated->size(), 8u);
}

TEST(ParseUeids, ThirtyTwoCharsAcceptedThirtyThreeRejected) {
  const std::string n32(32, 'A');
  std::string why;
  auto r = parse_ueids(n32, &why);
  ASSERT_TRUE(r.has_value()) << why;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], ueid(n32));
  EXPECT_TRUE(std::all_of((*r)[0].begin(), (*r)[0].end(), [](uint8_t c) { return c == 'A'; }));
  expect_rejected(std::string(33, 'A'));
  expect_rejected("OK1," + std::string(33, 'B'));
}

TEST(ParseUeids, LowercaseRejected) {
  expect_rejected("smclab");
  expect_rejected("SMCLAB-uEID");
  expect_rejected("GOOD,bad");
}

TEST(ParseUeids, LeadingDotOrDashRejected) {
  expect_rejected(".SMCLAB");
  expect_rejected("-SMCLAB");
  expect_rejected("GOOD,-BAD");
}

TEST(ParseUeids, DotAndDashInsideAccepted) {
  std::string why;
  auto r = parse_ueids("A.B-C,9-.X.", &why);
  ASSERT_TRUE(r.has_value()) << why;
  EXPECT_EQ(*r, (std::vector<clc::Ueid>{ueid("A.B-C"), ueid("9-.X.")}));
}

TEST(ParseUeids, OtherCharactersRejected) {
  expect_rejected("SMC_LAB");
  expect_rejected("SMC/LAB");
}

TEST(ParseUeids, EmptyGivesEmptyList) {
  std::string why;
  auto r = parse_ueids("", &why);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->empty());
  auto seps = parse_ueids(" , ,", &why);
  ASSERT_TRUE(seps.has_value());
  EXPECT_TRUE(seps->empty());
}

// --- ipv4_mapped ------------------------------------------------------------------

TEST(Ipv4Mapped, Classifies) {
  EXPECT_TRUE(ipv4_mapped(mapped_gid(10, 9, 1, 2)));
  EXPECT_FALSE(ipv4_mapped(kLinkLocalGid));
  EXPECT_FALSE(ipv4_mapped(clc::Gid{}));
}

// --- configured_ueids -------------------------------------------------------------

TEST(ConfiguredUeids, ReadsSmcrUeid) {
  ASSERT_TRUE(kUeidEnvSet);
  EXPECT_EQ(configured_ueids(), (std::vector<clc::Ueid>{ueid("SMCLAB-UEID-1"), ueid("OTHER-UEID")}));
}

// --- negotiate (server) -----------------------------------------------------------

clc::SmcrV2Offer offer_with(std::vector<clc::Ueid> ueids) {
  clc::SmcrV2Offer o;
  o.release = 1;
  o.roce_gid = mapped_gid(10, 9, 1, 2);
  o.max_conns = 255;
  o.max_links = 2;
  o.ueids = std::move(ueids);
  return o;
}

TEST(Negotiate, NoUeidOffered) {
  ServerTerms t;
  EXPECT_EQ(negotiate(offer_with({}), &t), clc::decline::kNoUeid);
}

TEST(Negotiate, NoUeidInCommon) {
  ServerTerms t;
  t.release = 7;  // untouched on failure
  EXPECT_EQ(negotiate(offer_with({ueid("UNKNOWN"), ueid("ALSO-UNKNOWN")}), &t), clc::decline::kNoSmcDevice);
  EXPECT_EQ(t.release, 7);
}

TEST(Negotiate, FirstOfferedUeidWeHaveIsChosen) {
  ServerTerms t;
  ASSERT_EQ(negotiate(offer_with({ueid("UNKNOWN"), ueid("OTHER-UEID"), ueid("SMCLAB-UEID-1")}), &t), 0u);
  EXPECT_EQ(t.eid, ueid("OTHER-UEID"));
}

TEST(Negotiate, Release1Limits) {
  ServerTerms t;
  ASSERT_EQ(negotiate(offer_with({ueid("SMCLAB-UEID-1")}), &t), 0u);
  EXPECT_EQ(t.eid, ueid("SMCLAB-UEID-1"));
  EXPECT_EQ(t.release, 1);
  EXPECT_EQ(t.max_conns, 255);
  EXPECT_EQ(t.max_links, 1);
  EXPECT_EQ(t.max_links, kMaxLinks);
}

TEST(Negotiate, SmallerPeerMaxConnsTaken) {
  auto o = offer_with({ueid("SMCLAB-UEID-1")});
  o.max_conns = 16;
  ServerTerms t;
  ASSERT_EQ(negotiate(o, &t), 0u);
  EXPECT_EQ(t.max_conns, 16);
}

TEST(Negotiate, MaxConnsTooSmall) {
  auto o = offer_with({ueid("SMCLAB-UEID-1")});
  o.max_conns = 15;
  ServerTerms t;
  EXPECT_EQ(negotiate(o, &t), clc::decline::kMaxConnsError);
}

TEST(Negotiate, MaxLinksZero) {
  auto o = offer_with({ueid("SMCLAB-UEID-1")});
  o.max_links = 0;
  ServerTerms t;
  EXPECT_EQ(negotiate(o, &t), clc::decline::kMaxLinksError);
}

TEST(Negotiate, Release0HasNoLimits) {
  auto o = offer_with({ueid("SMCLAB-UEID-1")});
  o.release = 0;
  o.max_conns = 0;  // not read with release 0
  o.max_links = 0;
  ServerTerms t;
  t.max_conns = 99;
  t.max_links = 99;
  ASSERT_EQ(negotiate(o, &t), 0u);
  EXPECT_EQ(t.release, 0);
  EXPECT_EQ(t.max_conns, 0);
  EXPECT_EQ(t.max_links, 0);
  EXPECT_EQ(t.eid, ueid("SMCLAB-UEID-1"));
}

TEST(Negotiate, LaterReleaseCappedAtOurs) {
  auto o = offer_with({ueid("OTHER-UEID")});
  o.release = 3;
  ServerTerms t;
  ASSERT_EQ(negotiate(o, &t), 0u);
  EXPECT_EQ(t.release, 1);
  EXPECT_EQ(t.max_conns, 255);
  EXPECT_EQ(t.max_links, 1);
}

// --- accept_extension / limits_of -------------------------------------------------

TEST(AcceptExtension, CarriesTerms) {
  ServerTerms t;
  t.eid = ueid("SMCLAB-UEID-1");
  t.release = 1;
  t.max_conns = 200;
  t.max_links = 1;
  const clc::FirstContactV2 fce = accept_extension(t);
  EXPECT_TRUE(fce.v2_direct);
  EXPECT_EQ(fce.os_type, clc::kOsLinux);
  EXPECT_EQ(fce.release, 1);
  EXPECT_EQ(fce.max_conns, 200);
  EXPECT_EQ(fce.max_links, 1);
  EXPECT_EQ(fce.feature_mask, 0);
  EXPECT_EQ(fce.hostname, hostname_field());
}

TEST(LimitsOf, Release1AndRelease0) {
  clc::AcceptConfirmV2 v2;
  clc::FirstContactV2 fce;
  fce.release = 1;
  fce.max_conns = 100;
  fce.max_links = 1;
  v2.first_contact = fce;
  GroupLimits l = limits_of(v2);
  EXPECT_EQ(l.max_conns, 100);
  EXPECT_EQ(l.max_links, 1);
  v2.first_contact->release = 0;
  l = limits_of(v2);
  EXPECT_EQ(l.max_conns, 255);
  EXPECT_EQ(l.max_links, 2);
  v2.first_contact.reset();
  l = limits_of(v2);
  EXPECT_EQ(l.max_conns, 255);
  EXPECT_EQ(l.max_links, 2);
}

// --- check_accept (client) --------------------------------------------------------

clc::AcceptConfirm v2_accept(uint8_t release, uint8_t max_conns, uint8_t max_links) {
  clc::AcceptConfirm a;
  a.type = clc::Type::kAccept;
  a.first_contact = true;
  a.peer_id = {1, 2, 3, 4, 5, 6, 7, 8};
  a.gid = mapped_gid(10, 9, 1, 1);
  a.mac = {0x02, 0, 0, 0, 0, 1};
  a.qpn = 0x123456;
  a.rmb_rkey = 0xabcdef01;
  a.rmbe_index = 1;
  a.rmbe_alert_token = 7;
  a.rmbe_size_code = 2;
  a.mtu_code = 3;
  a.rmb_vaddr = 0x1122334455667788;
  a.psn = 0x654321;
  clc::AcceptConfirmV2 v2;
  v2.eid = ueid("SMCLAB-UEID-1");
  clc::FirstContactV2 fce;
  fce.v2_direct = false;
  fce.os_type = clc::kOsLinux;
  fce.release = release;
  fce.hostname = ueid("PEER-HOST");  // any 32 space-padded bytes
  fce.max_conns = max_conns;
  fce.max_links = max_links;
  v2.first_contact = fce;
  a.v2 = v2;
  return a;
}

clc::AcceptConfirm subsequent_accept() {
  clc::AcceptConfirm a = v2_accept(1, 255, 1);
  a.first_contact = false;
  a.v2->first_contact.reset();
  return a;
}

TEST(CheckAccept, V1AcceptTaken) {
  clc::AcceptConfirm a;
  a.first_contact = true;
  EXPECT_EQ(check_accept(a), 0u);
}

TEST(CheckAccept, FirstContactLimits) {
  EXPECT_EQ(check_accept(v2_accept(1, 16, 1)), 0u);
  EXPECT_EQ(check_accept(v2_accept(1, 255, 2)), 0u);
  EXPECT_EQ(check_accept(v2_accept(1, 15, 1)), clc::decline::kMaxConnsError);
  EXPECT_EQ(check_accept(v2_accept(1, 16, 3)), clc::decline::kMaxLinksError);
  EXPECT_EQ(check_accept(v2_accept(1, 16, 0)), clc::decline::kMaxLinksError);
}

TEST(CheckAccept, Release0Unchecked) { EXPECT_EQ(check_accept(v2_accept(0, 0, 0)), 0u); }

TEST(CheckAccept, SubsequentContactTaken) { EXPECT_EQ(check_accept(subsequent_accept()), 0u); }

// --- confirm_for (client) ---------------------------------------------------------

const clc::Gid kOurGid = mapped_gid(10, 9, 1, 2);

clc::AcceptConfirm confirm_message(const clc::AcceptConfirm& acc, const clc::AcceptConfirmV2& v2) {
  clc::AcceptConfirm c;
  c.type = clc::Type::kConfirm;
  c.peer_id = {8, 7, 6, 5, 4, 3, 2, 1};
  c.gid = kOurGid;
  c.mac = {0x02, 0, 0, 0, 0, 2};
  c.qpn = 0x000abc;
  c.rmb_rkey = 0x10203040;
  c.rmbe_index = 1;
  c.rmbe_alert_token = 9;
  c.rmbe_size_code = 1;
  c.mtu_code = acc.mtu_code;
  c.rmb_vaddr = 0x1000;
  c.psn = 0x000001;
  c.v2 = v2;
  return c;
}

TEST(ConfirmFor, FirstContactEchoesAccept) {
  const clc::AcceptConfirm acc = v2_accept(1, 200, 1);
  const clc::AcceptConfirmV2 v2 = confirm_for(acc, kOurGid);
  EXPECT_EQ(v2.eid, acc.v2->eid);
  ASSERT_TRUE(v2.first_contact.has_value());
  const clc::FirstContactV2& fce = *v2.first_contact;
  EXPECT_EQ(fce.release, 1);
  EXPECT_EQ(fce.max_conns, 200);
  EXPECT_EQ(fce.max_links, 1);
  EXPECT_EQ(fce.v2_direct, false);  // the Accept's, echoed
  EXPECT_EQ(fce.os_type, clc::kOsLinux);
  EXPECT_EQ(fce.hostname, hostname_field());
  EXPECT_EQ(fce.feature_mask, 0);
  EXPECT_EQ(v2.gids, std::vector<clc::Gid>{kOurGid});

  clc::AcceptConfirm direct = v2_accept(1, 255, 2);
  direct.v2->first_contact->v2_direct = true;
  const clc::AcceptConfirmV2 v2d = confirm_for(direct, kOurGid);
  ASSERT_TRUE(v2d.first_contact.has_value());
  EXPECT_TRUE(v2d.first_contact->v2_direct);
  EXPECT_EQ(v2d.first_contact->max_conns, 255);
  EXPECT_EQ(v2d.first_contact->max_links, 2);
}

TEST(ConfirmFor, SubsequentContactHasNoExtension) {
  const clc::AcceptConfirm acc = subsequent_accept();
  const clc::AcceptConfirmV2 v2 = confirm_for(acc, kOurGid);
  EXPECT_EQ(v2.eid, ueid("SMCLAB-UEID-1"));
  EXPECT_FALSE(v2.first_contact.has_value());
  EXPECT_TRUE(v2.gids.empty());
}

TEST(ConfirmFor, FirstContactEncodesTo180AndRoundTrips) {
  const clc::AcceptConfirm acc = v2_accept(1, 255, 1);
  const clc::AcceptConfirm conf = confirm_message(acc, confirm_for(acc, kOurGid));
  const std::vector<uint8_t> bytes = clc::encode(conf);
  EXPECT_EQ(bytes.size(), 160u + 4u + 16u);
  ASSERT_EQ(bytes.size(), 180u);
  EXPECT_EQ(bytes[5], 0);
  EXPECT_EQ(bytes[6], 180);  // big-endian length
  clc::DecodeError err = clc::DecodeError::kNone;
  auto back = clc::decode_accept_confirm(bytes, clc::Type::kConfirm, &err);
  ASSERT_TRUE(back.has_value()) << clc::to_string(err);
  EXPECT_TRUE(back->first_contact);
  ASSERT_TRUE(back->v2.has_value());
  EXPECT_EQ(*back->v2, *conf.v2);
  EXPECT_EQ(back->v2->gids, std::vector<clc::Gid>{kOurGid});
}

TEST(ConfirmFor, SubsequentContactEncodesTo108AndRoundTrips) {
  const clc::AcceptConfirm acc = subsequent_accept();
  const clc::AcceptConfirm conf = confirm_message(acc, confirm_for(acc, kOurGid));
  const std::vector<uint8_t> bytes = clc::encode(conf);
  ASSERT_EQ(bytes.size(), 108u);
  clc::DecodeError err = clc::DecodeError::kNone;
  auto back = clc::decode_accept_confirm(bytes, clc::Type::kConfirm, &err);
  ASSERT_TRUE(back.has_value()) << clc::to_string(err);
  EXPECT_FALSE(back->first_contact);
  ASSERT_TRUE(back->v2.has_value());
  EXPECT_EQ(*back->v2, *conf.v2);
  EXPECT_FALSE(back->v2->first_contact.has_value());
}

// --- check_confirm (server) -------------------------------------------------------

ServerTerms release1_terms() {
  ServerTerms t;
  t.eid = ueid("SMCLAB-UEID-1");
  t.release = 1;
  t.max_conns = 255;
  t.max_links = 1;
  return t;
}

clc::AcceptConfirm v2_confirm(uint8_t release, uint8_t max_conns, uint8_t max_links) {
  clc::AcceptConfirm c = v2_accept(release, max_conns, max_links);
  c.type = clc::Type::kConfirm;
  c.v2->gids = {mapped_gid(10, 9, 1, 2)};
  return c;
}

TEST(CheckConfirm, EchoTaken) { EXPECT_EQ(check_confirm(v2_confirm(1, 255, 1), release1_terms()), 0u); }

TEST(CheckConfirm, ReleaseMismatch) {
  EXPECT_EQ(check_confirm(v2_confirm(0, 255, 1), release1_terms()), clc::decline::kReleaseError);
}

TEST(CheckConfirm, MaxConnsMismatch) {
  EXPECT_EQ(check_confirm(v2_confirm(1, 254, 1), release1_terms()), clc::decline::kMaxConnsError);
}

TEST(CheckConfirm, MaxLinksMismatch) {
  EXPECT_EQ(check_confirm(v2_confirm(1, 255, 2), release1_terms()), clc::decline::kMaxLinksError);
}

TEST(CheckConfirm, WithoutExtensionTaken) {
  clc::AcceptConfirm c = v2_confirm(0, 0, 0);
  c.v2->first_contact.reset();
  c.v2->gids.clear();
  EXPECT_EQ(check_confirm(c, release1_terms()), 0u);
  c.first_contact = false;
  EXPECT_EQ(check_confirm(c, release1_terms()), 0u);
}

// --- hostname_field ---------------------------------------------------------------

TEST(HostnameField, NodenameSpacePadded) {
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  const std::string node(u.nodename, strnlen(u.nodename, sizeof u.nodename));
  ASSERT_TRUE(std::all_of(node.begin(), node.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) <= 0x7e;
  })) << "this host's nodename is not printable ASCII";
  std::array<uint8_t, 32> expected;
  expected.fill(' ');
  std::memcpy(expected.data(), node.data(), std::min(node.size(), expected.size()));
  const std::array<uint8_t, 32> field = hostname_field();
  EXPECT_EQ(field.size(), 32u);
  EXPECT_EQ(field, expected);
}

// --- client_offer -----------------------------------------------------------------

TEST(ClientOffer, OffersConfiguredUeids) {
  const clc::Gid gid = mapped_gid(10, 9, 1, 2);
  auto o = client_offer(gid);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->release, 1);
  EXPECT_EQ(o->max_conns, 255);
  EXPECT_EQ(o->max_links, 1);
  EXPECT_EQ(o->feature_mask, 0);
  EXPECT_FALSE(o->seid);
  EXPECT_EQ(o->ueids, (std::vector<clc::Ueid>{ueid("SMCLAB-UEID-1"), ueid("OTHER-UEID")}));
  EXPECT_EQ(o->roce_gid, gid);
}

TEST(ClientOffer, NoneForNonMappedGid) {
  EXPECT_FALSE(client_offer(kLinkLocalGid).has_value());
  EXPECT_FALSE(client_offer(clc::Gid{}).has_value());
}

TEST(ClientOffer, ProposalEncodesTo196AndRoundTrips) {
  const clc::Gid gid = mapped_gid(10, 9, 1, 2);
  auto o = client_offer(gid);
  ASSERT_TRUE(o.has_value());
  clc::Proposal p;
  p.peer_id = {1, 2, 3, 4, 5, 6, 7, 8};
  p.gid = gid;
  p.mac = {0x02, 0, 0, 0, 0, 3};
  p.ipv4_subnet = 0x0a090100;
  p.ipv4_prefix_len = 24;
  p.offers_smcr_v1 = true;
  p.v2 = *o;
  const std::vector<uint8_t> bytes = clc::encode(p);
  EXPECT_EQ(bytes.size(), 40u + 40u + 8u + 40u + 32u * 2u + 4u);
  ASSERT_EQ(bytes.size(), 196u);
  EXPECT_EQ(bytes[7], 0x20);  // version 2, typev2 R, typev1 R
  clc::DecodeError err = clc::DecodeError::kNone;
  auto back = clc::decode_proposal(bytes, &err);
  ASSERT_TRUE(back.has_value()) << clc::to_string(err);
  EXPECT_TRUE(back->offers_smcr_v1);
  EXPECT_EQ(back->version, 2);
  EXPECT_EQ(back->ipv4_subnet, 0x0a090100u);
  EXPECT_EQ(back->ipv4_prefix_len, 24);
  ASSERT_TRUE(back->v2.has_value());
  EXPECT_EQ(*back->v2, *o);
}

}  // namespace
}  // namespace smcr::v2
