// Reading files and running tools where `numabind check` and `--draw` may run as root on
// files other users control: every read and every run is bounded (size, time), nothing
// waits on a FIFO or a device, and no program is taken from a relative or user-writable PATH
// entry.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sys/config_file.hpp"

namespace numabind::cli {

// check reads a configuration file up to the plugin's own bound, so the two never differ.
using numabind::kMaxConfigBytes;

// The plugin's own bounded reader (src/sys/config_file.hpp).
using numabind::read_regular_file;

// `program` from PATH: absolute entries only (an empty or relative entry is never the
// current directory); as root also only a file untrusted_file() accepts (root's, in root's
// directories). "" when none; `skipped` lists each candidate refused and why.
std::string find_program(const std::string& program, std::vector<std::string>& skipped);

struct ToolRun {
    bool started = false;    // fork and exec succeeded (exit status 127: not executable)
    bool timed_out = false;  // killed at the bound, with every process of its group
    int status = -1;         // exit status, or 128 + signal
    std::string out;         // stdout when captured (at most `cap` bytes)
};
// Runs argv[0] (an absolute path) in its own process group with stdin from /dev/null.
// stdout: captured (`out_fd` < 0) or written to `out_fd`; stderr: dropped unless
// `keep_stderr`. `pass_fd` (>= 0) stays open in the child. At `seconds` the whole group is
// killed (SIGKILL); reading stops at the bound too, not at EOF (a child left holding the pipe
// does not keep us waiting).
ToolRun run_bounded(const std::vector<std::string>& argv, int seconds, int out_fd = -1, bool keep_stderr = false,
                    int pass_fd = -1, size_t cap = 1 << 20);

}  // namespace numabind::cli
