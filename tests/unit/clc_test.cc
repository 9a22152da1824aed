// CLC codec: digest section 9.2-9.7 vectors, Linux kernel captures
// (shared/spec/linux-clc-vectors.md), round trips and malformed input.
#include "core/clc.h"

#include <gtest/gtest.h>

#include "tests/unit/hex.h"

#include <cctype>
#include <string_view>
#include <vector>

namespace smcr::clc {
namespace {

using smcr::test::hex;

template <size_t N>
std::array<uint8_t, N> arr(std::string_view text) {
  auto v = hex(text);
  std::array<uint8_t, N> out{};
  EXPECT_EQ(v.size(), N);
  std::copy_n(v.begin(), std::min(v.size(), N), out.begin());
  return out;
}

// --- Digest 9.3-9.6 -------------------------------------------------------------

const auto kProposalIpv4 = hex(
    "E2 D4 C3 D9 01 00 34 10 12 34 02 00 00 00 00 0B"
    "FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0B"
    "02 00 00 00 00 0B 00 00 C0 A8 01 00 18 00 00 00"
    "E2 D4 C3 D9");

const auto kProposalIpv6 = hex(
    "E2 D4 C3 D9 01 00 45 10 12 34 02 00 00 00 00 0B"
    "FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0B"
    "02 00 00 00 00 0B 00 00 00 00 00 00 00 00 00 01"
    "20 01 0D B8 00 00 00 01 00 00 00 00 00 00 00 00"
    "40 E2 D4 C3 D9");

const auto kAcceptFirstContact = hex(
    "E2 D4 C3 D9 02 00 44 18 AB CD 02 00 00 00 00 0A"
    "FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0A"
    "02 00 00 00 00 0A 00 01 08 11 22 33 44 01 00 00"
    "A0 01 23 00 00 00 00 00 12 34 00 00 00 00 AB CD"
    "E2 D4 C3 D9");

const auto kDeclineOutOfSync = hex(
    "E2 D4 C3 D9 04 00 1C 18 AB CD 02 00 00 00 00 0A"
    "03 00 00 00 00 00 00 00 E2 D4 C3 D9");

Proposal digest_proposal() {
  Proposal p;
  p.peer_id = arr<8>("12 34 02 00 00 00 00 0B");
  p.gid = arr<16>("FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0B");
  p.mac = arr<6>("02 00 00 00 00 0B");
  return p;
}

Proposal digest_proposal_ipv4() {
  Proposal p = digest_proposal();
  p.ipv4_subnet = 0xC0A80100;
  p.ipv4_prefix_len = 24;
  return p;
}

Proposal digest_proposal_ipv6() {
  Proposal p = digest_proposal();
  Ipv6Prefix prefix;
  prefix.prefix = arr<16>("20 01 0D B8 00 00 00 01 00 00 00 00 00 00 00 00");
  prefix.prefix_len = 64;
  p.ipv6_prefixes.push_back(prefix);
  return p;
}

AcceptConfirm digest_accept() {
  AcceptConfirm m;
  m.type = Type::kAccept;
  m.first_contact = true;
  m.peer_id = arr<8>("AB CD 02 00 00 00 00 0A");
  m.gid = arr<16>("FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0A");
  m.mac = arr<6>("02 00 00 00 00 0A");
  m.qpn = 0x108;
  m.rmb_rkey = 0x11223344;
  m.rmbe_index = 1;
  m.rmbe_alert_token = 0xA001;
  m.rmbe_size_code = 2;
  m.mtu_code = 3;
  m.rmb_vaddr = 0x12340000;
  m.psn = 0xABCD;
  return m;
}

Decline digest_decline() {
  Decline d;
  d.peer_id = arr<8>("AB CD 02 00 00 00 00 0A");
  d.diagnosis = decline::kConfigError;
  d.out_of_sync = true;
  return d;
}

std::vector<uint8_t> first8(const std::vector<uint8_t>& v) { return {v.begin(), v.begin() + 8}; }

TEST(ClcHeader, Digest92HeaderBytes) {
  EXPECT_EQ(first8(encode(digest_proposal_ipv4())), hex("E2 D4 C3 D9 01 00 34 10"));
  AcceptConfirm accept = digest_accept();
  EXPECT_EQ(first8(encode(accept)), hex("E2 D4 C3 D9 02 00 44 18"));
  accept.first_contact = false;
  EXPECT_EQ(first8(encode(accept)), hex("E2 D4 C3 D9 02 00 44 10"));
  AcceptConfirm confirm = digest_accept();
  confirm.type = Type::kConfirm;
  confirm.first_contact = true;  // reserved in Confirm: never sent
  EXPECT_EQ(first8(encode(confirm)), hex("E2 D4 C3 D9 03 00 44 10"));
  Decline d = digest_decline();
  d.out_of_sync = false;
  EXPECT_EQ(first8(encode(d)), hex("E2 D4 C3 D9 04 00 1C 10"));
  d.out_of_sync = true;
  EXPECT_EQ(first8(encode(d)), hex("E2 D4 C3 D9 04 00 1C 18"));
}

TEST(ClcHeader, DecodesEachType) {
  struct Case {
    std::vector<uint8_t> bytes;
    Type type;
    uint16_t length;
    uint8_t flags;
  };
  const Case cases[] = {
      {kProposalIpv4, Type::kProposal, 52, 0},
      {kAcceptFirstContact, Type::kAccept, 68, 0x8},
      {kDeclineOutOfSync, Type::kDecline, 28, 0x8},
  };
  for (const auto& c : cases) {
    DecodeError err = DecodeError::kBadField;
    auto h = decode_header(c.bytes, &err);
    ASSERT_TRUE(h);
    EXPECT_EQ(err, DecodeError::kNone);
    EXPECT_EQ(h->type, c.type);
    EXPECT_EQ(h->length, c.length);
    EXPECT_EQ(h->version, 1);
    EXPECT_EQ(h->flags, c.flags);
  }
  // Only the first 8 bytes are needed.
  auto h = decode_header(std::span(kAcceptFirstContact).first(8));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->length, 68);
}

TEST(ClcProposal, Digest93Ipv4Encode) { EXPECT_EQ(encode(digest_proposal_ipv4()), kProposalIpv4); }

TEST(ClcProposal, Digest93Ipv4Decode) {
  DecodeError err;
  auto p = decode_proposal(kProposalIpv4, &err);
  ASSERT_TRUE(p) << to_string(err);
  EXPECT_EQ(*p, digest_proposal_ipv4());
  EXPECT_EQ(p->ipv4_subnet, 0xC0A80100u);
  EXPECT_EQ(p->ipv4_prefix_len, 24);
  EXPECT_TRUE(p->offers_smcr_v1);
  EXPECT_EQ(p->version, 1);
}

TEST(ClcProposal, Digest94Ipv6Encode) {
  EXPECT_EQ(kProposalIpv6.size(), 69u);
  EXPECT_EQ(encode(digest_proposal_ipv6()), kProposalIpv6);
}

TEST(ClcProposal, Digest94Ipv6Decode) {
  auto p = decode_proposal(kProposalIpv6);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, digest_proposal_ipv6());
  ASSERT_EQ(p->ipv6_prefixes.size(), 1u);
  EXPECT_EQ(p->ipv6_prefixes[0].prefix_len, 64);
  EXPECT_EQ(p->ipv4_subnet, 0u);
}

