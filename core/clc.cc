#include "core/clc.h"

#include <algorithm>

#include "core/rmb.h"
#include "core/wire.h"

namespace smcr::clc {

namespace {

constexpr uint8_t kVersion1 = 1;
// Byte 7 low nibble: F (Accept, and Linux Confirm) / S (Decline).
constexpr uint8_t kFirstContactFlag = 0x08;
constexpr uint8_t kOutOfSyncFlag = 0x08;
// Linux splits byte 7 of version >= 2 messages as version:4 | typev2:2 | typev1:2,
// where each type is R(0), D(1), N(2, none) or B(3, both).
constexpr uint8_t kTypeV1Mask = 0x03;
constexpr uint8_t kSmcTypeR = 0;
constexpr uint8_t kSmcTypeN = 2;
constexpr uint8_t kSmcTypeB = 3;

constexpr size_t kProposalFixedLen = 40;  // header + peer id + gid + mac + offset field
constexpr size_t kIpAreaFixedLen = 8;     // subnet(4) prefix_len(1) reserved(2) count(1)
constexpr size_t kIpv6PrefixLen = 17;     // 16-byte prefix + 1-byte length, unpadded
constexpr size_t kMaxIpv6Prefixes = 8;

void fail(DecodeError* err, DecodeError e) {
  if (err) *err = e;
}

size_t minimum_length(Type t) {
  switch (t) {
    case Type::kProposal: return kProposalMinLen;
    case Type::kAccept:
    case Type::kConfirm: return kAcceptConfirmLen;
    case Type::kDecline: return kDeclineLen;
  }
  return kMaxMessageLen + 1;
}

void write_header(WireWriter& w, Type type, uint8_t version_and_flags) {
  w.bytes(kEyecatcher);
  w.u8(static_cast<uint8_t>(type));
  w.be16(0);  // patched by finish() once the body is known
  w.u8(version_and_flags);
}

std::vector<uint8_t> finish(WireWriter& w) {
  w.bytes(kEyecatcher);
  w.patch_be16(5, static_cast<uint16_t>(w.size()));
  return w.take();
}

bool trailer_ok(std::span<const uint8_t> bytes, bool smcd) {
  const auto& eye = smcd ? kSmcdEyecatcher : kEyecatcher;
  return bytes.size() >= kTrailerLen && std::equal(eye.begin(), eye.end(), bytes.end() - kTrailerLen);
}

// Common framing for every decoder: a valid header of the expected type whose
// Length is exactly the span handed in, and a valid trailing eyecatcher.
std::optional<Header> decode_frame(std::span<const uint8_t> bytes, Type expected,
                                   DecodeError* err) {
  auto header = decode_header(bytes, err);
  if (!header) return std::nullopt;
  if (header->type != expected) {
    fail(err, DecodeError::kBadType);
    return std::nullopt;
  }
  if (bytes.size() < header->length) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  if (bytes.size() > header->length) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }
  if (!trailer_ok(bytes, header->smcd)) {
    fail(err, DecodeError::kBadEyecatcher);
    return std::nullopt;
  }
  return header;
}

}  // namespace

bool starts_like_clc(std::span<const uint8_t> bytes) {
  const size_t n = std::min<size_t>(bytes.size(), 4);
  return std::equal(bytes.begin(), bytes.begin() + n, kEyecatcher.begin()) ||
         std::equal(bytes.begin(), bytes.begin() + n, kSmcdEyecatcher.begin());
}

std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kNone: return "no error";
    case DecodeError::kTooShort: return "message truncated";
    case DecodeError::kBadEyecatcher: return "bad eyecatcher";
    case DecodeError::kBadType: return "unexpected message type";
    case DecodeError::kBadLength: return "length field out of range";
    case DecodeError::kBadVersion: return "bad version";
    case DecodeError::kBadField: return "field value out of range";
    case DecodeError::kReservedValue: return "reserved field value";
  }
  return "unknown decode error";
}

