#include "core/llc.h"

#include <algorithm>
#include <iterator>
#include <type_traits>

#include "core/wire.h"

namespace smcr::llc {

namespace {

constexpr uint8_t kReplyFlag = 0x80;        // R, byte 3 of every LLC message
constexpr uint8_t kNoRmbeEyecatcher = 0x03; // Linux SMC_LLC_FLAG_NO_RMBE_EYEC
constexpr uint8_t kAddLinkRejectFlag = 0x40;      // Z
constexpr uint8_t kDeleteLinkAllFlag = 0x40;      // A
constexpr uint8_t kDeleteLinkOrderlyFlag = 0x20;  // O
constexpr uint8_t kRkeyNegativeFlag = 0x20;       // Z in CONFIRM RKEY (CONT.) / DELETE RKEY
constexpr uint8_t kRkeyRetryFlag = 0x10;          // C in CONFIRM RKEY
constexpr uint8_t kMaxOtherLinks = kMaxLinks - 1;

constexpr uint8_t kOpcodeClassMask = 0xC0;
constexpr uint8_t kOpcodeOptional = 0x80;
constexpr uint8_t kCdcType = 0xFE;

uint8_t flag(bool set, uint8_t mask) { return set ? mask : 0; }

// Writes bytes 0-3; byte 2 is reserved except for ADD LINK's RsnCode nibble.
void write_header(WireWriter& w, Type type, uint8_t byte2, uint8_t flags) {
  w.u8(static_cast<uint8_t>(type));
  w.u8(static_cast<uint8_t>(kMessageLen));
  w.u8(byte2);
  w.u8(flags);
}

std::array<uint8_t, kMessageLen> finish(WireWriter& w) {
  std::array<uint8_t, kMessageLen> out{};
  auto& buffer = w.buffer();
  std::copy_n(buffer.begin(), std::min(buffer.size(), kMessageLen), out.begin());
  return out;
}

void write_other_link(WireWriter& w, const OtherLinkRtoken& t) {
  w.u8(t.link_num);
  w.be32(t.rkey);
  w.be64(t.vaddr);
}

OtherLinkRtoken read_other_link(WireReader& r) {
  OtherLinkRtoken t;
  t.link_num = r.u8();
  t.rkey = r.be32();
  t.vaddr = r.be64();
  return t;
}

// Slots beyond the count are sent as zero and not read back, so stale data in
// a reused struct never reaches the wire and decode(encode(x)) == x for any
// well-formed x.
template <size_t N>
size_t slots_used(size_t count) {
  return std::min(count, N);
}

bool is_known_type(uint8_t t) {
  switch (static_cast<Type>(t)) {
    case Type::kConfirmLink:
    case Type::kAddLink:
    case Type::kAddLinkContinuation:
    case Type::kDeleteLink:
    case Type::kConfirmRkey:
    case Type::kTestLink:
    case Type::kConfirmRkeyContinuation:
    case Type::kDeleteRkey:
      return true;
  }
  return false;
}

ConfirmLink decode_confirm_link(WireReader& r, uint8_t flags) {
  ConfirmLink m;
  m.reply = flags & kReplyFlag;
  // Linux tests any of the two bits, so do we.
  m.no_rmbe_eyecatcher = flags & kNoRmbeEyecatcher;
  m.sender_mac = r.bytes<6>();
  m.sender_gid = r.bytes<16>();
  m.sender_qpn = r.be24();
  m.link_num = r.u8();
  m.link_user_id = r.be32();
  m.max_links = r.u8();
  return m;
}

AddLink decode_add_link(WireReader& r, uint8_t byte2, uint8_t flags, LayoutVariant layout) {
  AddLink m;
  m.reply = flags & kReplyFlag;
  m.rejected = flags & kAddLinkRejectFlag;
  m.reason_code = byte2 & 0x0F;
  m.sender_mac = r.bytes<6>();
  if (layout == LayoutVariant::kLinux) r.skip(2);
  m.sender_gid = r.bytes<16>();
  m.sender_qpn = r.be24();
  m.link_num = r.u8();
  m.mtu_code = r.u8() & 0x0F;
  m.initial_psn = r.be24();
  return m;
}

AddLinkContinuation decode_add_link_continuation(WireReader& r, uint8_t flags) {
  AddLinkContinuation m;
  m.reply = flags & kReplyFlag;
  m.link_num = r.u8();
  m.num_rtokens = r.u8();
  r.skip(2);
  for (size_t i = 0; i < m.pairs_in_message(); ++i) {
    m.pairs[i].reference_rkey = r.be32();
    m.pairs[i].new_rkey = r.be32();
    m.pairs[i].new_vaddr = r.be64();
  }
  return m;
}

DeleteLink decode_delete_link(WireReader& r, uint8_t flags) {
  DeleteLink m;
  m.reply = flags & kReplyFlag;
  m.all_links = flags & kDeleteLinkAllFlag;
  m.orderly = flags & kDeleteLinkOrderlyFlag;
  m.link_num = r.u8();
  m.reason_code = r.be32();  // unaligned at byte 5
  return m;
}

std::optional<ConfirmRkey> decode_confirm_rkey(WireReader& r, uint8_t flags, DecodeError* err) {
  ConfirmRkey m;
  m.reply = flags & kReplyFlag;
  m.negative = flags & kRkeyNegativeFlag;
  m.configuration_retry = flags & kRkeyRetryFlag;
  m.num_tokens = r.u8();
  if (m.num_tokens > kMaxOtherLinks) {
    if (err) *err = DecodeError::kBadField;
    return std::nullopt;
  }
  m.rkey = r.be32();
  m.vaddr = r.be64();
  for (size_t i = 0; i < slots_used<2>(m.num_tokens); ++i) m.other_links[i] = read_other_link(r);
  return m;
}

TestLink decode_test_link(WireReader& r, uint8_t flags) {
  TestLink m;
  m.reply = flags & kReplyFlag;
  m.user_data = r.bytes<16>();
  return m;
}

std::optional<ConfirmRkeyContinuation> decode_confirm_rkey_continuation(WireReader& r,
                                                                        uint8_t flags,
                                                                        DecodeError* err) {
  ConfirmRkeyContinuation m;
  m.reply = flags & kReplyFlag;
  m.negative = flags & kRkeyNegativeFlag;
  m.num_tokens_left = r.u8();
  if (m.num_tokens_left > kMaxOtherLinks) {
    if (err) *err = DecodeError::kBadField;
    return std::nullopt;
  }
  for (size_t i = 0; i < slots_used<3>(m.num_tokens_left); ++i) {
    m.other_links[i] = read_other_link(r);
  }
  return m;
}

std::optional<DeleteRkey> decode_delete_rkey(WireReader& r, uint8_t flags, DecodeError* err) {
  DeleteRkey m;
  m.reply = flags & kReplyFlag;
  m.negative = flags & kRkeyNegativeFlag;
  m.count = r.u8();
  if (m.count > kMaxDeleteRkeys) {
    if (err) *err = DecodeError::kBadField;
    return std::nullopt;
  }
  m.error_mask = r.u8();
  r.skip(2);
  for (size_t i = 0; i < m.count; ++i) m.rkeys[i] = r.be32();
  return m;
}

}  // namespace

Opcode classify(uint8_t type_byte) {
  if (type_byte == kCdcType) return Opcode::kCdc;
  if ((type_byte & kOpcodeClassMask) == kOpcodeOptional) return Opcode::kDiscard;
  if (is_known_type(type_byte)) return Opcode::kLlc;
  return Opcode::kProtocolError;
}

std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kNone: return "no error";
    case DecodeError::kTooShort: return "LLC message shorter than 44 bytes";
    case DecodeError::kBadLength: return "LLC length byte is not 44";
    case DecodeError::kBadType: return "not a known LLC type";
    case DecodeError::kBadField: return "LLC count out of range";
  }
  return "unknown decode error";
}