TEST(ClcProposal, NonZeroIpAreaOffsetIsSkipped) {
  Proposal p = digest_proposal_ipv4();
  p.ip_area_offset = 7;
  auto bytes = encode(p);
  ASSERT_EQ(bytes.size(), 52u + 7);
  EXPECT_EQ(bytes[6], 52 + 7);
  EXPECT_EQ(bytes[38], 0);
  EXPECT_EQ(bytes[39], 7);
  // Whatever sits in the skipped area is not ours to interpret.
  for (size_t i = 40; i < 47; ++i) bytes[i] = 0xAA;
  auto decoded = decode_proposal(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, p);
}

TEST(ClcProposal, EceTravelsInTheSkippedArea) {
  Proposal p = digest_proposal_ipv4();
  p.ece = Ece{0x0015b3, 0x10000003};
  auto bytes = encode(p);
  ASSERT_EQ(bytes.size(), 52u + kEceBlockLen);
  EXPECT_EQ(bytes[39], kEceBlockLen) << "the RFC's offset to the IP area names the gap";
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 40, bytes.begin() + 44), (std::vector<uint8_t>{0xC5, 0xC3, 0xC5, 0x40}));
  auto decoded = decode_proposal(bytes);
  ASSERT_TRUE(decoded);
  ASSERT_TRUE(decoded->ece);
  EXPECT_EQ(*decoded->ece, *p.ece);
  // The IP area after the gap is where every RFC receiver looks for it.
  EXPECT_EQ(decoded->ipv4_subnet, p.ipv4_subnet);
  EXPECT_EQ(decoded->ipv4_prefix_len, p.ipv4_prefix_len);
}

TEST(ClcProposal, TwelveByteGapWithoutTheMagicIsNotEce) {
  Proposal p = digest_proposal_ipv4();
  p.ip_area_offset = kEceBlockLen;
  auto bytes = encode(p);
  for (size_t i = 40; i < 52; ++i) bytes[i] = 0x5A;
  auto decoded = decode_proposal(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_FALSE(decoded->ece);
  EXPECT_EQ(decoded->ipv4_subnet, p.ipv4_subnet);
}

TEST(ClcProposal, RoundTripManyPrefixes) {
  Proposal p = digest_proposal();
  for (uint8_t i = 0; i < 8; ++i) {
    Ipv6Prefix prefix;
    prefix.prefix[0] = 0x20;
    prefix.prefix[15] = i;
    prefix.prefix_len = static_cast<uint8_t>(48 + i);
    p.ipv6_prefixes.push_back(prefix);
  }
  p.ip_area_offset = 3;
  auto bytes = encode(p);
  EXPECT_EQ(bytes.size(), 52u + 3 + 17 * 8);
  auto decoded = decode_proposal(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, p);
}

TEST(ClcProposal, EncoderSendsAtMostEightPrefixes) {
  Proposal p = digest_proposal();
  p.ipv6_prefixes.resize(9);
  auto bytes = encode(p);
  EXPECT_EQ(bytes.size(), 52u + 17 * 8);
  auto decoded = decode_proposal(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->ipv6_prefixes.size(), 8u);
}

TEST(ClcAcceptConfirm, Digest95AcceptEncode) { EXPECT_EQ(encode(digest_accept()), kAcceptFirstContact); }

TEST(ClcAcceptConfirm, Digest95AcceptDecode) {
  auto m = decode_accept_confirm(kAcceptFirstContact, Type::kAccept);
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, digest_accept());
}

TEST(ClcAcceptConfirm, Digest95ConfirmSameLayout) {
  AcceptConfirm c = digest_accept();
  c.type = Type::kConfirm;
  c.first_contact = false;
  auto bytes = encode(c);
  auto expected = kAcceptFirstContact;
  expected[4] = 0x03;
  expected[7] = 0x10;
  EXPECT_EQ(bytes, expected);
  auto decoded = decode_accept_confirm(bytes, Type::kConfirm);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, c);
}

TEST(ClcAcceptConfirm, Digest97BsizeAndMtuNibbles) {
  AcceptConfirm m = digest_accept();
  m.rmbe_size_code = 5;
  m.mtu_code = 5;
  auto bytes = encode(m);
  EXPECT_EQ(bytes[50], 0x55);
  auto decoded = decode_accept_confirm(bytes, Type::kAccept);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->rmbe_size_code, 5);
  EXPECT_EQ(decoded->mtu_code, 5);
}

TEST(ClcAcceptConfirm, TwentyFourBitFieldsRoundTrip) {
  AcceptConfirm m = digest_accept();
  m.qpn = 0xFEDCBA;
  m.psn = 0xABCDEF;
  m.rmb_vaddr = 0xFF3F9BC485640000;
  m.rmbe_alert_token = 0xFFFFFFFF;
  m.rmbe_index = 255;
  auto decoded = decode_accept_confirm(encode(m), Type::kAccept);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, m);
}

