// numabind SPANK plugin: what a step or task that cannot be bound as asked does, for the
// front and the step engine alike (fallback= in plugstack.conf).
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "policy/config.hpp"

namespace numabind::spank {

// fallback=fail: `line` + " (fallback=fail)" to Slurm's error log and -1 (Slurm fails the
// task); a caller that does not `say` it waits briefly instead, so that the one who does is
// heard before Slurm's own failure lines. fallback=warn: the task runs unbound
// (NUMABIND_MODE=none, no other NUMABIND_*) and "warning: " + `line` + "; running unbound
// (fallback=warn)" goes to its stderr. `line` is whole at the caller ("node n1: why").
int fall_back(spank_t sp, Fallback fallback, bool say, const std::string& line);

}  // namespace numabind::spank
