// numabind SPANK plugin: the trust rule for files loaded as root (file_trust.hpp).
#include "policy/file_trust.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace numabind::spank {

namespace {

std::string real_path(const std::string& path) {
    char* resolved = realpath(path.c_str(), nullptr);
    if (!resolved) return {};
    std::string out = resolved;
    std::free(resolved);
    return out;
}

std::string parent_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

// Nobody else may change what a directory lists: closed to group/other writes, or sticky
// (/tmp: others may add entries but not replace ours).
bool trusted_directory(const struct stat& st, uid_t self) {
    return S_ISDIR(st.st_mode) && trusted_owner(st.st_uid, self) &&
           (!(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX));
}

// Why a regular file opened as `fd` may not be loaded; "" when it may.
std::string file_refusal(int fd, uid_t self) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "is not a regular file";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by group or others";
    if (!trusted_owner(st.st_uid, self)) return "is owned by uid " + std::to_string(st.st_uid) + ", not root";
    return "";
}

}  // namespace

bool trusted_owner(uid_t owner, uid_t self) { return owner == 0 || owner == self; }

int open_trusted_dir(const std::string& dir, uid_t self, std::string& error) {
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::string at = "/";
    size_t pos = 1;
    while (fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) != 0 || !trusted_directory(st, self)) {
            error = "directory " + at + " is " +
                    (S_ISDIR(st.st_mode) && !trusted_owner(st.st_uid, self) ? "owned by uid " + std::to_string(st.st_uid)
                                                                             : std::string("writable by group or others")) +
                    " (every directory up to / must be root's and closed to others' writes)";
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
    error = "cannot open directory " + at + ": " + std::strerror(errno);
    return -1;
}

int open_step_engine(const std::string& front_path, const char* engine_file, uid_t self, std::string& engine,
                     std::string& error) {
    // The front's real path: the engine is the one installed beside the file itself, not
    // beside a link to it that someone else may have made.
    const std::string front = real_path(front_path);
    if (front.empty()) {
        error = "cannot resolve the plugin's path " + front_path + ": " + std::strerror(errno);
        return -1;
    }
    const std::string dir = parent_of(front);
    engine = (dir == "/" ? "" : dir) + "/" + engine_file;
    std::string why;
    const int dir_fd = open_trusted_dir(dir, self, why);
    if (dir_fd < 0) {
        error = "the step engine's " + why + "; not loaded";
        return -1;
    }
    // Opened once: what is checked (on the descriptor) is what gets loaded.
    const int fd = openat(dir_fd, engine_file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    const int open_errno = errno;
    close(dir_fd);
    if (fd < 0) {
        error = open_errno == ELOOP ? "the step engine " + engine + " is a symlink; not loaded (install the file itself)"
                                    : "cannot find the step engine " + engine + ": " + std::strerror(open_errno) +
                                          " (install it beside " + front + ")";
        return -1;
    }
    const std::string refusal = file_refusal(fd, self);
    if (refusal.empty()) return fd;
    close(fd);
    error = "the step engine " + engine + " " + refusal + "; not loaded";
    return -1;
}

std::string untrusted_file(const std::string& path, const std::string& what, uid_t self) {
    if (path.empty() || path[0] != '/') return what + " " + path + " is not an absolute path";
    // A symlink on the way can be repointed by whoever may write the directory holding it.
    for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
        const std::string prefix = end == std::string::npos ? path : path.substr(0, end);
        struct stat st {};
        if (lstat(prefix.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            const std::string holder = real_path(parent_of(prefix));
            std::string why;
            const int fd = holder.empty() ? -1 : open_trusted_dir(holder, self, why);
            if (fd < 0) return what + " " + path + ": the symlink " + prefix + " is in a " + (why.empty() ? "directory that cannot be resolved" : why);
            close(fd);
        }
        if (end == std::string::npos) break;
    }
    const std::string real = real_path(path);
    if (real.empty()) return what + " " + path + ": " + std::strerror(errno);
    std::string why;
    const int dir_fd = open_trusted_dir(parent_of(real), self, why);
    if (dir_fd < 0) return what + " " + path + (real == path ? "" : " (" + real + ")") + ": " + why;
    const std::string name = real.substr(real.rfind('/') + 1);
    const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    const int open_errno = errno;
    close(dir_fd);
    if (fd < 0) return what + " " + real + ": " + std::strerror(open_errno);
    const std::string refusal = file_refusal(fd, self);
    close(fd);
    return refusal.empty() ? "" : what + " " + real + " " + refusal;
}

}  // namespace numabind::spank