TEST(ClcAcceptConfirm, AcceptWithEceIsEightyBytesAndRoundTrips) {
  AcceptConfirm m = digest_accept();
  m.ece = Ece{0x0015b3, 0x10000001};
  auto bytes = encode(m);
  ASSERT_EQ(bytes.size(), kAcceptConfirmLen + kEceBlockLen);
  // The RFC fields keep their offsets.
  auto plain = encode(digest_accept());
  EXPECT_TRUE(std::equal(plain.begin() + 8, plain.begin() + 64, bytes.begin() + 8));
  auto decoded = decode_accept_confirm(bytes, Type::kAccept);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, m);
}

TEST(ClcAcceptConfirm, EightyByteAcceptWithoutTheMagicIsRejected) {
  AcceptConfirm m = digest_accept();
  m.ece = Ece{1, 2};
  auto bytes = encode(m);
  bytes[64] ^= 0xFF;
  DecodeError err;
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

TEST(ClcAcceptConfirm, ConfirmNeverCarriesEce) {
  AcceptConfirm c = digest_accept();
  c.type = Type::kConfirm;
  c.first_contact = false;
  c.ece = Ece{1, 2};
  EXPECT_EQ(encode(c).size(), kAcceptConfirmLen);
  auto extended = encode(digest_accept());
  AcceptConfirm a = digest_accept();
  a.ece = Ece{1, 2};
  extended = encode(a);
  extended[4] = 0x03;  // an 80-byte Confirm is not a thing
  EXPECT_FALSE(decode_accept_confirm(extended, Type::kConfirm));
}

TEST(ClcDecline, Digest96Encode) { EXPECT_EQ(encode(digest_decline()), kDeclineOutOfSync); }

TEST(ClcDecline, Digest96Decode) {
  auto d = decode_decline(kDeclineOutOfSync);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, digest_decline());
}

TEST(ClcDecline, RoundTripWithoutSync) {
  Decline d = digest_decline();
  d.out_of_sync = false;
  d.diagnosis = decline::kNoSmcDevice;
  auto decoded = decode_decline(encode(d));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, d);
}

// --- Linux kernel captures ------------------------------------------------------

// V16: 6.12 SMC-Rv1 Proposal, version 2 in byte 7, 40-byte SMC-D area, offset 40.
const auto kLinuxV16 = hex(
    "e2d4c3d901005c28ef5c52540000010200000000000000000000ffff0a0901025254000001020028000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000a09010018000000e2d4c3d9");
// V20: the same from 6.1.
const auto kLinuxV20 = hex(
    "e2d4c3d901005c28ef6e52540000010200000000000000000000ffff0a0901025254000001020028000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000a09010018000000e2d4c3d9");
// V04: 6.1 SMC-Rv2-only Proposal (typev1 = N): zero v1 fields, no IP area.
const auto kLinuxV04 = hex(
    "e2d4c3d901009c2200000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000001c000000000000000000000000000000000000000000000000000000000100000000000000000000000000000000"
    "00ffff0a09000100000000000000000000000000000000534d434c41422d554549442d3120202020202020202020202020"
    "202020202020e2d4c3d9");
// V12: 6.12 SMC-Rv2-only Proposal, v2.1 extension fields set.
const auto kLinuxV12 = hex(
    "e2d4c3d901009c2200000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000001c000000000000000000000000000000000000000000000000000000000100001000000000000000000000000000"
    "00ffff0a090102ff020001000000000000000000000000534d434c41422d554549442d3120202020202020202020202020"
    "202020202020e2d4c3d9");
const auto kLinuxV17 = hex(
    "e2d4c3d9020044187e3252540000010100000000000000000000ffff0a0901015254000001010000110000037f0100"
    "0000012300ff30fe51850f000000f66edfe2d4c3d9");
const auto kLinuxV18 = hex(
    "e2d4c3d903004418ef5c52540000010200000000000000000000ffff0a0901025254000001020000110000039201"
    "000000012300ff2e29d6c4f500000096464be2d4c3d9");
const auto kLinuxV02 = hex("e2d4c3d904001c100693c606b187d82a0303000000000000e2d4c3d9");
const auto kLinuxV03 = hex("e2d4c3d904001c104d5bf27d710e0da30303000000000000e2d4c3d9");
const auto kLinuxV10 = hex(
    "e2d4c3d904002c20fd1882e5a1836f5e020100002000000000000000000000000000000000000000e2d4c3d9");
// V13/V14: 6.12 v2 Accept (160 bytes) and Confirm (180 bytes).
const auto kLinuxV13 = hex(
    "e2d4c3d90200a02869cf52540000010100000000000000000000ffff0a0901015254000001010000110000037f0100"
    "0000012300ff11daebc53c000000c45d76534d434c41422d554549442d312020202020202020202020202020202020"
    "2020000000000000000080210000286e6f6e65292020202020202020202020202020202020202020202020202020ff02"
    "0001000000000000000000000000e2d4c3d9");
const auto kLinuxV14 = hex(
    "e2d4c3d90300b428a9e452540000010200000000000000000000ffff0a090102525400000102000011000003f90100"
    "0000012300ff18cc868575000000640970534d434c41422d554549442d312020202020202020202020202020202020"
    "2020000000000000000080210000286e6f6e65292020202020202020202020202020202020202020202020202020ff02"
    "00010000000000000000000000000100000000000000000000000000ffff0a090102e2d4c3d9");

TEST(ClcLinux, VectorsHaveTheirCapturedLengths) {
  EXPECT_EQ(kLinuxV16.size(), 92u);
  EXPECT_EQ(kLinuxV20.size(), 92u);
  EXPECT_EQ(kLinuxV04.size(), 156u);
  EXPECT_EQ(kLinuxV12.size(), 156u);
  EXPECT_EQ(kLinuxV17.size(), 68u);
  EXPECT_EQ(kLinuxV18.size(), 68u);
  EXPECT_EQ(kLinuxV02.size(), 28u);
  EXPECT_EQ(kLinuxV10.size(), 44u);
  EXPECT_EQ(kLinuxV13.size(), 160u);
  EXPECT_EQ(kLinuxV14.size(), 180u);
}

