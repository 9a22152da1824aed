// SMC-Rv2 negotiation with a Linux AF_SMC peer
// (../shared/spec/SMC-Rv2-LINUX.md sections 3, 4 and 8): which UEIDs we
// share, what our Proposal offers, and whether an Accept's or a Proposal's
// v2 limits are ones we take. The wire layouts are clc.h's; the LLC side is
// llc.h's v2 namespace and LinkGroup::set_linux_v2.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clc.h"

namespace smcr::v2 {

// What we offer and accept. max_links 1: a version-2 group keeps one link
// (Linux then runs no ADD LINK at all; we reject one that comes anyway).
inline constexpr uint8_t kMaxConns = 255;
inline constexpr uint8_t kMaxLinks = 1;
// Linux's lower bounds for the negotiated values (release >= 1).
inline constexpr uint8_t kMinMaxConns = 16;
inline constexpr uint8_t kLinuxMaxLinks = 2;

// A UEID list as SMCR_UEID takes it: comma- or space-separated, at most 8,
// each 1..32 characters of A-Z, 0-9, '.' and '-', starting with a letter
// or digit (Linux's smc_clc_ueid_valid), space-padded to 32 bytes. Nullopt
// with `why` set when any is invalid.
std::optional<std::vector<clc::Ueid>> parse_ueids(std::string_view list, std::string* why);

// SMCR_UEID, read once (an invalid value is logged and offers nothing).
// Without a UEID we neither offer nor accept SMC-Rv2, as Linux.
const std::vector<clc::Ueid>& configured_ueids();

// Our nodename as the first-contact extension carries it: ASCII,
// space-padded to 32 (a name with other bytes is sent as spaces: Linux
// keeps a hostname only if it is all ASCII).
std::array<uint8_t, 32> hostname_field();

// ::ffff:a.b.c.d, the only GIDs Linux routes SMC-Rv2 over.
bool ipv4_mapped(const clc::Gid& gid);

// Our Proposal's SMC-Rv2 offer for a link from `roce_gid`, or nullopt when
// we have none to make (no UEID, or a GID that is not IPv4-mapped).
std::optional<clc::SmcrV2Offer> client_offer(const clc::Gid& roce_gid);

// Client: a version-2 Accept's limits, as Linux's client checks them
// (release >= 1: max_conns >= 16, max_links 1..2). 0 when we take it, else
// the Decline code.
uint32_t check_accept(const clc::AcceptConfirm& acc);

// Client: the version-2 part of our Confirm, echoing the Accept's UEID and
// (first contact) its release and limits, with our hostname and GID.
clc::AcceptConfirmV2 confirm_for(const clc::AcceptConfirm& acc, const clc::Gid& our_gid);

// Server: what we answer a Proposal's SMC-Rv2 offer with, as Linux's
// server decides it (smc_listen_v2_check, smc_clc_srv_v2x_features_validate,
// smc_clc_match_eid): the first proposed UEID we have, release
// min(theirs, 1), and with release >= 1 the smaller limits.
struct ServerTerms {
  clc::Ueid eid{};
  uint8_t release = 0;
  uint8_t max_conns = 0;  // 0 with release 0 (Linux then implies 255 and 2)
  uint8_t max_links = 0;
};
// 0 with *terms set, or the Decline code: kNoUeid (none offered),
// kMaxConnsError / kMaxLinksError, kNoSmcDevice (no UEID in common).
uint32_t negotiate(const clc::SmcrV2Offer& offer, ServerTerms* terms);
// The first-contact extension of our Accept for `terms`.
clc::FirstContactV2 accept_extension(const ServerTerms& terms);
// Server: a first-contact Confirm must echo our release and limits (Linux:
// smc_clc_v2x_features_confirm_check). 0, or the Decline code.
uint32_t check_confirm(const clc::AcceptConfirm& conf, const ServerTerms& terms);

// The limits a group negotiated in CLC, as its CONFIRM LINK carries them
// (release 0: Linux's implied 255 connections and 2 links).
struct GroupLimits {
  uint8_t max_conns = kMaxConns;
  uint8_t max_links = kLinuxMaxLinks;
};
GroupLimits limits_of(const clc::AcceptConfirmV2& v2);

}  // namespace smcr::v2
