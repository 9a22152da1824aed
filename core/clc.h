// CLC (Connection Layer Control) messages, RFC 7609 appendix A.2: the SMC-R
// handshake carried in the TCP byte stream. Encoders produce RFC-exact v1
// bytes; decoders validate eyecatchers, type, length, version and every
// enumerated field, and also accept the Linux kernel's v1-compatible variants
// (version 2 Proposals with an SMC-D area, Confirm with the F bit, 44-byte v2
// Declines) so that a kernel peer is never misread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace smcr::clc {

inline constexpr std::array<uint8_t, 4> kEyecatcher = {0xE2, 0xD4, 0xC3, 0xD9};
// "SMCD" in EBCDIC: Linux frames its SMC-D-only messages with it (an SMC-D
// loopback client's Proposal, its Declines). A CLC message all the same:
// read, and answered (a Proposal offering no SMC-R gets a Decline), never
// taken for application data. We never send it.
inline constexpr std::array<uint8_t, 4> kSmcdEyecatcher = {0xE2, 0xD4, 0xC3, 0xC4};
// Whether the first bytes of a stream (up to 4) can begin a CLC message.
bool starts_like_clc(std::span<const uint8_t> bytes);
inline constexpr size_t kHeaderLen = 8;
inline constexpr size_t kTrailerLen = 4;
inline constexpr size_t kProposalMinLen = 52;
inline constexpr size_t kAcceptConfirmLen = 68;
inline constexpr size_t kDeclineLen = 28;
inline constexpr size_t kDeclineV2Len = 44;
// Largest message we are willing to buffer while waiting for it to arrive
// (Linux v2 Confirm with a GID list is 180 + 16*n; 1 KiB bounds a hostile length).
inline constexpr size_t kMaxMessageLen = 1024;

enum class Type : uint8_t { kProposal = 1, kAccept = 2, kConfirm = 3, kDecline = 4 };

using PeerId = std::array<uint8_t, 8>;
using Gid = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 6>;

enum class DecodeError {
  kNone,
  kTooShort,        // fewer bytes than the header or than Length says
  kBadEyecatcher,   // leading or trailing eyecatcher wrong
  kBadType,         // type not 1..4, or not the type the caller expected
  kBadLength,       // Length field out of range for this type
  kBadVersion,      // version nibble 0
  kBadField,        // an enumerated field holds a value that is out of range
  kReservedValue,   // reserved enumerated value (e.g. MTU): Decline, not terminate
};
std::string_view to_string(DecodeError e);

struct Header {
  Type type;
  uint16_t length;
  uint8_t version;  // high nibble of byte 7
  uint8_t flags;    // low nibble of byte 7
  bool smcd = false;  // framed with kSmcdEyecatcher (trailer must match)
};
// Validates the leading eyecatcher (either), type 1..4 and a length within
// [minimum for the type, kMaxMessageLen]. Needs only the first 8 bytes.
std::optional<Header> decode_header(std::span<const uint8_t> bytes, DecodeError* err = nullptr);

struct Ipv6Prefix {
  std::array<uint8_t, 16> prefix{};
  uint8_t prefix_len = 0;
  bool operator==(const Ipv6Prefix&) const = default;
};

// Enhanced Connection Establishment values (IBTA; struct ibv_ece) carried
// between two smcr peers: the client's in the Proposal's architected gap
// before the IP area (RFC A.2.2 "offset to mask/prefix area", which every
// receiver skips), the agreed ones in an Accept extended by 12 bytes, sent
// only to a client whose Proposal carried ECE (so only to smcr). Both
// blocks are: be32 kEceMagic, be32 vendor_id, be32 options.
struct Ece {
  uint32_t vendor_id = 0;
  uint32_t options = 0;  // 4 MSB: ECE version; 28 LSB: feature bits
  bool operator==(const Ece&) const = default;
};
inline constexpr uint32_t kEceMagic = 0xC5C3C540;  // "ECE " in EBCDIC
inline constexpr size_t kEceBlockLen = 12;

