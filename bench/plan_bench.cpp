// Google Benchmark for the engine: planning every task of a node (plan_node),
// accelerator matching (find_accelerators), the hwloc -> model conversion from an XML
// file and from an XML buffer, and live discovery of this machine.
//
// Topologies: generated GPU-node shapes (NUMABIND_GEN_DIR, gen_topology.py --preset, written
// by bench/CMakeLists.txt) always, and the recorded corpus where it is (read in place from
// $NUMABIND_TOPOLOGY_CORPUS, else the configured NUMABIND_TOPO_DIR; cases skipped without it).
// Planning benchmarks hold only the planner's plain-data model: no hwloc topology is
// alive while they run, so the load benchmarks pay hwloc's per-process plugin set-up
// exactly as a fresh slurmstepd does.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hwloc/topology_cache.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

namespace nb = numabind;

namespace {

struct Case {
    const char* name;  // short label used in benchmark names
    std::string path;
    const char* match;  // --device-match spec, "" = built-in table
};

std::string topo_dir() {
    if (const char* v = std::getenv("NUMABIND_TOPOLOGY_CORPUS"); v && *v) return v;
    return NUMABIND_TOPO_DIR;
}
std::string gen_dir() { return NUMABIND_GEN_DIR; }

std::vector<Case> cases() {
    std::vector<Case> all = {
        {"gen-dgx-a100", gen_dir() + "/dgx-a100.xml", ""},        // 256 PUs, 8 NUMA, 32 L3, 8 GPUs
        {"gen-16gpu", gen_dir() + "/16gpu.xml", ""},              // 96 PUs, 2 NUMA, 16 GPUs
        {"gen-mi300a-tpx", gen_dir() + "/mi300a-tpx.xml", ""},    // 192 PUs, MI300A TPX: 12 logical GPUs
        {"gen-nps4", gen_dir() + "/nps4.xml", ""},                // 96 PUs, 8 NUMA, 16 L3, 4 GPUs
        {"gen-dgx-h100", gen_dir() + "/dgx-h100.xml", ""},        // 112 PUs, 8 GPUs, 8 HCAs behind their switches
    };
    const std::vector<Case> corpus = {
        {"jsfc005", topo_dir() + "/psmgmt_topo.jsfc005.xml", ""},                 // 256 PUs, 8 NUMA, 32 L3, 1 GPU
        {"jsfc005-16gpu", gen_dir() + "/jsfc005-16gpu.xml", ""},                  // + 16 fake GPUs, 2 per NUMA node
        {"dgx2", topo_dir() + "/hwloc_nvidiaDGX2.xml", ""},                       // 16 GPUs
        {"tuo-tpx", topo_dir() + "/flux-core_tuo.TPX.xml", ""},                   // MI300A TPX: 12 logical GPUs
        {"epyc-corona", topo_dir() + "/mpibind_epyc-corona.xml", ""},             // 96 PUs, 8 NUMA, 4 GPUs
        {"jwb0001", topo_dir() + "/psmgmt_topo.jwb0001.xml", ""},                 // 96 PUs, 8 NUMA, 4 GPUs
    };
    for (const Case& c : corpus) {
        if (std::filesystem::exists(c.path))
            all.push_back(c);
        else
            std::fprintf(stderr, "plan_bench: %s skipped: %s not found (set NUMABIND_TOPOLOGY_CORPUS)\n", c.name,
                         c.path.c_str());
    }
    return all;
}

struct Loaded {
    nb::Topology model;
    std::vector<nb::Accelerator> accs;
};

// Models are loaded once and kept as plain data (the hwloc topology is destroyed).
const Loaded& loaded(const Case& c) {
    static std::map<std::string, Loaded> cache;
    auto it = cache.find(c.name);
    if (it != cache.end()) return it->second;
    Loaded l;
    {
        nb::HwlocTopology t({c.path, false});
        l.model = t.model();
    }
    l.accs = nb::find_accelerators(l.model, *c.match ? nb::DeviceMatcher::parse(c.match) : nb::DeviceMatcher::builtin());
    return cache.emplace(c.name, std::move(l)).first->second;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void bm_plan(benchmark::State& state, Case c, nb::Mode mode, int ntasks) {
    const Loaded& l = loaded(c);
    nb::PlanRequest req;
    req.mode = mode;
    req.mem = nb::MemPolicy::Bind;
    req.ntasks = ntasks;
    try {
        nb::plan_node(l.model, l.accs, req);
    } catch (const std::exception& e) {  // e.g. exclusive with more tasks than PUs (DGX-2 XML: 4 PUs)
        state.SkipWithError(e.what());
        return;
    }
    for (auto _ : state) {
        nb::NodePlan plan = nb::plan_node(l.model, l.accs, req);
        benchmark::DoNotOptimize(plan.tasks.data());
    }
    state.counters["tasks"] = ntasks;
    state.counters["gpus"] = static_cast<double>(l.accs.size());
    state.counters["nics"] = static_cast<double>(nb::fabric_nics(l.model).size());  // planned per task too
}

// The NIC share of plan_node (issue 22): the node's fabric NICs and each GPU's nearest ones,
// one task per GPU.
void bm_nics(benchmark::State& state, Case c) {
    const Loaded& l = loaded(c);
    for (auto _ : state) {
        const std::vector<nb::Nic> nics = nb::fabric_nics(l.model);
        for (size_t d = 0; d < l.accs.size(); ++d) {
            auto mine = nb::nics_for_devices(l.model, nics, l.accs, {static_cast<int>(d)});
            benchmark::DoNotOptimize(mine.data());
        }
    }
    state.counters["nics"] = static_cast<double>(nb::fabric_nics(l.model).size());
    state.counters["gpus"] = static_cast<double>(l.accs.size());
}

void bm_find_accelerators(benchmark::State& state, Case c) {
    const Loaded& l = loaded(c);
    const nb::DeviceMatcher m = *c.match ? nb::DeviceMatcher::parse(c.match) : nb::DeviceMatcher::builtin();
    for (auto _ : state) {
        auto accs = nb::find_accelerators(l.model, m);
        benchmark::DoNotOptimize(accs.data());
    }
    state.counters["pci"] = static_cast<double>(l.model.pci_devices.size());
    state.counters["gpus"] = static_cast<double>(l.accs.size());
}

// quiet: hwloc's GL and OpenCL plugins not loaded (what HwlocTopology does by itself,
// nb::ScopedQuietHwlocPlugins); loud: every installed plugin is loaded, by setting
// HWLOC_PLUGINS_BLACKLIST to "" (a site's own value, which HwlocTopology leaves alone).
class PluginSetting {
public:
    explicit PluginSetting(bool quiet) {
        if (quiet) return;
        if (const char* v = std::getenv(kVar)) saved_ = v;
        setenv(kVar, "", 1);
        loud_ = true;
    }
    ~PluginSetting() {
        if (!loud_) return;
        if (saved_) setenv(kVar, saved_->c_str(), 1); else unsetenv(kVar);
    }
    PluginSetting(const PluginSetting&) = delete;
    PluginSetting& operator=(const PluginSetting&) = delete;

private:
    static constexpr const char* kVar = nb::ScopedQuietHwlocPlugins::kVariable;
    std::optional<std::string> saved_;
    bool loud_ = false;
};

void bm_load_xml_file(benchmark::State& state, Case c, bool quiet) {
    PluginSetting plugins(quiet);
    const nb::LoadOptions o(c.path, false);
    for (auto _ : state) {
        nb::HwlocTopology t(o);
        benchmark::DoNotOptimize(t.model().cores.data());
    }
    state.SetLabel(std::to_string(slurp(c.path).size() / 1024) + " KiB");
}

void bm_load_xml_buffer(benchmark::State& state, Case c, bool quiet) {
    PluginSetting plugins(quiet);
    const nb::LoadOptions o = nb::LoadOptions::from_buffer(slurp(c.path), false);
    for (auto _ : state) {
        nb::HwlocTopology t(o);
        benchmark::DoNotOptimize(t.model().cores.data());
    }
}

// Live discovery of this machine (hwloc's plugin set-up included: no topology is alive
// between iterations, so each one loads the plugins again, as a new process does).
void bm_load_live(benchmark::State& state, bool quiet) {
    PluginSetting plugins(quiet);
    const nb::LoadOptions o;  // live
    for (auto _ : state) {
        nb::HwlocTopology t(o);
        benchmark::DoNotOptimize(t.model().cores.data());
    }
}

// This machine's topology exported as XML once (what the per-boot cache holds), in a
// temporary directory that main() removes.
std::string g_tmpdir;
std::string this_machine_xml() {
    static std::string path;
    if (path.empty()) {
        char dir[] = "/tmp/numabind-bench-XXXXXX";
        if (!mkdtemp(dir)) throw nb::Error("mkdtemp failed");
        g_tmpdir = dir;
        path = std::string(dir) + "/this-machine.xml";
        std::ofstream(path) << nb::HwlocTopology(nb::LoadOptions{}).export_xml();
    }
    return path;
}

void bm_load_this_machine_xml(benchmark::State& state, bool quiet) {
    PluginSetting plugins(quiet);
    const nb::LoadOptions o(this_machine_xml(), true);
    for (auto _ : state) {
        nb::HwlocTopology t(o);
        benchmark::DoNotOptimize(t.model().cores.data());
    }
}

// The cache's fast path end to end: key (boot id, CPU and PCI lists), trust checks,
// read, load from the buffer, key check. Root only (only root-owned caches are trusted).
void bm_cache_hit(benchmark::State& state, bool quiet) {
    if (geteuid() != 0) {
        state.SkipWithError("needs root (the cache only trusts root-owned files)");
        return;
    }
    nb::TopologyCacheOptions o;
    o.dir = this_machine_xml().substr(0, this_machine_xml().rfind('/')) + "/cache";
    PluginSetting plugins(quiet);
    nb::write_topology_cache(o);
    nb::CacheOutcome out;
    for (auto _ : state) {
        auto t = nb::load_this_machine(o, &out);
        benchmark::DoNotOptimize(t->model().cores.data());
    }
    if (out.result != nb::CacheResult::Hit) state.SkipWithError(("cache not hit: " + out.detail).c_str());
}

void bm_cache_key(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(nb::topology_cache_key());
}

const std::vector<std::pair<const char*, nb::Mode>> kModes = {
    {"none", nb::Mode::None},           {"node", nb::Mode::Node},
    {"socket", nb::Mode::Socket},       {"exclusive", nb::Mode::Exclusive},
    {"core-complex", nb::Mode::CoreComplex},
};

// The widest list IdSet accepts (issue 21 item 4: ranges are filled a word at a time; id by
// id this was ~13 ms).
void bm_idset_parse_range(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(numabind::IdSet::parse("0-1048575"));
}

int register_all() {
    for (const Case& c : cases()) {
        int ngpu = 0;
        try {
            ngpu = static_cast<int>(loaded(c).accs.size());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "plan_bench: skipping %s: %s\n", c.name, e.what());
            continue;
        }
        // Realistic task counts: one per GPU, two per GPU, and 16 (more tasks than GPUs
        // where the node has few).
        std::vector<int> counts = {ngpu, 2 * ngpu};
        if (ngpu < 16) counts.push_back(16);
        for (const auto& [mname, mode] : kModes) {
            for (int n : counts) {
                if (n < 1) continue;
                benchmark::RegisterBenchmark(
                    ("plan_node/" + std::string(c.name) + "/" + mname + "/tasks:" + std::to_string(n)).c_str(),
                    bm_plan, c, mode, n);
            }
        }
        benchmark::RegisterBenchmark(("find_accelerators/" + std::string(c.name)).c_str(), bm_find_accelerators, c);
        benchmark::RegisterBenchmark(("nics/" + std::string(c.name)).c_str(), bm_nics, c);
        for (bool quiet : {false, true}) {
            const std::string sfx = quiet ? "/quiet" : "";
            benchmark::RegisterBenchmark(("load_xml_file/" + std::string(c.name) + sfx).c_str(), bm_load_xml_file, c,
                                         quiet)
                ->Unit(benchmark::kMillisecond);
            benchmark::RegisterBenchmark(("load_xml_buffer/" + std::string(c.name) + sfx).c_str(),
                                         bm_load_xml_buffer, c, quiet)
                ->Unit(benchmark::kMillisecond);
        }
    }
    for (bool quiet : {false, true}) {
        const std::string sfx = quiet ? "/quiet" : "";
        benchmark::RegisterBenchmark(("load_live/this-machine" + sfx).c_str(), bm_load_live, quiet)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("load_xml_file/this-machine" + sfx).c_str(), bm_load_this_machine_xml, quiet)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("topology_cache/hit" + sfx).c_str(), bm_cache_hit, quiet)
            ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark("topology_cache/key", bm_cache_key);
    benchmark::RegisterBenchmark("idset_parse/0-1048575", bm_idset_parse_range);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (!g_tmpdir.empty()) std::filesystem::remove_all(g_tmpdir);
    return 0;
}
