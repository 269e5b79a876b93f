// Adapter: loads a node's topology with hwloc (live or XML) and converts it to
// the planner's model. Loading is the expensive part; do it once per node/step.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "numabind/idset.hpp"
#include "numabind/topology.hpp"
#include "numabind/topology.hpp"

namespace numabind {

struct LoadOptions {
    LoadOptions(std::string path = {}, bool is_this_system = true)
        : xml_path(std::move(path)), this_system(is_this_system) {}
    static LoadOptions from_buffer(std::string xml, bool is_this_system = false) {
        LoadOptions o({}, is_this_system);
        o.xml_buffer = std::move(xml);
        return o;
    }
    std::string xml_path;       // empty: discover the live machine
    bool this_system = true;    // an XML describing the machine we run on
    std::string xml_buffer;     // XML text to load instead of a file (tests, fuzzing, caches)
};

// hwloc dlopens all its plugins at a process's first topology (and again whenever none
// is alive); GL/X11 and OpenCL cost milliseconds and are never needed here.
// HwlocTopology itself keeps their discovery off per topology
// (hwloc_topology_set_components: thread-safe, no environment), but only the environment
// variable HWLOC_PLUGINS_BLACKLIST, read when hwloc loads its plugins, avoids the dlopen
// itself. This guard sets HWLOC_PLUGINS_BLACKLIST=hwloc_gl,hwloc_opencl while alive unless
// it is already set (a site's choice wins) and unsets it on destruction. setenv(3) is not
// thread-safe: only single-threaded programs may use it (the CLI does, around its one
// load); never in slurmstepd, which runs other threads. The libxml2 importer is kept on
// purpose: hwloc 2.9's built-in one crashes on some malformed files
// (fuzz/known-hwloc-crashes/) and is no faster.
class ScopedQuietHwlocPlugins {
public:
    static constexpr const char* kVariable = "HWLOC_PLUGINS_BLACKLIST";
    static constexpr const char* kValue = "hwloc_gl,hwloc_opencl";
    ScopedQuietHwlocPlugins();
    ~ScopedQuietHwlocPlugins();
    ScopedQuietHwlocPlugins(const ScopedQuietHwlocPlugins&) = delete;
    ScopedQuietHwlocPlugins& operator=(const ScopedQuietHwlocPlugins&) = delete;

private:
    bool set_ = false;
};

class HwlocTopology {
public:
    // Throws Error with a one-line reason when hwloc cannot load the topology.
    explicit HwlocTopology(const LoadOptions& options);
    ~HwlocTopology();
    HwlocTopology(const HwlocTopology&) = delete;
    HwlocTopology& operator=(const HwlocTopology&) = delete;

    const Topology& model() const { return model_; }
    bool is_this_system() const { return this_system_; }
    const std::string& source() const { return source_; }

    // The CPUs and memory nodes this process may use, from the OS's cpuset/cgroup
    // (not the current affinity, which a launcher may have narrowed). Reread on
    // each call, so a forked task sees its own cgroup. For a foreign XML: everything.
    // Never empty: throws Error when the topology shares no CPU (no memory node) with
    // what this process may use, since an empty set means "all" to the planner.
    IdSet allowed_cpus() const;
    IdSet allowed_mems() const;
    // Both at once: one read of the OS restrictions (the task hook's hot path).
    using Allowed = AllowedSets;
    Allowed allowed() const;

    // hwloc XML (v2) of this topology, with extra name=value info attributes on the
    // root object (used by the per-boot cache, see topology_cache.hpp). Throws Error.
    std::string export_xml(const std::vector<std::pair<std::string, std::string>>& root_infos = {}) const;
    // An info attribute of the root object ("" when absent).
    std::string root_info(const std::string& name) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    Topology model_;
    bool this_system_ = true;
    std::string source_;
};

}  // namespace numabind
