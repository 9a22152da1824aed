// The preload half of carrying SMC-R connections across exec (core/
// exec_carry.h): before the exec, the connections to carry are held and
// written down; in the new program, before main(), they are installed at
// the application's numbers.
#pragma once

#include <utility>
#include <vector>

#include "core/connection.h"
#include "preload/exec_inherit.h"

namespace smcr::preload::exec_carry {

// SMCR_EXEC_CARRY=0 turns it off (inherited connections are relayed).
bool enabled();

// Whether the program an exec starts will load this shim and can take
// connections over: `envp` preloads this very library, and the file (found
// on PATH when `search_path`; or the descriptor `fd` for fexecve) is a
// dynamically linked ELF, or a script whose interpreter is, that does not
// run set-user-ID or set-group-ID for us. A static program, or one whose
// environment drops the preload, gets the earlier relay instead.
// kMissing: there is no such program (the exec will fail: nothing may be
// done to the connections, execvp tries the next directory).
enum class NewProgram { kMissing, kWithoutShim, kWithShim };
NewProgram new_program(const char* file, bool search_path, int fd, char* const envp[]);

// Before this process forks (fork, posix_spawn): a carried connection its
// children may use is relayed from here on (Connection::relay_here), its
// descriptors plain streams in this process and its children.
void before_fork();

// At load: takes over the connections SMCR_EXEC_SMC names, and removes it.
void adopt_from_environment();
// The process that spawned this program gave it a connection (core/exec_carry.h, "take"): taken over as a carried
// one. False (everything of it closed) if it cannot be.
bool adopt_taken(const smcr::exec_carry::Record& r);

// Before an exec: `carry` are the application's numbers that survive it and
// their connections (referenced; the references are consumed), each
// exec_carriable() and owned by this process. Those that can be carried are
// held and named in env->carry_variable, until the exec replaces the
// process or exec_failed() gives them back.
void prepare(const std::vector<std::pair<int, Connection*>>& carry, exec_inherit::ExecEnvironment* env);
// The exec failed: the connections go on here.
void exec_failed(exec_inherit::ExecEnvironment* env);

}  // namespace smcr::preload::exec_carry
