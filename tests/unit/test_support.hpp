// Shared helpers: topology paths (recorded corpus, generated shapes), loading, and
// hwloc-calc as an independent oracle.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

namespace numabind::test {

// The recorded corpus (other projects' files, read in place, never copied into the tree):
// $NUMABIND_TOPOLOGY_CORPUS at run time, else the directory CMake resolved at configure
// time (default ../shared/topologies beside the source tree).
inline std::string corpus_dir() {
    if (const char* v = std::getenv("NUMABIND_TOPOLOGY_CORPUS"); v && *v) return v;
    return NUMABIND_TOPOLOGY_CORPUS_DEFAULT;
}

inline bool corpus_present() {
    return access((corpus_dir() + "/expected_gpu_locality.json").c_str(), R_OK) == 0;
}

// The one line a skipped corpus test prints.
inline std::string corpus_skip_message() {
    return "recorded topology corpus not found at " + corpus_dir() +
           ": set NUMABIND_TOPOLOGY_CORPUS to the directory of its INDEX.md and expected_gpu_locality.json";
}

// First statement of every test that reads the corpus: skips the test when it is absent.
#define NUMABIND_REQUIRE_CORPUS()                                                           \
    do {                                                                                    \
        if (!::numabind::test::corpus_present()) GTEST_SKIP() << ::numabind::test::corpus_skip_message(); \
    } while (0)

inline std::string corpus(const std::string& name) {
    if (!corpus_present())
        throw std::runtime_error(corpus_skip_message() + " (and start the test with NUMABIND_REQUIRE_CORPUS())");
    return corpus_dir() + "/" + name;
}

inline std::vector<std::string> split_csv(const std::string& csv) {
    std::vector<std::string> out;
    std::stringstream in(csv);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

// Corpus files known when CMake ran (test names must not depend on the run-time corpus).
inline std::vector<std::string> corpus_xml_files() { return split_csv(NUMABIND_CORPUS_XMLS); }
inline std::vector<std::string> corpus_gpu_files() { return split_csv(NUMABIND_CORPUS_GPU_XMLS); }

// Parameters of a test over corpus files: the list, or one placeholder when CMake found no
// corpus (a parameterized test needs at least one instance; that one skips).
constexpr const char* kNoCorpusFiles = "corpus_not_configured";
inline std::vector<std::string> corpus_params(std::vector<std::string> files) {
    if (files.empty()) files.push_back(kNoCorpusFiles);
    return files;
}
#define NUMABIND_REQUIRE_CORPUS_PARAM(param)                                                          \
    do {                                                                                              \
        if ((param) == ::numabind::test::kNoCorpusFiles)                                              \
            GTEST_SKIP() << "the corpus was absent when CMake ran: re-run cmake with NUMABIND_TOPOLOGY_CORPUS set"; \
    } while (0)

// Generated shapes (tests/tools/gen_topology.py --preset NAME, written by the build):
// generated("dgx-a100") is an absolute path usable wherever a corpus name is.
inline std::vector<std::string> presets() { return split_csv(NUMABIND_TOPOLOGY_PRESETS); }
inline std::string generated(const std::string& preset) {
    return std::string(NUMABIND_GENERATED_TOPOLOGIES) + "/" + preset + ".xml";
}

// The generator's inputs for a preset (devices with bus id, kind, location, partitions,
// GPU-memory node; allowed CPUs). Which CPUs and nodes those mean comes from hwloc-calc.
inline nlohmann::json generated_facts(const std::string& preset) {
    const std::string path = std::string(NUMABIND_GENERATED_TOPOLOGIES) + "/" + preset + ".json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("generated topology facts missing: " + path + " (build the tests first)");
    return nlohmann::json::parse(in);
}

// What hwloc-calc and hwloc-info say about a generated topology (tests/tools/hwloc_oracle.py,
// run by the build): the expected values of tests on generated shapes, without one
// hwloc-calc process per question. NUMA nodes by OS index, other objects by logical index.
class HwlocFacts {
public:
    explicit HwlocFacts(const std::string& preset) {
        const std::string path = std::string(NUMABIND_GENERATED_TOPOLOGIES) + "/" + preset + ".hwloc.json";
        std::ifstream in(path);
        if (!in) throw std::runtime_error("hwloc facts missing: " + path + " (build the tests first)");
        j_ = nlohmann::json::parse(in);
    }
    IdSet allowed() const { return set(j_["allowed_pus"]); }  // hwloc-calc all
    IdSet all() const { return set(j_["all_pus"]); }          // hwloc-calc --disallowed all
    IdSet numa_pus(int os) const { return set(numa(os)["pus"]); }
    bool gpu_memory(int os) const { return numa(os)["gpu_memory"].get<bool>(); }
    std::vector<int> numa_l3s(int os) const { return numa(os)["l3"].get<std::vector<int>>(); }
    std::vector<int> numa_cores(int os) const { return numa(os)["cores"].get<std::vector<int>>(); }
    int numa_package(int os) const { return numa(os)["package"].at(0).get<int>(); }
    std::vector<int> cpu_nodes() const {  // NUMA nodes with CPUs (not GPU memory), by OS index
        std::vector<int> out;
        for (auto& [os, n] : j_["numa"].items())
            if (!n["gpu_memory"].get<bool>()) out.push_back(std::stoi(os));
        std::sort(out.begin(), out.end());
        return out;
    }
    IdSet l3_pus(int l3) const { return set(j_["l3"].at(l3)["pus"]); }
    std::vector<int> l3_cores(int l3) const { return j_["l3"].at(l3)["cores"].get<std::vector<int>>(); }
    std::vector<int> l3_numa(int l3) const { return j_["l3"].at(l3)["numa"].get<std::vector<int>>(); }
    IdSet core_pus(int core) const { return set(j_["cores"].at(core)); }
    IdSet cores_pus(const std::vector<int>& cores, size_t from, size_t count) const {
        IdSet out;
        for (size_t i = from; i < from + count; ++i) out = out | core_pus(cores.at(i));
        return out;
    }
    int ncores() const { return static_cast<int>(j_["cores"].size()); }
    IdSet package_pus(int pkg) const { return set(j_["packages"].at(pkg)); }
    // A PCI function: its locality (all PUs / allowed PUs), NUMA nodes (OS), L3s, package, OS devices.
    IdSet pci_pus(const std::string& bus) const { return set(pci(bus)["pus"]); }
    IdSet pci_allowed_pus(const std::string& bus) const { return set(pci(bus)["allowed_pus"]); }
    std::vector<int> pci_l3s(const std::string& bus) const { return pci(bus)["l3"].get<std::vector<int>>(); }
    int pci_package(const std::string& bus) const { return pci(bus)["package"].at(0).get<int>(); }
    std::vector<int> pci_cpu_nodes(const std::string& bus) const {  // GPU memory nodes left out
        std::vector<int> out;
        for (int n : pci(bus)["numa"].get<std::vector<int>>())
            if (!gpu_memory(n)) out.push_back(n);
        std::sort(out.begin(), out.end());
        return out;
    }
    std::vector<std::string> pci_osdevs(const std::string& bus) const {
        return pci(bus)["osdevs"].get<std::vector<std::string>>();
    }
    bool has_pci(const std::string& bus) const { return j_["pci"].contains(bus); }

private:
    static IdSet set(const nlohmann::json& s) { return IdSet::parse(s.get<std::string>()); }
    const nlohmann::json& numa(int os) const { return j_["numa"].at(std::to_string(os)); }
    const nlohmann::json& pci(const std::string& bus) const { return j_["pci"].at(bus); }
    nlohmann::json j_;
};

// A corpus file name, or an absolute path (generated topologies).
inline std::string topology_path(const std::string& name) {
    return !name.empty() && name.front() == '/' ? name : corpus(name);
}

inline std::unique_ptr<HwlocTopology> load(const std::string& name) {
    return std::make_unique<HwlocTopology>(LoadOptions{topology_path(name), false});
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

// hwloc-calc on a topology file; "--disallowed" in `expr` (all PUs, also those outside the
// allowed set an XML records) is moved before the options that need the topology.
inline std::string hwloc_calc(const std::string& file, const std::string& options, std::string expr) {
    std::string input = "--input '" + topology_path(file) + "'";
    const std::string all = "--disallowed";
    if (size_t at = expr.find(all); at != std::string::npos) {
        expr.erase(at, all.size());
        input += " " + all;
    }
    // Topology files do not change while the tests run: ask hwloc-calc each question once.
    static std::map<std::string, std::string> answers;
    const std::string cmd = "hwloc-calc " + input + " " + options + " " + expr;
    auto it = answers.find(cmd);
    if (it == answers.end()) it = answers.emplace(cmd, run_command(cmd)).first;
    return it->second;
}

// PUs (OS indexes) of an object expression, computed by hwloc-calc, not by numabind.
// Example: calc_pus("psmgmt_topo.jwb0001.xml", "l3cache:6") or ("...", "--pi numa:3").
// hwloc-calc sees only the allowed PUs of an XML that records an allowed set; add
// "--disallowed" to the expression for all of them.
inline IdSet calc_pus(const std::string& file, const std::string& expr) {
    return IdSet::parse(hwloc_calc(file, "--po -I pu", expr));
}

// Logical indexes of objects of `type` inside an expression, e.g. the cores of NUMA node 3.
inline std::vector<int> calc_logical(const std::string& file, const std::string& type, const std::string& expr) {
    return IdSet::parse(hwloc_calc(file, "-I " + type, expr)).ids();
}

// OS indexes of objects of `type` inside an expression, e.g. the NUMA nodes of pci=0000:03:00.0.
inline std::vector<int> calc_physical(const std::string& file, const std::string& type, const std::string& expr) {
    return IdSet::parse(hwloc_calc(file, "--po -I " + type, expr)).ids();
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
