// Device ownership and every mode on the recorded GPU servers, for ntasks = 1, 2, n/2,
// n-1, n and 2n, plus a randomized property test over the corpus. The oracle is
// independent of numabind: GPU homes from the corpus's expected_gpu_locality.json
// (computed with hwloc-calc), cores, L3s and packages from hwloc-info on the same XML.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "numabind/error.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

// hwloc's bitmap text ("0x0000000f,,0x00000101": 32-bit words, most significant first,
// empty words are zero) as an IdSet.
IdSet parse_hwloc_bitmap(const std::string& text) {
    std::vector<std::string> words;
    std::stringstream in(text);
    for (std::string w; std::getline(in, w, ',');) words.push_back(w);
    IdSet out;
    for (size_t i = 0; i < words.size(); ++i) {
        std::string w = words[words.size() - 1 - i];
        if (w.rfind("0x", 0) == 0) w = w.substr(2);
        if (w.empty()) continue;
        const unsigned long bits = std::stoul(w, nullptr, 16);
        for (int b = 0; b < 32; ++b)
            if (bits >> b & 1UL) out.insert(static_cast<int>(i) * 32 + b);
    }
    return out;
}

// The cpusets of every object of a type, in logical order, from `hwloc-info -v`.
std::vector<IdSet> hwloc_objects(const std::string& file, const std::string& type) {
    const std::string out =
        run_command("hwloc-info --input '" + corpus(file) + "' -v " + type + ":all 2>/dev/null || true");
    std::vector<IdSet> sets;
    std::stringstream in(out);
    bool want = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("using object", 0) == 0 || line.find(" L#") != std::string::npos) want = true;
        const std::string key = " cpuset = ";
        if (want && line.rfind(key, 0) == 0) {
            sets.push_back(parse_hwloc_bitmap(line.substr(key.size())));
            want = false;
        }
    }
    return sets;
}

struct Gpu {
    std::string busid;
    // NUMA nodes with allowed CPUs that the GPU's locality intersects; empty when it has
    // no allowed local CPU (then numabind falls back to the nearest allowed nodes).
    std::vector<int> home;
    int l3 = -1;  // the one L3 (logical) its locality lies in, -1 when none or several
};

struct Oracle {
    std::string file;
    std::vector<Gpu> gpus;  // numabind's accelerator order: PCI order, partitions expanded
    std::map<int, IdSet> node_pus;  // CPU nodes only
    std::vector<IdSet> cores, l3s, packages;
    IdSet all;

    IdSet pus_of(const std::vector<int>& nodes) const {
        IdSet s;
        for (int n : nodes) s |= node_pus.at(n);
        return s;
    }
    // Cores (as their PU sets) that `pus` touches.
    int cores_touched(const IdSet& pus) const {
        return static_cast<int>(std::count_if(cores.begin(), cores.end(), [&](const IdSet& c) { return c.intersects(pus); }));
    }
};

const nlohmann::json& expected() {
    static const nlohmann::json j = [] {
        std::ifstream in(corpus("expected_gpu_locality.json"));
        return nlohmann::json::parse(in);
    }();
    return j;
}

Oracle oracle_for(const std::string& file) {
    Oracle o;
    o.file = file;
    const nlohmann::json& entry = expected()[file];
    for (auto& n : entry["numa"]) {
        const std::string pus = n["pus"].get<std::string>();
        if (!n["subtype"].is_null() || pus.empty() || pus == "-") continue;  // memory-only
        o.node_pus[std::stoi(n["os_index"].get<std::string>())] = IdSet::parse(pus);
    }
    std::vector<nlohmann::json> gpus;
    for (auto& g : entry["gpus"])
        if (g["compute"].get<bool>()) gpus.push_back(g);
    std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) {
        return a["busid"].template get<std::string>() < b["busid"].template get<std::string>();
    });
    for (auto& g : gpus) {
        Gpu gpu;
        gpu.busid = g["busid"];
        const IdSet isect = IdSet::parse(g["numa_isect"].get<std::string>());
        for (const auto& [os, pus] : o.node_pus)
            if (isect.contains(os)) gpu.home.push_back(os);
        const std::string l3 = g["l3"].is_string() ? g["l3"].get<std::string>() : "";
        if (!l3.empty() && l3.find_first_of(",-") == std::string::npos) gpu.l3 = std::stoi(l3);
        int rsmi = 0;
        for (auto& os : g["osdevs"]) rsmi += os.get<std::string>().rfind("rsmi", 0) == 0;
        for (int s = 0; s < std::max(1, rsmi); ++s) o.gpus.push_back(gpu);
    }
    o.cores = hwloc_objects(file, "core");
    o.l3s = hwloc_objects(file, "l3cache");
    o.packages = hwloc_objects(file, "package");
    for (const IdSet& c : o.cores) o.all |= c;
    return o;
}

