// Discovery and every binding mode on generated GPU-node shapes (tests/tools/gen_topology.py
// --preset NAME, written by the build), so that the suite covers each mode and each shape
// without the recorded corpus. The generator's facts say only what was put in (bus ids,
// kinds, partitions); which CPUs, NUMA nodes, packages and L3 groups that means comes from
// hwloc-calc / hwloc-info on the generated file (tests/tools/hwloc_oracle.py, run by the
// build: <preset>.hwloc.json), never from numabind.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "numabind/error.hpp"
#include "numabind/report.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

// ---------------------------------------------------------------- facts
// hwloc's answers for a preset (HwlocFacts: hwloc-calc/hwloc-info, run by the build).
const HwlocFacts& hw(const std::string& preset) {
    static std::map<std::string, HwlocFacts> cache;
    auto it = cache.find(preset);
    if (it == cache.end()) it = cache.emplace(preset, HwlocFacts(preset)).first;
    return it->second;
}

struct Gpu {
    std::string busid, location;
    int partitions;
};

// The GPUs the generator put in, in PCI order (the order devices are numbered in).
std::vector<Gpu> gpus_of(const std::string& preset) {
    std::vector<Gpu> out;
    const nlohmann::json facts = generated_facts(preset);
    for (const auto& d : facts["devices"])
        if (d["gpu"].get<bool>())
            out.push_back({d["busid"].get<std::string>(), d["location"].get<std::string>(), d["partitions"].get<int>()});
    return out;
}

// Home NUMA node of each device index, from hwloc (single-node homes only).
std::vector<int> device_homes(const std::string& preset) {
    std::vector<int> homes;
    for (const Gpu& g : gpus_of(preset)) {
        auto nodes = hw(preset).pci_cpu_nodes(g.busid);
        EXPECT_EQ(nodes.size(), 1u) << preset << " " << g.busid;
        for (int p = 0; p < g.partitions; ++p) homes.push_back(nodes.empty() ? -1 : nodes[0]);
    }
    return homes;
}

// Task ranks grouped by the home node of their device (task r has device r mod ndevices).
std::map<int, std::vector<int>> ranks_by_home(const std::vector<int>& homes, int ntasks) {
    std::map<int, std::vector<int>> out;
    for (int r = 0; r < ntasks; ++r) out[homes[r % homes.size()]].push_back(r);
    return out;
}

bool has_warning(const TaskPlan& t, const std::string& needle) {
    for (const auto& w : t.warnings)
        if (w.find(needle) != std::string::npos) return true;
    return false;
}

void expect_disjoint(const NodePlan& plan) {
    for (size_t a = 0; a < plan.tasks.size(); ++a)
        for (size_t b = a + 1; b < plan.tasks.size(); ++b)
            EXPECT_FALSE(plan.tasks[a].cpus.intersects(plan.tasks[b].cpus)) << a << " and " << b;
}

// ---------------------------------------------------------------- discovery, every preset
class GeneratedLocality : public ::testing::TestWithParam<std::string> {};

