// LLC (Link Layer Control) messages, RFC 7609 appendix A.3: the 44-byte
// RoCE SendMsg messages that confirm, add and delete links and exchange RMB
// RTokens within a link group. Every message is byte 0 type, byte 1 length
// (44), byte 3 flags with R (reply) at 0x80; reserved bytes are sent as zero
// and ignored on receipt.
//
// Version 1 (type bytes 0x01..0x09) is RFC 7609's, what classify() and
// decode() read. Linux's SMC-Rv2 link groups frame them as version 2 (type
// 0x21, 0x22, ...; a little-endian length in bytes 1-2, up to 8 KiB), read
// and written by the v2:: functions below.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

namespace smcr::llc {

inline constexpr size_t kMessageLen = 44;
// Architectural maximum of symmetric links per link group (RFC 2.2.2).
inline constexpr uint8_t kMaxLinks = 8;
inline constexpr size_t kMaxDeleteRkeys = 8;

using Mac = std::array<uint8_t, 6>;
using Gid = std::array<uint8_t, 16>;

enum class Type : uint8_t {
  kConfirmLink = 1,
  kAddLink = 2,
  kAddLinkContinuation = 3,
  kDeleteLink = 4,
  kConfirmRkey = 6,
  kTestLink = 7,
  kConfirmRkeyContinuation = 8,
  kDeleteRkey = 9,
};

// How a receiver must treat a SendMsg by its first byte (RFC 3.3, C.7.1).
enum class Opcode {
  kLlc,            // a known LLC message
  kCdc,            // 0xFE
  kDiscard,        // 10xxxxxx: optional and unknown, silently discard
  kProtocolError,  // unknown 00xxxxxx, 01xxxxxx or 11xxxxxx: link down
};
Opcode classify(uint8_t type_byte);

enum class DecodeError {
  kNone,
  kTooShort,   // fewer than 44 bytes
  kBadLength,  // byte 1 is not 44
  kBadType,    // not a known LLC type
  kBadField,   // a count out of its architected range
};
std::string_view to_string(DecodeError e);

// ADD LINK has two 44-byte layouts in the wild: the RFC A.3.2 figure (GID at
// byte 10) and Linux net/smc, which pads 2 bytes after the MAC (GID at 12,
// QPN 28, link 31, MTU 32, PSN 33). Nothing in the message says which one a
// peer uses, so the caller picks (e.g. Linux when CONFIRM LINK carried
// no_rmbe_eyecatcher).
enum class LayoutVariant { kRfc, kLinux };

struct ConfirmLink {
  bool reply = false;
  // Linux sets 0x03 in byte 3 (SMC_LLC_FLAG_NO_RMBE_EYEC): its RMBEs have no
  // eyecatcher and cursors start at 0. A Linux receiver rejects a CONFIRM LINK
  // without it.
  bool no_rmbe_eyecatcher = false;
  Mac sender_mac{};
  Gid sender_gid{};
  uint32_t sender_qpn = 0;  // 24 bits
  uint8_t link_num = 0;
  uint32_t link_user_id = 0;
  uint8_t max_links = 0;  // 0 from a client means "accept the server's"
  uint8_t max_conns = 0;  // version 2 only (byte 35; reserved in version 1)
  bool operator==(const ConfirmLink&) const = default;
};

struct RtokenPair {
  uint32_t reference_rkey = 0;  // the RMB's RKey on the link this message travels on
  uint32_t new_rkey = 0;        // the same RMB's RKey on the new link
  uint64_t new_vaddr = 0;
  bool operator==(const RtokenPair&) const = default;
};

// Version 2 ADD LINK (a request, or a reply that accepts) carries the
// RTokens itself: version 2 has no ADD LINK CONTINUATION.
struct AddLinkV2Ext {
  bool v2_direct = true;
  Gid client_target_gid{};
  std::vector<RtokenPair> rtokens;
  bool operator==(const AddLinkV2Ext&) const = default;
};

struct AddLink {
  // RsnCode values for a rejecting reply (Z set; version 1 only: in version
  // 2 byte 2 is the length's high byte).
  static constexpr uint8_t kReasonNoAlternatePath = 1;
  static constexpr uint8_t kReasonInvalidMtu = 2;

  bool reply = false;
  bool rejected = false;    // Z
  uint8_t reason_code = 0;  // RsnCode, 4 bits, meaningful with Z
  Mac sender_mac{};
  Gid sender_gid{};
  uint32_t sender_qpn = 0;  // 24 bits
  uint8_t link_num = 0;     // of the new link
  uint8_t mtu_code = 0;     // 4 bits; not validated here so a reply can say "invalid MTU"
  uint32_t initial_psn = 0; // 24 bits
  std::optional<AddLinkV2Ext> v2_ext;  // version 2 only
  bool operator==(const AddLink&) const = default;
};

struct AddLinkContinuation {
  bool reply = false;
  uint8_t link_num = 0;
  // RTokens still to send, this message included; <= 2 means this is the last.
  uint8_t num_rtokens = 0;
  std::array<RtokenPair, 2> pairs{};  // the first min(num_rtokens, 2) are meaningful
  size_t pairs_in_message() const { return num_rtokens < 2 ? num_rtokens : 2; }
  bool operator==(const AddLinkContinuation&) const = default;
};

struct DeleteLink {
  static constexpr uint32_t kReasonLostPath = 0x00010000;
  static constexpr uint32_t kReasonOperator = 0x00020000;
  static constexpr uint32_t kReasonInactivity = 0x00030000;
  static constexpr uint32_t kReasonProtocolViolation = 0x00040000;
  static constexpr uint32_t kReasonAsymmetricNotNeeded = 0x00050000;
  static constexpr uint32_t kReasonUnknownLink = 0x00100000;  // reply only