// The recorded servers with compute GPUs, and the match a user would give for the ones
// whose PCI ids were blanked by their authors.
// The recorded servers with compute GPUs (known when CMake ran; one skipping placeholder
// without the corpus), and the match a user would give for the ones whose PCI ids were
// blanked by their authors.
std::vector<std::string> gpu_files() { return corpus_params(corpus_gpu_files()); }
std::string match_for(const std::string& file) {
    return file.find("nvidiagpunumanodes") != std::string::npos ? "class=0x0300" : "";
}

// The device ownership rule, written out again from its description (plan.hpp).
std::vector<std::vector<int>> owners(int ntasks, int n) {
    std::vector<std::vector<int>> out(ntasks);
    if (ntasks >= n) {
        for (int r = 0; r < ntasks; ++r) out[r] = {r % n};
        return out;
    }
    int next = 0;
    for (int r = 0; r < ntasks; ++r) {
        const int size = n / ntasks + (r < n % ntasks ? 1 : 0);
        for (int k = 0; k < size; ++k) out[r].push_back(next++);
    }
    return out;
}

std::vector<int> home_of_devices(const Oracle& o, const std::vector<int>& devices) {
    std::vector<int> nodes;
    for (int d : devices) nodes.insert(nodes.end(), o.gpus[d].home.begin(), o.gpus[d].home.end());
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    return nodes;
}

// Tasks whose homes share a CPU, through chains: the pools whose CPUs exclusive splits among their tasks.
std::vector<std::vector<int>> pools(const std::vector<IdSet>& homes) {
    std::vector<int> pool(homes.size(), -1);
    int count = 0;
    for (size_t seed = 0; seed < homes.size(); ++seed) {
        if (pool[seed] >= 0) continue;
        pool[seed] = count;
        IdSet cpus = homes[seed];
        for (bool grew = true; grew;) {
            grew = false;
            for (size_t t = 0; t < homes.size(); ++t)
                if (pool[t] < 0 && homes[t].intersects(cpus)) pool[t] = count, cpus |= homes[t], grew = true;
        }
        ++count;
    }
    std::vector<std::vector<int>> out(count);
    for (size_t t = 0; t < homes.size(); ++t) out[pool[t]].push_back(static_cast<int>(t));
    return out;
}

