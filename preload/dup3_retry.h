// dup3 onto a number the application holds, when the shim replaces what is
// there (a reset socket, end-of-file in place of a connection it cannot
// pass on).
#pragma once

#include <errno.h>
#include <sched.h>

#include "core/sys.h"

namespace smcr::preload {

// sys::dup3, retried as the takeover's take_number() (preload/takeover.cc)
// retries it: EINTR, and EBUSY, which is another thread's open() between
// taking `newfd` and installing its file (it passes). Otherwise -1 with
// errno: `newfd` still refers to what it did.
inline int dup3_retrying(int oldfd, int newfd, int flags) {
  for (int tries = 0;; ++tries) {
    int rc = smcr::sys::dup3(oldfd, newfd, flags);
    if (rc >= 0 || (errno != EINTR && errno != EBUSY) || tries >= 1000) return rc;
    sched_yield();
  }
}

}  // namespace smcr::preload