std::optional<Header> decode_header(std::span<const uint8_t> bytes, DecodeError* err) {
  fail(err, DecodeError::kNone);
  if (bytes.size() < kHeaderLen) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  WireReader r(bytes);
  const auto eye = r.bytes<4>();
  if (eye != kEyecatcher && eye != kSmcdEyecatcher) {
    fail(err, DecodeError::kBadEyecatcher);
    return std::nullopt;
  }
  const uint8_t type = r.u8();
  if (type < static_cast<uint8_t>(Type::kProposal) || type > static_cast<uint8_t>(Type::kDecline)) {
    fail(err, DecodeError::kBadType);
    return std::nullopt;
  }
  Header h;
  h.smcd = eye == kSmcdEyecatcher;
  h.type = static_cast<Type>(type);
  h.length = r.be16();
  const uint8_t version_and_flags = r.u8();
  h.version = version_and_flags >> 4;
  h.flags = version_and_flags & 0x0F;
  if (h.length < minimum_length(h.type) || h.length > kMaxMessageLen) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }
  if (h.version == 0) {
    fail(err, DecodeError::kBadVersion);
    return std::nullopt;
  }
  return h;
}

std::vector<uint8_t> encode(const Proposal& p) {
  WireWriter w;
  write_header(w, Type::kProposal, kVersion1 << 4);
  w.bytes(p.peer_id);
  w.bytes(p.gid);
  w.bytes(p.mac);
  if (p.ece) {
    w.be16(static_cast<uint16_t>(kEceBlockLen));
    w.be32(kEceMagic);
    w.be32(p.ece->vendor_id);
    w.be32(p.ece->options);
  } else {
    w.be16(p.ip_area_offset);
    w.zeros(p.ip_area_offset);
  }
  w.be32(p.ipv4_subnet);
  w.u8(p.ipv4_prefix_len);
  w.zeros(2);
  // The RFC allows at most 8 prefixes; extra ones would make a message every
  // receiver rejects, so they are not sent.
  const size_t count = std::min(p.ipv6_prefixes.size(), kMaxIpv6Prefixes);
  w.u8(static_cast<uint8_t>(count));
  for (size_t i = 0; i < count; ++i) {
    w.bytes(p.ipv6_prefixes[i].prefix);
    w.u8(p.ipv6_prefixes[i].prefix_len);
  }
  return finish(w);
}

std::vector<uint8_t> encode(const AcceptConfirm& m) {
  WireWriter w;
  // F is reserved in Confirm (RFC A.2.4), so it is only ever sent in Accept.
  const bool send_first_contact = m.type == Type::kAccept && m.first_contact;
  write_header(w, m.type, (kVersion1 << 4) | (send_first_contact ? kFirstContactFlag : 0));
  w.bytes(m.peer_id);
  w.bytes(m.gid);
  w.bytes(m.mac);
  w.be24(m.qpn & 0xFFFFFF);
  w.be32(m.rmb_rkey);
  w.u8(m.rmbe_index);
  w.be32(m.rmbe_alert_token);
  w.u8(static_cast<uint8_t>((m.rmbe_size_code << 4) | (m.mtu_code & 0x0F)));
  w.zeros(1);
  w.be64(m.rmb_vaddr);
  w.zeros(1);
  w.be24(m.psn & 0xFFFFFF);
  if (m.type == Type::kAccept && m.ece) {
    w.be32(kEceMagic);
    w.be32(m.ece->vendor_id);
    w.be32(m.ece->options);
  }
  return finish(w);
}

std::vector<uint8_t> encode(const Decline& d) {
  WireWriter w;
  write_header(w, Type::kDecline, (kVersion1 << 4) | (d.out_of_sync ? kOutOfSyncFlag : 0));
  w.bytes(d.peer_id);
  w.be32(d.diagnosis);
  w.zeros(4);
  return finish(w);
}

