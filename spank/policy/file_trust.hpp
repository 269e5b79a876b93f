// numabind SPANK plugin: which files the plugin may load as root. The front's engine loader
// and `numabind check` call these same functions, so check's verdict is the loader's.
// System calls only (open, fstat, realpath), no Slurm header.
#pragma once

#include <sys/types.h>

#include <string>

namespace numabind::spank {

// The step engine's file name, beside the front (stepd_api.h's NUMABIND_STEPD_FILE; the
// loader asserts they are equal).
inline constexpr const char* kStepEngineFile = "numabind_stepd.so";

// Owned by root or by `self` (a process loading its own user's file gains nothing).
bool trusted_owner(uid_t owner, uid_t self);

// Opens `dir` (absolute, symlinks resolved) one component at a time from "/", each with
// O_NOFOLLOW and checked on its descriptor: every directory must be owned by root (or `self`)
// and closed to group/other writes unless sticky (/tmp). Returns an O_PATH descriptor of
// `dir`, or -1 with `error` set to one line naming the directory.
int open_trusted_dir(const std::string& dir, uid_t self, std::string& error);

// The step engine beside the front's real file (the front's path as Slurm mapped it,
// symlinks resolved): every directory from / down to it trusted as above, the engine
// `engine_file` opened with O_NOFOLLOW|O_NONBLOCK and checked on its descriptor (a regular
// file, owned by root or `self`, closed to group/other writes). Returns the open descriptor
// (O_RDONLY|O_CLOEXEC; the caller loads through /proc/self/fd/N and closes it), or -1 with
// `error` set to one line. `engine` is set to the engine's path either way once known.
int open_step_engine(const std::string& front_path, const char* engine_file, uid_t self, std::string& engine,
                     std::string& error);

// "" when the file at `path` is one root may load or run: every symlink on the way sits in a
// trusted directory, the directories down to the real file are trusted (open_trusted_dir)
// and the file itself is a regular file owned by root (or `self`) and closed to group/other
// writes. Otherwise one line naming `what`, the path and why.
std::string untrusted_file(const std::string& path, const std::string& what, uid_t self);

}  // namespace numabind::spank
