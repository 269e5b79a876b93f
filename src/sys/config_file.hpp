// Adapter: a site configuration file (slurm.conf, cgroup.conf, gres.conf, plugstack.conf) read
// whole, as root, without being led astray by what a path may name instead: only a regular
// file, opened without blocking (a FIFO never stalls slurmstepd or `numabind check`), bounded.
#pragma once

#include <optional>
#include <string>

namespace numabind {

// A regular file's contents, at most `limit` bytes: opened O_NONBLOCK and checked with fstat
// before any read. nullopt with `error` set to one phrase ("is a FIFO, not a regular file",
// "is larger than the 1048576-byte limit", errno's text).
std::optional<std::string> read_regular_file(const std::string& path, size_t limit, std::string& error);

inline constexpr size_t kMaxConfigBytes = 4u << 20;

// The file's text for slurmstepd; nullopt when it does not exist (`why` ""), or cannot be
// used (`why` names the path and the reason).
std::optional<std::string> read_config_file(const std::string& path, std::string& why);

}  // namespace numabind