TEST_P(GeneratedLocality, AcceleratorsMatchHwloc) {
    const std::string preset = GetParam();
    const HwlocFacts& h = hw(preset);
    auto topo = load(generated(preset));
    const auto accs = find_accelerators(topo->model(), DeviceMatcher::builtin());
    // hwloc-calc without --disallowed sees the allowed CPUs recorded in the XML.
    EXPECT_EQ(topo->allowed_cpus(), h.allowed());
    EXPECT_EQ(topo->model().all_pus(), h.all());
    const nlohmann::json facts = generated_facts(preset);
    if (!facts["allowed_cpus"].is_null()) EXPECT_EQ(h.allowed(), IdSet::parse(facts["allowed_cpus"].get<std::string>()));

    size_t next = 0;
    for (const Gpu& g : gpus_of(preset)) {
        SCOPED_TRACE(preset + " " + g.busid);
        ASSERT_TRUE(h.has_pci(g.busid)) << "hwloc does not see the generated GPU";
        for (int s = 0; s < g.partitions; ++s, ++next) {
            ASSERT_LT(next, accs.size()) << "missing accelerator";
            const Accelerator& a = accs[next];
            EXPECT_EQ(a.index, static_cast<int>(next));
            EXPECT_EQ(a.pci, g.busid);
            EXPECT_EQ(a.sub_index, s);
            EXPECT_EQ(a.sub_count, g.partitions);
            EXPECT_EQ(a.locality, h.pci_pus(g.busid));
            EXPECT_EQ(a.locality & h.allowed(), h.pci_allowed_pus(g.busid));
            if (g.location == "machine") {
                EXPECT_EQ(a.home_nodes, h.cpu_nodes());
                EXPECT_NE(a.home_warning.find("no NUMA affinity"), std::string::npos) << a.home_warning;
            } else {
                EXPECT_EQ(a.home_nodes, h.pci_cpu_nodes(g.busid));
                EXPECT_TRUE(a.home_warning.empty()) << a.home_warning;
            }
            if (topo->model().cache_level_name == "L3") EXPECT_EQ(l3_groups_of(topo->model(), a.locality), h.pci_l3s(g.busid));
        }
        // one OS device per partition and backend below the function (hwloc-info)
        EXPECT_EQ(h.pci_osdevs(g.busid).size() % g.partitions, 0u);
    }
    EXPECT_EQ(next, accs.size()) << "accelerators that are no GPU (NIC, NVSwitch, BMC VGA, NVMe)";
    // NUMA nodes: GPU memory nodes hold no CPU; the others own exactly their hwloc CPUs.
    for (const NumaNode& n : topo->model().numa_nodes) {
        if (h.gpu_memory(n.os_index)) {
            EXPECT_FALSE(n.has_cpus()) << n.os_index;
            EXPECT_EQ(n.subtype, "GPUMemory");
        } else {
            EXPECT_EQ(n.pus, h.numa_pus(n.os_index)) << n.os_index;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Preset, GeneratedLocality, ::testing::ValuesIn(presets()), [](const auto& info) {
    std::string n = info.param;
    for (char& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
});

TEST(GeneratedShapes, TheShapesTheTestsRelyOnAreHwlocFacts) {
    // Checked against hwloc, so that a generator change that loses one is reported here,
    // not as a puzzling planner failure.
    EXPECT_EQ(hw("power9").cpu_nodes(), (std::vector<int>{0, 8}));
    for (int n : {252, 253, 254, 255}) EXPECT_TRUE(hw("power9").gpu_memory(n)) << n;
    EXPECT_TRUE(hw("gh200").gpu_memory(1));
    EXPECT_EQ(hw("snc").numa_l3s(0), hw("snc").numa_l3s(1));  // one L3 spans both nodes of a socket
    EXPECT_EQ(hw("snc").l3_numa(0), (std::vector<int>{0, 1}));
    EXPECT_FALSE(hw("no-allowed-cpu").numa_pus(1).empty());  // node 1 has CPUs, none allowed
    EXPECT_FALSE(hw("no-allowed-cpu").numa_pus(1).intersects(hw("no-allowed-cpu").allowed()));
    EXPECT_EQ(hw("mixed-vendors").cpu_nodes(), (std::vector<int>{0, 2}));  // sparse NUMA ids
    EXPECT_EQ(gpus_of("16gpu").size(), 16u);
    EXPECT_EQ(hw("mi300a-tpx").pci_osdevs("0000:02:00.0").size(), 3u);  // rsmi0-2 below one function
    EXPECT_TRUE(gpus_of("cpu-only").empty());
    EXPECT_TRUE(find_accelerators(load(generated("cpu-only"))->model(), DeviceMatcher::builtin()).empty());
}

// ---------------------------------------------------------------- node
TEST(GeneratedNode, EachTaskGetsItsGpusNumaNode) {
    for (const std::string preset : {"nps4", "dgx-a100", "snc", "mi300a-spx", "16gpu", "mixed-vendors"}) {
        const auto homes = device_homes(preset);
        auto p = plan_for(generated(preset), Mode::Node, static_cast<int>(homes.size()));
        for (size_t r = 0; r < homes.size(); ++r) {
            const TaskPlan& t = p.plan.tasks[r];
            ASSERT_NE(t.device, nullptr);
            EXPECT_EQ(t.device->index, static_cast<int>(r));
            EXPECT_EQ(t.cpus, hw(preset).numa_pus(homes[r])) << preset << " " << r;
            EXPECT_EQ(t.mems, std::vector<int>{homes[r]}) << preset << " " << r;
            EXPECT_EQ(t.mem, MemPolicy::Prefer);
            EXPECT_TRUE(t.warnings.empty()) << preset;
        }
    }
}

TEST(GeneratedNode, CpuLessGpuMemoryNodesAreNeverTargets) {
    for (const std::string preset : {"power9", "gh200"}) {
        const auto homes = device_homes(preset);
        for (Mode mode : {Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex}) {
            auto p = plan_for(generated(preset), mode, static_cast<int>(homes.size()));
            for (size_t r = 0; r < homes.size(); ++r) {
                EXPECT_FALSE(hw(preset).gpu_memory(homes[r]));
                EXPECT_EQ(p.plan.tasks[r].mems, std::vector<int>{homes[r]}) << preset << " " << to_string(mode);
                EXPECT_FALSE(p.plan.tasks[r].cpus.empty());
                if (mode != Mode::Socket) EXPECT_TRUE(p.plan.tasks[r].cpus.is_subset_of(hw(preset).numa_pus(homes[r])));
            }
        }
    }
}

TEST(GeneratedNode, MachineLevelGpuIsLocalToAllNodesWithAWarning) {
    const HwlocFacts& h = hw("machine-gpu");
    auto p = plan_for(generated("machine-gpu"), Mode::Node, 2);
    for (auto& t : p.plan.tasks) {
        EXPECT_EQ(t.cpus, h.all());
        EXPECT_EQ(t.mems, h.cpu_nodes());
        EXPECT_TRUE(has_warning(t, "no NUMA affinity")) << t.warnings.size();
    }
    // Both tasks share the home (all nodes): exclusive splits it, one socket's L3 each.
    auto e = plan_for(generated("machine-gpu"), Mode::Exclusive, 2);
    EXPECT_EQ(e.plan.tasks[0].cpus, h.l3_pus(0));
    EXPECT_EQ(e.plan.tasks[1].cpus, h.l3_pus(1));
}

TEST(GeneratedNode, GpuWhoseNodeHasNoAllowedCpuFallsBackToTheNearestAllowed) {
    // The allowed CPUs recorded in the XML are those of NUMA node 0 (hwloc-calc "all").
    const HwlocFacts& h = hw("no-allowed-cpu");
    const auto homes = device_homes("no-allowed-cpu");
    ASSERT_EQ(homes.size(), 2u);
    ASSERT_FALSE(h.numa_pus(homes[1]).intersects(h.allowed()));
    auto p = plan_for(generated("no-allowed-cpu"), Mode::Node, 2);
    EXPECT_EQ(p.plan.tasks[0].cpus, h.numa_pus(homes[0]) & h.allowed());
    EXPECT_TRUE(p.plan.tasks[0].warnings.empty());
    const TaskPlan& t = p.plan.tasks[1];
    EXPECT_FALSE(t.cpus.empty());
    EXPECT_TRUE(t.cpus.is_subset_of(h.allowed())) << t.cpus.to_string();
    EXPECT_TRUE(has_warning(t, "nearest allowed"));
    // The same pair given as a request (a step's allowed set) on the unrestricted nps4: only
    // device 1's node allowed; the other devices' tasks fall back to it.
    const auto nhomes = device_homes("nps4");
    const IdSet only = hw("nps4").numa_pus(nhomes[1]);
    auto q = plan_for(generated("nps4"), Mode::Node, 4, "", {}, only.to_string());
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(q.plan.tasks[r].cpus, only) << r;
        EXPECT_EQ(has_warning(q.plan.tasks[r], "nearest allowed"), r != 1) << r;
    }
}

TEST(GeneratedNode, SparseNumaIdsAndMixedVendors) {
    const HwlocFacts& h = hw("mixed-vendors");
    const auto g = gpus_of("mixed-vendors");
    ASSERT_EQ(g.size(), 2u);
    const int amd_home = h.pci_cpu_nodes(g[1].busid).at(0);
    auto p = plan_for(generated("mixed-vendors"), Mode::Node, 1, "", {1});
    EXPECT_EQ(p.plan.tasks[0].device->pci, g[1].busid);
    EXPECT_EQ(p.plan.tasks[0].device->vendor, Vendor::Amd);
    EXPECT_EQ(p.plan.tasks[0].cpus, h.numa_pus(amd_home));
    EXPECT_EQ(p.plan.tasks[0].mems, std::vector<int>{amd_home});
    auto s = plan_for(generated("mixed-vendors"), Mode::Socket, 1, "", {1});
    EXPECT_EQ(s.plan.tasks[0].cpus, h.package_pus(h.pci_package(g[1].busid)));
}

// ---------------------------------------------------------------- socket
TEST(GeneratedSocket, EachTaskGetsThePackageOfItsNodeAndMemoryStaysOnTheNode) {
    for (const std::string preset : {"nps4", "dgx-a100", "power9", "snc"}) {
        const HwlocFacts& h = hw(preset);
        const auto g = gpus_of(preset);
        const auto homes = device_homes(preset);
        auto p = plan_for(generated(preset), Mode::Socket, static_cast<int>(g.size()));
        for (size_t r = 0; r < g.size(); ++r) {
            EXPECT_EQ(p.plan.tasks[r].cpus, h.package_pus(h.pci_package(g[r].busid))) << preset << " " << r;
            EXPECT_EQ(p.plan.tasks[r].mems, std::vector<int>{homes[r]}) << preset << " " << r;
        }
    }
}

// ---------------------------------------------------------------- exclusive
TEST(GeneratedExclusive, TwoTasksPerGpuSplitTheNodeOnL3Edges) {
    const HwlocFacts& h = hw("nps4");
    const auto homes = device_homes("nps4");
    auto p = plan_for(generated("nps4"), Mode::Exclusive, 8);
    for (int dev = 0; dev < 4; ++dev) {
        auto l3 = h.numa_l3s(homes[dev]);
        ASSERT_EQ(l3.size(), 2u);
        EXPECT_EQ(p.plan.tasks[dev].cpus, h.l3_pus(l3[0]));  // ranks dev and dev+4 share the device
        EXPECT_EQ(p.plan.tasks[dev + 4].cpus, h.l3_pus(l3[1]));
        EXPECT_EQ(p.plan.tasks[dev + 4].device->index, dev);
    }
    expect_disjoint(p.plan);
}

// Exclusive on a shape with several tasks per node: each node's cores go in equal contiguous
// blocks to the tasks whose devices live there, one block each. With one task per device the
// blocks follow the device (= rank) order; with more, only the block set is fixed here.
void expect_even_split(const std::string& preset, int ntasks) {
    const HwlocFacts& h = hw(preset);
    const auto homes = device_homes(preset);
    auto p = plan_for(generated(preset), Mode::Exclusive, ntasks);
    for (const auto& [home, ranks] : ranks_by_home(homes, ntasks)) {
        const auto cores = h.numa_cores(home);
        ASSERT_EQ(cores.size() % ranks.size(), 0u) << preset << " node " << home;
        const size_t each = cores.size() / ranks.size();
        std::vector<IdSet> blocks;
        for (size_t i = 0; i < ranks.size(); ++i) blocks.push_back(h.cores_pus(cores, i * each, each));
        for (size_t i = 0; i < ranks.size(); ++i) {
            const IdSet& got = p.plan.tasks[ranks[i]].cpus;
            if (static_cast<size_t>(ntasks) == homes.size())
                EXPECT_EQ(got, blocks[i]) << preset << " rank " << ranks[i] << ": " << got.to_string();
            else
                EXPECT_NE(std::find(blocks.begin(), blocks.end(), got), blocks.end())
                    << preset << " rank " << ranks[i] << ": " << got.to_string() << " is not one block of node " << home;
        }
    }
    expect_disjoint(p.plan);
}

TEST(GeneratedExclusive, TasksOfANodeSplitItsCoresInContiguousBlocks) {
    expect_even_split("dgx-a100", 8);    // 2 GPUs per node: halves
    expect_even_split("dgx-a100", 16);   // 4 tasks per node
    expect_even_split("16gpu", 16);      // 8 GPUs per socket-wide node
    expect_even_split("snc", 8);         // the node's cores, not the socket-wide L3
    expect_even_split("mi300a-spx", 8);  // 2 tasks per APU
    expect_even_split("power9", 4);      // GPU memory nodes take no cores
}

TEST(GeneratedExclusive, OnlyTheDevicesInUseSplitTheirNode) {
    const HwlocFacts& h = hw("dgx-a100");
    const auto homes = device_homes("dgx-a100");
    ASSERT_EQ(homes[4], homes[5]);
    auto two = plan_for(generated("dgx-a100"), Mode::Exclusive, 2, "", {4, 5});
    auto cores = h.numa_cores(homes[4]);
    EXPECT_EQ(two.plan.tasks[0].cpus, h.cores_pus(cores, 0, cores.size() / 2));
    EXPECT_EQ(two.plan.tasks[1].cpus, h.cores_pus(cores, cores.size() / 2, cores.size() / 2));
}

TEST(GeneratedExclusive, MoreTasksThanPusIsAnError) {
    const HwlocFacts& h = hw("workstation");
    const int npus = h.all().size();
    auto ok = plan_for(generated("workstation"), Mode::Exclusive, 2);  // both GPUs on the one node
    std::vector<int> cores(h.ncores());
    for (int c = 0; c < h.ncores(); ++c) cores[c] = c;
    EXPECT_EQ(ok.plan.tasks[0].cpus, h.cores_pus(cores, 0, cores.size() / 2));
    EXPECT_EQ(ok.plan.tasks[1].cpus, h.cores_pus(cores, cores.size() / 2, cores.size() / 2));
    try {
        plan_for(generated("workstation"), Mode::Exclusive, npus + 1);
        FAIL() << npus + 1 << " tasks on " << npus << " PUs must not plan";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PU"), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------- core-complex
TEST(GeneratedCoreComplex, OneDistinctL3PerTask) {
    const HwlocFacts& h = hw("dgx-a100");
    auto p = plan_for(generated("dgx-a100"), Mode::CoreComplex, 8);
    for (const auto& [home, ranks] : ranks_by_home(device_homes("dgx-a100"), 8)) {
        auto l3 = h.numa_l3s(home);
        ASSERT_GE(l3.size(), ranks.size());
        for (size_t i = 0; i < ranks.size(); ++i) EXPECT_EQ(p.plan.tasks[ranks[i]].cpus, h.l3_pus(l3[i])) << ranks[i];
    }
    EXPECT_TRUE(p.plan.warnings.empty());
}

// As torch.numa.binding (test_core_complex_numa_binding_with_fewer_l3_than_gpu): whole
// groups, shared round-robin (as evenly as possible), never split unevenly into cores.
TEST(GeneratedCoreComplex, MoreTasksThanL3GroupsShareWholeGroupsEvenly) {
    const HwlocFacts& h = hw("nps4");  // 2 L3 groups of 3 cores per node
    const auto homes = device_homes("nps4");
    auto p = plan_for(generated("nps4"), Mode::CoreComplex, 12);  // 3 tasks per GPU: ranks 0, 4, 8 on GPU 0
    auto l3 = h.numa_l3s(homes[0]);
    ASSERT_EQ(l3.size(), 2u);
    EXPECT_EQ(p.plan.tasks[0].cpus, h.l3_pus(l3[0]));
    EXPECT_EQ(p.plan.tasks[4].cpus, h.l3_pus(l3[1]));
    EXPECT_EQ(p.plan.tasks[8].cpus, h.l3_pus(l3[0]));  // shares the first group with rank 0
    ASSERT_EQ(p.plan.warnings.size(), 4u);  // one per GPU home: never silent sharing
    EXPECT_NE(p.plan.warnings[0].find("shared by up to 2 tasks"), std::string::npos) << p.plan.warnings[0];
}

TEST(GeneratedCoreComplex, Mi300aTpxPartitionsEachGetAnL3OfTheirApu) {
    const HwlocFacts& h = hw("mi300a-tpx");
    auto p = plan_for(generated("mi300a-tpx"), Mode::CoreComplex, 12);
    size_t r = 0;
    for (const Gpu& apu : gpus_of("mi300a-tpx")) {
        const int home = h.pci_cpu_nodes(apu.busid).at(0);
        auto l3 = h.numa_l3s(home);
        ASSERT_EQ(l3.size(), static_cast<size_t>(apu.partitions));
        for (int k = 0; k < apu.partitions; ++k, ++r) {
            const TaskPlan& t = p.plan.tasks[r];
            EXPECT_EQ(t.device->pci, apu.busid);
            EXPECT_EQ(t.device->sub_index, k);
            EXPECT_EQ(t.cpus, h.l3_pus(l3[k]));
            EXPECT_EQ(t.mems, std::vector<int>{home});
        }
    }
    EXPECT_EQ(r, 12u);
}

TEST(GeneratedCoreComplex, AnL3SpanningTwoNodesIsCutAtTheNode) {
    const HwlocFacts& h = hw("snc");
    const auto g = gpus_of("snc");
    const auto homes = device_homes("snc");
    auto p = plan_for(generated("snc"), Mode::CoreComplex, 4);
    for (int r = 0; r < 4; ++r) {
        const int l3 = h.pci_l3s(g[r].busid).at(0);
        EXPECT_EQ(p.plan.tasks[r].cpus, h.l3_pus(l3) & h.numa_pus(homes[r])) << r;
        EXPECT_NE(p.plan.tasks[r].cpus, h.l3_pus(l3));
    }
    expect_disjoint(p.plan);
}

TEST(GeneratedCoreComplex, CpuLessGpuMemoryKeepsTheSocketsL3s) {
    const HwlocFacts& h = hw("power9");
    const auto homes = device_homes("power9");
    auto cc = plan_for(generated("power9"), Mode::CoreComplex, 4);
    for (const auto& [home, ranks] : ranks_by_home(homes, 4)) {
        auto l3 = h.numa_l3s(home);
        for (size_t i = 0; i < ranks.size(); ++i) EXPECT_EQ(cc.plan.tasks[ranks[i]].cpus, h.l3_pus(l3[i])) << ranks[i];
    }
}

// ---------------------------------------------------------------- allowed CPUs, devices
TEST(GeneratedAllowedCpus, PlansStayInsideTheAllowedSet) {
    const HwlocFacts& h = hw("nps4");
    const auto homes = device_homes("nps4");
    // part of device 1's node and all of device 0's; devices 2 and 3 have nothing allowed
    const IdSet part = h.cores_pus(h.numa_cores(homes[1]), 0, 3);
    const IdSet allowed = part | h.numa_pus(homes[0]);
    auto p = plan_for(generated("nps4"), Mode::Node, 4, "", {}, allowed.to_string());
    EXPECT_EQ(p.plan.tasks[1].cpus, part);
    EXPECT_EQ(p.plan.tasks[0].cpus, h.numa_pus(homes[0]));
    for (int r : {2, 3}) {
        EXPECT_TRUE(p.plan.tasks[r].cpus.is_subset_of(allowed));
        EXPECT_FALSE(p.plan.tasks[r].cpus.empty());
        EXPECT_TRUE(has_warning(p.plan.tasks[r], "nearest allowed"));
    }
    auto e = plan_for(generated("nps4"), Mode::Exclusive, 8, "", {}, h.numa_pus(homes[0]).to_string());
    for (auto& t : e.plan.tasks) EXPECT_TRUE(t.cpus.is_subset_of(h.numa_pus(homes[0])));
    EXPECT_THROW(plan_for(generated("nps4"), Mode::Node, 1, "", {}, "500-501"), Error);
}

TEST(GeneratedDevices, TasksOutnumberDevicesAndVisibleListsPickDevices) {
    const auto homes = device_homes("nps4");
    auto p = plan_for(generated("nps4"), Mode::Node, 6, "", {2, 0});
    const int want[] = {2, 0, 2, 0, 2, 0};
    for (int r = 0; r < 6; ++r) EXPECT_EQ(p.plan.tasks[r].device->index, want[r]);
    EXPECT_EQ(p.plan.tasks[0].cpus, hw("nps4").numa_pus(homes[2]));
    EXPECT_THROW(plan_for(generated("nps4"), Mode::Node, 1, "", {9}), Error);
}

TEST(GeneratedDevices, NoAcceleratorIsAClearErrorButModeNoneStillPlans) {
    for (const std::string& match : {std::string("1234:5678"), std::string()}) {
        const std::string f = generated(match.empty() ? "cpu-only" : "nps4");
        try {
            plan_for(f, Mode::Node, 1, match);
            FAIL() << f;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("no accelerator"), std::string::npos) << e.what();
        }
        auto none = plan_for(f, Mode::None, 2, match);
        EXPECT_EQ(none.plan.tasks[0].device, nullptr);
        EXPECT_EQ(none.plan.tasks[0].mem, MemPolicy::None);
    }
}

TEST(GeneratedPlan, IsDeterministicAndCopySafe) {
    auto a = plan_for(generated("dgx-a100"), Mode::CoreComplex, 16);
    auto b = plan_for(generated("dgx-a100"), Mode::CoreComplex, 16);
    NodePlan copy = a.plan;
    for (int r = 0; r < 16; ++r) {
        EXPECT_EQ(a.plan.tasks[r].cpus, b.plan.tasks[r].cpus);
        EXPECT_EQ(copy.tasks[r].device->pci, a.plan.tasks[r].device->pci);
        EXPECT_GE(copy.tasks[r].device, copy.accelerators.data());
        EXPECT_LT(copy.tasks[r].device, copy.accelerators.data() + copy.accelerators.size());
    }
}

}  // namespace
