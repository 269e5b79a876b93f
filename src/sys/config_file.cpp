// A site configuration file, read whole and bounded (see config_file.hpp).
#include "sys/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace numabind {

std::optional<std::string> read_config_file(const std::string& path, std::string& why) {
    why.clear();
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno != ENOENT) why = path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    struct stat sb {};
    std::optional<std::string> out;
    if (fstat(fd, &sb) != 0) {
        why = path + ": " + std::strerror(errno);
    } else if (!S_ISREG(sb.st_mode)) {
        why = path + " is not a regular file";
    } else if (static_cast<unsigned long long>(sb.st_size) > kMaxConfigBytes) {
        why = path + " is larger than " + std::to_string(kMaxConfigBytes >> 20) + " MiB";
    } else {
        std::string text;
        char buf[8192];
        ssize_t n = 0;
        while (text.size() <= kMaxConfigBytes && (n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
        if (n < 0) why = path + ": " + std::strerror(errno);
        else if (text.size() > kMaxConfigBytes) why = path + " is larger than " + std::to_string(kMaxConfigBytes >> 20) + " MiB";
        else out = std::move(text);
    }
    close(fd);
    return out;
}

}  // namespace numabind
