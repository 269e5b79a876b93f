// Adapter: a site configuration file (slurm.conf, cgroup.conf, gres.conf) read whole, as
// root, without being led astray by what a path may name instead: only a regular file, opened
// without blocking (a FIFO never stalls slurmstepd), at most kMaxConfigBytes.
#pragma once

#include <optional>
#include <string>

namespace numabind {

inline constexpr size_t kMaxConfigBytes = 4u << 20;

// The file's text; nullopt when it does not exist, is not a regular file, cannot be read or
// is larger than kMaxConfigBytes (`why` then says which, "" for a file that does not exist).
std::optional<std::string> read_config_file(const std::string& path, std::string& why);

}  // namespace numabind
