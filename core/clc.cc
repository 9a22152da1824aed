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
constexpr uint8_t kTypeV2Shift = 2;
constexpr uint8_t kSmcTypeR = 0;
constexpr uint8_t kSmcTypeN = 2;
constexpr uint8_t kSmcTypeB = 3;
constexpr uint8_t kVersion2 = 2;


constexpr size_t kProposalFixedLen = 40;  // header + peer id + gid + mac + offset field
constexpr size_t kIpAreaFixedLen = 8;     // subnet(4) prefix_len(1) reserved(2) count(1)
constexpr size_t kIpv6PrefixLen = 17;     // 16-byte prefix + 1-byte length, unpadded
constexpr size_t kMaxIpv6Prefixes = 8;

// The v2 Proposal: a 40-byte SMC-D area follows the fixed fields (always,
// whatever is offered); its bytes 10-11 give the SMCv2 extension's start as
// an offset from the end of that field (Linux: 1..172).
constexpr size_t kSmcdAreaLen = 40;
constexpr size_t kV2ExtOffsetField = kProposalFixedLen + 10;  // 50
constexpr size_t kV2ExtBase = kV2ExtOffsetField + 2;           // 52
constexpr uint16_t kV2ExtOffsetMax = 172;
constexpr size_t kV2ExtFixedLen = 40;  // eid_cnt .. reserved, before the UEIDs
// The v2 Accept/Confirm: the RFC's 64 bytes, the UEID and 8 reserved bytes
// (108 with the trailer), then with F the first-contact extension (52), then
// in a Confirm the GID list (4 + 16 per GID).
constexpr size_t kV2AcceptConfirmBase = 64 + kUeidLen + 8;        // 104
constexpr size_t kV2FirstContactLen = 52;
constexpr size_t kV2GidListFixedLen = 4;
constexpr size_t kMaxV2Gids = 8;

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

namespace {

void write_ip_area(WireWriter& w, const Proposal& p) {
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
}

std::vector<uint8_t> encode_v2(const Proposal& p) {
  const SmcrV2Offer& v2 = *p.v2;
  WireWriter w;
  const uint8_t type_v1 = p.offers_smcr_v1 ? kSmcTypeR : kSmcTypeN;
  write_header(w, Type::kProposal, static_cast<uint8_t>((kVersion2 << 4) | (kSmcTypeR << kTypeV2Shift) | type_v1));
  w.bytes(p.peer_id);
  w.bytes(p.gid);
  w.bytes(p.mac);
  const size_t ip_area_len =
      p.offers_smcr_v1 ? kIpAreaFixedLen + kIpv6PrefixLen * std::min(p.ipv6_prefixes.size(), kMaxIpv6Prefixes) : 0;
  w.be16(p.offers_smcr_v1 ? static_cast<uint16_t>(kSmcdAreaLen) : 0);  // the IP area follows the SMC-D area
  // SMC-D area: ISM GID and CHID (none), the extension's offset, reserved.
  w.zeros(kV2ExtOffsetField - kProposalFixedLen);
  w.be16(static_cast<uint16_t>(kProposalFixedLen + kSmcdAreaLen + ip_area_len - kV2ExtBase));
  w.zeros(kProposalFixedLen + kSmcdAreaLen - kV2ExtBase);
  if (p.offers_smcr_v1) write_ip_area(w, p);
  const size_t ueids = std::min(v2.ueids.size(), kMaxUeids);
  w.u8(static_cast<uint8_t>(ueids));
  w.u8(0);  // ISM GIDs
  w.u8(0);
  w.u8(static_cast<uint8_t>((v2.release << 4) | (v2.seid ? 1 : 0)));
  w.zeros(2);
  w.be16(0);  // no SMC-Dv2 extension
  w.bytes(v2.roce_gid);
  w.u8(v2.max_conns);
  w.u8(v2.max_links);
  w.be16(v2.feature_mask);
  w.zeros(12);
  for (size_t i = 0; i < ueids; ++i) w.bytes(v2.ueids[i]);
  return finish(w);
}

}  // namespace

std::vector<uint8_t> encode(const Proposal& p) {
  if (p.v2) return encode_v2(p);
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
  write_ip_area(w, p);
  return finish(w);
}

