// LLC codec: digest 9.9 and 9.13 vectors, Linux captures L14-L17, opcode
// classification, round trips and malformed input.
#include "core/llc.h"

#include <gtest/gtest.h>

#include "tests/unit/hex.h"

#include <cctype>
#include <string_view>
#include <vector>

namespace smcr::llc {
namespace {

using smcr::test::hex;

// A 44-byte message from its leading bytes, the rest zero.
std::vector<uint8_t> padded(std::string_view leading) {
  auto v = hex(leading);
  v.resize(kMessageLen, 0);
  return v;
}

template <size_t N>
std::array<uint8_t, N> arr(std::string_view text) {
  auto v = hex(text);
  std::array<uint8_t, N> out{};
  EXPECT_EQ(v.size(), N);
  std::copy_n(v.begin(), std::min(v.size(), N), out.begin());
  return out;
}

std::vector<uint8_t> bytes_of(const std::array<uint8_t, kMessageLen>& a) { return {a.begin(), a.end()}; }

template <typename T>
T decode_as(const std::vector<uint8_t>& bytes, LayoutVariant layout = LayoutVariant::kRfc) {
  DecodeError err = DecodeError::kNone;
  auto m = decode(bytes, &err, layout);
  EXPECT_TRUE(m) << to_string(err);
  EXPECT_EQ(err, DecodeError::kNone);
  if (!m || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "decoded to the wrong message type";
    return T{};
  }
  return std::get<T>(*m);
}

// --- Digest 9.9 ---------------------------------------------------------------------

const auto kConfirmLinkRequest = hex(
    "01 2C 00 00 02 00 00 00 00 0A FE 80 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 0A 00 01 08 01 00 00"
    "01 01 02 00 00 00 00 00 00 00 00 00");

ConfirmLink digest_confirm_link() {
  ConfirmLink m;
  m.sender_mac = arr<6>("02 00 00 00 00 0A");
  m.sender_gid = arr<16>("FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0A");
  m.sender_qpn = 0x108;
  m.link_num = 1;
  m.link_user_id = 0x101;
  m.max_links = 2;
  return m;
}

TEST(LlcConfirmLink, Digest99Request) {
  EXPECT_EQ(bytes_of(encode(digest_confirm_link())), kConfirmLinkRequest);
  EXPECT_EQ(decode_as<ConfirmLink>(kConfirmLinkRequest), digest_confirm_link());
}

TEST(LlcConfirmLink, Digest99ReplyByte3) {
  ConfirmLink reply = digest_confirm_link();
  reply.reply = true;
  auto bytes = bytes_of(encode(reply));
  auto expected = kConfirmLinkRequest;
  expected[3] = 0x80;
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ(decode_as<ConfirmLink>(bytes), reply);
}

TEST(LlcConfirmLink, LinuxNoRmbeEyecatcherFlag) {
  ConfirmLink m = digest_confirm_link();
  m.no_rmbe_eyecatcher = true;
  EXPECT_EQ(encode(m)[3], 0x03);
  m.reply = true;
  EXPECT_EQ(encode(m)[3], 0x83);
  EXPECT_EQ(decode_as<ConfirmLink>(bytes_of(encode(m))), m);
}

const auto kAddLinkRfc = hex(
    "02 2C 00 00 02 00 00 00 00 0C FE 80 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 0C 00 01 09 02 03 00"
    "AB CE 00 00 00 00 00 00 00 00 00 00");

AddLink digest_add_link() {
  AddLink m;
  m.sender_mac = arr<6>("02 00 00 00 00 0C");
  m.sender_gid = arr<16>("FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0C");
  m.sender_qpn = 0x109;
  m.link_num = 2;
  m.mtu_code = 3;
  m.initial_psn = 0xABCE;
  return m;
}

TEST(LlcAddLink, Digest99RfcLayout) {
  EXPECT_EQ(bytes_of(encode(digest_add_link())), kAddLinkRfc);
  EXPECT_EQ(bytes_of(encode(digest_add_link(), LayoutVariant::kRfc)), kAddLinkRfc);
  EXPECT_EQ(decode_as<AddLink>(kAddLinkRfc), digest_add_link());
}

TEST(LlcAddLink, Digest99LinuxLayout) {
  auto bytes = bytes_of(encode(digest_add_link(), LayoutVariant::kLinux));
  ASSERT_EQ(bytes.size(), kMessageLen);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4), hex("02 2C 00 00"));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 4, bytes.begin() + 12), hex("02 00 00 00 00 0C 00 00"));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 12, bytes.begin() + 28),
            hex("FE 80 00 00 00 00 00 00 00 00 00 00 00 00 00 0C"));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 28, bytes.begin() + 36), hex("00 01 09 02 03 00 AB CE"));
  for (size_t i = 36; i < kMessageLen; ++i) EXPECT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(decode_as<AddLink>(bytes, LayoutVariant::kLinux), digest_add_link());
  EXPECT_EQ(decode(bytes, LayoutVariant::kLinux).value(), Message{digest_add_link()});
}

