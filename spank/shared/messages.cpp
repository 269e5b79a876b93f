// numabind SPANK plugin: log lines and task stderr lines, escaped and capped.
#include "messages.hpp"

extern "C" {
#include <slurm/spank.h>
}
#include <unistd.h>

#include <cerrno>

#include "policy/log_text.hpp"

namespace numabind::spank {

void log_error(const std::string& msg) { slurm_error("numabind: %s", log_safe(msg).c_str()); }
void log_info(const std::string& msg) { slurm_info("numabind: %s", log_safe(msg).c_str()); }

void task_stderr(const std::string& msg) {
    const std::string line = "numabind: " + log_safe(msg) + "\n";
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {  // one write(2) in practice: stderr lines of tasks do not interleave
        ssize_t n = write(STDERR_FILENO, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        p += n;
        left -= static_cast<size_t>(n);
    }
}

}  // namespace numabind::spank
