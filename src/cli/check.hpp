// `numabind check`: numabind's view of this node against every independent source present
// (sysfs, procfs, nvidia-smi, rocm-smi, Slurm's configuration, the kernel) and a plugstack
// line parsed by the plugin's own parser. One OK/WARN/FAIL table with the fix per row.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace numabind::check {

struct CheckOptions {
    bool json = false;
    std::string plugstack;       // one plugstack.conf line
    std::string plugstack_file;  // a plugstack.conf (include lines followed)
    std::string topology;        // hwloc XML standing for this node
};

// Registers `check` on the numabind command.
CLI::App* add_check_command(CLI::App& app, CheckOptions& options);

// Prints the report; returns 0 (all OK or WARN) or 1 (a FAIL). Throws UsageError (exit 2).
// System files are read below $NUMABIND_CHECK_ROOT when it is set (tests: fake sysfs/procfs/etc
// trees); paths named in the plugstack line and in Slurm's files are used as written.
// $NUMABIND_CHECK_NVML names another NVML library than libnvidia-ml.so.1 (tests: a stand-in).
int run_check(const CheckOptions& options);

}  // namespace numabind::check
