// numabind SPANK plugin front: finds and loads the step engine (stepd_api.h) beside itself.
#pragma once

#include <string>

#include "shared/stepd_api.h"

namespace numabind::spank {

// The engine beside this plugin's real file (symlinks resolved), loaded once per process
// (RTLD_NOW | RTLD_LOCAL) through the descriptor that was checked (/proc/self/fd/N, so no
// check-then-use race); null with `error` set to one line when it is missing, not
// trustworthy (not a regular file or a symlink, writable by group or others, owned by
// someone else than root; or a directory from / down to it that is not root's or is
// writable by group or others without the sticky bit), fails to load, or comes from another
// build. SECURITY.md states the rule.
const numabind_stepd_api* load_stepd_engine(std::string& error);

}  // namespace numabind::spank
