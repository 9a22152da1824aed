#include "core/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/env.h"
#include "core/sys.h"

extern char* program_invocation_short_name;

namespace smcr::policy {

namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parse_u16(std::string_view s, uint16_t* out) {
  if (s.empty() || s.size() > 5) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

bool parse_ports(std::string_view s, std::vector<std::pair<uint16_t, uint16_t>>* out) {
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    if (comma != std::string_view::npos && s.empty()) return false;  // trailing comma
    size_t dash = item.find('-');
    uint16_t lo, hi;
    if (dash == std::string_view::npos) {
      if (!parse_u16(item, &lo)) return false;
      hi = lo;
    } else if (!parse_u16(item.substr(0, dash), &lo) || !parse_u16(item.substr(dash + 1), &hi) || lo > hi) {
      return false;
    }
    out->emplace_back(lo, hi);
  }
  return !out->empty();
}

bool parse_prefix(std::string_view s, AddressPrefix* out) {
  size_t slash = s.find('/');
  std::string addr(s.substr(0, slash));
  if (inet_pton(AF_INET, addr.c_str(), out->bytes.data()) == 1) {
    out->family = AF_INET;
    out->prefix_len = 32;
  } else if (inet_pton(AF_INET6, addr.c_str(), out->bytes.data()) == 1) {
    out->family = AF_INET6;
    out->prefix_len = 128;
  } else {
    return false;
  }
  if (slash != std::string_view::npos) {
    uint16_t len;
    if (!parse_u16(s.substr(slash + 1), &len) || len > out->prefix_len) return false;
    out->prefix_len = len;
  }
  return true;
}

bool prefix_matches(const AddressPrefix& p, const sockaddr* peer) {
  if (!peer) return false;
  std::array<uint8_t, 16> a{};
  int family = peer->sa_family;
  if (family == AF_INET) {
    std::memcpy(a.data(), &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr, 4);
  } else if (family == AF_INET6) {
    const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
    if (p.family == AF_INET && IN6_IS_ADDR_V4MAPPED(a6)) {  // ::ffff:a.b.c.d is that IPv4 peer
      std::memcpy(a.data(), a6->s6_addr + 12, 4);
      family = AF_INET;
    } else {
      std::memcpy(a.data(), a6->s6_addr, 16);
    }
  } else {
    return false;
  }
  if (family != p.family) return false;
  int full = p.prefix_len / 8, rest = p.prefix_len % 8;
  if (std::memcmp(a.data(), p.bytes.data(), static_cast<size_t>(full)) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (a[static_cast<size_t>(full)] & mask) == (p.bytes[static_cast<size_t>(full)] & mask);
}

bool port_matches(const Rule& r, uint16_t port) {
  if (r.ports.empty()) return true;
  for (auto [lo, hi] : r.ports)
    if (port >= lo && port <= hi) return true;
  return false;
}

bool program_matches(const Rule& r, std::string_view a, std::string_view b) {
  return r.program.empty() || r.program == a || (!b.empty() && r.program == b);
}

}  // namespace

bool parse(std::string_view text, std::string_view origin, bool semicolons, Policy* into, std::string* error) {
  int line_no = 0;
  while (!text.empty() || line_no == 0) {
    ++line_no;
    size_t end = text.find(semicolons ? ';' : '\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto w = words(line);
    auto fail = [&](const std::string& why) {
      if (error) *error = std::string(origin) + ":" + std::to_string(line_no) + ": " + why;
      return false;
    };
    if (w.empty()) {
      if (text.empty()) break;
      continue;
    }
    if (w[0] == "default") {
      if (w.size() != 2 || (w[1] != "allow" && w[1] != "deny")) return fail("expected 'default allow' or 'default deny'");
      into->default_allow = w[1] == "allow";
      continue;
    }
    if (w[0] != "allow" && w[0] != "deny")
      return fail("unknown keyword '" + std::string(w[0]) + "' (expected allow, deny or default)");
    Rule r;
    r.allow = w[0] == "allow";
    r.origin = std::string(origin) + ":" + std::to_string(line_no);
    bool seen_port = false, seen_addr = false, seen_program = false;
    for (size_t i = 1; i < w.size(); i += 2) {
      if (i + 1 >= w.size()) return fail("'" + std::string(w[i]) + "' needs a value");
      std::string_view key = w[i], value = w[i + 1];
      if (key == "port") {
        if (seen_port) return fail("port given twice in one rule");
        seen_port = true;
        if (!parse_ports(value, &r.ports)) return fail("bad port list '" + std::string(value) + "' (N or N-M, comma separated, 0..65535)");
      } else if (key == "addr") {
        if (seen_addr) return fail("addr given twice in one rule");
        seen_addr = true;
        AddressPrefix p;
        if (!parse_prefix(value, &p)) return fail("bad address '" + std::string(value) + "' (IPv4 or IPv6, optional /prefix)");
        r.addr = p;
      } else if (key == "program") {
        if (seen_program) return fail("program given twice in one rule");
        seen_program = true;
        r.program = std::string(value);
      } else {
        return fail("unknown selector '" + std::string(key) + "' (expected port, addr or program)");
      }
    }
    into->rules.push_back(std::move(r));
  }
  return true;
}

bool allows(const Policy& p, uint16_t port, const sockaddr* peer, std::string_view program, std::string_view program_alt) {
  for (const Rule& r : p.rules) {
    if (!port_matches(r, port) || !program_matches(r, program, program_alt)) continue;
    if (r.addr && !prefix_matches(*r.addr, peer)) continue;
    return r.allow;
  }
  return p.default_allow;
}

bool may_allow(const Policy& p, uint16_t port, std::string_view program, std::string_view program_alt) {
  for (const Rule& r : p.rules) {
    if (!port_matches(r, port) || !program_matches(r, program, program_alt)) continue;
    // A rule about some peers: those may be allowed (allow) or not (deny:
    // others go on to the next rules).
    if (r.addr) {
      if (r.allow) return true;
      continue;
    }
    return r.allow;
  }
  return p.default_allow;
}

namespace {

struct Loaded {
  bool present = false;
  Policy policy;
  std::string error;
};

Loaded load() {
  Loaded l;
  const char* rules = env("SMCR_POLICY_RULES");
  const char* file = env("SMCR_POLICY");
  if ((!rules || !*rules) && (!file || !*file)) return l;
  l.present = true;
  if (rules && *rules && !parse(rules, "SMCR_POLICY_RULES", true, &l.policy, &l.error)) return l;
  if (file && *file) {
    int fd = static_cast<int>(smcr::sys::raw_syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
      l.error = std::string(file) + ": cannot open: " + strerror(errno);
      return l;
    }
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = sys::read(fd, buf, sizeof buf)) > 0 && text.size() < (1 << 20)) text.append(buf, static_cast<size_t>(n));
    sys::close(fd);
    parse(text, file, false, &l.policy, &l.error);
  }
  return l;
}

}  // namespace

const Policy* active(std::string* error) {
  static const Loaded* loaded = new Loaded(load());
  if (!loaded->error.empty()) {
    if (error) *error = loaded->error;
    return nullptr;
  }
  return loaded->present ? &loaded->policy : nullptr;
}

std::string_view program_name() {
  static const std::string name = program_invocation_short_name ? program_invocation_short_name : "";
  return name;
}

std::string_view executable_name() {
  static const std::string name = [] {
    char path[4096];
    ssize_t n = smcr::sys::raw_syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return std::string();
    std::string s(path, static_cast<size_t>(n));
    size_t slash = s.rfind('/');
    return slash == std::string::npos ? s : s.substr(slash + 1);
  }();
  return name;
}

}  // namespace smcr::policy
