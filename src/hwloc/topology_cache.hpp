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
// device list (/sys/bus/pci/devices), and the hwloc variables of the environment that are
// fully described by their value (HWLOC_PLUGINS_BLACKLIST, HWLOC_ALLOW, *_VERBOSE...: see
// keyable_hwloc_variable). Any other HWLOC_* variable present, even empty (HWLOC_XMLFILE,
// HWLOC_FSROOT, HWLOC_PCI_LOCALITY, whose value may name a file the key cannot see, and any
// unknown one) bypasses the cache: live discovery, nothing read or written. Only euid 0 writes it (atomically: temporary file +
// rename); readers trust it only when the directory and the file are owned by root and
// not writable by group or others, and the file is a regular file (opened
// O_NONBLOCK|O_NOFOLLOW, checked with fstat: a FIFO or a symlink there is ignored, never
// waited on). A writer removes its directory's `.topology-XXXXXX` temporaries older than
// 60 s (left by a writer killed between mkstemp and rename).
// Any problem with the cache falls back to live discovery; it is never an error. A lasting
// one (bypassed, or root could not read or write it) sets CacheOutcome::should_report once
// per boot (marker file <dir>.reported holding the boot id), for the caller to log.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "numabind/hwloc_topology.hpp"

namespace numabind {

struct TopologyCacheOptions {
    std::string dir = "/run/numabind";
    bool write = true;          // after a live discovery, write the cache when running as root
    std::string report_marker;  // "": dir + ".reported" (e.g. /run/numabind.reported)
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
    // True when detail is a lasting problem (Disabled, or a Miss of a root writer) that has
    // not been said yet this boot: log detail once, in slurmd's log. Never for non-root.
    bool should_report = false;
};

// The key of this boot and machine (cheap: a few small /proc and /sys reads).
std::string topology_cache_key();
// The cache file for `key` inside options.dir.
std::string topology_cache_path(const TopologyCacheOptions& options, const std::string& key);

// The marker file that records "reported this boot" (see TopologyCacheOptions).
std::string topology_cache_report_marker(const TopologyCacheOptions& options);

// This machine's topology (as LoadOptions{"", true} would load it): from a valid, trusted
// cache file, else live; after a live load, writes the cache when euid is 0 and
// options.write. Throws Error only when live discovery itself fails.
std::unique_ptr<HwlocTopology> load_this_machine(const TopologyCacheOptions& options = {},
                                                 CacheOutcome* outcome = nullptr);

// Discovers this machine live and writes its cache (euid 0 only; creates options.dir
// 0755 if missing, replaces stale topology-*.xml files). Returns the path; throws Error,
// also when an HWLOC_* variable that bypasses the cache is set.
std::string write_topology_cache(const TopologyCacheOptions& options = {});

// The step engine's node model (the planner's Topology, not hwloc's), cached beside the
// topology cache as options.dir/model-<hash of the key>.txt (model_text.hpp, after a line with the key and one with the source) under the same trust and write
// rules, so that a step that finds it never initialises hwloc (whose plugins, kept mapped,
// would make every fork of a task dearer). The key: a format tag, then for this machine
// (`xml_path` empty) topology_cache_key(), for an hwloc XML file its path, device, inode,
// size, modification and change times, hwloc's version and the keyable HWLOC_* variables.
// No key (""), so no cache, while an HWLOC_* variable that bypasses the topology cache is set.
std::string node_model_key(const std::string& xml_path);

struct ModelOutcome {
    bool hit = false;
    std::string path;       // the model cache file looked up ("" without a key)
    std::string detail;     // why it was not used or not written
    // True when detail is a problem (a file there but unusable: cut short, changed, past the
    // limits, untrusted; or not written) not said yet this boot (marker
    // topology_cache_report_marker() + ".model"). Never for non-root.
    bool should_report = false;
    CacheOutcome topology;  // this machine, on a miss: the topology cache's own outcome
};
// The lines to log for an outcome (model and topology cache problems, each once per boot).
std::vector<std::string> cache_report_lines(const ModelOutcome& outcome);
struct LoadedModel {
    Topology model;
    std::string source;  // HwlocTopology::source() of the topology it was built from
};
// From a trusted model cache file with this key (read under ModelLimits: ids within this
// machine's possible CPUs and nodes, a size cap; its end line checked), else from hwloc (this machine through
// load_this_machine, or the XML file, as this system) without keeping the hwloc topology,
// writing the model cache when euid is 0 and options.write (a damaged one is rebuilt, and
// model files of keys no longer current are removed). On a hit, source names the cache file
// and what it was built from. Throws Error when hwloc fails.
LoadedModel load_node_model(const std::string& xml_path, const TopologyCacheOptions& options = {},
                            ModelOutcome* outcome = nullptr);

}  // namespace numabind