std::array<uint8_t, kMessageLen> encode(const ConfirmLink& m) {
  WireWriter w;
  write_header(w, Type::kConfirmLink, 0,
               flag(m.reply, kReplyFlag) | flag(m.no_rmbe_eyecatcher, kNoRmbeEyecatcher));
  w.bytes(m.sender_mac);
  w.bytes(m.sender_gid);
  w.be24(m.sender_qpn & 0xFFFFFF);
  w.u8(m.link_num);
  w.be32(m.link_user_id);
  w.u8(m.max_links);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const AddLink& m, LayoutVariant layout) {
  WireWriter w;
  write_header(w, Type::kAddLink, m.reason_code & 0x0F,
               flag(m.reply, kReplyFlag) | flag(m.rejected, kAddLinkRejectFlag));
  w.bytes(m.sender_mac);
  if (layout == LayoutVariant::kLinux) w.zeros(2);
  w.bytes(m.sender_gid);
  w.be24(m.sender_qpn & 0xFFFFFF);
  w.u8(m.link_num);
  w.u8(m.mtu_code & 0x0F);
  w.be24(m.initial_psn & 0xFFFFFF);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const AddLinkContinuation& m) {
  WireWriter w;
  write_header(w, Type::kAddLinkContinuation, 0, flag(m.reply, kReplyFlag));
  w.u8(m.link_num);
  w.u8(m.num_rtokens);
  w.zeros(2);
  for (size_t i = 0; i < m.pairs_in_message(); ++i) {
    w.be32(m.pairs[i].reference_rkey);
    w.be32(m.pairs[i].new_rkey);
    w.be64(m.pairs[i].new_vaddr);
  }
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const DeleteLink& m) {
  WireWriter w;
  write_header(w, Type::kDeleteLink, 0,
               flag(m.reply, kReplyFlag) | flag(m.all_links, kDeleteLinkAllFlag) |
                   flag(m.orderly, kDeleteLinkOrderlyFlag));
  w.u8(m.link_num);
  w.be32(m.reason_code);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const ConfirmRkey& m) {
  WireWriter w;
  write_header(w, Type::kConfirmRkey, 0,
               flag(m.reply, kReplyFlag) | flag(m.negative, kRkeyNegativeFlag) |
                   flag(m.configuration_retry, kRkeyRetryFlag));
  w.u8(m.num_tokens);
  w.be32(m.rkey);
  w.be64(m.vaddr);
  for (size_t i = 0; i < slots_used<2>(m.num_tokens); ++i) write_other_link(w, m.other_links[i]);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const TestLink& m) {
  WireWriter w;
  write_header(w, Type::kTestLink, 0, flag(m.reply, kReplyFlag));
  w.bytes(m.user_data);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const ConfirmRkeyContinuation& m) {
  WireWriter w;
  write_header(w, Type::kConfirmRkeyContinuation, 0,
               flag(m.reply, kReplyFlag) | flag(m.negative, kRkeyNegativeFlag));
  w.u8(m.num_tokens_left);
  for (size_t i = 0; i < slots_used<3>(m.num_tokens_left); ++i) {
    write_other_link(w, m.other_links[i]);
  }
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const DeleteRkey& m) {
  WireWriter w;
  write_header(w, Type::kDeleteRkey, 0,
               flag(m.reply, kReplyFlag) | flag(m.negative, kRkeyNegativeFlag));
  w.u8(m.count);
  w.u8(m.error_mask);
  w.zeros(2);
  for (size_t i = 0; i < slots_used<kMaxDeleteRkeys>(m.count); ++i) w.be32(m.rkeys[i]);
  return finish(w);
}