TEST(LlcAddLink, Digest99RejectReasonOne) {
  AddLink m = digest_add_link();
  m.reply = true;
  m.rejected = true;
  m.reason_code = AddLink::kReasonNoAlternatePath;
  auto bytes = encode(m);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4), hex("02 2C 01 C0"));
  EXPECT_EQ(decode_as<AddLink>(bytes_of(bytes)), m);
}

TEST(LlcAddLink, Digest98InvalidMtuReply) {
  AddLink m = digest_add_link();
  m.reply = true;
  m.rejected = true;
  m.reason_code = AddLink::kReasonInvalidMtu;
  auto bytes = encode(m);
  EXPECT_EQ(bytes[2], 0x02);
  EXPECT_EQ(bytes[3], 0xC0);
}

TEST(LlcAddLink, ReservedMtuCodeStillDecodes) {
  // The receiver must be able to answer "invalid MTU" (RsnCode 2), so the
  // decoder hands reserved codes through.
  auto bytes = kAddLinkRfc;
  bytes[30] = 0x07;
  EXPECT_EQ(decode_as<AddLink>(bytes).mtu_code, 7);
}

const auto kAddLinkContinuation = hex(
    "03 2C 00 00 02 03 00 00 11 22 33 44 99 AA BB CC"
    "00 00 00 00 12 35 00 00 11 22 33 45 99 AA BB CD"
    "00 00 00 00 12 36 00 00 00 00 00 00");

AddLinkContinuation digest_add_link_continuation() {
  AddLinkContinuation m;
  m.link_num = 2;
  m.num_rtokens = 3;
  m.pairs[0] = {0x11223344, 0x99AABBCC, 0x12350000};
  m.pairs[1] = {0x11223345, 0x99AABBCD, 0x12360000};
  return m;
}

TEST(LlcAddLinkContinuation, Digest99) {
  EXPECT_EQ(bytes_of(encode(digest_add_link_continuation())), kAddLinkContinuation);
  auto m = decode_as<AddLinkContinuation>(kAddLinkContinuation);
  EXPECT_EQ(m, digest_add_link_continuation());
  EXPECT_EQ(m.pairs_in_message(), 2u);
}

TEST(LlcAddLinkContinuation, Digest99NextMessageCarriesOne) {
  AddLinkContinuation next;
  next.link_num = 2;
  next.num_rtokens = 1;
  next.pairs[0] = {0x11223346, 0x99AABBCE, 0x12370000};
  next.pairs[1] = {0xFFFFFFFF, 0xFFFFFFFF, ~uint64_t{0}};  // stale, must not be sent
  auto bytes = encode(next);
  EXPECT_EQ(bytes[5], 1);
  for (size_t i = 24; i < kMessageLen; ++i) EXPECT_EQ(bytes[i], 0) << i;
  auto decoded = decode_as<AddLinkContinuation>(bytes_of(bytes));
  EXPECT_EQ(decoded.pairs_in_message(), 1u);
  EXPECT_EQ(decoded.pairs[0], next.pairs[0]);
  EXPECT_EQ(decoded.pairs[1], RtokenPair{});
}

TEST(LlcAddLinkContinuation, Digest913Counts) {
  // Server with 3 RMBs: 3 (two pairs), then 1 (one pair).
  AddLinkContinuation m;
  m.num_rtokens = 3;
  EXPECT_EQ(m.pairs_in_message(), 2u);
  m.num_rtokens = 1;
  EXPECT_EQ(m.pairs_in_message(), 1u);
  // Client with 4: 4 then 2, both two pairs.
  m.num_rtokens = 4;
  EXPECT_EQ(m.pairs_in_message(), 2u);
  m.num_rtokens = 2;
  EXPECT_EQ(m.pairs_in_message(), 2u);
  // A side with nothing left sends empty messages.
  m.num_rtokens = 0;
  EXPECT_EQ(m.pairs_in_message(), 0u);
  auto empty = encode(m);
  EXPECT_EQ(empty[5], 0);
  EXPECT_EQ(decode_as<AddLinkContinuation>(bytes_of(empty)).num_rtokens, 0);
  m.num_rtokens = 255;
  EXPECT_EQ(decode_as<AddLinkContinuation>(bytes_of(encode(m))).num_rtokens, 255);
}

