// What the verbs fabric's two sources share, and nothing else includes:
// core/verbs_device.cc (devices, GIDs, port choice, ECE, counters, async
// events) and core/fabric_verbs.cc (VerbsLink). The fabric's declarations
// are in core/fabric_verbs.h. Needs rdma-core's verbs.h (SMCR_HAVE_VERBS).
#pragma once

#include <infiniband/verbs.h>

#include <cstring>
#include <optional>
#include <string>

#include "core/clc.h"
#include "core/fabric_verbs.h"

namespace smcr {

static_assert(IBV_MTU_256 == 1 && IBV_MTU_4096 == 5, "ibv_mtu values are the RFC 7609 MTU codes");

namespace verbs_internal {

inline void set_why(std::string* why, const std::string& s) {
  if (why) *why = s;
}

inline std::string errstr(int e) { return std::string(strerror(e)); }

std::string gid_to_string(const clc::Gid& g);

// Records what a QP created on `device` reported for ECE (nullopt:
// unsupported), for verbs_device_ece.
void note_device_ece(const std::string& device, const std::optional<VerbsEce>& ece);

}  // namespace verbs_internal
}  // namespace smcr
