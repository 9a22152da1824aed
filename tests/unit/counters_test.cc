// The counters' text (the --stats file, and what an exec carries into the
// new program: core/exec_carry.h) read back into the counters.
#include <gtest/gtest.h>

#include <string>

#include "core/log.h"

namespace smcr {
namespace {

uint64_t value_of(const std::string& text, const std::string& key) {
  size_t at = text.find("\n" + key + " ");
  if (at == std::string::npos && text.rfind(key + " ", 0) == 0) at = 0;
  else if (at != std::string::npos) ++at;
  if (at == std::string::npos) return ~uint64_t{0};
  return std::stoull(text.substr(at + key.size() + 1));
}

TEST(Counters, TextAddsBackIntoTheCounters) {
  Counters& c = counters();
  c.smc_passive.fetch_add(3);
  c.adopted.fetch_add(2);
  c.exec_carried.fetch_add(1);
  count_fallback(Fallback::kTimeout);
  const std::string before = format_counters();
  add_counters(before.c_str());
  const std::string after = format_counters();
  for (const char* key : {"smc_passive", "adopted", "exec_carried", "fallback.timeout", "fallback_total"})
    EXPECT_EQ(value_of(after, key), 2 * value_of(before, key)) << key;
  EXPECT_GE(value_of(after, "smc_passive"), 6u);
}

TEST(Counters, UnknownAndMalformedLinesChangeNothing) {
  const std::string before = format_counters();
  add_counters("no_such_counter 5\nsmc_active\ngarbage");
  add_counters("");
  EXPECT_EQ(format_counters(), before);
}

TEST(Counters, EveryLineHasANameAndANumber) {
  const std::string text = format_counters();
  size_t lines = 0;
  for (size_t start = 0; start < text.size();) {
    size_t eol = text.find('\n', start);
    ASSERT_NE(eol, std::string::npos);
    std::string line = text.substr(start, eol - start);
    size_t space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_EQ(line.find_first_not_of("0123456789", space + 1), std::string::npos) << line;
    ++lines;
    start = eol + 1;
  }
  EXPECT_GT(lines, 30u);
}

}  // namespace
}  // namespace smcr
