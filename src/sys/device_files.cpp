// Adapter: accelerator device files and whether this process may open them.
#include "sys/device_files.hpp"
#include "sys/process_inspect.hpp"
#include "core/text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>

namespace numabind {

namespace {

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

// The NVIDIA driver's minor number for a GPU (its directories are named like the kernel's,
// in lower case), -1 when the driver does not know the address.
int nvidia_minor(const std::string& addr, const std::string& procfs) {
    int minor = -1;
    std::string information;
    read_proc_file(procfs + "/proc/driver/nvidia/gpus/" + addr + "/information", information, 1u << 16);
    for_lines(information, [&](const std::string& line) {
        const std::string key = "Device Minor:";
        if (line.compare(0, key.size(), key) != 0) return false;
        size_t i = key.size();
        while (i < line.size() && is_space(line[i])) ++i;
        size_t j = i;
        while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
        if (j > i && j - i <= 6) minor = std::stoi(line.substr(i, j - i));
        return true;
    });
    return minor;
}

std::string nvidia_device_file(const std::string& addr, const std::string& procfs) {
    const int minor = nvidia_minor(addr, procfs);
    return minor < 0 ? std::string() : "/dev/nvidia" + std::to_string(minor);
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

namespace {

constexpr int kNvidiaMajor = 195;

// The last path component that looks like a PCI address ("0000:3b:00.0"), "" when none.
std::string last_pci_component(const std::string& path) {
    std::string found;
    size_t start = 0;
    while (start < path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        const std::string part = path.substr(start, end - start);
        if (part.size() == 12 && part[4] == ':' && part[7] == ':' && part[10] == '.' &&
            std::all_of(part.begin(), part.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; }))
            found = part;
        start = end + 1;
    }
    return found;
}

}  // namespace

DeviceFileCheck check_device_file(const std::string& path, const std::string& pci, const std::string& procfs_root,
                                  const std::string& sysfs_root) {
    DeviceFileCheck c;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        const int err = errno;
        c.verdict = err == ENOENT ? DeviceFileVerdict::Missing : DeviceFileVerdict::Unverifiable;
        c.detail = std::string(err == ENOENT ? "no such file" : "cannot stat it: ") + (err == ENOENT ? "" : std::strerror(err));
        return c;
    }
    if (!S_ISCHR(st.st_mode)) {
        c.verdict = DeviceFileVerdict::Mismatch;
        c.detail = "not a character device";
        return c;
    }
    const unsigned maj = major(st.st_rdev), min = minor(st.st_rdev);
    const std::string number = "char " + std::to_string(maj) + ":" + std::to_string(min);
    const std::string addr = kernel_pci_address(pci);
    const int nv = nvidia_minor(addr, procfs_root);
    if (nv >= 0) {
        const bool same = maj == kNvidiaMajor && static_cast<int>(min) == nv;
        c.verdict = same ? DeviceFileVerdict::Matches : DeviceFileVerdict::Mismatch;
        c.detail = number + ", the NVIDIA driver's minor of " + addr + " is " + std::to_string(nv);
        return c;
    }
    char real[PATH_MAX];
    const std::string link = sysfs_root + "/sys/dev/char/" + std::to_string(maj) + ":" + std::to_string(min);
    if (realpath(link.c_str(), real)) {
        const std::string owner = last_pci_component(real);
        if (owner.empty()) {
            c.detail = number + " is not a PCI device's (" + std::string(real).substr(sysfs_root.size()) + ")";
            return c;
        }
        c.verdict = owner == addr ? DeviceFileVerdict::Matches : DeviceFileVerdict::Mismatch;
        c.detail = number + " belongs to PCI " + owner;
        return c;
    }
    c.detail = number + ": no NVIDIA driver information for " + addr + " and no sysfs entry for the device number";
    return c;
}

ListedFileUse listed_file_use(DeviceFileVerdict verdict) {
    switch (verdict) {
        case DeviceFileVerdict::Matches: return ListedFileUse::Use;
        case DeviceFileVerdict::Unverifiable: return ListedFileUse::UseTrusted;
        case DeviceFileVerdict::Missing: return ListedFileUse::FindWithout;
        case DeviceFileVerdict::Mismatch: return ListedFileUse::FailStep;
    }
    return ListedFileUse::FailStep;
}

bool listed_files_fit(size_t listed, size_t accelerators) { return accelerators == 0 || listed == accelerators; }

}  // namespace numabind
