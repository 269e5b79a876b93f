// Bounded reads of site configuration files (see config_file.hpp).
#include "sys/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace numabind {

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    return "something else";
}

}  // namespace

std::optional<std::string> read_regular_file(const std::string& path, size_t limit, std::string& error) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        error = std::strerror(errno);
        return std::nullopt;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error = std::string("is ") + kind_of(st.st_mode) + ", not a regular file";
        close(fd);
        return std::nullopt;
    }
    std::string text;
    // One page: a larger stack frame is probed page by page (-fstack-clash-protection), and
    // each new page is a fault in a freshly forked slurmstepd task.
    char buf[4096];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = std::strerror(errno);
            close(fd);
            return std::nullopt;
        }
        if (n == 0) break;
        if (text.size() + static_cast<size_t>(n) > limit) {
            error = "is larger than the " + std::to_string(limit) + "-byte limit";
            close(fd);
            return std::nullopt;
        }
        text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return text;
}

std::optional<std::string> read_config_file(const std::string& path, std::string& why) {
    why.clear();
    std::string error;
    std::optional<std::string> text = read_regular_file(path, kMaxConfigBytes, error);
    if (!text && error != std::strerror(ENOENT)) why = path + ": " + error;
    return text;
}

}  // namespace numabind