TEST(LlcDeleteLink, Digest99Cases) {
  DeleteLink group;
  group.all_links = true;
  group.orderly = true;
  group.reason_code = DeleteLink::kReasonOperator;
  EXPECT_EQ(bytes_of(encode(group)), padded("04 2C 00 60 00 00 02 00 00"));
  EXPECT_EQ(decode_as<DeleteLink>(padded("04 2C 00 60 00 00 02 00 00")), group);

  DeleteLink lost;
  lost.link_num = 1;
  lost.reason_code = DeleteLink::kReasonLostPath;
  EXPECT_EQ(bytes_of(encode(lost)), padded("04 2C 00 00 01 00 01 00 00"));
  EXPECT_EQ(decode_as<DeleteLink>(padded("04 2C 00 00 01 00 01 00 00")), lost);

  DeleteLink unknown;
  unknown.reply = true;
  unknown.link_num = 5;
  unknown.reason_code = DeleteLink::kReasonUnknownLink;
  EXPECT_EQ(bytes_of(encode(unknown)), padded("04 2C 00 80 05 00 10 00 00"));
  EXPECT_EQ(decode_as<DeleteLink>(padded("04 2C 00 80 05 00 10 00 00")), unknown);
}

TEST(LlcDeleteLink, UnalignedReasonCode) {
  DeleteLink m;
  m.reason_code = 0x01020304;
  auto bytes = encode(m);
  EXPECT_EQ(bytes[5], 0x01);
  EXPECT_EQ(bytes[8], 0x04);
  EXPECT_EQ(decode_as<DeleteLink>(bytes_of(bytes)).reason_code, 0x01020304u);
}

const auto kConfirmRkey = hex(
    "06 2C 00 00 02 0A 0B 0C 0D 00 00 00 00 20 00 00"
    "00 02 1A 1B 1C 1D 00 00 00 00 20 00 00 00 03 2A"
    "2B 2C 2D 00 00 00 00 20 00 00 00 00");

ConfirmRkey digest_confirm_rkey() {
  ConfirmRkey m;
  m.num_tokens = 2;
  m.rkey = 0x0A0B0C0D;
  m.vaddr = 0x20000000;
  m.other_links[0] = {2, 0x1A1B1C1D, 0x20000000};
  m.other_links[1] = {3, 0x2A2B2C2D, 0x20000000};
  return m;
}

TEST(LlcConfirmRkey, Digest99) {
  EXPECT_EQ(bytes_of(encode(digest_confirm_rkey())), kConfirmRkey);
  EXPECT_EQ(decode_as<ConfirmRkey>(kConfirmRkey), digest_confirm_rkey());
}

TEST(LlcConfirmRkey, Digest99NegativeReplyWithRetry) {
  ConfirmRkey m = digest_confirm_rkey();
  m.reply = true;
  m.negative = true;
  m.configuration_retry = true;
  auto bytes = encode(m);
  EXPECT_EQ(bytes[3], 0xB0);
  EXPECT_EQ(decode_as<ConfirmRkey>(bytes_of(bytes)), m);
}

TEST(LlcConfirmRkey, Digest913EightLinkGroup) {
  // NumTkns 7, then CONTINUATIONs with 5 (three specs) and 2 (two specs).
  ConfirmRkey first = digest_confirm_rkey();
  first.num_tokens = 7;
  EXPECT_EQ(decode_as<ConfirmRkey>(bytes_of(encode(first))), first);

  ConfirmRkeyContinuation second;
  second.num_tokens_left = 5;
  for (uint8_t i = 0; i < 3; ++i) second.other_links[i] = {uint8_t(4 + i), 0x40u + i, 0x1000u * i};
  auto second_bytes = encode(second);
  EXPECT_EQ(second_bytes[4], 5);
  EXPECT_EQ(second_bytes[5], 4);   // spec 1 at 5..17
  EXPECT_EQ(second_bytes[18], 5);  // spec 2 at 18..30
  EXPECT_EQ(second_bytes[31], 6);  // spec 3 at 31..43
  EXPECT_EQ(decode_as<ConfirmRkeyContinuation>(bytes_of(second_bytes)), second);

  ConfirmRkeyContinuation third;
  third.num_tokens_left = 2;
  third.other_links[0] = {7, 0x70, 0x7000};
  third.other_links[1] = {8, 0x80, 0x8000};
  auto third_bytes = encode(third);
  for (size_t i = 31; i < kMessageLen; ++i) EXPECT_EQ(third_bytes[i], 0) << i;
  EXPECT_EQ(decode_as<ConfirmRkeyContinuation>(bytes_of(third_bytes)), third);
}