std::vector<uint8_t> encode(const AcceptConfirm& m) {
  WireWriter w;
  // F is reserved in a v1 Confirm (RFC A.2.4), so it is only ever sent in
  // Accept; Linux's v2 sets it in both, with the first-contact extension.
  const bool send_first_contact =
      m.v2 ? m.first_contact || m.v2->first_contact.has_value() : m.type == Type::kAccept && m.first_contact;
  write_header(w, m.type, static_cast<uint8_t>(((m.v2 ? kVersion2 : kVersion1) << 4) |
                                               (send_first_contact ? kFirstContactFlag : 0)));
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
  if (m.v2) {
    w.bytes(m.v2->eid);
    w.zeros(8);
    if (const auto& fce = m.v2->first_contact) {
      w.u8(fce->v2_direct ? 0x80 : 0);
      w.u8(static_cast<uint8_t>((fce->os_type << 4) | (fce->release & 0x0F)));
      w.zeros(2);
      w.bytes(fce->hostname);
      w.u8(fce->max_conns);
      w.u8(fce->max_links);
      w.be16(fce->feature_mask);
      w.zeros(12);  // vendor options, reserved
      if (m.type == Type::kConfirm) {
        const size_t n = std::min(m.v2->gids.size(), kMaxV2Gids);
        w.u8(static_cast<uint8_t>(n));
        w.zeros(3);
        for (size_t i = 0; i < n; ++i) w.bytes(m.v2->gids[i]);
      }
    }
  } else if (m.type == Type::kAccept && m.ece) {
    w.be32(kEceMagic);
    w.be32(m.ece->vendor_id);
    w.be32(m.ece->options);
  }
  return finish(w);
}