std::array<uint8_t, kMessageLen> encode(const Message& m, LayoutVariant layout) {
  return std::visit(
      [layout](const auto& msg) {
        if constexpr (std::is_same_v<std::decay_t<decltype(msg)>, AddLink>) {
          return encode(msg, layout);
        } else {
          return encode(msg);
        }
      },
      m);
}

Type type_of(const Message& m) {
  static constexpr Type kTypes[] = {
      Type::kConfirmLink, Type::kAddLink,  Type::kAddLinkContinuation,     Type::kDeleteLink,
      Type::kConfirmRkey, Type::kTestLink, Type::kConfirmRkeyContinuation, Type::kDeleteRkey};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[m.index()];
}

bool is_reply(const Message& m) {
  return std::visit([](const auto& msg) { return msg.reply; }, m);
}

std::optional<Message> decode(std::span<const uint8_t> bytes, DecodeError* err,
                              LayoutVariant layout) {
  if (err) *err = DecodeError::kNone;
  if (bytes.size() < kMessageLen) {
    if (err) *err = DecodeError::kTooShort;
    return std::nullopt;
  }
  WireReader r(bytes.first(kMessageLen));
  const uint8_t type = r.u8();
  const uint8_t length = r.u8();
  const uint8_t byte2 = r.u8();
  const uint8_t flags = r.u8();
  if (classify(type) != Opcode::kLlc) {
    if (err) *err = DecodeError::kBadType;
    return std::nullopt;
  }
  if (length != kMessageLen) {
    if (err) *err = DecodeError::kBadLength;
    return std::nullopt;
  }

  std::optional<Message> out;
  switch (static_cast<Type>(type)) {
    case Type::kConfirmLink: out = decode_confirm_link(r, flags); break;
    case Type::kAddLink: out = decode_add_link(r, byte2, flags, layout); break;
    case Type::kAddLinkContinuation: out = decode_add_link_continuation(r, flags); break;
    case Type::kDeleteLink: out = decode_delete_link(r, flags); break;
    case Type::kConfirmRkey:
      if (auto m = decode_confirm_rkey(r, flags, err)) out = *m;
      break;
    case Type::kTestLink: out = decode_test_link(r, flags); break;
    case Type::kConfirmRkeyContinuation:
      if (auto m = decode_confirm_rkey_continuation(r, flags, err)) out = *m;
      break;
    case Type::kDeleteRkey:
      if (auto m = decode_delete_rkey(r, flags, err)) out = *m;
      break;
  }
  // Every layout fits in 44 bytes, so a short read here would be a bug in
  // this file rather than in the peer's message.
  if (out && !r.ok()) {
    if (err) *err = DecodeError::kTooShort;
    return std::nullopt;
  }
  return out;
}

}  // namespace smcr::llc

