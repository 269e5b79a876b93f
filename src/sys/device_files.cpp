// Adapter: accelerator device files and whether this process may open them.
#include "numabind/device_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <string>

namespace numabind {

namespace {

// A small /proc or /sys file, whole ("" when it cannot be read). Plain read(2): the task
// hook's hot path, where an ifstream would first build the C++ locale machinery.
std::string read_text(const std::string& path) {
    std::string out;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return out;
    char buf[4096];
    ssize_t n;
    while (out.size() < (1u << 16) && (n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    close(fd);
    return out;
}

// Calls f(line) for each line of `text` until f returns true.
template <typename F>
void for_lines(const std::string& text, F&& f) {
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (f(text.substr(start, end - start))) return;
        start = end + 1;
    }
}

// "0000:17:00.0" as the kernel spells it (lower case, with domain).
std::string kernel_pci_address(const std::string& pci) {
    std::string a;
    for (char c : pci) a += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::count(a.begin(), a.end(), ':') == 1) a = "0000:" + a;
    return a;
}

// NVIDIA's driver names its GPU directories like the kernel, in lower case.
std::string nvidia_device_file(const std::string& addr, const std::string& procfs) {
    std::string file;
    for_lines(read_text(procfs + "/proc/driver/nvidia/gpus/" + addr + "/information"), [&](const std::string& line) {
        const std::string key = "Device Minor:";
        if (line.compare(0, key.size(), key) != 0) return false;
        size_t i = key.size();
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        size_t j = i;
        while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
        if (j > i && j - i <= 6) file = "/dev/nvidia" + line.substr(i, j - i);
        return true;
    });
    return file;
}

std::string drm_render_file(const std::string& addr, const std::string& sysfs) {
    const std::string dir = sysfs + "/sys/bus/pci/devices/" + addr + "/drm";
    DIR* d = opendir(dir.c_str());
    if (!d) return "";
    std::string found;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("renderD", 0) == 0 && name.size() > 7 &&
            name.find_first_not_of("0123456789", 7) == std::string::npos) {
            found = "/dev/dri/" + name;
            break;
        }
    }
    closedir(d);
    return found;
}

}  // namespace

std::string device_file_for_pci(const std::string& pci, const std::string& procfs_root, const std::string& sysfs_root) {
    if (pci.empty() || pci.find('/') != std::string::npos || pci.find("..") != std::string::npos) return "";
    const std::string addr = kernel_pci_address(pci);
    std::string file = nvidia_device_file(addr, procfs_root);
    if (file.empty()) file = drm_render_file(addr, sysfs_root);
    return file;
}

DeviceProbe probe_device_file(const std::string& path) {
    DeviceProbe p;
    int fd;
    do {
        fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0) {
        close(fd);
        p.access = DeviceAccess::Held;
        return p;
    }
    p.error = errno;
    switch (p.error) {
        case ENXIO:
        case ENODEV: p.access = DeviceAccess::Held; break;  // allowed by the cgroup, no driver behind it
        case EPERM:
        case EACCES: p.access = DeviceAccess::Denied; break;
        case ENOENT: p.access = DeviceAccess::Missing; break;
        default: p.access = DeviceAccess::Unknown; break;
    }
    return p;
}

}  // namespace numabind

namespace numabind {

std::optional<bool> devices_constrained() {
    std::optional<bool> result;
    for_lines(read_text("/proc/self/cgroup"), [&](const std::string& line) {
        // "4:devices:/slurm/uid_0/job_12/step_0/task_1"
        const size_t a = line.find(':');
        const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) return false;
        const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
        if (controllers.find(",devices,") == std::string::npos) return false;
        const std::string list = read_text("/sys/fs/cgroup/devices" + line.substr(b + 1) + "/devices.list");
        if (!list.empty()) result = list.substr(0, list.find('\n')) != "a *:* rwm";
        return true;
    });
    return result;
}

}  // namespace numabind
