// SMCR_* settings as the process had them when the shim was loaded. Servers
// such as nginx clear their environment before they start their workers
// (only variables named by `env` directives survive), and the engine reads
// most settings lazily, in whichever process first needs them: reading the
// load-time snapshot keeps a worker configured like its master.
#pragma once

namespace smcr {

// The value of an SMCR_* variable at load time, or null.
const char* env(const char* name);
// An integer SMCR_* setting: `fallback` when unset, clamped to [lo, hi].
long env_long(const char* name, long fallback, long lo, long hi);
// Takes the snapshot now (the shim's constructor); later calls do nothing.
void snapshot_env();

}  // namespace smcr