namespace smcr::llc::v2 {

namespace {

constexpr uint8_t kTypeNibble = 0x0F;
constexpr size_t kAddLinkExtFixedLen = 28;  // v2_direct .. num_rkeys, after the 44 bytes
constexpr size_t kRtokenPairLen = 16;
constexpr size_t kReqAddLinkGidsAt = 28;
constexpr size_t kMaxReqAddLinkGids = 8;
constexpr size_t kMaxAddLinkRtokens = (kMaxMessageLen - kMessageLen - kAddLinkExtFixedLen) / kRtokenPairLen;

void fail(DecodeError* err, DecodeError e) {
  if (err) *err = e;
}

// Version 2's header over a version-1 encoding: the type's version nibble,
// and the length (little-endian) where version 1 has its length byte and a
// reserved (or ADD LINK's reason) byte.
void frame_v2(std::vector<uint8_t>& out) {
  if (out.size() < kMessageLen) return;  // never: every caller built 44 bytes or more
  out[0] = static_cast<uint8_t>((kVersion << 4) | (out[0] & kTypeNibble));
  out[1] = static_cast<uint8_t>(out.size() & 0xFF);
  out[2] = static_cast<uint8_t>(out.size() >> 8);
}

}  // namespace

size_t claimed_length(std::span<const uint8_t> bytes) {
  if (bytes.size() < 3 || (bytes[0] >> 4) != kVersion) return 0;
  return size_t{bytes[1]} | size_t{bytes[2]} << 8;
}

namespace {

// The claimed length of a version-2 message, if it is one Linux sends:
// 44..8192 bytes and all of them in `bytes`; else 0 (kBadLength).
size_t checked_length(std::span<const uint8_t> bytes, DecodeError* err) {
  const size_t length = claimed_length(bytes);
  if (length < kMessageLen || length > kMaxMessageLen || length > bytes.size()) {
    fail(err, DecodeError::kBadLength);
    return 0;
  }
  return length;
}

}  // namespace

std::optional<Message> decode(std::span<const uint8_t> bytes, DecodeError* err) {
  fail(err, DecodeError::kNone);
  if (bytes.size() < kMessageLen) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  if ((bytes[0] >> 4) == 0) return llc::decode(bytes, err, LayoutVariant::kLinux);
  if ((bytes[0] >> 4) != kVersion) {
    fail(err, DecodeError::kBadType);
    return std::nullopt;
  }
  const size_t length = checked_length(bytes, err);
  if (length == 0) return std::nullopt;
  const uint8_t type = bytes[0] & kTypeNibble;
  switch (static_cast<Type>(type)) {
    case Type::kConfirmLink:
    case Type::kAddLink:
    case Type::kDeleteLink:
    case Type::kConfirmRkey:
    case Type::kTestLink:
    case Type::kDeleteRkey:
      break;
    default:  // the continuations, REQ ADD LINK (decode_req_add_link), unknown types
      fail(err, DecodeError::kBadType);
      return std::nullopt;
  }
  // The 44-byte part reads as version 1 does, once its header says so.
  std::array<uint8_t, kMessageLen> head;
  std::copy_n(bytes.begin(), kMessageLen, head.begin());
  head[0] = type;
  head[1] = static_cast<uint8_t>(kMessageLen);
  head[2] = 0;  // no reason nibble in version 2
  auto m = llc::decode(head, err, LayoutVariant::kLinux);
  if (!m) return std::nullopt;
  if (auto* cl = std::get_if<ConfirmLink>(&*m)) cl->max_conns = bytes[35];
  if (auto* al = std::get_if<AddLink>(&*m); al && length > kMessageLen) {
    if (length < kMessageLen + kAddLinkExtFixedLen) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    WireReader r(bytes.first(length));
    r.seek(kMessageLen);
    AddLinkV2Ext ext;
    ext.v2_direct = r.u8() & 0x80;
    r.skip(1);
    ext.client_target_gid = r.bytes<16>();
    r.skip(8);
    const size_t count = size_t{r.u8()} | size_t{r.u8()} << 8;  // host order on the wire: Linux on x86
    if (length != kMessageLen + kAddLinkExtFixedLen + kRtokenPairLen * count) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    for (size_t i = 0; i < count; ++i) {
      RtokenPair t;
      t.reference_rkey = r.be32();
      t.new_rkey = r.be32();
      t.new_vaddr = r.be64();
      ext.rtokens.push_back(t);
    }
    if (!r.ok()) {
      fail(err, DecodeError::kTooShort);
      return std::nullopt;
    }
    al->v2_ext = std::move(ext);
  }
  return m;
}

std::optional<ReqAddLink> decode_req_add_link(std::span<const uint8_t> bytes, DecodeError* err) {
  fail(err, DecodeError::kNone);
  if (bytes.size() < kMessageLen) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  if (bytes[0] != ((kVersion << 4) | kReqAddLinkType)) {
    fail(err, DecodeError::kBadType);
    return std::nullopt;
  }
  const size_t length = checked_length(bytes, err);
  if (length == 0) return std::nullopt;
  ReqAddLink m;
  m.reply = bytes[3] & 0x80;
  const size_t count = bytes[24];
  if (count > kMaxReqAddLinkGids) {
    fail(err, DecodeError::kBadField);
    return std::nullopt;
  }
  if (kReqAddLinkGidsAt + 16 * count > length) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }
  WireReader r(bytes.first(length));
  r.seek(kReqAddLinkGidsAt);
  for (size_t i = 0; i < count; ++i) m.gids.push_back(r.bytes<16>());
  return m;
}

