// See xml_probe.hpp.
#include "xml_probe.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"

namespace numabind::cli {

std::optional<std::string> hwloc_dies_loading(const std::string& path) {
    const pid_t pid = fork();
    if (pid < 0) return std::nullopt;  // cannot probe: the caller's own load decides
    if (pid == 0) {
        // No output and no core file of its own: the parent loads the file again and reports.
        const rlimit no_core{0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        if (FILE* devnull = freopen("/dev/null", "w", stderr)) (void)devnull;
        try {
            HwlocTopology topo(LoadOptions{path, false});
        } catch (...) {
        }
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFSIGNALED(status)) return std::nullopt;
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "hwloc crashed loading " + path + " (SIG" + std::string(name ? name : std::to_string(sig).c_str()) +
           ": a malformed XML that this hwloc cannot read; the plugin would take slurmstepd down with it)";
}

}  // namespace numabind::cli
