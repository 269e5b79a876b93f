// Every binding mode on recorded GPU servers (the corpus, read in place; each test skips
// without it). Expected CPU sets come from hwloc-calc (an independent tool) and the corpus
// INDEX, never from numabind. generated_test.cpp covers every mode without the corpus.
#include <algorithm>

#include <gtest/gtest.h>

#include "numabind/error.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

IdSet numa_pus(const std::string& f, int os) { return calc_pus(f, "--pi numa:" + std::to_string(os)); }
IdSet l3_pus(const std::string& f, int logical) { return calc_pus(f, "l3cache:" + std::to_string(logical)); }
std::vector<int> l3s_of_numa(const std::string& f, int os) { return calc_logical(f, "l3cache", "--pi numa:" + std::to_string(os)); }
std::vector<int> cores_of(const std::string& f, const std::string& expr) { return calc_logical(f, "core", expr); }
IdSet cores_pus(const std::string& f, const std::vector<int>& cores, size_t from, size_t count) {
    std::string expr;
    for (size_t i = from; i < from + count; ++i) expr += " core:" + std::to_string(cores.at(i));
    return calc_pus(f, expr);
}

bool has_warning(const TaskPlan& t, const std::string& needle) {
    for (const auto& w : t.warnings)
        if (w.find(needle) != std::string::npos) return true;
    return false;
}

// JUWELS Booster: NPS4 EPYC, A100s on NUMA 1,3,5,7; PCI order 03:00 (node 3), 44:00 (1), 84:00 (7), c4:00 (5).
const std::string kJwb = "psmgmt_topo.jwb0001.xml";
const int kJwbHome[] = {3, 1, 7, 5};
const int kJwbPackage[] = {0, 0, 1, 1};

TEST(ModeNode, EachTaskGetsItsGpusNumaNode) {
    NUMABIND_REQUIRE_CORPUS();
    auto p = plan_for(kJwb, Mode::Node, 4);
    for (int r = 0; r < 4; ++r) {
        const TaskPlan& t = p.plan.tasks[r];
        ASSERT_NE(t.device, nullptr);
        EXPECT_EQ(t.device->index, r);
        EXPECT_EQ(t.cpus, numa_pus(kJwb, kJwbHome[r])) << r;
        EXPECT_EQ(t.mems, std::vector<int>{kJwbHome[r]});
        EXPECT_EQ(t.mem, MemPolicy::Prefer);
        EXPECT_TRUE(t.warnings.empty());
    }
}

TEST(ModeSocket, EachTaskGetsThePackageOfItsNode) {
    NUMABIND_REQUIRE_CORPUS();
    auto p = plan_for(kJwb, Mode::Socket, 4);
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(p.plan.tasks[r].cpus, calc_pus(kJwb, "--pi package:" + std::to_string(kJwbPackage[r])));
        EXPECT_EQ(p.plan.tasks[r].mems, std::vector<int>{kJwbHome[r]});  // memory stays on the GPU's node
    }
}

TEST(ModeExclusive, TwoTasksPerGpuSplitTheNodeOnL3Edges) {
    NUMABIND_REQUIRE_CORPUS();
    auto p = plan_for(kJwb, Mode::Exclusive, 8);
    for (int dev = 0; dev < 4; ++dev) {
        auto l3 = l3s_of_numa(kJwb, kJwbHome[dev]);
        ASSERT_EQ(l3.size(), 2u);
        // Ranks dev and dev+4 share the device; the lower rank comes first.
        EXPECT_EQ(p.plan.tasks[dev].cpus, l3_pus(kJwb, l3[0]));
        EXPECT_EQ(p.plan.tasks[dev + 4].cpus, l3_pus(kJwb, l3[1]));
        EXPECT_EQ(p.plan.tasks[dev + 4].device->index, dev);
    }
}

TEST(ModeExclusive, OneTaskPerNodeGetsTheWholeNode) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "psmgmt_topo.mel2001.xml";  // NPS4, A100s on 1,3,5,7
    auto p = plan_for(f, Mode::Exclusive, 4);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(p.plan.tasks[r].cpus, numa_pus(f, p.plan.tasks[r].mems.at(0)));
    std::vector<int> homes;
    for (auto& t : p.plan.tasks) homes.push_back(t.mems.at(0));
    std::sort(homes.begin(), homes.end());
    EXPECT_EQ(homes, (std::vector<int>{1, 3, 5, 7}));  // INDEX: GPUs on NUMA 1,3,5,7
}