// --- SMC-Rv2 (Linux's layout; ../shared/spec/SMC-Rv2-LINUX.md sections 3, 4) ---
// A UEID: 32 ASCII bytes, space-padded (A-Z, 0-9, '.', '-').
inline constexpr size_t kUeidLen = 32;
inline constexpr size_t kMaxUeids = 8;
using Ueid = std::array<uint8_t, kUeidLen>;
// Our SMC-Rv2 release: 1 = SMC v2.1 (max_conns, max_links, feature_mask).
inline constexpr uint8_t kV2Release = 1;
inline constexpr uint8_t kOsLinux = 2;  // os_type: 1 z/OS, 2 Linux, 3 AIX

// The SMCv2 extension of a Proposal that offers SMC-Rv2 (typev2 R or B).
struct SmcrV2Offer {
  uint8_t release = kV2Release;  // flag 0xF0; Linux 6.1 sends 0
  bool seid = false;             // flag 0x01 (s390 only)
  Gid roce_gid{};                // the client's RoCE v2 GID (IPv4-mapped)
  uint8_t max_conns = 0;         // read only with release >= 1
  uint8_t max_links = 0;
  uint16_t feature_mask = 0;
  std::vector<Ueid> ueids;       // 0..8 (Linux declines an offer without one)
  bool operator==(const SmcrV2Offer&) const = default;
};

struct Proposal {
  PeerId peer_id{};
  Gid gid{};
  Mac mac{};
  uint16_t ip_area_offset = 0;   // bytes skipped between offset 40 and the IP area
  std::optional<Ece> ece;        // encoded in that gap (ip_area_offset becomes 12)
  uint32_t ipv4_subnet = 0;      // host byte order; the subnet number (address & mask)
  uint8_t ipv4_prefix_len = 0;
  std::vector<Ipv6Prefix> ipv6_prefixes;  // at most 8
  // Decoded only: the sender's version nibble and whether it offers SMC-R v1
  // (Linux v2-capable Proposals set version 2 and typev1 = R(0) or B(3)).
  uint8_t version = 1;
  bool offers_smcr_v1 = true;
  // SMC-Rv2 offered. Encoding one emits Linux's v2 layout (version 2, the
  // 40-byte SMC-D area, then the IP area when offers_smcr_v1, then the
  // extension); without it, an RFC 7609 version-1 Proposal.
  std::optional<SmcrV2Offer> v2;
  bool operator==(const Proposal&) const = default;
};

// An SMC-Rv2 Accept or Confirm after the RFC fields (bytes 64-103), and on a
// first contact Linux's first-contact extension (104-155) and, in a
// Confirm, the client's GID list.
struct FirstContactV2 {
  bool v2_direct = true;          // no gateway between the two GIDs
  uint8_t os_type = kOsLinux;
  uint8_t release = kV2Release;
  std::array<uint8_t, 32> hostname{};  // space-padded ASCII
  uint8_t max_conns = 0;          // negotiated (release >= 1), echoed in the Confirm
  uint8_t max_links = 0;
  uint16_t feature_mask = 0;
  bool operator==(const FirstContactV2&) const = default;
};
struct AcceptConfirmV2 {
  Ueid eid{};                               // the negotiated UEID
  std::optional<FirstContactV2> first_contact;  // sent with F
  std::vector<Gid> gids;                    // Confirm with F: the client's GIDs
  bool operator==(const AcceptConfirmV2&) const = default;
};

// Accept (server -> client) and Confirm (client -> server) share one layout.
struct AcceptConfirm {
  Type type = Type::kAccept;
  bool first_contact = false;  // F bit; meaningful in Accept only
  PeerId peer_id{};
  Gid gid{};
  Mac mac{};
  uint32_t qpn = 0;             // 24 bits
  uint32_t rmb_rkey = 0;
  uint8_t rmbe_index = 1;       // 1..255
  uint32_t rmbe_alert_token = 0;
  uint8_t rmbe_size_code = 0;   // Bsize 0..5 (see rmb.h)
  uint8_t mtu_code = 0;         // 1..5
  uint64_t rmb_vaddr = 0;
  uint32_t psn = 0;             // 24 bits
  std::optional<Ece> ece;       // Accept only: the agreed ECE (80-byte Accept)
  // SMC-Rv2: encoded as version 2 (108 bytes, 160 or more with the
  // first-contact extension, whose presence also sets F in a Confirm).
  std::optional<AcceptConfirmV2> v2;
  bool operator==(const AcceptConfirm&) const = default;
};

