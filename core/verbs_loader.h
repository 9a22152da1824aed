// rdma-core's libibverbs is loaded when the verbs fabric is first wanted, not
// when the shim is: an application container without rdma-core still runs
// the shim (shm fabric, TCP fallback). core/verbs_loader.cc defines the
// ibv_* functions the verbs fabric calls, hidden inside the shim, as
// forwarders to the library it opens with dlopen.
#pragma once

#include <string>

namespace smcr {

// Opens libibverbs.so.1 and resolves every function the verbs fabric uses,
// once per process. False, with the reason, when rdma-core is not installed
// or lacks one of them (an rdma-core older than 1.11's GID table calls).
bool verbs_library_loaded(std::string* why = nullptr);

}  // namespace smcr