TEST(ModeExclusive, SplitsOnlyAmongTasksSharingAHomeNotIdleGpus) {
    NUMABIND_REQUIRE_CORPUS();
    // g4dn.metal: 4 T4 per socket. Two tasks see devices 0 and 1 (node 0): the 24 cores of
    // node 0 go 12/12 between them, not 6/6 as if the idle GPUs 2 and 3 took cores too.
    const std::string f = "mpibind_g4dnmetal.xml";
    auto p = plan_for(f, Mode::Exclusive, 2, "", {0, 1});
    auto cores = cores_of(f, "--pi numa:0");
    ASSERT_EQ(cores.size(), 24u);
    EXPECT_EQ(p.plan.tasks[0].cpus, cores_pus(f, cores, 0, 12));
    EXPECT_EQ(p.plan.tasks[1].cpus, cores_pus(f, cores, 12, 12));
}

TEST(ModeExclusive, FourTasksOnOneSocketGetSixCoresEachWithSiblings) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "mpibind_g4dnmetal.xml";
    auto p = plan_for(f, Mode::Exclusive, 8);
    auto cores0 = cores_of(f, "--pi numa:0"), cores1 = cores_of(f, "--pi numa:1");
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(p.plan.tasks[r].cpus, cores_pus(f, cores0, 6 * r, 6)) << r;
        EXPECT_EQ(p.plan.tasks[r].cpus.size(), 12);  // 6 cores x 2 hardware threads
        EXPECT_EQ(p.plan.tasks[r + 4].cpus, cores_pus(f, cores1, 6 * r, 6)) << r + 4;
    }
}

TEST(ModeExclusive, RemainderGoesToTheFirstTasksAndGpuMemoryNodesAreIgnored) {
    NUMABIND_REQUIRE_CORPUS();
    // AC922 with GPU memory kept as NUMA nodes 250-255 (CPU-less); PCI ids blanked.
    const std::string f = "hwloc-linux_nvidiagpunumanodes-keptgpunuma.xml";
    auto p = plan_for(f, Mode::Exclusive, 6, "class=0x0300");
    auto cores0 = cores_of(f, "--pi numa:0"), cores8 = cores_of(f, "--pi numa:8");
    ASSERT_EQ(cores0.size(), 4u);  // 4 cores for 3 tasks: 2,1,1
    EXPECT_EQ(p.plan.tasks[0].cpus, cores_pus(f, cores0, 0, 2));
    EXPECT_EQ(p.plan.tasks[1].cpus, cores_pus(f, cores0, 2, 1));
    EXPECT_EQ(p.plan.tasks[2].cpus, cores_pus(f, cores0, 3, 1));
    EXPECT_EQ(p.plan.tasks[3].cpus, cores_pus(f, cores8, 0, 2));
    for (int r = 0; r < 6; ++r) EXPECT_EQ(p.plan.tasks[r].mems, std::vector<int>{r < 3 ? 0 : 8});
}

TEST(ModeExclusive, FewerCoresThanTasksSplitsThreadsAndFewerThreadsIsAnError) {
    NUMABIND_REQUIRE_CORPUS();
    // DGX-2 (trimmed): 16 V100s on 2 single-thread cores per socket.
    const std::string f = "hwloc_nvidiaDGX2.xml";
    auto p = plan_for(f, Mode::Exclusive, 2, "", {0, 1});
    EXPECT_EQ(p.plan.tasks[0].cpus, calc_pus(f, "core:0"));
    EXPECT_EQ(p.plan.tasks[1].cpus, calc_pus(f, "core:1"));
    try {
        plan_for(f, Mode::Exclusive, 16);
        FAIL() << "16 tasks on 4 PUs must not plan";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("PU"), std::string::npos) << e.what();
    }
    // Node mode with 16 tasks is fine: 8 per node.
    auto n = plan_for(f, Mode::Node, 16);
    for (int r = 0; r < 16; ++r) EXPECT_EQ(n.plan.tasks[r].cpus, numa_pus(f, r < 8 ? 0 : 1));
}

TEST(ModeCoreComplex, OneDistinctL3PerTask) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "mpibind_epyc-corona.xml";  // 8 NUMA, 3-core L3s, GPUs on 1,2,5,7
    const int home[] = {1, 2, 5, 7};
    auto p = plan_for(f, Mode::CoreComplex, 8);
    for (int dev = 0; dev < 4; ++dev) {
        auto l3 = l3s_of_numa(f, home[dev]);
        ASSERT_EQ(l3.size(), 2u);
        EXPECT_EQ(p.plan.tasks[dev].cpus, l3_pus(f, l3[0]));
        EXPECT_EQ(p.plan.tasks[dev + 4].cpus, l3_pus(f, l3[1]));
    }
    EXPECT_TRUE(p.plan.warnings.empty());
}