TEST(LlcConfirmRkeyContinuation, FlagsAndRoundTrip) {
  ConfirmRkeyContinuation m;
  m.reply = true;
  m.negative = true;
  m.num_tokens_left = 3;
  m.other_links = {OtherLinkRtoken{2, 0xAABBCCDD, 0x1122334455667788},
                   OtherLinkRtoken{3, 1, 2}, OtherLinkRtoken{4, 3, 4}};
  auto bytes = encode(m);
  EXPECT_EQ(bytes[0], 8);
  EXPECT_EQ(bytes[3], 0xA0);
  EXPECT_EQ(decode_as<ConfirmRkeyContinuation>(bytes_of(bytes)), m);
}

const auto kDeleteRkeyNegative = hex(
    "09 2C 00 A0 04 50 00 00 0A 0B 0C 0D 0A 0B 0C 0E"
    "0A 0B 0C 0F 0A 0B 0C 10 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00");

TEST(LlcDeleteRkey, Digest99NegativeReply) {
  DeleteRkey m;
  m.reply = true;
  m.negative = true;
  m.count = 4;
  m.error_mask = 0x50;  // 2nd and 4th failed
  m.rkeys = {0x0A0B0C0D, 0x0A0B0C0E, 0x0A0B0C0F, 0x0A0B0C10};
  EXPECT_EQ(bytes_of(encode(m)), kDeleteRkeyNegative);
  EXPECT_EQ(decode_as<DeleteRkey>(kDeleteRkeyNegative), m);
}

TEST(LlcDeleteRkey, EightKeys) {
  DeleteRkey m;
  m.count = 8;
  for (uint32_t i = 0; i < 8; ++i) m.rkeys[i] = 0x100 + i;
  auto bytes = encode(m);
  EXPECT_EQ(bytes[36], 0x00);
  EXPECT_EQ(bytes[39], 0x07);
  EXPECT_EQ(decode_as<DeleteRkey>(bytes_of(bytes)), m);
}

const auto kTestLinkRequest = hex(
    "07 2C 00 00 01 02 03 04 05 06 07 08 09 0A 0B 0C"
    "0D 0E 0F 10 00 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00");

TEST(LlcTestLink, Digest99) {
  TestLink m;
  for (uint8_t i = 0; i < 16; ++i) m.user_data[i] = static_cast<uint8_t>(i + 1);
  EXPECT_EQ(bytes_of(encode(m)), kTestLinkRequest);
  EXPECT_EQ(decode_as<TestLink>(kTestLinkRequest), m);
  TestLink reply = m;
  reply.reply = true;
  auto reply_bytes = bytes_of(encode(reply));
  auto expected = kTestLinkRequest;
  expected[3] = 0x80;
  EXPECT_EQ(reply_bytes, expected);
  EXPECT_EQ(decode_as<TestLink>(reply_bytes).user_data, m.user_data);
}

// --- Opcode dispatch (digest 9.9) ---------------------------------------------------

TEST(LlcOpcode, Digest99Dispatch) {
  EXPECT_EQ(classify(0x85), Opcode::kDiscard);
  EXPECT_EQ(classify(0x05), Opcode::kProtocolError);
  EXPECT_EQ(classify(0x45), Opcode::kProtocolError);
  EXPECT_EQ(classify(0xFE), Opcode::kCdc);
}

TEST(LlcOpcode, EveryByte) {
  for (unsigned b = 0; b < 256; ++b) {
    const uint8_t type = static_cast<uint8_t>(b);
    Opcode expected;
    if (type == 0xFE) {
      expected = Opcode::kCdc;
    } else if ((type & 0xC0) == 0x80) {
      expected = Opcode::kDiscard;
    } else if ((type >= 1 && type <= 4) || (type >= 6 && type <= 9)) {
      expected = Opcode::kLlc;
    } else {
      expected = Opcode::kProtocolError;
    }
    EXPECT_EQ(classify(type), expected) << std::hex << b;
  }
  // Linux SMC-Rv2 LLC types are not v1 LLC.
  EXPECT_EQ(classify(0x21), Opcode::kProtocolError);
  EXPECT_EQ(classify(0x29), Opcode::kProtocolError);
}

// --- Linux captures (SMC-Rv1 run F) -------------------------------------------------