std::vector<int> task_counts(int n) {
    std::vector<int> counts = {1, 2, n / 2, n - 1, n, 2 * n};
    counts.erase(std::remove_if(counts.begin(), counts.end(), [](int c) { return c < 1; }), counts.end());
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

bool has_warning(const std::vector<std::string>& warnings, const std::string& needle) {
    return std::any_of(warnings.begin(), warnings.end(), [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

// Checks one plan against the oracle; `allowed` is the allowed PU set given to the planner.
void check_plan(const Oracle& o, Mode mode, const NodePlan& plan, const std::vector<std::vector<int>>& owned,
                const IdSet& allowed, const std::string& label) {
    const int ntasks = static_cast<int>(plan.tasks.size());
    std::vector<IdSet> homes(ntasks);
    for (int r = 0; r < ntasks; ++r) {
        const TaskPlan& t = plan.tasks[r];
        SCOPED_TRACE(label + " rank " + std::to_string(r));
        ASSERT_EQ(t.devices, owned[r]);
        ASSERT_NE(t.device, nullptr);
        EXPECT_EQ(t.device->index, owned[r].front());
        EXPECT_EQ(t.device->pci, o.gpus[owned[r].front()].busid);
        const std::vector<int> nodes = home_of_devices(o, owned[r]);
        homes[r] = o.pus_of(nodes) & allowed;
        const bool fallback = homes[r].empty();
        EXPECT_FALSE(t.cpus.empty()) << "every home that owns devices gets CPUs";
        EXPECT_TRUE(t.cpus.is_subset_of(allowed)) << t.cpus.to_string();
        if (fallback) {  // the documented nearest fallback: inside the allowed set, warned
            EXPECT_TRUE(has_warning(t.warnings, "no allowed CPU on NUMA node(s)")) << label;
            homes[r] = plan.tasks[r].cpus;
            continue;
        }
        // Memory nodes are the devices' home nodes.
        for (int m : t.mems) EXPECT_TRUE(std::find(nodes.begin(), nodes.end(), m) != nodes.end()) << m;
        switch (mode) {
            case Mode::Node:
                EXPECT_EQ(t.cpus, homes[r]);
                EXPECT_EQ(t.mems, nodes);
                break;
            case Mode::Socket: {
                IdSet sock;
                for (const IdSet& p : o.packages)
                    if (p.intersects(homes[r])) sock |= p;
                EXPECT_EQ(t.cpus, sock & allowed);
                break;
            }
            default:
                EXPECT_TRUE(t.cpus.is_subset_of(homes[r])) << t.cpus.to_string() << " not in " << homes[r].to_string();
        }
    }
    if (mode != Mode::Exclusive && mode != Mode::CoreComplex) return;
    // Exclusive: disjoint. Core-complex: tasks share only whole groups (torch.numa.binding).
    for (int a = 0; a < ntasks; ++a)
        for (int b = a + 1; b < ntasks; ++b)
            if (mode == Mode::Exclusive || plan.tasks[a].cpus != plan.tasks[b].cpus)
                EXPECT_FALSE(plan.tasks[a].cpus.intersects(plan.tasks[b].cpus))
                    << label << ": ranks " << a << " and " << b << " share CPUs";
    for (const std::vector<int>& pool : pools(homes)) {
        IdSet pool_cpus;
        for (int r : pool) pool_cpus |= homes[r];
        const int pool_cores = o.cores_touched(pool_cpus);
        // Whole cores (every allowed sibling) whenever the pool has a core per task.
        if (pool_cores >= static_cast<int>(pool.size())) {
            for (int r : pool)
                for (const IdSet& core : o.cores)
                    if (core.intersects(plan.tasks[r].cpus))
                        EXPECT_EQ(core & allowed & plan.tasks[r].cpus, core & allowed)
                            << label << " rank " << r << " has part of a core";
        }
        const bool one_home = std::all_of(pool.begin(), pool.end(), [&](int r) { return homes[r] == homes[pool[0]]; });
        if (!one_home) continue;
        // One home: nothing idle, and in exclusive mode core counts differ by at most one.
        IdSet used;
        for (int r : pool) used |= plan.tasks[r].cpus;
        if (mode == Mode::Exclusive) {
            EXPECT_EQ(used, pool_cpus) << label << ": idle CPUs in a home";
            if (pool_cores >= static_cast<int>(pool.size())) {
                int lo = INT32_MAX, hi = 0;
                for (int r : pool) {
                    lo = std::min(lo, o.cores_touched(plan.tasks[r].cpus));
                    hi = std::max(hi, o.cores_touched(plan.tasks[r].cpus));
                }
                std::string sets;
                for (int r : pool) sets += " " + plan.tasks[r].cpus.to_string();
                EXPECT_LE(hi - lo, 1) << label << ":" << sets;
            }
        } else if (!o.l3s.empty()) {
            // core-complex: each task's CPUs are one L3 inside the home. Tasks at least as
            // many as the parts: every part is used (shared whole, as torch.numa.binding
            // does). Fewer: no part with more allowed PUs of the same tier (the first
            // device's nodes, or the rest of the home) stays free while a smaller one is
            // used, unless it is an owned GPU's own L3.
            int parts_in_home = 0;
            for (const IdSet& l3 : o.l3s) parts_in_home += l3.intersects(pool_cpus) ? 1 : 0;
            if (static_cast<int>(pool.size()) >= parts_in_home) {
                for (const IdSet& l3 : o.l3s) {
                    if (!l3.intersects(pool_cpus)) continue;
                    bool used_whole = false;
                    for (int r : pool) used_whole |= plan.tasks[r].cpus == (l3 & pool_cpus);
                    EXPECT_TRUE(used_whole) << label << ": L3 part " << (l3 & pool_cpus).to_string()
                                            << " left unused with " << pool.size() << " tasks";
                }
                continue;
            }
            std::vector<int> part_of(plan.tasks.size(), -1);
            std::vector<bool> taken(o.l3s.size(), false);
            for (int r : pool) {
                for (size_t g = 0; g < o.l3s.size(); ++g)
                    if (!plan.tasks[r].cpus.empty() && (o.l3s[g] & pool_cpus) == plan.tasks[r].cpus) part_of[r] = static_cast<int>(g);
                ASSERT_GE(part_of[r], 0) << label << " rank " << r << ": CPUs " << plan.tasks[r].cpus.to_string()
                                         << " are not one L3 part of the home";
                taken[part_of[r]] = true;
            }
            for (int r : pool) {
                const int mine = part_of[r];
                bool own_l3 = false;
                for (int d : owned[r]) own_l3 |= o.gpus[d].l3 == mine;
                if (own_l3) continue;
                const IdSet first_nodes = o.pus_of(o.gpus[owned[r].front()].home) & pool_cpus;
                const bool tier0 = o.l3s[mine].intersects(first_nodes);
                const int my_pus = plan.tasks[r].cpus.size();
                for (size_t g = 0; g < o.l3s.size(); ++g) {
                    if (taken[g] || !o.l3s[g].intersects(pool_cpus)) continue;
                    const bool g_tier0 = o.l3s[g].intersects(first_nodes);
                    EXPECT_FALSE(g_tier0 && !tier0) << label << " rank " << r << ": L3 " << g
                                                    << " in the first GPU's node stayed free";
                    if (g_tier0 == tier0)
                        EXPECT_LE((o.l3s[g] & pool_cpus).size(), my_pus)
                            << label << " rank " << r << ": a larger free L3 part (" << g << ") was passed over";
                }
            }
        }
    }
}

class OwnershipOnCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnershipOnCorpus, EveryModeForOneTwoHalfAllButOneAllAndTwiceTheGpus) {
    const std::string file = GetParam();
    NUMABIND_REQUIRE_CORPUS_PARAM(file);
    NUMABIND_REQUIRE_CORPUS();
    const Oracle o = oracle_for(file);
    auto topo = load(file);
    const std::string match = match_for(file);
    auto accs = find_accelerators(topo->model(), match.empty() ? DeviceMatcher::builtin() : DeviceMatcher::parse(match));
    ASSERT_EQ(accs.size(), o.gpus.size()) << file;
    const int n = static_cast<int>(accs.size());
    const IdSet allowed = o.all;  // hwloc's allowed PUs of the recorded machine
    for (int ntasks : task_counts(n)) {
        for (Mode mode : {Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex}) {
            PlanRequest req;
            req.mode = mode;
            req.ntasks = ntasks;
            req.allowed_cpus = allowed;
            const std::string label = file + " " + to_string(mode) + " ntasks=" + std::to_string(ntasks);
            NodePlan plan;
            try {
                plan = plan_node(topo->model(), accs, req);
            } catch (const Error& e) {
                // Only an exclusive split with fewer PUs than tasks in a pool may refuse.
                ASSERT_TRUE(mode == Mode::Exclusive || mode == Mode::CoreComplex) << label << ": " << e.what();
                EXPECT_NE(std::string(e.what()).find("exclusive binding impossible"), std::string::npos) << e.what();
                continue;
            }
            check_plan(o, mode, plan, owners(ntasks, n), allowed, label);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Corpus, OwnershipOnCorpus, ::testing::ValuesIn(gpu_files()),
                         [](const auto& info) {
                             std::string s = info.param;
                             for (char& c : s)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return s;
                         });

// Random allowed sets x ownership (shared lists in random order, per-task lists) x modes.
TEST(OwnershipProperty, RandomAllowedSetsAndOwnershipKeepEveryInvariant) {
    NUMABIND_REQUIRE_CORPUS();
    std::mt19937 rng(20261201);
    int plans = 0, refusals = 0;
    for (const std::string& file : corpus_gpu_files()) {
        const Oracle o = oracle_for(file);
        auto topo = load(file);
        const std::string match = match_for(file);
        auto accs = find_accelerators(topo->model(), match.empty() ? DeviceMatcher::builtin() : DeviceMatcher::parse(match));
        const int n = static_cast<int>(accs.size());
        const std::vector<int> all_pus = o.all.ids();
        for (int trial = 0; trial < 12; ++trial) {
            // Allowed: whole NUMA nodes dropped at random, then single PUs dropped at random.
            IdSet allowed;
            for (const auto& [os, pus] : o.node_pus)
                if (rng() % 4 != 0) allowed |= pus;
            const int keep_pct = 50 + static_cast<int>(rng() % 51);
            IdSet thinned;
            for (int pu : allowed.ids())
                if (static_cast<int>(rng() % 100) < keep_pct) thinned.insert(pu);
            allowed = thinned.empty() ? IdSet{all_pus[rng() % all_pus.size()]} : thinned;

            PlanRequest req;
            req.mode = static_cast<Mode>(1 + rng() % 4);
            req.ntasks = 1 + static_cast<int>(rng() % (2 * n));
            req.allowed_cpus = allowed;
            std::vector<std::vector<int>> owned;
            if (rng() % 2) {  // one shared visible list, a random subset in random order
                std::vector<int> visible(n);
                for (int i = 0; i < n; ++i) visible[i] = i;
                std::shuffle(visible.begin(), visible.end(), rng);
                visible.resize(1 + rng() % n);
                req.visible_devices = visible;
                for (auto& own : owners(req.ntasks, static_cast<int>(visible.size()))) {
                    for (int& d : own) d = visible[d];
                    owned.push_back(own);
                }
            } else {  // every task its own list of 1-2 devices
                for (int r = 0; r < req.ntasks; ++r) {
                    std::vector<int> own = {static_cast<int>(rng() % n)};
                    if (rng() % 3 == 0 && n > 1) own.push_back((own[0] + 1) % n);
                    req.per_task_devices.push_back(own);
                }
                owned = req.per_task_devices;
            }
            const std::string label = file + " trial " + std::to_string(trial) + " " + to_string(req.mode) +
                                      " ntasks=" + std::to_string(req.ntasks) + " allowed=" + allowed.to_string();
            NodePlan plan;
            try {
                plan = plan_node(topo->model(), accs, req);
            } catch (const Error& e) {
                // Refusing is right only when some pool has fewer allowed PUs than tasks.
                ASSERT_TRUE(req.mode == Mode::Exclusive || req.mode == Mode::CoreComplex) << label << ": " << e.what();
                std::vector<IdSet> homes;
                for (auto& own : owned) {
                    IdSet h = o.pus_of(home_of_devices(o, own)) & allowed;
                    homes.push_back(h.empty() ? allowed : h);
                }
                bool short_pool = false;
                for (auto& pool : pools(homes)) {
                    IdSet cpus;
                    for (int r : pool) cpus |= homes[r];
                    short_pool |= cpus.size() < static_cast<int>(pool.size());
                    // A narrow home inside a wide pool may also run short of PUs.
                    for (int r : pool) {
                        int same = 0;
                        for (int q : pool) same += homes[q] == homes[r];
                        short_pool |= homes[r].size() < same;
                    }
                }
                EXPECT_TRUE(short_pool) << label << ": refused without a short pool: " << e.what();
                ++refusals;
                continue;
            }
            ++plans;
            check_plan(o, req.mode, plan, owned, allowed, label);
        }
    }
    EXPECT_GT(plans, 200);
    RecordProperty("plans", plans);
    RecordProperty("refusals", refusals);
}

// Whole L3 groups go to tasks before single-core ones, on the recorded POWER9 node: 23 L3s over 44 cores, some of
// one core; two tasks on NUMA 0 get two-core groups.
TEST(CoreComplexOnCorpus, Power9TwoTasksGetTwoCoreGroups) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "flux-core_sierra.xml";
    const Oracle o = oracle_for(f);
    auto p = plan_for(f, Mode::CoreComplex, 2, "", {0, 1});
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(o.cores_touched(p.plan.tasks[r].cpus), 2) << r << ": " << p.plan.tasks[r].cpus.to_string();
        EXPECT_TRUE(p.plan.tasks[r].cpus.is_subset_of(o.node_pus.at(0)));
    }
    EXPECT_FALSE(p.plan.tasks[0].cpus.intersects(p.plan.tasks[1].cpus));
}

// NPS4: 4 A100s on NUMA 1,3,5,7 of 8 (JUWELS Booster). Two tasks own two GPUs each, in PCI
// order: 03:00 (node 3) + 44:00 (node 1), 84:00 (node 7) + c4:00 (node 5).
TEST(OwnershipOnCorpus, Nps4TwoTasksOwnTwoGpusOnTwoNodesEach) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "psmgmt_topo.jwb0001.xml";
    for (Mode mode : {Mode::Node, Mode::Exclusive}) {
        auto p = plan_for(f, mode, 2);
        EXPECT_EQ(p.plan.tasks[0].mems, (std::vector<int>{1, 3}));
        EXPECT_EQ(p.plan.tasks[1].mems, (std::vector<int>{5, 7}));
        EXPECT_EQ(p.plan.tasks[0].cpus, calc_pus(f, "--pi numa:1 numa:3"));
        EXPECT_EQ(p.plan.tasks[1].cpus, calc_pus(f, "--pi numa:5 numa:7"));
    }
}

}  // namespace