TEST(ModeCoreComplex, MoreTasksThanL3GroupsShareWholeGroupsEvenly) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "mpibind_epyc-corona.xml";
    auto p = plan_for(f, Mode::CoreComplex, 12);  // 3 tasks per GPU, 2 L3 per node
    auto l3 = l3s_of_numa(f, 1);
    ASSERT_EQ(l3.size(), 2u);
    EXPECT_EQ(p.plan.tasks[0].cpus, l3_pus(f, l3[0]));
    EXPECT_EQ(p.plan.tasks[4].cpus, l3_pus(f, l3[1]));
    EXPECT_EQ(p.plan.tasks[8].cpus, l3_pus(f, l3[0]));  // whole groups shared round-robin, as torch does
    EXPECT_FALSE(p.plan.warnings.empty());  // never silent sharing
}

TEST(ModeCoreComplex, Mi300aTpxPartitionsEachGetAnL3OfTheirApu) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "flux-core_tuo.TPX.xml";  // 4 APUs x 3 partitions, 3 L3 per APU
    auto p = plan_for(f, Mode::CoreComplex, 12);
    const char* pci[] = {"0000:02:00.0", "0001:02:00.0", "0002:02:00.0", "0003:02:00.0"};
    for (int apu = 0; apu < 4; ++apu) {
        auto l3 = l3s_of_numa(f, apu);
        ASSERT_EQ(l3.size(), 3u);
        for (int k = 0; k < 3; ++k) {
            const TaskPlan& t = p.plan.tasks[3 * apu + k];
            EXPECT_EQ(t.device->pci, pci[apu]);
            EXPECT_EQ(t.device->sub_index, k);
            EXPECT_EQ(t.cpus, l3_pus(f, l3[k]));
            EXPECT_EQ(t.mems, std::vector<int>{apu});
        }
    }
}

TEST(ModeNode, Mi300aSpxAndPowerWithCpuLessGpuMemory) {
    NUMABIND_REQUIRE_CORPUS();
    auto spx = plan_for("flux-core_tuo.SPX.xml", Mode::Node, 4);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(spx.plan.tasks[r].cpus, numa_pus("flux-core_tuo.SPX.xml", r));
    // Sierra / Lassen (hwloc 1 exports): GPU memory nodes 252-255 are CPU-less and never targets.
    for (const std::string f : {"flux-core_sierra.xml", "mpibind_coral-lassen-hwloc1.xml"}) {
        auto p = plan_for(f, Mode::Socket, 4);
        for (int r = 0; r < 4; ++r) {
            const int node = r < 2 ? 0 : 8;
            EXPECT_EQ(p.plan.tasks[r].cpus, calc_pus(f, "--pi package:" + std::to_string(node))) << f;
            EXPECT_EQ(p.plan.tasks[r].mems, std::vector<int>{node}) << f;
        }
        auto cc = plan_for(f, Mode::CoreComplex, 4);
        auto l3 = l3s_of_numa(f, 0);
        EXPECT_EQ(cc.plan.tasks[0].cpus, l3_pus(f, l3[0])) << f;
        EXPECT_EQ(cc.plan.tasks[1].cpus, l3_pus(f, l3[1])) << f;
    }
}

TEST(ModeNode, MachineLevelGpuIsLocalToAllNodesWithAWarning) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "psmgmt_topo.j3c053.xml";
    auto p = plan_for(f, Mode::Node, 2);
    for (auto& t : p.plan.tasks) {
        EXPECT_EQ(t.cpus, calc_pus(f, "all"));
        EXPECT_EQ(t.mems, (std::vector<int>{0, 1}));
        EXPECT_TRUE(has_warning(t, "no NUMA affinity")) << t.warnings.size();
    }
    // Both tasks share the home {0,1}: exclusive splits it, one L3 (socket) each.
    auto e = plan_for(f, Mode::Exclusive, 2);
    EXPECT_EQ(e.plan.tasks[0].cpus, l3_pus(f, 0));
    EXPECT_EQ(e.plan.tasks[1].cpus, l3_pus(f, 1));
}

TEST(ModeNode, SparseNumaIdsAndMixedVendors) {
    NUMABIND_REQUIRE_CORPUS();
    const std::string f = "flux-sched_chimera.xml";  // NVIDIA on node 0, AMD on node 2
    auto p = plan_for(f, Mode::Node, 1, "", {1});
    EXPECT_EQ(p.plan.tasks[0].device->pci, "0000:44:00.0");
    EXPECT_EQ(p.plan.tasks[0].cpus, numa_pus(f, 2));
    EXPECT_EQ(p.plan.tasks[0].mems, std::vector<int>{2});
    auto s = plan_for(f, Mode::Socket, 1, "", {1});
    EXPECT_EQ(s.plan.tasks[0].cpus, calc_pus(f, "--pi package:0"));
}

