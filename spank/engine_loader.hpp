// numabind SPANK plugin front: finds and loads the step engine (stepd_api.h) beside itself.
#pragma once

#include <string>

#include "stepd_api.h"

namespace numabind::spank {

// The engine beside this plugin file, loaded once per process (RTLD_NOW | RTLD_LOCAL);
// null with `error` set to one line when it is missing, not trustworthy (not a regular
// file, writable by group or others, or owned by someone else than the plugin or root),
// fails to load, or comes from another build.
const numabind_stepd_api* load_stepd_engine(std::string& error);

}  // namespace numabind::spank