std::vector<uint8_t> encode(const Decline& d) {
  WireWriter w;
  const bool v2 = d.version >= kVersion2;
  write_header(w, Type::kDecline,
               static_cast<uint8_t>(((v2 ? kVersion2 : kVersion1) << 4) | (d.out_of_sync ? kOutOfSyncFlag : 0)));
  w.bytes(d.peer_id);
  w.be32(d.diagnosis);
  if (v2) {
    w.u8(static_cast<uint8_t>(d.os_type << 4));
    w.zeros(3 + 16);  // reserved, peer_diagnosis_v2[4]
  } else {
    w.zeros(4);
  }
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
  uint8_t type_v2 = kSmcTypeN;
  if (p.version == kVersion1) {
    p.offers_smcr_v1 = true;
  } else {
    const uint8_t type_v1 = header->flags & kTypeV1Mask;
    type_v2 = (header->flags >> kTypeV2Shift) & kTypeV1Mask;
    p.offers_smcr_v1 = type_v1 == kSmcTypeR || type_v1 == kSmcTypeB;
    has_ip_area = type_v1 != kSmcTypeN;
  }
  // SMC-D only (its eyecatcher): nothing of it is ours, and nothing more
  // need be read to decline it.
  if (header->smcd) {
    p.offers_smcr_v1 = false;
    return p;
  }
  const size_t body_end = bytes.size() - kTrailerLen;
  size_t parsed_end = kProposalFixedLen;  // where what we read ends
  if (has_ip_area) {
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
    parsed_end = ip_area_start + kIpAreaFixedLen + kIpv6PrefixLen * ipv6_count;
    // A v1 message is exactly header + fields + IP area + trailer.
    const bool length_ok = p.version == kVersion1 ? parsed_end == body_end : parsed_end <= body_end;
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
  }
  if (type_v2 == kSmcTypeR || type_v2 == kSmcTypeB) {
    // The SMCv2 extension, where the SMC-D area says, after the IP area,
    // checked as Linux checks it (smc_clc_msg_prop_valid): a message that
    // fails is malformed, not merely unsupported.
    if (kProposalFixedLen + kSmcdAreaLen > body_end) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    r.seek(kV2ExtOffsetField);
    const uint16_t ext_offset = r.be16();
    if (ext_offset < 1 || ext_offset > kV2ExtOffsetMax) {
      fail(err, DecodeError::kBadField);
      return std::nullopt;
    }
    const size_t ext_start = kV2ExtBase + ext_offset;
    if (ext_start < std::max(parsed_end, kProposalFixedLen + kSmcdAreaLen) || ext_start + kV2ExtFixedLen > body_end) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    r.seek(ext_start);
    SmcrV2Offer v2;
    const uint8_t eid_count = r.u8();
    r.skip(2);  // ISM GIDs (SMC-D), reserved
    const uint8_t flag = r.u8();
    v2.release = flag >> 4;
    v2.seid = flag & 0x01;
    r.skip(4);  // reserved, the SMC-Dv2 extension's offset
    v2.roce_gid = r.bytes<16>();
    v2.max_conns = r.u8();
    v2.max_links = r.u8();
    v2.feature_mask = r.be16();
    r.skip(12);
    if (eid_count > kMaxUeids) {
      fail(err, DecodeError::kBadField);
      return std::nullopt;
    }
    parsed_end = ext_start + kV2ExtFixedLen + kUeidLen * eid_count;
    // SMC-D's parts may follow when it is offered too; otherwise nothing.
    const bool smcd_too = type_v2 == kSmcTypeB;
    if (smcd_too ? parsed_end > body_end : parsed_end != body_end) {
      fail(err, DecodeError::kBadLength);
      return std::nullopt;
    }
    for (uint8_t i = 0; i < eid_count; ++i) v2.ueids.push_back(r.bytes<kUeidLen>());
    p.v2 = std::move(v2);
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
  // Version 1 is exactly 68 bytes; Linux v2 Accept/Confirm keep the RFC
  // fields in bytes 8-63 and add the UEID (108 bytes at least, as Linux
  // checks), then with F the first-contact extension; bytes past what we
  // know are skipped. An smcr Accept may carry the agreed ECE in 12 more
  // bytes (see clc.h).
  const bool ece_length = expected == Type::kAccept && header->length == kAcceptConfirmLen + kEceBlockLen;
  if (header->version == kVersion1 ? header->length != kAcceptConfirmLen && !ece_length
                                   : header->length < kV2AcceptConfirmBase + kTrailerLen) {
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
  if (header->version >= kVersion2) {
    const size_t body_end = bytes.size() - kTrailerLen;
    AcceptConfirmV2 v2;
    v2.eid = r.bytes<kUeidLen>();
    r.skip(8);
    if (m.first_contact && body_end >= kV2AcceptConfirmBase + kV2FirstContactLen) {
      FirstContactV2 fce;
      fce.v2_direct = r.u8() & 0x80;
      const uint8_t os_release = r.u8();
      fce.os_type = os_release >> 4;
      fce.release = os_release & 0x0F;
      r.skip(2);
      fce.hostname = r.bytes<32>();
      fce.max_conns = r.u8();
      fce.max_links = r.u8();
      fce.feature_mask = r.be16();
      r.skip(12);
      v2.first_contact = fce;
      const size_t list_start = kV2AcceptConfirmBase + kV2FirstContactLen;
      if (expected == Type::kConfirm && body_end >= list_start + kV2GidListFixedLen) {
        const uint8_t count = r.u8();
        r.skip(3);
        if (count > kMaxV2Gids || list_start + kV2GidListFixedLen + 16 * size_t{count} > body_end) {
          fail(err, count > kMaxV2Gids ? DecodeError::kBadField : DecodeError::kBadLength);
          return std::nullopt;
        }
        for (uint8_t i = 0; i < count; ++i) v2.gids.push_back(r.bytes<16>());
      }
    }
    m.v2 = std::move(v2);
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
  // the trailer); the v1 fields keep their RFC offsets. Linux takes exactly
  // these two lengths.
  const bool length_ok = header->length == (header->version == kVersion1 ? kDeclineLen : kDeclineV2Len);
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
  d.version = header->version >= kVersion2 ? kVersion2 : kVersion1;
  if (d.version == kVersion2) d.os_type = r.u8() >> 4;
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
    case decline::kNoUeid: return "no common UEID (SMC-Rv2)";
    case decline::kReleaseError: return "SMC-Rv2 release mismatch";
    case decline::kMaxConnsError: return "SMC-Rv2 max_conns out of range";
    case decline::kMaxLinksError: return "SMC-Rv2 max_links out of range";
    case decline::kModeUnsupported: return "SMC mode unsupported";
    case decline::kRmbeEyecatcher: return "RMBE eyecatcher mode mismatch";
    case decline::kOptionUnsupported: return "option unsupported";
    case decline::kDifferentPrefix: return "no common subnet or prefix";
    case decline::kNoActiveLink: return "no active link";
    case decline::kSyncError: return "link group out of sync";
    case decline::kPeerDeclined: return "peer declined";
    case decline::kInternalError: return "internal error";
    case decline::kRtokenError: return "RToken error";
    case decline::kRegisterBufferError: return "RMB registration (CONFIRM RKEY) failed";
    case decline::kProtocolError: return "CLC protocol error";
    case decline::kHandshakeTimeout: return "CLC handshake timeout";
  }
  return "unknown";
}

}  // namespace smcr::clc
