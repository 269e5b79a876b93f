// Per-boot topology cache: see include/numabind/topology_cache.hpp.
#include "numabind/topology_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "numabind/error.hpp"

namespace numabind {

namespace {

constexpr const char* kInfoName = "NumabindCacheKey";
constexpr off_t kMaxCacheBytes = 64 << 20;

std::string read_small(const char* path) {
    std::string out;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && out.size() < (1u << 16)) out.append(buf, static_cast<size_t>(n));
    close(fd);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// Variables that change what live discovery returns; with any set, the cache is bypassed.
const char* override_variable() {
    for (const char* v : {"HWLOC_XMLFILE", "HWLOC_FSROOT", "HWLOC_SYNTHETIC", "HWLOC_CPUID_PATH", "HWLOC_COMPONENTS"}) {
        const char* val = std::getenv(v);
        if (val && *val) return v;
    }
    return nullptr;
}

// A directory or file only root can have written: owned by uid 0, no group/other write bit.
bool trusted(const struct stat& st) { return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0; }

std::string sys_error(const std::string& what, const std::string& path) {
    return what + " '" + path + "': " + std::strerror(errno);
}

// Reads the cache file if it and its directory are trustworthy; "" with `why` set otherwise.
std::string read_trusted(const TopologyCacheOptions& o, const std::string& path, std::string& why) {
    struct stat st;
    if (lstat(o.dir.c_str(), &st) != 0) {
        why = sys_error("no cache directory", o.dir);
        return {};
    }
    if (!S_ISDIR(st.st_mode) || !trusted(st)) {
        why = "cache directory '" + o.dir + "' is not a root-owned directory closed to group/other writes; ignored";
        return {};
    }
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        why = sys_error("no cache file", path);
        return {};
    }
    std::string xml;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !trusted(st) || st.st_size <= 0 || st.st_size > kMaxCacheBytes) {
        why = "cache file '" + path + "' is not a root-owned regular file closed to group/other writes; ignored";
    } else {
        xml.resize(static_cast<size_t>(st.st_size));
        size_t got = 0;
        while (got < xml.size()) {
            ssize_t n = read(fd, &xml[got], xml.size() - got);
            if (n <= 0) break;
            got += static_cast<size_t>(n);
        }
        if (got != xml.size()) {
            why = "short read of cache file '" + path + "'";
            xml.clear();
        }
    }
    close(fd);
    return xml;
}

void prepare_dir(const TopologyCacheOptions& o) {
    if (mkdir(o.dir.c_str(), 0755) == 0) {
        if (chmod(o.dir.c_str(), 0755) != 0) throw Error(sys_error("cannot chmod cache directory", o.dir));
    } else if (errno != EEXIST) {
        throw Error(sys_error("cannot create cache directory", o.dir));
    }
    struct stat st;
    if (lstat(o.dir.c_str(), &st) != 0) throw Error(sys_error("cannot stat cache directory", o.dir));
    if (!S_ISDIR(st.st_mode) || !trusted(st))
        throw Error("cache directory '" + o.dir + "' is not a root-owned directory closed to group/other writes");
}

std::string write_from(const HwlocTopology& live, const TopologyCacheOptions& o, const std::string& key) {
    if (geteuid() != 0) throw Error("only root writes the topology cache");
    prepare_dir(o);
    const std::string path = topology_cache_path(o, key);
    const std::string xml = live.export_xml({{kInfoName, key}});
    std::string tmp = o.dir + "/.topology-XXXXXX";
    int fd = mkstemp(&tmp[0]);
    if (fd < 0) throw Error(sys_error("cannot create a temporary file in", o.dir));
    bool ok = fchmod(fd, 0644) == 0;
    size_t done = 0;
    while (ok && done < xml.size()) {
        ssize_t n = write(fd, xml.data() + done, xml.size() - done);
        if (n <= 0) ok = false;
        else done += static_cast<size_t>(n);
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        std::string err = sys_error("cannot write topology cache", path);
        unlink(tmp.c_str());
        throw Error(err);
    }
    // Files of other keys (previous boots, other hwloc versions) are dead: remove them.
    if (DIR* d = opendir(o.dir.c_str())) {
        const std::string mine = path.substr(path.rfind('/') + 1);
        while (dirent* e = readdir(d)) {
            std::string name = e->d_name;
            if (name != mine && name.rfind("topology-", 0) == 0 && name.size() > 4 &&
                name.compare(name.size() - 4, 4, ".xml") == 0)
                unlinkat(dirfd(d), name.c_str(), 0);
        }
        closedir(d);
    }
    return path;
}

}  // namespace

