// Adapter: a per-boot cache of this machine's hwloc topology as XML, so that a process
// (slurmstepd, `numabind run`) loads a small XML instead of discovering the machine live
// (sysfs walk, PCI scan, plugin loading: ~10x slower, see docs/PERFORMANCE.md).
//
// The file lives in a root-owned directory (default /run/numabind, mode 0755) and is named
// after a key that changes whenever the hardware view or hwloc changes:
//   topology-<64-bit hash of the key, 16 hex digits>.xml   (mode 0644, owner root)
// The key (also stored on the XML's root object as info "NumabindCacheKey" and checked
// after loading) holds: a format tag, hwloc's version (header and runtime API), the boot id
// (/proc/sys/kernel/random/boot_id), the possible and online CPU lists, and the PCI
// device list (/sys/bus/pci/devices). Only euid 0 writes it (atomically: temporary file +
// rename); readers trust it only when the directory and the file are owned by root and
// not writable by group or others, and the file is a regular file (opened O_NOFOLLOW).
// Any problem with the cache falls back to live discovery; it is never an error.
#pragma once

#include <memory>
#include <string>

#include "numabind/hwloc_topology.hpp"

namespace numabind {

struct TopologyCacheOptions {
    std::string dir = "/run/numabind";
    bool write = true;          // after a live discovery, write the cache when running as root
};

enum class CacheResult {
    Hit,       // loaded from the cache
    Written,   // discovered live, cache written
    Miss,      // discovered live, cache not written (not root, write=false, or a write error)
    Disabled,  // discovered live without looking (an HWLOC_* override variable is set)
};
const char* to_string(CacheResult r);

struct CacheOutcome {
    CacheResult result = CacheResult::Miss;
    std::string path;    // the cache file looked up / written
    std::string detail;  // one line: why the cache was not used or not written; empty on a hit
};

// The key of this boot and machine (cheap: a few small /proc and /sys reads).
std::string topology_cache_key();
// The cache file for `key` inside options.dir.
std::string topology_cache_path(const TopologyCacheOptions& options, const std::string& key);

// This machine's topology (as LoadOptions{"", true} would load it): from a valid, trusted
// cache file, else live; after a live load, writes the cache when euid is 0 and
// options.write. Throws Error only when live discovery itself fails.
std::unique_ptr<HwlocTopology> load_this_machine(const TopologyCacheOptions& options = {},
                                                 CacheOutcome* outcome = nullptr);

// Discovers this machine live and writes its cache (euid 0 only; creates options.dir
// 0755 if missing, replaces stale topology-*.xml files). Returns the path; throws Error.
std::string write_topology_cache(const TopologyCacheOptions& options = {});

}  // namespace numabind