std::vector<uint8_t> encode(const Message& m) {
  if (std::holds_alternative<AddLinkContinuation>(m) || std::holds_alternative<ConfirmRkeyContinuation>(m)) return {};
  auto v1 = llc::encode(m, LayoutVariant::kLinux);
  std::vector<uint8_t> out(v1.begin(), v1.end());
  if (const auto* cl = std::get_if<ConfirmLink>(&m)) out[35] = cl->max_conns;
  if (const auto* al = std::get_if<AddLink>(&m); al && al->v2_ext) {
    const AddLinkV2Ext& ext = *al->v2_ext;
    const size_t count = std::min(ext.rtokens.size(), kMaxAddLinkRtokens);
    WireWriter w;
    w.u8(ext.v2_direct ? 0x80 : 0);
    w.zeros(1);
    w.bytes(ext.client_target_gid);
    w.zeros(8);
    w.u8(static_cast<uint8_t>(count & 0xFF));  // num_rkeys: host order on the wire (Linux on x86)
    w.u8(static_cast<uint8_t>(count >> 8));
    for (size_t i = 0; i < count; ++i) {
      w.be32(ext.rtokens[i].reference_rkey);
      w.be32(ext.rtokens[i].new_rkey);
      w.be64(ext.rtokens[i].new_vaddr);
    }
    const auto& tail = w.buffer();
    out.insert(out.end(), tail.begin(), tail.end());
  }
  frame_v2(out);
  return out;
}

std::vector<uint8_t> encode(const ReqAddLink& m) {
  // A reply is the request echoed with R and everything after the header
  // zeroed (Linux: smc_llc_send_req_add_link_response).
  const size_t count = m.reply ? 0 : std::min(m.gids.size(), kMaxReqAddLinkGids);
  std::vector<uint8_t> out(std::max(kMessageLen, kReqAddLinkGidsAt + 16 * count), 0);
  out[0] = kReqAddLinkType;
  out[3] = m.reply ? 0x80 : 0;
  out[24] = static_cast<uint8_t>(count);
  for (size_t i = 0; i < count; ++i) std::copy(m.gids[i].begin(), m.gids[i].end(), out.begin() + kReqAddLinkGidsAt + 16 * i);
  frame_v2(out);
  return out;
}

}  // namespace smcr::llc::v2