  bool reply = false;
  bool all_links = false;  // A: the whole link group
  bool orderly = false;    // O
  uint8_t link_num = 0;    // 0 and meaningless with A
  uint32_t reason_code = 0;
  bool operator==(const DeleteLink&) const = default;
};

// RToken of an RMB on another link of the group (RFC Figure 37, 13 bytes).
struct OtherLinkRtoken {
  uint8_t link_num = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  bool operator==(const OtherLinkRtoken&) const = default;
};

struct ConfirmRkey {
  bool reply = false;
  bool negative = false;             // Z
  bool configuration_retry = false;  // C, negative replies only
  // Other links' RTokens still to send (this link's RToken not counted): the
  // first min(num_tokens, 2) of other_links are meaningful; more go in
  // CONFIRM RKEY CONTINUATIONs. At most kMaxLinks - 1.
  uint8_t num_tokens = 0;
  uint32_t rkey = 0;  // the new RMB on the link this message travels on
  uint64_t vaddr = 0;
  std::array<OtherLinkRtoken, 2> other_links{};
  bool operator==(const ConfirmRkey&) const = default;
};

struct TestLink {
  bool reply = false;
  std::array<uint8_t, 16> user_data{};  // echoed unchanged in the reply
  bool operator==(const TestLink&) const = default;
};

// Laid out as Linux does (count + 3 x 13 bytes): the RFC figure does not add up.
struct ConfirmRkeyContinuation {
  bool reply = false;
  bool negative = false;        // Z
  uint8_t num_tokens_left = 0;  // this message included; <= 3 means last. At most kMaxLinks - 1.
  std::array<OtherLinkRtoken, 3> other_links{};
  bool operator==(const ConfirmRkeyContinuation&) const = default;
};

struct DeleteRkey {
  bool reply = false;
  bool negative = false;   // Z
  uint8_t count = 0;       // 0..8
  // Version 1: MSB = first RKey failed. Version 2 (Linux): the number of
  // RKeys that failed, the list zeroed.
  uint8_t error_mask = 0;
  std::array<uint32_t, kMaxDeleteRkeys> rkeys{};  // first `count` used
  bool operator==(const DeleteRkey&) const = default;
};

using Message = std::variant<ConfirmLink, AddLink, AddLinkContinuation, DeleteLink, ConfirmRkey,
                             TestLink, ConfirmRkeyContinuation, DeleteRkey>;

std::array<uint8_t, kMessageLen> encode(const ConfirmLink& m);
std::array<uint8_t, kMessageLen> encode(const AddLink& m, LayoutVariant layout = LayoutVariant::kRfc);
std::array<uint8_t, kMessageLen> encode(const AddLinkContinuation& m);
std::array<uint8_t, kMessageLen> encode(const DeleteLink& m);
std::array<uint8_t, kMessageLen> encode(const ConfirmRkey& m);
std::array<uint8_t, kMessageLen> encode(const TestLink& m);
std::array<uint8_t, kMessageLen> encode(const ConfirmRkeyContinuation& m);
std::array<uint8_t, kMessageLen> encode(const DeleteRkey& m);
std::array<uint8_t, kMessageLen> encode(const Message& m, LayoutVariant layout = LayoutVariant::kRfc);

Type type_of(const Message& m);
bool is_reply(const Message& m);

// Decodes the first 44 bytes of `bytes` (a receive buffer may be larger).
// Validates length byte 44, a known LLC type and the counts; reserved bits
// are ignored. Callers should classify() first to tell CDC, discardable and
// protocol-error opcodes apart; decode() reports all of them as kBadType.
std::optional<Message> decode(std::span<const uint8_t> bytes, DecodeError* err = nullptr,
                              LayoutVariant layout = LayoutVariant::kRfc);
inline std::optional<Message> decode(std::span<const uint8_t> bytes, LayoutVariant layout,
                                     DecodeError* err = nullptr) {
  return decode(bytes, err, layout);
}

// --- Version 2 (Linux SMC-Rv2 link groups; ../shared/spec/SMC-Rv2-LINUX.md section 6) ---
namespace v2 {

inline constexpr uint8_t kVersion = 2;
inline constexpr size_t kMaxMessageLen = 8192;  // what Linux posts receives for
inline constexpr uint8_t kReqAddLinkType = 5;   // 0x25; no version-1 form

// REQ ADD LINK: a client with another RNIC asks the server to add a link;
// the server must answer (a reply with nothing else), or the client's RKey
// flows wait for it.
struct ReqAddLink {
  bool reply = false;
  std::vector<Gid> gids;  // the sender's, at most 8
  bool operator==(const ReqAddLink&) const = default;
};

// The length a version-2 message claims (bytes 1-2, little-endian), or 0 if
// `bytes` does not hold a version-2 header.
size_t claimed_length(std::span<const uint8_t> bytes);

// A message received on a version-2 link group: version 2 framing (length
// 44..8192 and within `bytes`), or a version-1 message (byte 1 == 44),
// which Linux also takes there. Version-1 ADD LINK is read in Linux's
// layout. REQ ADD LINK and the types version 2 does not have (the
// continuations) are kBadType here: Linux drops unknown types silently.
std::optional<Message> decode(std::span<const uint8_t> bytes, DecodeError* err = nullptr);
std::optional<ReqAddLink> decode_req_add_link(std::span<const uint8_t> bytes, DecodeError* err = nullptr);

// Version-2 framing of `m`; empty for the continuations, which version 2
// does not have. ADD LINK in Linux's layout, with its extension if set.
std::vector<uint8_t> encode(const Message& m);
std::vector<uint8_t> encode(const ReqAddLink& m);

}  // namespace v2

}  // namespace smcr::llc