const char* to_string(CacheResult r) {
    switch (r) {
        case CacheResult::Hit: return "hit";
        case CacheResult::Written: return "written";
        case CacheResult::Miss: return "miss";
        case CacheResult::Disabled: return "disabled";
    }
    return "miss";
}

std::string topology_cache_key() {
    std::vector<std::string> pci;
    if (DIR* d = opendir("/sys/bus/pci/devices")) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') pci.emplace_back(e->d_name);
        closedir(d);
    }
    std::sort(pci.begin(), pci.end());
    std::string pci_list;
    for (const std::string& p : pci) pci_list += p + ",";
    char api[16];
    std::snprintf(api, sizeof api, "%x", hwloc_get_api_version());
    return std::string("numabind-topology-cache 1; hwloc ") + HWLOC_VERSION + " api 0x" + api +
           "; boot " + read_small("/proc/sys/kernel/random/boot_id") +
           "; cpus possible " + read_small("/sys/devices/system/cpu/possible") +
           " online " + read_small("/sys/devices/system/cpu/online") +
           "; pci " + std::to_string(pci.size()) + " " + hex64(fnv1a(pci_list));
}

std::string topology_cache_path(const TopologyCacheOptions& options, const std::string& key) {
    return options.dir + "/topology-" + hex64(fnv1a(key)) + ".xml";
}

std::unique_ptr<HwlocTopology> load_this_machine(const TopologyCacheOptions& options, CacheOutcome* outcome) {
    CacheOutcome local;
    CacheOutcome& out = outcome ? *outcome : local;
    out = CacheOutcome{};
    if (const char* var = override_variable()) {
        out.result = CacheResult::Disabled;
        out.detail = std::string(var) + " is set; topology cache bypassed";
        return std::make_unique<HwlocTopology>(LoadOptions{});
    }
    const std::string key = topology_cache_key();
    out.path = topology_cache_path(options, key);
    std::string why;
    std::string xml = read_trusted(options, out.path, why);
    if (!xml.empty()) {
        try {
            auto topo = std::make_unique<HwlocTopology>(LoadOptions::from_buffer(std::move(xml), true));
            if (topo->root_info(kInfoName) == key) {
                out.result = CacheResult::Hit;
                return topo;
            }
            why = "cache file '" + out.path + "' belongs to another key; ignored";
        } catch (const std::exception& e) {
            why = "cache file '" + out.path + "' unusable (" + e.what() + ")";
        }
    }
    auto live = std::make_unique<HwlocTopology>(LoadOptions{});
    out.result = CacheResult::Miss;
    out.detail = why;
    if (options.write && geteuid() == 0) {
        try {
            write_from(*live, options, key);
            out.result = CacheResult::Written;
        } catch (const std::exception& e) {
            out.detail += (out.detail.empty() ? "" : "; ") + std::string(e.what());
        }
    }
    return live;
}

std::string write_topology_cache(const TopologyCacheOptions& options) {
    if (geteuid() != 0) throw Error("only root writes the topology cache");
    const std::string key = topology_cache_key();
    HwlocTopology live(LoadOptions{});
    return write_from(live, options, key);
}

}  // namespace numabind
