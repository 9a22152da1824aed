#include "core/smc_v2.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/env.h"
#include "core/log.h"

namespace smcr::v2 {

namespace {

bool ueid_char(char c, bool first) {
  if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return !first && (c == '.' || c == '-');
}

}  // namespace

std::optional<std::vector<clc::Ueid>> parse_ueids(std::string_view list, std::string* why) {
  std::vector<clc::Ueid> out;
  size_t i = 0;
  while (i < list.size()) {
    if (list[i] == ',' || list[i] == ' ') {
      ++i;
      continue;
    }
    size_t end = list.find_first_of(", ", i);
    if (end == std::string_view::npos) end = list.size();
    std::string_view name = list.substr(i, end - i);
    i = end;
    if (name.size() > clc::kUeidLen) {
      if (why) *why = "UEID longer than 32 characters: " + std::string(name);
      return std::nullopt;
    }
    for (size_t k = 0; k < name.size(); ++k) {
      if (!ueid_char(name[k], k == 0)) {
        if (why) *why = "UEID with a character other than A-Z 0-9 . - (or not starting with A-Z 0-9): " + std::string(name);
        return std::nullopt;
      }
    }
    clc::Ueid u;
    u.fill(' ');
    std::memcpy(u.data(), name.data(), name.size());
    if (std::find(out.begin(), out.end(), u) != out.end()) continue;
    if (out.size() == clc::kMaxUeids) {
      if (why) *why = "more than 8 UEIDs";
      return std::nullopt;
    }
    out.push_back(u);
  }
  return out;
}

const std::vector<clc::Ueid>& configured_ueids() {
  static const std::vector<clc::Ueid> ueids = [] {
    const char* v = env("SMCR_UEID");
    if (!v || !*v) return std::vector<clc::Ueid>{};
    std::string why;
    auto parsed = parse_ueids(v, &why);
    if (!parsed) {
      SMCR_LOG(0, "SMCR_UEID ignored (no SMC-Rv2): %s", why.c_str());
      return std::vector<clc::Ueid>{};
    }
    return *parsed;
  }();
  return ueids;
}

std::array<uint8_t, 32> hostname_field() {
  std::array<uint8_t, 32> out;
  out.fill(' ');
  utsname u{};
  if (uname(&u) != 0) return out;
  size_t n = strnlen(u.nodename, sizeof u.nodename);
  for (size_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(u.nodename[i]) < 0x20 || static_cast<unsigned char>(u.nodename[i]) > 0x7e) return out;
  std::memcpy(out.data(), u.nodename, std::min(n, out.size()));
  return out;
}

bool ipv4_mapped(const clc::Gid& gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.data(), kPrefix, sizeof kPrefix) == 0;
}

std::optional<clc::SmcrV2Offer> client_offer(const clc::Gid& roce_gid) {
  const auto& ueids = configured_ueids();
  if (ueids.empty() || !ipv4_mapped(roce_gid)) return std::nullopt;
  clc::SmcrV2Offer o;
  o.release = clc::kV2Release;
  o.roce_gid = roce_gid;
  o.max_conns = kMaxConns;
  // SMCR_TEST_V2_MAX_LINKS=2 (tests only): offer a second link, so that a
  // Linux server runs ADD LINK and the group's reject is exercised.
  static const uint8_t offered_links = static_cast<uint8_t>(env_long("SMCR_TEST_V2_MAX_LINKS", kMaxLinks, 1, 2));
  o.max_links = offered_links;
  o.feature_mask = 0;  // the one feature bit (emulated ISM) is SMC-D's
  o.ueids = ueids;
  return o;
}

uint32_t check_accept(const clc::AcceptConfirm& acc) {
  if (!acc.v2 || !acc.first_contact || !acc.v2->first_contact) return 0;
  const clc::FirstContactV2& fce = *acc.v2->first_contact;
  if (fce.release < 1) return 0;
  if (fce.max_conns < kMinMaxConns) return clc::decline::kMaxConnsError;
  if (fce.max_links < 1 || fce.max_links > kLinuxMaxLinks) return clc::decline::kMaxLinksError;
  return 0;
}

clc::AcceptConfirmV2 confirm_for(const clc::AcceptConfirm& acc, const clc::Gid& our_gid) {
  clc::AcceptConfirmV2 c;
  c.eid = acc.v2 ? acc.v2->eid : clc::Ueid{};
  if (acc.first_contact) {
    clc::FirstContactV2 fce;
    if (acc.v2 && acc.v2->first_contact) {
      const clc::FirstContactV2& theirs = *acc.v2->first_contact;
      fce.v2_direct = theirs.v2_direct;
      fce.release = theirs.release;  // Linux's server declines any other (RELEASEERR)
      fce.max_conns = theirs.max_conns;
      fce.max_links = theirs.max_links;
    } else {
      fce.release = 0;
    }
    fce.os_type = clc::kOsLinux;
    fce.hostname = hostname_field();
    fce.feature_mask = 0;
    c.first_contact = fce;
    c.gids = {our_gid};
  }
  return c;
}

uint32_t negotiate(const clc::SmcrV2Offer& offer, ServerTerms* terms) {
  if (offer.ueids.empty()) return clc::decline::kNoUeid;
  ServerTerms t;
  t.release = std::min(offer.release, clc::kV2Release);
  if (t.release >= 1) {
    t.max_conns = std::min(offer.max_conns, kMaxConns);
    if (t.max_conns < kMinMaxConns) return clc::decline::kMaxConnsError;
    t.max_links = std::min(offer.max_links, kMaxLinks);
    if (t.max_links < 1) return clc::decline::kMaxLinksError;
  }
  const auto& ours = configured_ueids();
  for (const clc::Ueid& u : offer.ueids) {
    if (std::find(ours.begin(), ours.end(), u) == ours.end()) continue;
    t.eid = u;
    *terms = t;
    return 0;
  }
  return clc::decline::kNoSmcDevice;
}

clc::FirstContactV2 accept_extension(const ServerTerms& terms) {
  clc::FirstContactV2 fce;
  fce.v2_direct = true;  // we route no RoCE v2 through a gateway
  fce.os_type = clc::kOsLinux;
  fce.release = terms.release;
  fce.hostname = hostname_field();
  fce.max_conns = terms.max_conns;
  fce.max_links = terms.max_links;
  fce.feature_mask = 0;
  return fce;
}

uint32_t check_confirm(const clc::AcceptConfirm& conf, const ServerTerms& terms) {
  // Without F or its extension Linux skips the check too (and learns no
  // hostname); a client that echoes something else is declined.
  if (!conf.v2 || !conf.first_contact || !conf.v2->first_contact) return 0;
  const clc::FirstContactV2& fce = *conf.v2->first_contact;
  if (fce.release != terms.release) return clc::decline::kReleaseError;
  if (terms.release >= 1 && fce.max_conns != terms.max_conns) return clc::decline::kMaxConnsError;
  if (terms.release >= 1 && fce.max_links != terms.max_links) return clc::decline::kMaxLinksError;
  return 0;
}

GroupLimits limits_of(const clc::AcceptConfirmV2& v2) {
  GroupLimits l;
  if (v2.first_contact && v2.first_contact->release >= 1) {
    l.max_conns = v2.first_contact->max_conns;
    l.max_links = v2.first_contact->max_links;
  }
  return l;
}

}  // namespace smcr::v2
