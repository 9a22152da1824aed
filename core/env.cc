#include "core/env.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace smcr {

namespace {

std::once_flag g_once;
std::vector<std::pair<std::string, std::string>>* g_vars = nullptr;

void take() {
  // Never freed: read until the process ends, from any thread.
  auto* vars = new std::vector<std::pair<std::string, std::string>>();
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "SMCR_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    vars->emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  g_vars = vars;
}

}  // namespace

void snapshot_env() { std::call_once(g_once, take); }

const char* env(const char* name) {
  snapshot_env();
  for (const auto& [k, v] : *g_vars)
    if (k == name) return v.c_str();
  return nullptr;
}

long env_long(const char* name, long fallback, long lo, long hi) {
  const char* v = env(name);
  return std::clamp(v ? strtol(v, nullptr, 10) : fallback, lo, hi);
}

}  // namespace smcr
