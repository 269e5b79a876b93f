// Per-boot topology cache: see src/hwloc/topology_cache.hpp.
#include "hwloc/topology_cache.hpp"

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
#include <string_view>
#include <vector>

#include "core/model_text.hpp"
#include "numabind/error.hpp"
#include "sys/process_inspect.hpp"

extern char** environ;

namespace numabind {

namespace {

constexpr const char* kInfoName = "NumabindCacheKey";
constexpr off_t kMaxCacheBytes = 64 << 20;

// A small kernel file's text without its trailing newline and blanks ("" when unreadable).
std::string read_small(const char* path) {
    std::string out;
    read_proc_file(path, out, 1u << 16);
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

// hwloc's environment variables (HWLOC_*), split by what they do to a live discovery:
// - known to be fully described by their value (plugin lists, allow modes, verbosity):
//   they enter the cache key as NAME=value, so a changed value means a new discovery;
// - all others, HWLOC_XMLFILE, HWLOC_FSROOT, HWLOC_PCI_LOCALITY (whose value may be a
//   file, whose content the key cannot see) and any this list does not know: the cache
//   is bypassed while one is set, even empty.
bool keyable_hwloc_variable(std::string_view name) {
    static constexpr std::string_view kValueOnly[] = {
        "HWLOC_PLUGINS_BLACKLIST", "HWLOC_ALLOW", "HWLOC_THISSYSTEM", "HWLOC_HIDE_ERRORS",
        "HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "HWLOC_LIBXML_IMPORT", "HWLOC_LIBXML_EXPORT"};
    for (std::string_view v : kValueOnly)
        if (name == v) return true;
    constexpr std::string_view verbose = "_VERBOSE";  // messages only
    return name.size() > verbose.size() && name.substr(name.size() - verbose.size()) == verbose;
}

// The plugins HWLOC_PLUGINS_BLACKLIST removes, sorted, without GL and OpenCL, whose
// discovery HwlocTopology turns off anyway (the CLI sets exactly those two around its
// load, ScopedQuietHwlocPlugins: it must find the cache that slurmstepd wrote without).
std::string blacklist_for_key(std::string_view value) {
    std::vector<std::string> plugins;
    size_t start = 0;
    while (start <= value.size()) {
        size_t end = value.find(',', start);
        if (end == std::string_view::npos) end = value.size();
        std::string_view p = value.substr(start, end - start);
        if (!p.empty() && p != "hwloc_gl" && p != "hwloc_opencl") plugins.emplace_back(p);
        start = end + 1;
    }
    std::sort(plugins.begin(), plugins.end());
    plugins.erase(std::unique(plugins.begin(), plugins.end()), plugins.end());
    std::string out;
    for (const std::string& p : plugins) out += (out.empty() ? "" : ",") + p;
    return out;
}

struct HwlocEnvironment {
    std::string bypass;  // the first variable that bypasses the cache; empty if none
    std::string key;     // "NAME=value;" of the keyable ones, sorted
};

HwlocEnvironment hwloc_environment() {
    HwlocEnvironment env;
    std::vector<std::string> keyed;
    for (char** e = environ; e && *e; ++e) {
        std::string_view entry(*e);
        if (entry.rfind("HWLOC_", 0) != 0) continue;
        const std::string_view name = entry.substr(0, entry.find('='));
        if (name == "HWLOC_PLUGINS_BLACKLIST") {
            if (std::string plugins = blacklist_for_key(entry.substr(name.size() + 1)); !plugins.empty())
                keyed.push_back(std::string(name) + "=" + plugins);
        } else if (keyable_hwloc_variable(name)) {
            keyed.emplace_back(entry);
        } else if (env.bypass.empty() || name < env.bypass) {
            env.bypass = std::string(name);  // the same name whatever environ's order
        }
    }
    std::sort(keyed.begin(), keyed.end());
    for (const std::string& k : keyed) env.key += k + ";";
    return env;
}

// A directory or file only root can have written: owned by uid 0, no group/other write bit.
bool trusted(const struct stat& st) { return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0; }

std::string sys_error(const std::string& what, const std::string& path) {
    return what + " '" + path + "': " + std::strerror(errno);
}

// Reads the cache file if it and its directory are trustworthy; "" with `why` set otherwise,
// and `absent` (when given) set when there is simply no file yet (no problem to report).
std::string read_trusted(const TopologyCacheOptions& o, const std::string& path, std::string& why, bool* absent = nullptr) {
    struct stat st;
    if (absent) *absent = false;
    if (lstat(o.dir.c_str(), &st) != 0) {
        if (absent) *absent = errno == ENOENT;
        why = sys_error("no cache directory", o.dir);
        return {};
    }
    if (!S_ISDIR(st.st_mode) || !trusted(st)) {
        why = "cache directory '" + o.dir + "' is not a root-owned directory closed to group/other writes; ignored";
        return {};
    }
    // O_NONBLOCK: a FIFO (or device) put there must not block the step in open(); only a
    // regular file is then accepted, from fstat on what was opened (no check-then-open race).
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (absent) *absent = errno == ENOENT;
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

// A writer killed between mkstemp and rename leaves its temporary file behind. One older
// than kStaleTempSeconds is no writer's any more (a write takes milliseconds): remove it.
constexpr const char* kTempPrefix = ".topology-";
constexpr time_t kStaleTempSeconds = 60;

void remove_stale_temporaries(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    const time_t now = time(nullptr);
    const std::string prefix = kTempPrefix;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (now - st.st_mtime > kStaleTempSeconds) unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
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

// Writes `content` to `path` inside o.dir atomically (temporary file + rename), mode 0644.
void write_atomic(const TopologyCacheOptions& o, const std::string& path, const std::string& content) {
    if (geteuid() != 0) throw Error("only root writes the topology cache");
    prepare_dir(o);
    remove_stale_temporaries(o.dir);
    std::string tmp = o.dir + "/" + kTempPrefix + "XXXXXX";
    int fd = mkstemp(&tmp[0]);
    if (fd < 0) throw Error(sys_error("cannot create a temporary file in", o.dir));
    bool ok = fchmod(fd, 0644) == 0;
    size_t done = 0;
    while (ok && done < content.size()) {
        ssize_t n = write(fd, content.data() + done, content.size() - done);
        if (n <= 0) ok = false;
        else done += static_cast<size_t>(n);
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        std::string err = sys_error("cannot write topology cache", path);
        unlink(tmp.c_str());
        throw Error(err);
    }
}

std::string write_from(const HwlocTopology& live, const TopologyCacheOptions& o, const std::string& key) {
    if (geteuid() != 0) throw Error("only root writes the topology cache");
    const std::string path = topology_cache_path(o, key);
    write_atomic(o, path, live.export_xml({{kInfoName, key}}));
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
           "; pci " + std::to_string(pci.size()) + " " + hex64(fnv1a(pci_list)) +
           "; env " + hwloc_environment().key;
}

std::string topology_cache_path(const TopologyCacheOptions& options, const std::string& key) {
    return options.dir + "/topology-" + hex64(fnv1a(key)) + ".xml";
}

std::string topology_cache_report_marker(const TopologyCacheOptions& options) {
    return options.report_marker.empty() ? options.dir + ".reported" : options.report_marker;
}

namespace {

// True the first time this boot a caller asks (and for every caller when that cannot be
// recorded: better said every step than never). The marker holds the boot id; it is
// created with O_EXCL, so of concurrent first steps only one says it.
bool first_report_this_boot(const std::string& marker, std::string& note) {
    const std::string boot = read_small("/proc/sys/kernel/random/boot_id");
    for (int attempt = 0; attempt < 2; ++attempt) {
        int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            const bool ok = write(fd, boot.data(), boot.size()) == static_cast<ssize_t>(boot.size());
            if (close(fd) != 0 || !ok) note = sys_error("cannot record this report in", marker);
            return true;
        }
        if (errno != EEXIST) {
            note = sys_error("cannot record this report in", marker);
            return true;
        }
        std::string seen;
        fd = open(marker.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && trusted(st) && st.st_size < 256) {
            char buf[256];
            const ssize_t n = read(fd, buf, sizeof buf);
            if (n > 0) seen.assign(buf, static_cast<size_t>(n));
        }
        if (fd >= 0) close(fd);
        if (!seen.empty() && seen == boot) return false;  // said already this boot
        if (unlink(marker.c_str()) != 0 && errno != ENOENT) {  // a previous boot's, or not ours
            note = sys_error("cannot record this report in", marker);
            return true;
        }
    }
    return true;
}

// Whether `out` is a lasting problem an administrator should hear of: the cache bypassed,
// or a writer (root, write=true) that could not use or write it.
bool worth_reporting(const CacheOutcome& out, const TopologyCacheOptions& options) {
    if (geteuid() != 0) return false;  // only a writer can fix it, and only root records it
    return out.result == CacheResult::Disabled || (out.result == CacheResult::Miss && options.write);
}

void decide_report(CacheOutcome& out, const TopologyCacheOptions& options) {
    out.should_report = false;
    if (!worth_reporting(out, options)) return;
    std::string note;
    out.should_report = first_report_this_boot(topology_cache_report_marker(options), note);
    if (out.should_report)
        out.detail += (out.detail.empty() ? "" : "; ") +
                      (note.empty() ? std::string("said once per boot") : note + ", so said on every step");
}

std::unique_ptr<HwlocTopology> load_uncached(CacheOutcome& out, const TopologyCacheOptions& options) {
    auto live = std::make_unique<HwlocTopology>(LoadOptions{});
    decide_report(out, options);
    return live;
}

}  // namespace

std::unique_ptr<HwlocTopology> load_this_machine(const TopologyCacheOptions& options, CacheOutcome* outcome) {
    CacheOutcome local;
    CacheOutcome& out = outcome ? *outcome : local;
    out = CacheOutcome{};
    if (const std::string var = hwloc_environment().bypass; !var.empty()) {
        out.result = CacheResult::Disabled;
        out.detail = var + " is set; topology cache bypassed (live discovery on every step)";
        return load_uncached(out, options);
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
    decide_report(out, options);
    return live;
}

std::string write_topology_cache(const TopologyCacheOptions& options) {
    if (geteuid() != 0) throw Error("only root writes the topology cache");
    // Under such a variable live discovery is not this machine as every step sees it.
    if (const std::string var = hwloc_environment().bypass; !var.empty())
        throw Error(var + " is set: not writing the topology cache (unset it, or leave the cache unused)");
    const std::string key = topology_cache_key();
    HwlocTopology live(LoadOptions{});
    return write_from(live, options, key);
}

// ---------------------------------------------------------------- the node model cache

namespace {

// The key of an hwloc XML file: what it is (path, device, inode) and which version of it
// (size, modification and change times, to the nanosecond).
std::string xml_file_key(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return {};
    char buf[160];
    std::snprintf(buf, sizeof buf, " dev %llx ino %llu size %lld mtime %lld.%09ld ctime %lld.%09ld",
                  static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                  static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                  static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
    return "xml " + path + buf + "; hwloc " + HWLOC_VERSION + "; env " + hwloc_environment().key;
}

}  // namespace

std::string node_model_key(const std::string& xml_path) {
    if (!hwloc_environment().bypass.empty()) return {};
    const std::string what = xml_path.empty() ? topology_cache_key() : xml_file_key(xml_path);
    if (what.empty() || what.find('\n') != std::string::npos) return {};
    return "numabind-model 2; " + what;
}

namespace {

constexpr const char* kModelPrefix = "model-";
constexpr const char* kModelKeyTag = "numabind-model 2; ";

std::string model_path(const TopologyCacheOptions& o, const std::string& key) {
    return o.dir + "/" + kModelPrefix + hex64(fnv1a(key)) + ".txt";
}

// The highest id of a kernel list file ("0-3,8"), or -1 when it cannot be read.
int highest_in(const char* list_file) {
    try {
        return IdSet::parse(read_small(list_file)).last();
    } catch (const std::exception&) {
        return -1;
    }
}

// A model of this machine holds no CPU or node this kernel could ever have; one of an XML
// file, those any Linux machine could have (ModelLimits' defaults).
ModelLimits limits_for(const std::string& xml_path) {
    ModelLimits l;
    if (!xml_path.empty()) return l;
    if (const int pu = highest_in("/sys/devices/system/cpu/possible"); pu >= 0) l.max_pu = pu;
    const int node = highest_in("/sys/devices/system/node/possible");
    l.max_node = node >= 0 ? node : 0;  // no NUMA in sysfs: hwloc makes one node 0
    return l;
}

// The key a model file was written under (its first line), "" when unreadable.
std::string key_line_of(int dir_fd, const char* name) {
    const int fd = openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return {};
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return {};
    const std::string head(buf, static_cast<size_t>(n));
    const size_t eol = head.find('\n');
    return eol == std::string::npos ? std::string() : head.substr(0, eol);
}

// Whether the key written in a model file is still the key of what it was built from: this
// machine's (boot, CPUs, PCI, hwloc) or its XML file's (same file, same version). Several
// keys live at once (one XML per node, this machine); only dead ones are stale.
bool key_still_current(const std::string& key) {
    if (key.rfind(kModelKeyTag, 0) != 0) return false;
    const std::string what = key.substr(std::strlen(kModelKeyTag));
    if (what.rfind("xml ", 0) != 0) return key == node_model_key("");
    const size_t dev = what.find(" dev ");
    if (dev == std::string::npos) return false;
    return key == node_model_key(what.substr(4, dev - 4));
}

// After writing `mine`: removes the directory's model files whose key is dead.
void remove_stale_models(const TopologyCacheOptions& o, const std::string& mine) {
    DIR* d = opendir(o.dir.c_str());
    if (!d) return;
    const std::string own = mine.substr(mine.rfind('/') + 1);
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name == own || name.rfind(kModelPrefix, 0) != 0 || name.size() < 4 ||
            name.compare(name.size() - 4, 4, ".txt") != 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode) || !key_still_current(key_line_of(dirfd(d), e->d_name)))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

// Marker of "the model cache problem was said this boot" (beside the topology cache's).
std::string model_report_marker(const TopologyCacheOptions& o) { return topology_cache_report_marker(o) + ".model"; }

}  // namespace

std::vector<std::string> cache_report_lines(const ModelOutcome& out) {
    std::vector<std::string> lines;
    if (out.should_report) lines.push_back("model cache (" + out.path + "): " + out.detail);
    if (out.topology.should_report)
        lines.push_back("topology cache " + std::string(to_string(out.topology.result)) + " (" + out.topology.path +
                        "): " + out.topology.detail + "; every step discovers the node live until this is fixed");
    return lines;
}

LoadedModel load_node_model(const std::string& xml_path, const TopologyCacheOptions& options, ModelOutcome* outcome) {
    ModelOutcome local;
    ModelOutcome& out = outcome ? *outcome : local;
    out = ModelOutcome{};
    const std::string key = node_model_key(xml_path);
    bool problem = false;  // a file that was there but could not be used: worth an admin's look
    if (!key.empty()) {
        out.path = model_path(options, key);
        std::string why;
        bool absent = false;
        const std::string text = read_trusted(options, out.path, why, &absent);
        // key, source, model: one line each
        const size_t a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
        if (b != std::string::npos && text.compare(0, a, key) == 0 && a == key.size()) {
            try {
                LoadedModel m{model_from_text(std::string_view(text).substr(b + 1), limits_for(xml_path)),
                              // Messages about the model name where it was read, and what from.
                              "model cache " + out.path + " (of " + text.substr(a + 1, b - a - 1) + ")"};
                out.hit = true;
                return m;
            } catch (const std::exception& e) {
                out.detail = "unusable (" + std::string(e.what()) + "); ignored";
                problem = true;
            }
        } else {
            out.detail = text.empty() ? why : "belongs to another key; ignored";
            problem = !absent;
        }
    }
    LoadedModel m;
    {
        // hwloc only here, and not kept: with no topology left alive hwloc unloads its
        // plugins, so the process (slurmstepd, before it forks the tasks) is as small as before.
        std::unique_ptr<HwlocTopology> topo = xml_path.empty()
                                                  ? load_this_machine(options, &out.topology)
                                                  : std::make_unique<HwlocTopology>(LoadOptions{xml_path, true});
        m.model = topo->model();
        m.source = topo->source();
    }
    if (!key.empty() && options.write && geteuid() == 0 && m.source.find('\n') == std::string::npos) {
        try {
            write_atomic(options, out.path, key + "\n" + m.source + "\n" + model_to_text(m.model));
            if (problem) out.detail += "; rebuilt";
            remove_stale_models(options, out.path);
        } catch (const std::exception& e) {
            out.detail += (out.detail.empty() ? "" : "; ") + std::string(e.what());
            problem = true;
        }
    }
    // Said once per boot (the marker records it), by root only: the one who can fix it.
    if (problem && geteuid() == 0) {
        std::string note;
        out.should_report = first_report_this_boot(model_report_marker(options), note);
        if (out.should_report) out.detail += note.empty() ? "; said once per boot" : "; " + note + ", so said on every step";
    }
    return m;
}

}  // namespace numabind