TEST(LlcLinux, L14L15ConfirmLink) {
  auto request = decode_as<ConfirmLink>(
      hex("012c000352540000010100000000000000000000ffff0a090101000011010000010102000000000000000000"));
  EXPECT_FALSE(request.reply);
  EXPECT_TRUE(request.no_rmbe_eyecatcher);
  EXPECT_EQ(request.sender_mac, arr<6>("525400000101"));
  EXPECT_EQ(request.sender_gid, arr<16>("00000000000000000000ffff0a090101"));
  EXPECT_EQ(request.sender_qpn, 0x11u);
  EXPECT_EQ(request.link_num, 1);
  EXPECT_EQ(request.link_user_id, 0x101u);
  EXPECT_EQ(request.max_links, 2);
  EXPECT_EQ(bytes_of(encode(request)),
            hex("012c000352540000010100000000000000000000ffff0a090101000011010000010102000000000000000000"));

  auto reply = decode_as<ConfirmLink>(
      hex("012c008352540000010200000000000000000000ffff0a090102000011010000010102000000000000000000"));
  EXPECT_TRUE(reply.reply);
  EXPECT_TRUE(reply.no_rmbe_eyecatcher);
}

TEST(LlcLinux, L16AddLinkLinuxLayout) {
  const auto bytes = hex("022c0000525400000101000000000000000000000000ffff0a0901010000120203e393cb0000000000000000");
  auto m = decode_as<AddLink>(bytes, LayoutVariant::kLinux);
  EXPECT_FALSE(m.reply);
  EXPECT_EQ(m.sender_mac, arr<6>("525400000101"));
  EXPECT_EQ(m.sender_gid, arr<16>("00000000000000000000ffff0a090101"));
  EXPECT_EQ(m.sender_qpn, 0x12u);
  EXPECT_EQ(m.link_num, 2);
  EXPECT_EQ(m.mtu_code, 3);
  EXPECT_EQ(m.initial_psn, 0xE393CBu);
  EXPECT_EQ(bytes_of(encode(m, LayoutVariant::kLinux)), bytes);
}

TEST(LlcLinux, L17AddLinkReject) {
  const auto bytes = hex("022c01c0525400000101000000000000000000000000ffff0a0901010000120203e393cb0000000000000000");
  auto m = decode_as<AddLink>(bytes, LayoutVariant::kLinux);
  EXPECT_TRUE(m.reply);
  EXPECT_TRUE(m.rejected);
  EXPECT_EQ(m.reason_code, AddLink::kReasonNoAlternatePath);
  EXPECT_EQ(m.initial_psn, 0xE393CBu);
  EXPECT_EQ(bytes_of(encode(m, LayoutVariant::kLinux)), bytes);
}

TEST(LlcLinux, V2LlcIsNotDecoded) {
  DecodeError err;
  EXPECT_FALSE(decode(hex("212c000352540000010100000000000000000000ffff0a090101000011010000010102ff0000000000000000"), &err));
  EXPECT_EQ(err, DecodeError::kBadType);
}

// --- Round trips, type_of, is_reply ---------------------------------------------

std::vector<Message> every_message() {
  ConfirmLink confirm_link = digest_confirm_link();
  confirm_link.no_rmbe_eyecatcher = true;
  AddLink add_link = digest_add_link();
  add_link.reply = true;
  DeleteLink delete_link;
  delete_link.link_num = 3;
  delete_link.reason_code = DeleteLink::kReasonAsymmetricNotNeeded;
  TestLink test_link;
  test_link.user_data.fill(0x5A);
  ConfirmRkeyContinuation continuation;
  continuation.num_tokens_left = 1;
  continuation.other_links[0] = {2, 3, 4};
  DeleteRkey delete_rkey;
  delete_rkey.count = 1;
  delete_rkey.rkeys[0] = 0x37F;
  return {confirm_link, add_link,  digest_add_link_continuation(), delete_link,
          digest_confirm_rkey(), test_link, continuation, delete_rkey};
}

TEST(LlcRoundTrip, EveryMessageBothLayouts) {
  for (auto layout : {LayoutVariant::kRfc, LayoutVariant::kLinux}) {
    for (const auto& m : every_message()) {
      auto bytes = encode(m, layout);
      EXPECT_EQ(bytes[0], static_cast<uint8_t>(type_of(m)));
      EXPECT_EQ(bytes[1], 44);
      EXPECT_EQ(classify(bytes[0]), Opcode::kLlc);
      DecodeError err;
      auto decoded = decode(bytes, &err, layout);
      ASSERT_TRUE(decoded) << to_string(err);
      EXPECT_EQ(*decoded, m) << "type " << int(bytes[0]);
    }
  }
}

