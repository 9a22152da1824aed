// Which connections may use SMC-R: an operator's policy, from a file
// (SMCR_POLICY) and/or inline rules (SMCR_POLICY_RULES, evaluated first).
//
//   # comment
//   deny  port 22                      keep ssh on TCP
//   allow port 6379,8000-8099
//   deny  addr 10.1.0.0/16             peers in that subnet stay on TCP
//   allow program redis-server port 6379
//   default deny                       what happens when no rule matches
//
// A rule is allow|deny with any of: port LIST (N or N-M, comma separated),
// addr ADDRESS[/PREFIX] (IPv4 or IPv6), program NAME. All selectors given
// must match; the first matching rule decides; without rules everything is
// allowed. "port" is the server's port of the connection (the remote port
// for connect(), the local port for accept()), "addr" the peer's address,
// "program" the program's name (argv[0]'s or the executable's basename).
// A malformed policy is an error naming the line: smc_run refuses to start.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace smcr::policy {

struct AddressPrefix {
  int family = 0;                  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 in the first 4
  int prefix_len = 0;
};

struct Rule {
  bool allow = true;
  std::vector<std::pair<uint16_t, uint16_t>> ports;  // empty: any port
  std::optional<AddressPrefix> addr;
  std::string program;                               // empty: any program
  std::string origin;                                // "file:line", for logs
};

struct Policy {
  std::vector<Rule> rules;
  bool default_allow = true;
};

// Parses rules from `text` (lines, or ';'-separated when `semicolons`),
// appending to `into`. On error returns false with "<origin>:<line>: why".
bool parse(std::string_view text, std::string_view origin, bool semicolons, Policy* into, std::string* error);

// The decision for a connection. `peer` may be null (not known yet: a
// listener) - see may_allow.
bool allows(const Policy& p, uint16_t port, const sockaddr* peer, std::string_view program,
            std::string_view program_alt = {});
// For a listener (peer unknown): could any peer be allowed on this port?
bool may_allow(const Policy& p, uint16_t port, std::string_view program, std::string_view program_alt = {});

// The process's policy from SMCR_POLICY_RULES and the SMCR_POLICY file as
// they were at load time (see env.h); null when neither is set. `error` is
// set (and null returned) when they do not parse.
const Policy* active(std::string* error = nullptr);
// The program's names, for "program" selectors: argv[0]'s basename and the
// executable's.
std::string_view program_name();
std::string_view executable_name();

}  // namespace smcr::policy
