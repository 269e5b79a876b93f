// numabind SPANK plugin front: see engine_loader.hpp.
#include "engine_loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace numabind::spank {

namespace {

// This plugin's own path, as the dynamic loader mapped it (Slurm's plugstack line).
std::string own_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&load_stepd_engine), &info) == 0 || !info.dli_fname) return {};
    return info.dli_fname;
}

// The front's real path (symlinks resolved): the engine is the one installed beside the
// file itself, not beside a link to it that someone else may have made.
std::string real_path(const std::string& path) {
    char* resolved = realpath(path.c_str(), nullptr);
    if (!resolved) return {};
    std::string out = resolved;
    std::free(resolved);
    return out;
}

// Owned by root (or by this process's own user, which gains nothing by loading its own file).
bool trusted_owner(const struct stat& st) { return st.st_uid == 0 || st.st_uid == geteuid(); }

// Nobody else may change what a directory lists: closed to group/other writes, or sticky
// (/tmp: others may add entries but not replace ours).
bool trusted_directory(const struct stat& st) {
    return S_ISDIR(st.st_mode) && trusted_owner(st) && (!(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX));
}

// Opens `dir` (absolute, symlinks resolved) one component at a time from "/", each with
// O_NOFOLLOW and checked on its descriptor: a directory of the chain that another user could
// change (or swap for a symlink) refuses the load. Returns an O_PATH descriptor of `dir`.
int open_trusted_dir(const std::string& dir, std::string& error) {
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::string at = "/";
    size_t pos = 1;
    while (fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) != 0 || !trusted_directory(st)) {
            error = "the step engine's directory " + at + " is " +
                    (S_ISDIR(st.st_mode) && !trusted_owner(st) ? "owned by uid " + std::to_string(st.st_uid)
                                                               : std::string("writable by group or others")) +
                    "; not loaded (every directory up to / must be root's and closed to others' writes)";
            close(fd);
            return -1;
        }
        if (pos >= dir.size()) return fd;
        size_t slash = dir.find('/', pos);
        if (slash == std::string::npos) slash = dir.size();
        const std::string name = dir.substr(pos, slash - pos);
        pos = slash + 1;
        if (name.empty()) continue;
        const int next = openat(fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        fd = next;
        at += (at.size() > 1 ? "/" : "") + name;
    }
    error = "cannot open the step engine's directory " + at + ": " + std::strerror(errno);
    return -1;
}

// The engine file, opened once: what is checked (on the descriptor) is what gets loaded.
int open_trusted_engine(int dir_fd, const std::string& engine, const std::string& plugin, std::string& error) {
    const int fd = openat(dir_fd, NUMABIND_STEPD_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        error = errno == ELOOP ? "the step engine " + engine + " is a symlink; not loaded (install the file itself)"
                               : "cannot find the step engine " + engine + ": " + std::strerror(errno) +
                                     " (install it beside " + plugin + ")";
        return -1;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error = "the step engine " + engine + " is not a regular file";
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        error = "the step engine " + engine + " is writable by group or others; not loaded";
    } else if (!trusted_owner(st)) {
        error = "the step engine " + engine + " is owned by uid " + std::to_string(st.st_uid) + ", not root; not loaded";
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

const numabind_stepd_api* load(std::string& error) {
    const std::string mapped = own_path();
    if (mapped.empty()) {
        error = "cannot find where the plugin itself was loaded from (dladdr)";
        return nullptr;
    }
    const std::string plugin = real_path(mapped);
    if (plugin.empty()) {
        error = "cannot resolve the plugin's path " + mapped + ": " + std::strerror(errno);
        return nullptr;
    }
    const std::string dir = plugin.substr(0, plugin.rfind('/'));
    const std::string engine = (dir.empty() ? "" : dir) + "/" + NUMABIND_STEPD_FILE;
    const int dir_fd = open_trusted_dir(dir.empty() ? "/" : dir, error);
    if (dir_fd < 0) return nullptr;
    const int fd = open_trusted_engine(dir_fd, engine, plugin, error);
    close(dir_fd);
    if (fd < 0) return nullptr;
    // Loaded through the checked descriptor: a rename or symlink swap of the path after the
    // check cannot change what is mapped.
    const std::string via = "/proc/self/fd/" + std::to_string(fd);
    void* handle = dlopen(via.c_str(), RTLD_NOW | RTLD_LOCAL);
    close(fd);  // the mapping stays
    if (!handle) {
        const char* why = dlerror();
        error = "cannot load the step engine " + engine + " (through " + via + "): " + (why ? why : "unknown error");
        return nullptr;
    }
    const auto* api = static_cast<const numabind_stepd_api*>(dlsym(handle, NUMABIND_STEPD_SYMBOL));
    if (!api || !api->build || !api->prepare || !api->task_init || !api->exit) {
        error = "the step engine " + engine + " has no " + NUMABIND_STEPD_SYMBOL + " (from another numabind release?)";
        dlclose(handle);
        return nullptr;
    }
    if (std::strcmp(api->build, NUMABIND_STEPD_BUILD) != 0) {
        error = "the step engine " + engine + " is from " + api->build + ", the plugin from " + NUMABIND_STEPD_BUILD +
                "; install both from one build";
        dlclose(handle);
        return nullptr;
    }
    return api;  // kept loaded for the life of the process (slurmstepd lives one step)
}

}  // namespace

const numabind_stepd_api* load_stepd_engine(std::string& error) {
    static const numabind_stepd_api* api = nullptr;
    static std::string load_error;
    static bool tried = false;
    if (!tried) {
        api = load(load_error);  // may throw std::bad_alloc (then tried again next time)
        tried = true;
    }
    error = load_error;
    return api;
}

}  // namespace numabind::spank