TEST(LlcRoundTrip, TypeOfAndIsReply) {
  auto messages = every_message();
  const Type types[] = {Type::kConfirmLink, Type::kAddLink,  Type::kAddLinkContinuation,
                        Type::kDeleteLink,  Type::kConfirmRkey, Type::kTestLink,
                        Type::kConfirmRkeyContinuation, Type::kDeleteRkey};
  ASSERT_EQ(messages.size(), std::size(types));
  for (size_t i = 0; i < messages.size(); ++i) EXPECT_EQ(type_of(messages[i]), types[i]);
  EXPECT_FALSE(is_reply(messages[0]));
  EXPECT_TRUE(is_reply(messages[1]));
}

// --- Malformed input ------------------------------------------------------------

TEST(LlcMalformed, EveryTruncationOfEveryMessage) {
  for (const auto& m : every_message()) {
    auto bytes = encode(m);
    for (size_t n = 0; n < kMessageLen; ++n) {
      DecodeError err = DecodeError::kNone;
      EXPECT_FALSE(decode(std::span(bytes).first(n), &err)) << n;
      EXPECT_EQ(err, DecodeError::kTooShort) << n;
    }
  }
}

TEST(LlcMalformed, LengthByteNot44) {
  for (uint8_t length : {0, 43, 45, 88, 0xFF}) {
    auto bytes = kConfirmLinkRequest;
    bytes[1] = length;
    DecodeError err;
    EXPECT_FALSE(decode(bytes, &err));
    EXPECT_EQ(err, DecodeError::kBadLength) << int(length);
  }
}

TEST(LlcMalformed, UnknownTypes) {
  for (uint8_t type : {0x00, 0x05, 0x0A, 0x45, 0x85, 0xFE, 0xFF, 0x21}) {
    auto bytes = kConfirmLinkRequest;
    bytes[0] = type;
    DecodeError err;
    EXPECT_FALSE(decode(bytes, &err));
    EXPECT_EQ(err, DecodeError::kBadType) << int(type);
  }
}