std::optional<Proposal> decode_proposal(std::span<const uint8_t> bytes, DecodeError* err) {
  auto header = decode_frame(bytes, Type::kProposal, err);
  if (!header) return std::nullopt;

  WireReader r(bytes);
  r.skip(kHeaderLen);
  Proposal p;
  p.peer_id = r.bytes<8>();
  p.gid = r.bytes<16>();
  p.mac = r.bytes<6>();
  p.ip_area_offset = r.be16();
  p.version = header->version;

  // Version 1 is RFC 7609 proper. Version >= 2 is the Linux layout, which names
  // the SMC types offered per version in byte 7 and, when SMC-Rv1 is not
  // offered (typev1 = N), omits the IP area altogether and zeroes the v1 fields.
  bool has_ip_area = true;
  if (p.version == kVersion1) {
    p.offers_smcr_v1 = true;
  } else {
    const uint8_t type_v1 = header->flags & kTypeV1Mask;
    p.offers_smcr_v1 = type_v1 == kSmcTypeR || type_v1 == kSmcTypeB;
    has_ip_area = type_v1 != kSmcTypeN;
  }
  // SMC-D only (its eyecatcher): nothing of it is ours, and the IP area
  // need not be read to decline it.
  if (header->smcd) p.offers_smcr_v1 = false;
  if (!has_ip_area || header->smcd) return p;
  if (p.ip_area_offset == kEceBlockLen && bytes.size() >= kProposalFixedLen + kEceBlockLen) {
    WireReader gap(bytes);
    gap.seek(kProposalFixedLen);
    if (gap.be32() == kEceMagic) {
      Ece e;
      e.vendor_id = gap.be32();
      e.options = gap.be32();
      p.ece = e;
    }
  }

  // Only the trailer may follow the IP area; it must fit before it.
  const size_t body_end = bytes.size() - kTrailerLen;
  const size_t ip_area_start = kProposalFixedLen + size_t{p.ip_area_offset};
  if (ip_area_start + kIpAreaFixedLen > body_end) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }
  r.seek(ip_area_start);
  p.ipv4_subnet = r.be32();
  p.ipv4_prefix_len = r.u8();
  r.skip(2);
  const uint8_t ipv6_count = r.u8();
  if (ipv6_count > kMaxIpv6Prefixes) {
    fail(err, DecodeError::kBadField);
    return std::nullopt;
  }
  const size_t ip_area_end = ip_area_start + kIpAreaFixedLen + kIpv6PrefixLen * ipv6_count;
  // A v1 message is exactly header + fields + IP area + trailer; Linux v2
  // messages carry extensions after the IP area, which are not ours to read.
  const bool length_ok = p.version == kVersion1 ? ip_area_end == body_end : ip_area_end <= body_end;
  if (!length_ok) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }
  for (uint8_t i = 0; i < ipv6_count; ++i) {
    Ipv6Prefix prefix;
    prefix.prefix = r.bytes<16>();
    prefix.prefix_len = r.u8();
    p.ipv6_prefixes.push_back(prefix);
  }
  if (!r.ok()) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  return p;
}