struct Decline {
  PeerId peer_id{};
  uint32_t diagnosis = 0;
  bool out_of_sync = false;  // S bit
  // 1: RFC 7609's 28 bytes. 2: Linux's 44 (os_type, room for four more
  // diagnoses); a v2 peer gets the version it proposed or accepted.
  uint8_t version = 1;
  uint8_t os_type = 0;       // version 2 only
  bool operator==(const Decline&) const = default;
};

std::vector<uint8_t> encode(const Proposal& p);
std::vector<uint8_t> encode(const AcceptConfirm& m);
std::vector<uint8_t> encode(const Decline& d);

// Each decoder takes exactly one whole message (bytes.size() == header length).
std::optional<Proposal> decode_proposal(std::span<const uint8_t> bytes, DecodeError* err = nullptr);
std::optional<AcceptConfirm> decode_accept_confirm(std::span<const uint8_t> bytes, Type expected,
                                                   DecodeError* err = nullptr);
std::optional<Decline> decode_decline(std::span<const uint8_t> bytes, DecodeError* err = nullptr);

// Decline diagnosis codes. RFC 7609 defines none; these are the Linux values
// (include/net/smc.h / smc_clc.h) so that both ends' logs read the same.
namespace decline {
inline constexpr uint32_t kNoMemory = 0x01010000;          // SMC_CLC_DECL_MEM
inline constexpr uint32_t kTimeoutConfirmLink = 0x02010000;
inline constexpr uint32_t kTimeoutAddLink = 0x02020000;
inline constexpr uint32_t kConfigError = 0x03000000;       // SMC_CLC_DECL_CNFERR
inline constexpr uint32_t kPeerNoSmc = 0x03010000;         // peer did not offer SMC-R
inline constexpr uint32_t kIpsec = 0x03020000;
inline constexpr uint32_t kNoSmcDevice = 0x03030000;       // no usable device/fabric
inline constexpr uint32_t kNoSmcRDevice = 0x03030002;
inline constexpr uint32_t kNoUeid = 0x03030008;          // SMC-Rv2 offered without a UEID we share
inline constexpr uint32_t kReleaseError = 0x03030009;     // v2 Confirm's release is not the Accept's
inline constexpr uint32_t kMaxConnsError = 0x0303000a;
inline constexpr uint32_t kMaxLinksError = 0x0303000b;
inline constexpr uint32_t kModeUnsupported = 0x03040000;
inline constexpr uint32_t kRmbeEyecatcher = 0x03050000;
inline constexpr uint32_t kOptionUnsupported = 0x03060000;
inline constexpr uint32_t kDifferentPrefix = 0x03070000;   // subnet/prefix mismatch
inline constexpr uint32_t kNoActiveLink = 0x030a0000;
inline constexpr uint32_t kSyncError = 0x04000000;
inline constexpr uint32_t kPeerDeclined = 0x05000000;
inline constexpr uint32_t kInternalError = 0x09990000;
inline constexpr uint32_t kRtokenError = 0x09990001;
inline constexpr uint32_t kRegisterBufferError = 0x09990003;  // CONFIRM RKEY failed
// Not a Linux code: fallbacks decided locally before/without any Decline.
inline constexpr uint32_t kProtocolError = 0x09990010;     // malformed CLC from the peer
inline constexpr uint32_t kHandshakeTimeout = 0x02000000;  // SMC_CLC_DECL_TIMEOUT
}  // namespace decline
std::string_view decline_reason(uint32_t diagnosis);

}  // namespace smcr::clc
