// Shared helpers: corpus paths, loading, and hwloc-calc as an independent oracle.
#pragma once

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "numabind/accelerators.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

namespace numabind::test {

inline std::string corpus(const std::string& name) {
    return std::string(NUMABIND_TEST_DATA) + "/topologies/" + name;
}

inline std::unique_ptr<HwlocTopology> load(const std::string& name) {
    return std::make_unique<HwlocTopology>(LoadOptions{corpus(name), false});
}

inline std::string run_command(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen failed: " + cmd);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (pclose(p) != 0) throw std::runtime_error("command failed: " + cmd);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

// PUs (OS indexes) of an object expression, computed by hwloc-calc, not by numabind.
// Example: calc_pus("psmgmt_topo.jwb0001.xml", "l3cache:6") or ("...", "--pi numa:3").
inline IdSet calc_pus(const std::string& file, const std::string& expr) {
    return IdSet::parse(run_command("hwloc-calc --input '" + corpus(file) + "' --po -I pu " + expr));
}

// Logical indexes of objects of `type` inside an expression, e.g. the cores of NUMA node 3.
inline std::vector<int> calc_logical(const std::string& file, const std::string& type, const std::string& expr) {
    IdSet s = IdSet::parse(run_command("hwloc-calc --input '" + corpus(file) + "' -I " + type + " " + expr));
    return s.ids();
}

struct Planned {
    std::unique_ptr<HwlocTopology> topo;
    NodePlan plan;
};

inline Planned plan_for(const std::string& file, Mode mode, int ntasks, const std::string& match = "",
                        std::vector<int> visible = {}, const std::string& allowed = "") {
    Planned p;
    p.topo = load(file);
    auto accs = find_accelerators(p.topo->model(),
                                  match.empty() ? DeviceMatcher::builtin() : DeviceMatcher::parse(match));
    PlanRequest req;
    req.mode = mode;
    req.ntasks = ntasks;
    req.visible_devices = std::move(visible);
    req.allowed_cpus = allowed.empty() ? p.topo->allowed_cpus() : IdSet::parse(allowed);
    p.plan = plan_node(p.topo->model(), accs, req);
    return p;
}

}  // namespace numabind::test