std::optional<AcceptConfirm> decode_accept_confirm(std::span<const uint8_t> bytes, Type expected,
                                                   DecodeError* err) {
  fail(err, DecodeError::kNone);
  if (expected != Type::kAccept && expected != Type::kConfirm) {
    fail(err, DecodeError::kBadType);
    return std::nullopt;
  }
  auto header = decode_frame(bytes, expected, err);
  if (!header) return std::nullopt;
  if (header->smcd) {  // an SMC-D answer to an SMC-R offer
    fail(err, DecodeError::kBadField);
    return std::nullopt;
  }
  // Version 1 is exactly 68 bytes; Linux v2 Accept/Confirm (160/180 bytes)
  // keep the RFC fields in bytes 8-63 and append extensions we skip.
  // An smcr Accept may carry the agreed ECE in 12 more bytes (see clc.h).
  const bool ece_length = expected == Type::kAccept && header->length == kAcceptConfirmLen + kEceBlockLen;
  if (header->version == kVersion1 && header->length != kAcceptConfirmLen && !ece_length) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }

  WireReader r(bytes);
  r.skip(kHeaderLen);
  AcceptConfirm m;
  m.type = expected;
  // Linux also sets 0x08 in Confirm, where the RFC reserves it; report it as
  // sent and let the receiver decide whether it matters.
  m.first_contact = header->flags & kFirstContactFlag;
  m.peer_id = r.bytes<8>();
  m.gid = r.bytes<16>();
  m.mac = r.bytes<6>();
  m.qpn = r.be24();
  m.rmb_rkey = r.be32();
  m.rmbe_index = r.u8();
  m.rmbe_alert_token = r.be32();
  const uint8_t size_and_mtu = r.u8();
  m.rmbe_size_code = size_and_mtu >> 4;
  m.mtu_code = size_and_mtu & 0x0F;
  r.skip(1);
  m.rmb_vaddr = r.be64();
  r.skip(1);
  m.psn = r.be24();
  if (header->version == kVersion1 && ece_length) {
    if (r.be32() != kEceMagic) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    Ece e;
    e.vendor_id = r.be32();
    e.options = r.be32();
    m.ece = e;
  }
  if (!r.ok()) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  // Out-of-range fields are protocol errors; reserved values are checked
  // last because they alone call for a Decline instead of terminating (RFC
  // C.6): an MTU code, and an RMBE size past RFC 7609's 512 KiB (which Linux
  // sends when its net.smc.rmem is larger: a peer to fall back with, not
  // to reset).
  if (m.rmbe_index == 0) {
    fail(err, DecodeError::kBadField);
    return std::nullopt;
  }
  if (m.rmbe_size_code > rmb::kMaxCode || !rmb::decode_mtu(m.mtu_code)) {
    fail(err, DecodeError::kReservedValue);
    return std::nullopt;
  }
  return m;
}

std::optional<Decline> decode_decline(std::span<const uint8_t> bytes, DecodeError* err) {
  auto header = decode_frame(bytes, Type::kDecline, err);
  if (!header) return std::nullopt;
  // Linux v2 Declines are 44 bytes (os_type plus peer_diagnosis_v2[4] before
  // the trailer); the v1 fields keep their RFC offsets.
  const bool length_ok = header->version == kVersion1 ? header->length == kDeclineLen
                                                      : header->length >= kDeclineLen;
  if (!length_ok) {
    fail(err, DecodeError::kBadLength);
    return std::nullopt;
  }

  WireReader r(bytes);
  r.skip(kHeaderLen);
  Decline d;
  d.out_of_sync = header->flags & kOutOfSyncFlag;
  d.peer_id = r.bytes<8>();
  d.diagnosis = r.be32();
  if (!r.ok()) {
    fail(err, DecodeError::kTooShort);
    return std::nullopt;
  }
  return d;
}

std::string_view decline_reason(uint32_t diagnosis) {
  switch (diagnosis) {
    case decline::kNoMemory: return "insufficient memory";
    case decline::kTimeoutConfirmLink: return "timeout waiting for CONFIRM LINK";
    case decline::kTimeoutAddLink: return "timeout waiting for ADD LINK";
    case decline::kConfigError: return "configuration error";
    case decline::kPeerNoSmc: return "peer did not offer SMC-R";
    case decline::kIpsec: return "IPsec in use";
    case decline::kNoSmcDevice: return "no SMC device";
    case decline::kNoSmcRDevice: return "no SMC-R device";
    case decline::kModeUnsupported: return "SMC mode unsupported";
    case decline::kRmbeEyecatcher: return "RMBE eyecatcher mode mismatch";
    case decline::kOptionUnsupported: return "option unsupported";
    case decline::kDifferentPrefix: return "no common subnet or prefix";
    case decline::kNoActiveLink: return "no active link";
    case decline::kSyncError: return "link group out of sync";
    case decline::kPeerDeclined: return "peer declined";
    case decline::kInternalError: return "internal error";
    case decline::kRtokenError: return "RToken error";
    case decline::kProtocolError: return "CLC protocol error";
    case decline::kHandshakeTimeout: return "CLC handshake timeout";
  }
  return "unknown";
}

}  // namespace smcr::clc