TEST(ClcLinux, V16V1ProposalWithSmcdAreaDecodes) {
  for (const auto* bytes : {&kLinuxV16, &kLinuxV20}) {
    DecodeError err;
    auto p = decode_proposal(*bytes, &err);
    ASSERT_TRUE(p) << to_string(err);
    EXPECT_EQ(p->version, 2);
    EXPECT_TRUE(p->offers_smcr_v1);
    EXPECT_EQ(p->ip_area_offset, 40);
    EXPECT_EQ(p->ipv4_subnet, 0x0A090100u);  // 10.9.1.0
    EXPECT_EQ(p->ipv4_prefix_len, 24);
    EXPECT_TRUE(p->ipv6_prefixes.empty());
    EXPECT_EQ(p->mac, arr<6>("525400000102"));
    EXPECT_EQ(p->gid, arr<16>("00000000000000000000ffff0a090102"));
  }
  EXPECT_EQ(decode_proposal(kLinuxV16)->peer_id, arr<8>("ef5c525400000102"));
}

TEST(ClcLinux, V04V2OnlyProposalDecodesWithoutSmcrV1) {
  for (const auto* bytes : {&kLinuxV04, &kLinuxV12}) {
    DecodeError err;
    auto p = decode_proposal(*bytes, &err);
    ASSERT_TRUE(p) << to_string(err);
    EXPECT_EQ(p->version, 2);
    EXPECT_FALSE(p->offers_smcr_v1);
    EXPECT_EQ(p->peer_id, PeerId{});
    EXPECT_EQ(p->gid, Gid{});
    EXPECT_EQ(p->ip_area_offset, 0);
    EXPECT_EQ(p->ipv4_subnet, 0u);
    EXPECT_TRUE(p->ipv6_prefixes.empty());
  }
}

TEST(ClcLinux, V2ProposalTypeV1Bits) {
  // typev1 B (both) offers SMC-Rv1; D (SMC-D only) does not, but has an IP
  // area. (typev2 stays N: 0x08.)
  auto bytes = kLinuxV16;
  bytes[7] = 0x2B;
  auto both = decode_proposal(bytes);
  ASSERT_TRUE(both);
  EXPECT_TRUE(both->offers_smcr_v1);
  bytes[7] = 0x29;
  auto smcd_only = decode_proposal(bytes);
  ASSERT_TRUE(smcd_only);
  EXPECT_FALSE(smcd_only->offers_smcr_v1);
  EXPECT_EQ(smcd_only->ipv4_subnet, 0x0A090100u);
}

TEST(ClcLinux, V17AcceptDecodes) {
  DecodeError err;
  auto m = decode_accept_confirm(kLinuxV17, Type::kAccept, &err);
  ASSERT_TRUE(m) << to_string(err);
  EXPECT_EQ(m->type, Type::kAccept);
  EXPECT_TRUE(m->first_contact);
  EXPECT_EQ(m->peer_id, arr<8>("7e32525400000101"));
  EXPECT_EQ(m->gid, arr<16>("00000000000000000000ffff0a090101"));
  EXPECT_EQ(m->mac, arr<6>("525400000101"));
  EXPECT_EQ(m->qpn, 0x11u);
  EXPECT_EQ(m->rmb_rkey, 0x37Fu);
  EXPECT_EQ(m->rmbe_index, 1);
  EXPECT_EQ(m->rmbe_alert_token, 1u);
  EXPECT_EQ(m->rmbe_size_code, 2);
  EXPECT_EQ(m->mtu_code, 3);
  EXPECT_EQ(m->rmb_vaddr, 0xFF30FE51850F0000u);
  EXPECT_EQ(m->psn, 0xF66EDFu);
  // Our encoder reproduces the kernel's bytes exactly.
  EXPECT_EQ(encode(*m), kLinuxV17);
}