TEST(LlcMalformed, CountsOutOfRange) {
  DecodeError err;
  auto delete_rkey = kDeleteRkeyNegative;
  delete_rkey[4] = 9;
  EXPECT_FALSE(decode(delete_rkey, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  delete_rkey[4] = 0xFF;
  EXPECT_FALSE(decode(delete_rkey, &err));
  EXPECT_EQ(err, DecodeError::kBadField);

  auto confirm_rkey = kConfirmRkey;
  confirm_rkey[4] = 8;  // more other links than a group can have
  EXPECT_FALSE(decode(confirm_rkey, &err));
  EXPECT_EQ(err, DecodeError::kBadField);

  auto continuation = bytes_of(encode(ConfirmRkeyContinuation{}));
  continuation[4] = 8;
  EXPECT_FALSE(decode(continuation, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  continuation[4] = 7;
  EXPECT_TRUE(decode(continuation, &err));
}

TEST(LlcMalformed, ReservedBytesIgnored) {
  auto bytes = kConfirmLinkRequest;
  bytes[2] = 0xFF;
  for (size_t i = 35; i < kMessageLen; ++i) bytes[i] = 0xEE;  // Linux v2.1 puts max_conns at 35
  EXPECT_EQ(decode_as<ConfirmLink>(bytes), digest_confirm_link());
  auto test_link = kTestLinkRequest;
  test_link[3] |= 0x7F;
  test_link[43] = 0x99;
  EXPECT_FALSE(decode_as<TestLink>(test_link).reply);
}

TEST(LlcMalformed, LongerBufferDecodesFirst44Bytes) {
  auto bytes = kConfirmRkey;
  bytes.resize(128, 0xAB);
  EXPECT_EQ(decode_as<ConfirmRkey>(bytes), digest_confirm_rkey());
}

// --- Version 2: the kernel's SMC-Rv2 captures L01-L04, L10-L13, byte for byte --------

const auto kL01 = hex("212c000352540000010100000000000000000000ffff0a090101000011010000010102ff0000000000000000");
const auto kL02 = hex("212c008352540000010200000000000000000000ffff0a090102000011010000010102ff0000000000000000");
const auto kL03 = hex(
    "22580000525400000101000000000000000000000000ffff0a0901010000120203bb74b90000000000000000800000000000000000000000"
    "ffff0a090101000000000000000001000000037f0000053cff11daebc53c0000");
const auto kL04 = hex("222c00c0525400000101000000000000000000000000ffff0a0901010000120203bb74b90000000000000000");
const auto kL10 = hex("292c0000010000000000037f0000000000000000000000000000000000000000000000000000000000000000");
const auto kL12 = hex("292c008001000000000000000000000000000000000000000000000000000000000000000000000000000000");

template <typename T>
T decode_v2_as(const std::vector<uint8_t>& bytes) {
  DecodeError err = DecodeError::kNone;
  auto m = v2::decode(bytes, &err);
  EXPECT_TRUE(m) << to_string(err);
  if (!m || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "decoded to the wrong message type";
    return T{};
  }
  return std::get<T>(*m);
}

TEST(LlcV2, ConfirmLinkL01L02) {
  // The same request as the SMC-Rv1 run's L14 (checked field by field
  // above), in version 2's framing and with the v2.1 max_conns.
  auto req = decode_v2_as<ConfirmLink>(kL01);
  auto l14 = decode_as<ConfirmLink>(
      hex("012c000352540000010100000000000000000000ffff0a090101000011010000010102000000000000000000"));
  l14.max_conns = 255;
  EXPECT_EQ(req, l14);
  EXPECT_EQ(v2::encode(req), kL01);
  auto reply = decode_v2_as<ConfirmLink>(kL02);
  EXPECT_TRUE(reply.reply);
  EXPECT_EQ(v2::encode(reply), kL02);
  // Version 1 never carries max_conns (reserved there).
  EXPECT_EQ(encode(req)[35], 0);
  EXPECT_EQ(decode_as<ConfirmLink>(bytes_of(encode(req))).max_conns, 0);
}

TEST(LlcV2, AddLinkWithRtokensL03AndItsRejectL04) {
  auto req = decode_v2_as<AddLink>(kL03);
  EXPECT_FALSE(req.reply);
  EXPECT_EQ(req.sender_gid, arr<16>("00000000000000000000ffff0a090101"));
  EXPECT_EQ(req.sender_qpn, 0x12u);
  EXPECT_EQ(req.link_num, 2);
  EXPECT_EQ(req.mtu_code, 3);
  EXPECT_EQ(req.initial_psn, 0xBB74B9u);
  ASSERT_TRUE(req.v2_ext);
  EXPECT_TRUE(req.v2_ext->v2_direct);
  EXPECT_EQ(req.v2_ext->client_target_gid, arr<16>("00000000000000000000ffff0a090101"));
  ASSERT_EQ(req.v2_ext->rtokens.size(), 1u);
  EXPECT_EQ(req.v2_ext->rtokens[0].reference_rkey, 0x37Fu);
  EXPECT_EQ(req.v2_ext->rtokens[0].new_rkey, 0x53Cu);
  EXPECT_EQ(req.v2_ext->rtokens[0].new_vaddr, 0xFF11DAEBC53C0000u);
  EXPECT_EQ(v2::encode(req), kL03);

  auto reject = decode_v2_as<AddLink>(kL04);
  EXPECT_TRUE(reject.reply);
  EXPECT_TRUE(reject.rejected);
  EXPECT_EQ(reject.reason_code, 0);  // byte 2 is the length's high byte in version 2
  EXPECT_FALSE(reject.v2_ext);
  EXPECT_EQ(v2::encode(reject), kL04);
  // Linux's reject: the request's 44 bytes echoed with R and Z.
  AddLink echo = req;
  echo.v2_ext.reset();
  echo.reply = echo.rejected = true;
  EXPECT_EQ(v2::encode(echo), kL04);
}

TEST(LlcV2, AddLinkExtensionMustAddUp) {
  DecodeError err;
  auto bytes = kL03;
  bytes[70] = 2;  // claims two RTokens, carries one
  EXPECT_FALSE(v2::decode(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  auto cut = kL03;
  cut.resize(60);  // longer than 44, shorter than the extension's fixed part
  cut[1] = 60;
  EXPECT_FALSE(v2::decode(cut, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  // Many RTokens: the length field's high byte in use.
  AddLink big = decode_v2_as<AddLink>(kL03);
  big.v2_ext->rtokens.resize(40);
  auto encoded = v2::encode(big);
  EXPECT_EQ(encoded.size(), 44u + 28 + 16 * 40);
  EXPECT_EQ(v2::claimed_length(encoded), encoded.size());
  EXPECT_EQ(decode_v2_as<AddLink>(encoded), big);
}

TEST(LlcV2, DeleteRkeyL10L12) {
  auto req = decode_v2_as<DeleteRkey>(kL10);
  EXPECT_FALSE(req.reply);
  EXPECT_EQ(req.count, 1);
  EXPECT_EQ(req.rkeys[0], 0x37Fu);
  EXPECT_EQ(v2::encode(req), kL10);
  auto reply = decode_v2_as<DeleteRkey>(kL12);
  EXPECT_TRUE(reply.reply);
  EXPECT_EQ(reply.count, 1);
  EXPECT_EQ(reply.error_mask, 0);  // the number of unknown RKeys in version 2
  EXPECT_EQ(v2::encode(reply), kL12);
}

TEST(LlcV2, OtherTypesRoundTrip) {
  DeleteLink dl;
  dl.all_links = dl.orderly = true;
  dl.reason_code = DeleteLink::kReasonInactivity;
  TestLink tl;
  tl.user_data[0] = 0xAB;
  ConfirmRkey cr;
  cr.rkey = 0x1234;
  cr.vaddr = 0x5678;
  for (const Message& m : {Message{dl}, Message{tl}, Message{cr}}) {
    auto bytes = v2::encode(m);
    ASSERT_EQ(bytes.size(), kMessageLen);
    EXPECT_EQ(bytes[0] >> 4, 2);
    EXPECT_EQ(bytes[1], 44);
    EXPECT_EQ(bytes[2], 0);
    auto back = v2::decode(bytes);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, m);
  }
  // Version 2 has no continuations.
  EXPECT_TRUE(v2::encode(Message{AddLinkContinuation{}}).empty());
  EXPECT_TRUE(v2::encode(Message{ConfirmRkeyContinuation{}}).empty());
}

TEST(LlcV2, VersionOneMessagesAreTakenToo) {
  // Linux processes version-1 messages in a version-2 group; ADD LINK in its layout.
  auto req = decode_v2_as<AddLink>(kL03);
  req.v2_ext.reset();
  auto v1 = bytes_of(encode(Message{req}, LayoutVariant::kLinux));
  EXPECT_EQ(decode_v2_as<AddLink>(v1), req);
}

TEST(LlcV2, MalformedFrames) {
  DecodeError err;
  auto bytes = kL01;
  bytes[1] = 43;  // shorter than 44
  EXPECT_FALSE(v2::decode(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  bytes = kL01;
  bytes[1] = 45;  // past the bytes received
  EXPECT_FALSE(v2::decode(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  bytes = kL01;
  bytes[2] = 0x21;  // past 8 KiB
  bytes.resize(0x2200);
  EXPECT_FALSE(v2::decode(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
  for (uint8_t type : {0x23, 0x28, 0x25, 0x2F, 0x31, 0xF1}) {
    bytes = kL01;
    bytes[0] = type;
    EXPECT_FALSE(v2::decode(bytes, &err)) << int(type);
    EXPECT_EQ(err, DecodeError::kBadType) << int(type);
  }
  EXPECT_FALSE(v2::decode(std::span<const uint8_t>(kL01.data(), 43), &err));
  EXPECT_EQ(err, DecodeError::kTooShort);
}

TEST(LlcV2, ReqAddLink) {
  v2::ReqAddLink req;
  req.gids = {arr<16>("00000000000000000000ffff0a090102"), arr<16>("00000000000000000000ffff0a090202")};
  auto bytes = v2::encode(req);
  ASSERT_EQ(bytes.size(), 28u + 32);
  EXPECT_EQ(bytes[0], 0x25);
  EXPECT_EQ(v2::claimed_length(bytes), bytes.size());
  DecodeError err;
  auto back = v2::decode_req_add_link(bytes, &err);
  ASSERT_TRUE(back) << to_string(err);
  EXPECT_EQ(*back, req);
  // The answer: 44 bytes, R, nothing else.
  v2::ReqAddLink answer;
  answer.reply = true;
  answer.gids = req.gids;
  auto reply = v2::encode(answer);
  std::vector<uint8_t> expected(44, 0);
  expected[0] = 0x25;
  expected[1] = 44;
  expected[3] = 0x80;
  EXPECT_EQ(reply, expected);
  bytes[24] = 9;
  EXPECT_FALSE(v2::decode_req_add_link(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadField);
  bytes[24] = 3;  // claims more GIDs than its length holds
  EXPECT_FALSE(v2::decode_req_add_link(bytes, &err));
  EXPECT_EQ(err, DecodeError::kBadLength);
}

TEST(LlcStrings, DecodeErrors) {
  for (auto e : {DecodeError::kNone, DecodeError::kTooShort, DecodeError::kBadLength,
                 DecodeError::kBadType, DecodeError::kBadField}) {
    EXPECT_FALSE(to_string(e).empty());
  }
}

}  // namespace
}  // namespace smcr::llc
