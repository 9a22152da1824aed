// Byte vectors written as hex text (non-hex characters such as spaces and
// newlines are ignored), so tests can quote byte dumps readably.
#pragma once

#include <cctype>
#include <cstdint>
#include <string_view>
#include <vector>

namespace smcr::test {

inline std::vector<uint8_t> hex(std::string_view text) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char ch : text) {
    if (!std::isxdigit(static_cast<unsigned char>(ch))) continue;
    const int nibble = std::isdigit(static_cast<unsigned char>(ch))
                           ? ch - '0'
                           : std::tolower(static_cast<unsigned char>(ch)) - 'a' + 10;
    if (high < 0) {
      high = nibble;
    } else {
      out.push_back(static_cast<uint8_t>(high << 4 | nibble));
      high = -1;
    }
  }
  return out;
}

}  // namespace smcr::test