TEST(ClcLinux, V18ConfirmWithFirstContactBitDecodes) {
  DecodeError err;
  auto m = decode_accept_confirm(kLinuxV18, Type::kConfirm, &err);
  ASSERT_TRUE(m) << to_string(err);
  EXPECT_EQ(m->type, Type::kConfirm);
  EXPECT_TRUE(m->first_contact);
  EXPECT_EQ(m->peer_id, arr<8>("ef5c525400000102"));
  EXPECT_EQ(m->qpn, 0x11u);
  EXPECT_EQ(m->rmb_rkey, 0x392u);
  EXPECT_EQ(m->rmb_vaddr, 0xFF2E29D6C4F50000u);
  EXPECT_EQ(m->psn, 0x96464Bu);
  // Not an Accept, even though the F bit is there.
  EXPECT_FALSE(decode_accept_confirm(kLinuxV18, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
}

TEST(ClcLinux, V2AcceptAndConfirmDecodeTheirRfcFields) {
  auto accept = decode_accept_confirm(kLinuxV13, Type::kAccept);
  ASSERT_TRUE(accept);
  EXPECT_TRUE(accept->first_contact);
  EXPECT_EQ(accept->rmb_rkey, 0x37Fu);
  EXPECT_EQ(accept->psn, 0xC45D76u);
  EXPECT_EQ(accept->rmb_vaddr, 0xFF11DAEBC53C0000u);
  auto confirm = decode_accept_confirm(kLinuxV14, Type::kConfirm);
  ASSERT_TRUE(confirm);
  EXPECT_EQ(confirm->rmb_rkey, 0x3F9u);
  EXPECT_EQ(confirm->psn, 0x640970u);
}

TEST(ClcLinux, V02V03V1Declines) {
  auto v02 = decode_decline(kLinuxV02);
  ASSERT_TRUE(v02);
  EXPECT_EQ(v02->diagnosis, decline::kNoSmcDevice);
  EXPECT_FALSE(v02->out_of_sync);
  EXPECT_EQ(v02->peer_id, arr<8>("0693c606b187d82a"));
  EXPECT_EQ(encode(*v02), kLinuxV02);
  auto v03 = decode_decline(kLinuxV03);
  ASSERT_TRUE(v03);
  EXPECT_EQ(v03->diagnosis, 0x03030000u);
  EXPECT_EQ(v03->peer_id, arr<8>("4d5bf27d710e0da3"));
  EXPECT_EQ(encode(*v03), kLinuxV03);
}

TEST(ClcLinux, V10V2DeclineOf44Bytes) {
  DecodeError err;
  auto d = decode_decline(kLinuxV10, &err);
  ASSERT_TRUE(d) << to_string(err);
  EXPECT_EQ(d->diagnosis, decline::kTimeoutConfirmLink);
  EXPECT_FALSE(d->out_of_sync);
  EXPECT_EQ(d->peer_id, arr<8>("fd1882e5a1836f5e"));
}

// --- SMC-Rv2: the kernel's own bytes, decoded and re-encoded byte for byte -----------

void set_length(std::vector<uint8_t>& bytes, uint16_t length) {
  bytes[5] = static_cast<uint8_t>(length >> 8);
  bytes[6] = static_cast<uint8_t>(length);
}

Ueid ueid(std::string_view text) {
  Ueid u;
  u.fill(' ');
  std::copy(text.begin(), text.end(), u.begin());
  return u;
}

TEST(ClcV2, V12ProposalOfferAndExactReencode) {
  DecodeError err;
  auto p = decode_proposal(kLinuxV12, &err);
  ASSERT_TRUE(p) << to_string(err);
  EXPECT_FALSE(p->offers_smcr_v1);
  ASSERT_TRUE(p->v2);
  EXPECT_EQ(p->v2->release, 1);
  EXPECT_FALSE(p->v2->seid);
  EXPECT_EQ(p->v2->roce_gid, arr<16>("00000000000000000000ffff0a090102"));
  EXPECT_EQ(p->v2->max_conns, 255);
  EXPECT_EQ(p->v2->max_links, 2);
  EXPECT_EQ(p->v2->feature_mask, 1);
  ASSERT_EQ(p->v2->ueids.size(), 1u);
  EXPECT_EQ(p->v2->ueids[0], ueid("SMCLAB-UEID-1"));
  EXPECT_EQ(encode(*p), kLinuxV12);
  // 6.1's (release 0, the v2.1 fields zero) likewise.
  auto old = decode_proposal(kLinuxV04, &err);
  ASSERT_TRUE(old && old->v2) << to_string(err);
  EXPECT_EQ(old->v2->release, 0);
  EXPECT_EQ(old->v2->max_conns, 0);
  EXPECT_EQ(encode(*old), kLinuxV04);
  // V16 offers v1 only (typev2 N): no extension.
  EXPECT_FALSE(decode_proposal(kLinuxV16)->v2);
}

TEST(ClcV2, ProposalOfferingV1AndV2) {
  // Linux's "typev1 = R" variant: v1 fields, the IP area after the SMC-D
  // area, then the extension (164 bytes for IPv4 and one UEID).
  Proposal p = digest_proposal_ipv4();
  p.v2 = SmcrV2Offer{};
  p.v2->roce_gid = arr<16>("00000000000000000000ffff0a090102");
  p.v2->max_conns = 255;
  p.v2->max_links = 2;
  p.v2->ueids = {ueid("SMCLAB-UEID-1")};
  auto bytes = encode(p);
  ASSERT_EQ(bytes.size(), 164u);
  EXPECT_EQ(bytes[7], 0x20);
  EXPECT_EQ(bytes[38] << 8 | bytes[39], 40);       // iparea_offset
  EXPECT_EQ(bytes[50] << 8 | bytes[51], 28 + 8);   // the extension after the IP area
  DecodeError err;
  auto back = decode_proposal(bytes, &err);
  ASSERT_TRUE(back) << to_string(err);
  EXPECT_TRUE(back->offers_smcr_v1);
  EXPECT_EQ(back->ip_area_offset, 40);
  EXPECT_EQ(back->ipv4_subnet, p.ipv4_subnet);
  EXPECT_EQ(back->v2, p.v2);
  // With IPv6 prefixes the extension moves on by 17 each.
  p.ipv6_prefixes.resize(2);
  bytes = encode(p);
  EXPECT_EQ(bytes.size(), 164u + 34);
  back = decode_proposal(bytes, &err);
  ASSERT_TRUE(back) << to_string(err);
  EXPECT_EQ(back->ipv6_prefixes.size(), 2u);
  EXPECT_EQ(back->v2, p.v2);
}

TEST(ClcV2, MalformedExtensionsAreProtocolErrors) {
  DecodeError err;
  for (uint16_t offset : {uint16_t{0}, uint16_t{173}, uint16_t{0xFFFF}}) {
    auto bytes = kLinuxV12;
    bytes[50] = static_cast<uint8_t>(offset >> 8);
    bytes[51] = static_cast<uint8_t>(offset);
    EXPECT_FALSE(decode_proposal(bytes, &err)) << offset;
    EXPECT_EQ(err, DecodeError::kBadField) << offset;
  }
  // An offset inside the SMC-D area, or one that leaves the extension past the end.
  for (uint16_t offset : {uint16_t{1}, uint16_t{27}, uint16_t{29}}) {
    auto bytes = kLinuxV12;
    bytes[51] = static_cast<uint8_t>(offset);
    EXPECT_FALSE(decode_proposal(bytes, &err)) << offset;
    EXPECT_EQ(err, DecodeError::kBadLength) << offset;
  }
  auto nine = kLinuxV12;
  nine[80] = 9;
  EXPECT_FALSE(decode_proposal(nine, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  // One UEID too many or too few for the length.
  for (uint8_t count : {0, 2}) {
    auto bytes = kLinuxV12;
    bytes[80] = count;
    EXPECT_FALSE(decode_proposal(bytes, &err)) << int(count);
    EXPECT_EQ(err, DecodeError::kBadLength) << int(count);
  }
  // Too short to hold the SMC-D area at all.
  auto short_one = kLinuxV12;
  short_one.erase(short_one.begin() + 60, short_one.end() - 4);
  set_length(short_one, static_cast<uint16_t>(short_one.size()));
  EXPECT_FALSE(decode_proposal(short_one, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

TEST(ClcV2, V13AcceptAndV14ConfirmExactReencode) {
  DecodeError err;
  auto a = decode_accept_confirm(kLinuxV13, Type::kAccept, &err);
  ASSERT_TRUE(a && a->v2) << to_string(err);
  EXPECT_EQ(a->v2->eid, ueid("SMCLAB-UEID-1"));
  ASSERT_TRUE(a->v2->first_contact);
  const FirstContactV2& f = *a->v2->first_contact;
  EXPECT_TRUE(f.v2_direct);
  EXPECT_EQ(f.os_type, kOsLinux);
  EXPECT_EQ(f.release, 1);
  std::array<uint8_t, 32> none;
  none.fill(' ');
  std::string_view n = "(none)";
  std::copy(n.begin(), n.end(), none.begin());
  EXPECT_EQ(f.hostname, none);
  EXPECT_EQ(f.max_conns, 255);
  EXPECT_EQ(f.max_links, 2);
  EXPECT_EQ(f.feature_mask, 1);
  EXPECT_TRUE(a->v2->gids.empty());
  EXPECT_EQ(encode(*a), kLinuxV13);

  auto c = decode_accept_confirm(kLinuxV14, Type::kConfirm, &err);
  ASSERT_TRUE(c && c->v2 && c->v2->first_contact) << to_string(err);
  ASSERT_EQ(c->v2->gids.size(), 1u);
  EXPECT_EQ(c->v2->gids[0], arr<16>("00000000000000000000ffff0a090102"));
  EXPECT_EQ(encode(*c), kLinuxV14);
}

TEST(ClcV2, SubsequentContactAcceptIs108Bytes) {
  auto a = *decode_accept_confirm(kLinuxV13, Type::kAccept);
  a.first_contact = false;
  a.v2->first_contact.reset();
  auto bytes = encode(a);
  ASSERT_EQ(bytes.size(), 108u);
  EXPECT_EQ(bytes[7], 0x20);
  DecodeError err;
  auto back = decode_accept_confirm(bytes, Type::kAccept, &err);
  ASSERT_TRUE(back) << to_string(err);
  EXPECT_EQ(*back, a);
}

TEST(ClcV2, ConfirmGidListMustFit) {
  DecodeError err;
  auto bytes = kLinuxV14;
  bytes[156] = 2;  // claims two GIDs, carries one
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kConfirm, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  bytes[156] = 9;
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kConfirm, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
}

TEST(ClcV2, V10DeclineExactReencode) {
  auto d = decode_decline(kLinuxV10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->version, 2);
  EXPECT_EQ(d->os_type, kOsLinux);
  EXPECT_EQ(encode(*d), kLinuxV10);
  Decline v1 = *d;
  v1.version = 1;
  v1.os_type = 0;
  EXPECT_EQ(encode(v1).size(), kDeclineLen);
}

// --- Malformed input ---------------------------------------------------------------

struct Sample {
  const char* name;
  std::vector<uint8_t> bytes;
};

std::vector<Sample> all_samples() {
  return {
      {"proposal_ipv4", kProposalIpv4}, {"proposal_ipv6", kProposalIpv6},
      {"accept", kAcceptFirstContact},  {"decline", kDeclineOutOfSync},
      {"linux_v16", kLinuxV16},         {"linux_v04", kLinuxV04},
      {"linux_v17", kLinuxV17},         {"linux_v18", kLinuxV18},
      {"linux_v02", kLinuxV02},         {"linux_v10", kLinuxV10},
      {"linux_v13", kLinuxV13},         {"linux_v14", kLinuxV14},
  };
}

// Runs the decoder matching the message's own type byte.
bool decodes(std::span<const uint8_t> bytes, Type type, DecodeError* err) {
  switch (type) {
    case Type::kProposal: return decode_proposal(bytes, err).has_value();
    case Type::kAccept:
    case Type::kConfirm: return decode_accept_confirm(bytes, type, err).has_value();
    case Type::kDecline: return decode_decline(bytes, err).has_value();
  }
  return false;
}

TEST(ClcMalformed, SamplesDecodeIntact) {
  for (const auto& s : all_samples()) {
    DecodeError err;
    EXPECT_TRUE(decodes(s.bytes, static_cast<Type>(s.bytes[4]), &err)) << s.name << ": " << to_string(err);
  }
}

TEST(ClcMalformed, EveryTruncationFailsCleanly) {
  for (const auto& s : all_samples()) {
    const Type type = static_cast<Type>(s.bytes[4]);
    for (size_t n = 0; n < s.bytes.size(); ++n) {
      std::span<const uint8_t> prefix(s.bytes.data(), n);
      DecodeError err = DecodeError::kNone;
      EXPECT_FALSE(decodes(prefix, type, &err)) << s.name << " length " << n;
      EXPECT_EQ(err, DecodeError::kTooShort) << s.name << " length " << n;
      const auto header = decode_header(prefix, &err);
      if (n < kHeaderLen) {
        EXPECT_FALSE(header);
        EXPECT_EQ(err, DecodeError::kTooShort);
      } else {
        EXPECT_TRUE(header) << s.name << " length " << n;
      }
    }
  }
}

TEST(ClcMalformed, ExtraBytesAfterTheMessageAreRejected) {
  for (const auto& s : all_samples()) {
    auto bytes = s.bytes;
    bytes.push_back(0);
    DecodeError err;
    EXPECT_FALSE(decodes(bytes, static_cast<Type>(s.bytes[4]), &err)) << s.name;
    EXPECT_EQ(err, DecodeError::kBadLength) << s.name;
  }
}

TEST(ClcMalformed, WrongLeadingEyecatcher) {
  for (const auto& s : all_samples()) {
    for (size_t i = 0; i < 4; ++i) {
      auto bytes = s.bytes;
      bytes[i] ^= 0x01;
      DecodeError err;
      EXPECT_FALSE(decode_header(bytes, &err));
      EXPECT_EQ(err, DecodeError::kBadEyecatcher);
      EXPECT_FALSE(decodes(bytes, static_cast<Type>(s.bytes[4]), &err)) << s.name;
      EXPECT_EQ(err, DecodeError::kBadEyecatcher);
    }
  }
}

// "SMCD" frames Linux's SMC-D-only messages: CLC all the same (read and
// answered, never application data), but nothing this engine takes.
TEST(ClcSmcd, SmcdFramingIsClc) {
  EXPECT_TRUE(starts_like_clc(kEyecatcher));
  EXPECT_TRUE(starts_like_clc(kSmcdEyecatcher));
  EXPECT_TRUE(starts_like_clc(std::span<const uint8_t>(kSmcdEyecatcher.data(), 3)));
  EXPECT_TRUE(starts_like_clc(std::span<const uint8_t>()));
  const std::array<uint8_t, 4> http = {'G', 'E', 'T', ' '};
  EXPECT_FALSE(starts_like_clc(http));
  EXPECT_FALSE(starts_like_clc(std::span<const uint8_t>(http.data(), 1)));

  auto reframe = [](std::vector<uint8_t> bytes, bool lead, bool trail) {
    if (lead) bytes[3] = 0xC4;
    if (trail) bytes[bytes.size() - 1] = 0xC4;
    return bytes;
  };
  // An Accept framed "SMCD" answers an SMC-R offer with SMC-D: out of range.
  DecodeError err;
  auto acc = reframe(kAcceptFirstContact, true, true);
  auto h = decode_header(acc, &err);
  ASSERT_TRUE(h) << to_string(err);
  EXPECT_TRUE(h->smcd);
  EXPECT_FALSE(decode_accept_confirm(acc, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  // The two eyecatchers must agree.
  EXPECT_FALSE(decode_accept_confirm(reframe(kAcceptFirstContact, true, false), Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadEyecatcher);
  EXPECT_FALSE(decode_accept_confirm(reframe(kAcceptFirstContact, false, true), Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadEyecatcher);
  // A Proposal so framed offers no SMC-R (whatever its type bits say): it
  // decodes, to be declined.
  for (const auto* bytes : {&kProposalIpv4, &kLinuxV16, &kLinuxV04}) {
    auto p = decode_proposal(reframe(*bytes, true, true), &err);
    ASSERT_TRUE(p) << to_string(err);
    EXPECT_FALSE(p->offers_smcr_v1);
  }
  // A Decline so framed is a Decline.
  auto d = decode_decline(reframe(kLinuxV02, true, true), &err);
  ASSERT_TRUE(d) << to_string(err);
  EXPECT_EQ(d->diagnosis, 0x03030000u);
}

TEST(ClcMalformed, WrongTrailingEyecatcher) {
  for (const auto& s : all_samples()) {
    for (size_t i = 1; i <= 4; ++i) {
      auto bytes = s.bytes;
      bytes[bytes.size() - i] ^= 0x80;
      DecodeError err;
      EXPECT_TRUE(decode_header(bytes));
      EXPECT_FALSE(decodes(bytes, static_cast<Type>(s.bytes[4]), &err)) << s.name;
      EXPECT_EQ(err, DecodeError::kBadEyecatcher) << s.name;
    }
  }
}

TEST(ClcMalformed, UnknownTypes) {
  for (uint8_t type : {0, 5, 0x42, 0xFF}) {
    auto bytes = kDeclineOutOfSync;
    bytes[4] = type;
    DecodeError err;
    EXPECT_FALSE(decode_header(bytes, &err));
    EXPECT_EQ(err, DecodeError::kBadType);
  }
}

TEST(ClcMalformed, TypeOtherThanExpected) {
  DecodeError err;
  EXPECT_FALSE(decode_proposal(kAcceptFirstContact, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
  EXPECT_FALSE(decode_decline(kProposalIpv4, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
  EXPECT_FALSE(decode_accept_confirm(kAcceptFirstContact, Type::kConfirm, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
  EXPECT_FALSE(decode_accept_confirm(kDeclineOutOfSync, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
  // Asking for a non-Accept/Confirm type is a caller error reported the same way.
  EXPECT_FALSE(decode_accept_confirm(kAcceptFirstContact, Type::kDecline, &err));
  EXPECT_EQ(err, DecodeError::kBadType);
}

TEST(ClcMalformed, LengthBelowTypeMinimum) {
  struct Case {
    std::vector<uint8_t> bytes;
    uint16_t minimum;
  };
  for (auto c : {Case{kProposalIpv4, 52}, Case{kAcceptFirstContact, 68}, Case{kDeclineOutOfSync, 28}}) {
    for (uint16_t length : {uint16_t{0}, uint16_t{8}, uint16_t(c.minimum - 1)}) {
      set_length(c.bytes, length);
      DecodeError err;
      EXPECT_FALSE(decode_header(c.bytes, &err)) << length;
      EXPECT_EQ(err, DecodeError::kBadLength);
      EXPECT_FALSE(decodes(c.bytes, static_cast<Type>(c.bytes[4]), &err));
      EXPECT_EQ(err, DecodeError::kBadLength);
    }
  }
}

TEST(ClcMalformed, LengthLargerThanBuffer) {
  auto bytes = kAcceptFirstContact;
  set_length(bytes, 200);
  DecodeError err;
  auto header = decode_header(bytes, &err);
  ASSERT_TRUE(header);  // a stream reader would wait for 200 bytes
  EXPECT_EQ(header->length, 200);
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kTooShort);
}

TEST(ClcMalformed, LengthAboveMaxMessageLen) {
  auto bytes = kLinuxV13;
  for (uint16_t length : {uint16_t(kMaxMessageLen + 1), uint16_t{0xFFFF}}) {
    set_length(bytes, length);
    DecodeError err;
    EXPECT_FALSE(decode_header(bytes, &err));
    EXPECT_EQ(err, DecodeError::kBadLength);
  }
  // kMaxMessageLen itself is acceptable for a header.
  set_length(bytes, kMaxMessageLen);
  EXPECT_TRUE(decode_header(bytes));
}

TEST(ClcMalformed, VersionZero) {
  auto bytes = kAcceptFirstContact;
  bytes[7] = 0x08;
  DecodeError err;
  EXPECT_FALSE(decode_header(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadVersion);
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadVersion);
}

TEST(ClcMalformed, V1AcceptMustBeExactly68Bytes) {
  // A version-1 Accept has no room for extensions.
  auto bytes = kAcceptFirstContact;
  bytes.insert(bytes.end() - 4, 4, 0);
  set_length(bytes, 72);
  DecodeError err;
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  // With version 2, 108 bytes at least (the UEID), as Linux checks.
  bytes[7] = 0x28;
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  bytes.insert(bytes.end() - 4, 36, 0);
  set_length(bytes, 108);
  auto m = decode_accept_confirm(bytes, Type::kAccept, &err);
  ASSERT_TRUE(m) << to_string(err);
  ASSERT_TRUE(m->v2);
  EXPECT_FALSE(m->v2->first_contact);  // F, but no room for the extension
}

// Past RFC 7609's 512 KiB: what Linux sends with a larger net.smc.rmem, a
// peer to decline and fall back with (C.6), not a malformed message.
TEST(ClcMalformed, BsizeCodeAboveFiveIsReservedValue) {
  for (uint8_t code = 6; code < 16; ++code) {
    auto bytes = kAcceptFirstContact;
    bytes[50] = static_cast<uint8_t>(code << 4 | 3);
    DecodeError err;
    EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
    EXPECT_EQ(err, DecodeError::kReservedValue) << int(code);
  }
}

TEST(ClcMalformed, ReservedMtuIsReservedValue) {
  for (uint8_t code : {0, 6, 7, 15}) {
    auto bytes = kAcceptFirstContact;
    bytes[50] = static_cast<uint8_t>(0x20 | code);
    DecodeError err;
    EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
    EXPECT_EQ(err, DecodeError::kReservedValue) << int(code);
  }
}

TEST(ClcMalformed, RmbeIndexZero) {
  auto bytes = kAcceptFirstContact;
  bytes[45] = 0;
  DecodeError err;
  EXPECT_FALSE(decode_accept_confirm(bytes, Type::kAccept, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
}

TEST(ClcMalformed, ReservedBytesAreIgnored) {
  auto bytes = kAcceptFirstContact;
  bytes[51] = 0xFF;
  bytes[60] = 0xFF;
  bytes[7] |= 0x07;
  auto m = decode_accept_confirm(bytes, Type::kAccept);
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, digest_accept());
}

TEST(ClcMalformed, MoreThanEightIpv6Prefixes) {
  Proposal p = digest_proposal();
  p.ipv6_prefixes.resize(8);
  auto bytes = encode(p);
  // Claim 9 prefixes and make the length match so only the count is wrong.
  bytes.insert(bytes.end() - 4, 17, 0);
  bytes[47] = 9;
  set_length(bytes, static_cast<uint16_t>(bytes.size()));
  DecodeError err;
  EXPECT_FALSE(decode_proposal(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  bytes[47] = 255;
  EXPECT_FALSE(decode_proposal(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
}

TEST(ClcMalformed, IpAreaOffsetPastTheEnd) {
  for (uint16_t offset : {uint16_t{1}, uint16_t{5}, uint16_t{200}, uint16_t{0xFFFF}}) {
    auto bytes = kProposalIpv4;
    bytes[38] = static_cast<uint8_t>(offset >> 8);
    bytes[39] = static_cast<uint8_t>(offset);
    DecodeError err;
    EXPECT_FALSE(decode_proposal(bytes, &err)) << offset;
    EXPECT_EQ(err, DecodeError::kBadLength) << offset;
  }
  // Same for a Linux v2 Proposal, where trailing extensions are allowed.
  auto bytes = kLinuxV16;
  bytes[39] = 45;
  DecodeError err;
  EXPECT_FALSE(decode_proposal(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

TEST(ClcMalformed, Ipv6PrefixesPastTheEnd) {
  auto bytes = kProposalIpv6;
  bytes[47] = 2;  // claims a second prefix that is not there
  DecodeError err;
  EXPECT_FALSE(decode_proposal(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  auto linux_bytes = kLinuxV16;
  linux_bytes[87] = 1;
  EXPECT_FALSE(decode_proposal(linux_bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

TEST(ClcMalformed, V1ProposalWithTrailingBytesIsBadLength) {
  // 52 + o + 17n must be exact for version 1.
  auto bytes = kProposalIpv4;
  bytes.insert(bytes.end() - 4, 3, 0);
  set_length(bytes, static_cast<uint16_t>(bytes.size()));
  DecodeError err;
  EXPECT_FALSE(decode_proposal(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  // A version-2 sender may append extensions after the IP area.
  bytes[7] = 0x28;
  EXPECT_TRUE(decode_proposal(bytes, &err)) << to_string(err);
}

TEST(ClcMalformed, DeclineLengths) {
  DecodeError err;
  // A v1 Decline is exactly 28 bytes.
  auto v1_long = kLinuxV10;
  v1_long[7] = 0x10;
  EXPECT_FALSE(decode_decline(v1_long, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  // A v2 Decline is exactly 44 bytes, as Linux takes it.
  auto v2_short = kLinuxV02;
  v2_short[7] = 0x20;
  EXPECT_FALSE(decode_decline(v2_short, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

// --- Strings -------------------------------------------------------------------

TEST(ClcStrings, DeclineReasons) {
  const uint32_t codes[] = {
      decline::kNoMemory,        decline::kTimeoutConfirmLink, decline::kTimeoutAddLink,
      decline::kConfigError,     decline::kPeerNoSmc,          decline::kIpsec,
      decline::kNoSmcDevice,     decline::kNoSmcRDevice,       decline::kModeUnsupported,
      decline::kRmbeEyecatcher,  decline::kOptionUnsupported,  decline::kDifferentPrefix,
      decline::kNoActiveLink,    decline::kSyncError,          decline::kPeerDeclined,
      decline::kInternalError,   decline::kRtokenError,        decline::kProtocolError,
      decline::kHandshakeTimeout};
  for (uint32_t code : codes) {
    EXPECT_FALSE(decline_reason(code).empty()) << std::hex << code;
    EXPECT_NE(decline_reason(code), "unknown") << std::hex << code;
  }
  EXPECT_EQ(decline_reason(0x12345678), "unknown");
  EXPECT_EQ(decline_reason(0), "unknown");
}

TEST(ClcStrings, DecodeErrors) {
  for (auto e : {DecodeError::kNone, DecodeError::kTooShort, DecodeError::kBadEyecatcher,
                 DecodeError::kBadType, DecodeError::kBadLength, DecodeError::kBadVersion,
                 DecodeError::kBadField, DecodeError::kReservedValue}) {
    EXPECT_FALSE(to_string(e).empty());
  }
  EXPECT_NE(to_string(DecodeError::kTooShort), to_string(DecodeError::kBadLength));
}

}  // namespace
}  // namespace smcr::clc
