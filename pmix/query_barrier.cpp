#include "query_barrier.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace numabind {

namespace {

long long now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string hex_hash(const std::string& text) {  // FNV-1a: a short, fixed-size file name
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
    return out;
}

bool is_directory(const char* path) {
    struct stat st{};
    return path && *path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Appends one byte to `name` in `dir`; returns the file's size after our byte (O_APPEND
// writes are atomic, so this is our arrival's position), or -1.
long long append_mark(int dir, const char* name, int& fd) {
    fd = openat(dir, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    ssize_t w;
    do w = write(fd, "x", 1);
    while (w < 0 && errno == EINTR);
    if (w != 1) return -1;
    return static_cast<long long>(lseek(fd, 0, SEEK_CUR));
}

long long file_size(int fd) {
    struct stat st{};
    return fstat(fd, &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

}  // namespace

std::string barrier_base_directory() {
    if (is_directory("/dev/shm") && access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
    const char* tmp = std::getenv("TMPDIR");
    if (is_directory(tmp)) return tmp;
    return "/tmp";
}

BarrierOutcome wait_for_local_queries(const std::string& base, const std::string& key, int expected,
                                      long long timeout_ms) {
    BarrierOutcome out;
    const long long start = now_ms();
    const std::string path = base + "/numabind-pmix-" + std::to_string(geteuid()) + "-" + hex_hash(key);
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        out.error = "cannot create " + path + ": " + std::strerror(errno);
        return out;
    }
    int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st{};
    if (dir < 0 || fstat(dir, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        out.error = path + " is not a private directory of this user";
        if (dir >= 0) close(dir);
        return out;
    }
    int arrived_fd = -1, passed_fd = -1;
    if (append_mark(dir, "arrived", arrived_fd) < 0) {
        out.error = "cannot write in " + path + ": " + std::strerror(errno);
    } else {
        // Poll: the wait is short (the slowest local query), and files need no daemon.
        long long pause_us = 200;
        for (;;) {
            out.arrived = static_cast<int>(file_size(arrived_fd));
            if (out.arrived >= expected) {
                out.complete = true;
                break;
            }
            if (now_ms() - start >= timeout_ms) break;
            usleep(static_cast<useconds_t>(pause_us));
            if (pause_us < 5000) pause_us *= 2;
        }
        // Everyone who passed says so; the one that completes the count removes the files,
        // as nobody reads them any more.
        if (out.complete && append_mark(dir, "passed", passed_fd) >= expected) {
            unlinkat(dir, "arrived", 0);
            unlinkat(dir, "passed", 0);
            rmdir(path.c_str());
        }
    }
    if (arrived_fd >= 0) close(arrived_fd);
    if (passed_fd >= 0) close(passed_fd);
    close(dir);
    out.waited_ms = now_ms() - start;
    return out;
}

}  // namespace numabind