TEST(ModeNode, GpuWithoutAllowedLocalCpusFallsBackToNearestAllowed) {
    NUMABIND_REQUIRE_CORPUS();
    // SGI UV: both GPUs sit on packages whose CPUs are not allowed.
    const std::string f = "hwloc_64intel64-3g2n+2n-irregulargroups+pci.xml";
    auto p = plan_for(f, Mode::Node, 2);
    const IdSet allowed = calc_pus(f, "all");  // hwloc-calc only sees allowed PUs
    for (auto& t : p.plan.tasks) {
        EXPECT_FALSE(t.cpus.empty());
        EXPECT_TRUE(t.cpus.is_subset_of(allowed)) << t.cpus.to_string();
        EXPECT_TRUE(has_warning(t, "nearest allowed"));
    }
}

TEST(AllowedCpus, PlansStayInsideTheAllowedSet) {
    NUMABIND_REQUIRE_CORPUS();
    auto p = plan_for(kJwb, Mode::Node, 4, "", {}, "6-8,54-56,18-23");
    EXPECT_EQ(p.plan.tasks[1].cpus, IdSet::parse("6-8,54-56"));  // node 1 ∩ allowed
    EXPECT_EQ(p.plan.tasks[0].cpus, IdSet::parse("18-23"));      // node 3 ∩ allowed
    for (int r : {2, 3}) {  // nodes 7 and 5: nothing allowed there
        EXPECT_TRUE(p.plan.tasks[r].cpus.is_subset_of(IdSet::parse("6-8,54-56,18-23")));
        EXPECT_FALSE(p.plan.tasks[r].cpus.empty());
        EXPECT_TRUE(has_warning(p.plan.tasks[r], "nearest allowed"));
    }
    auto e = plan_for(kJwb, Mode::Exclusive, 8, "", {}, "18-23,66-71");
    for (auto& t : e.plan.tasks) EXPECT_TRUE(t.cpus.is_subset_of(IdSet::parse("18-23,66-71")));
}

TEST(AllowedCpus, NoAllowedCpuInTheTopologyIsAnError) {
    NUMABIND_REQUIRE_CORPUS();
    EXPECT_THROW(plan_for(kJwb, Mode::Node, 1, "", {}, "500-501"), Error);
}

TEST(Devices, TasksOutnumberDevicesAndVisibleListsPickDevices) {
    NUMABIND_REQUIRE_CORPUS();
    auto p = plan_for(kJwb, Mode::Node, 6, "", {2, 0});
    const int want[] = {2, 0, 2, 0, 2, 0};
    for (int r = 0; r < 6; ++r) EXPECT_EQ(p.plan.tasks[r].device->index, want[r]);
    EXPECT_EQ(p.plan.tasks[0].cpus, numa_pus(kJwb, 7));
    EXPECT_THROW(plan_for(kJwb, Mode::Node, 1, "", {9}), Error);
}

TEST(Devices, NoAcceleratorIsAClearErrorButModeNoneStillPlans) {
    NUMABIND_REQUIRE_CORPUS();
    try {
        plan_for(kJwb, Mode::Node, 1, "1234:5678");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no accelerator"), std::string::npos);
    }
    auto none = plan_for(kJwb, Mode::None, 2, "1234:5678");
    EXPECT_EQ(none.plan.tasks[0].device, nullptr);
    EXPECT_EQ(none.plan.tasks[0].mem, MemPolicy::None);
}

TEST(Plan, IsDeterministicAndCopySafe) {
    NUMABIND_REQUIRE_CORPUS();
    auto a = plan_for(kJwb, Mode::CoreComplex, 8);
    auto b = plan_for(kJwb, Mode::CoreComplex, 8);
    NodePlan copy = a.plan;
    for (int r = 0; r < 8; ++r) {
        EXPECT_EQ(a.plan.tasks[r].cpus, b.plan.tasks[r].cpus);
        EXPECT_EQ(copy.tasks[r].device->pci, a.plan.tasks[r].device->pci);
        EXPECT_GE(copy.tasks[r].device, copy.accelerators.data());
        EXPECT_LT(copy.tasks[r].device, copy.accelerators.data() + copy.accelerators.size());
    }
}

}  // namespace
