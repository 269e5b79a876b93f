// Each planner stage on its own (src/core/plan_stages.hpp), on hand-built models
// whose right answer can be read off the model, plus regression tests of placement
// defects found on real nodes.
#include <gtest/gtest.h>

#include <numeric>

#include "core/plan_stages.hpp"
#include "numabind/error.hpp"
#include "numabind/plan.hpp"

using namespace numabind;
using namespace numabind::planning;

namespace {

using Lists = std::vector<std::vector<int>>;

// `nodes` NUMA nodes x `cores` cores x `threads` threads; PU os index = core * threads + t;
// one L3 per `l3_cores` consecutive cores (never across nodes); one package per node.
Topology model(int nodes, int cores, int threads, int l3_cores) {
    Topology t;
    const int per_node = cores;
    for (int n = 0; n < nodes; ++n) {
        IdSet node_pus;
        for (int c = 0; c < per_node; ++c) {
            const int core = n * per_node + c;
            IdSet pus;
            for (int k = 0; k < threads; ++k) pus.insert(core * threads + k);
            const int l3 = core / l3_cores;
            if (static_cast<int>(t.l3_groups.size()) <= l3) t.l3_groups.resize(l3 + 1);
            t.l3_groups[l3].pus |= pus;
            t.cores.push_back({pus, l3, n});
            node_pus |= pus;
        }
        t.packages.push_back({n, node_pus});
        NumaNode node;
        node.os_index = n;
        node.pus = node.locality = node_pus;
        t.numa_nodes.push_back(node);
    }
    return t;
}

// One NVIDIA GPU below `locality` (machine level when it is every PU).
PciDevice gpu(int bus, const IdSet& locality, bool machine_level = false, int l3 = -1) {
    PciDevice d;
    char addr[16];
    std::snprintf(addr, sizeof addr, "0000:%02x:00.0", bus);
    d.address = addr;
    d.vendor = 0x10de;
    d.class_id = 0x0302;
    d.locality = locality;
    d.machine_level = machine_level;
    d.l3 = l3;
    return d;
}

IdSet cores_pus(const Topology& t, int first, int count) {
    IdSet s;
    for (int c = first; c < first + count; ++c) s |= t.cores[c].pus;
    return s;
}

bool mentions(const std::vector<std::string>& warnings, const std::string& needle) {
    for (const auto& w : warnings)
        if (w.find(needle) != std::string::npos) return true;
    return false;
}

// ---- 1. devices per task ----

TEST(AssignDevices, MoreTasksThanDevicesCycleModuloN) {
    EXPECT_EQ(assign_devices(5, {4, 6}, {}), (Lists{{4}, {6}, {4}, {6}, {4}}));
    EXPECT_EQ(assign_devices(2, {3, 1}, {}), (Lists{{3}, {1}}));
}

TEST(AssignDevices, FewerTasksThanDevicesGetContiguousBlocksLargerFirst) {
    EXPECT_EQ(assign_devices(1, {0, 1, 2, 3, 4, 5, 6, 7}, {}), (Lists{{0, 1, 2, 3, 4, 5, 6, 7}}));
    EXPECT_EQ(assign_devices(3, {0, 1, 2, 3, 4, 5, 6, 7}, {}), (Lists{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
    // Blocks follow the visible list's order, not the physical one.
    EXPECT_EQ(assign_devices(2, {7, 6, 5}, {}), (Lists{{7, 6}, {5}}));
}

TEST(AssignDevices, OwnListsWinAndAreKeptWhole) {
    EXPECT_EQ(assign_devices(2, {0, 1, 2, 3}, {{3, 2}, {}}), (Lists{{3, 2}, {2, 3}}));
    EXPECT_EQ(assign_devices(2, {}, {{1}, {0}}), (Lists{{1}, {0}}));
    EXPECT_EQ(assign_devices(2, {}, {}), (Lists{{}, {}}));
}

TEST(DevicesPerTask, AllAcceleratorsWhenNothingIsVisibleAndIndexesChecked) {
    PlanRequest req;
    req.ntasks = 2;
    EXPECT_EQ(devices_per_task(req, 4), (Lists{{0, 1}, {2, 3}}));
    req.visible_devices = {4};
    EXPECT_THROW(devices_per_task(req, 4), Error);
    req.visible_devices = {};
    req.per_task_devices = {{0}, {-1}};
    EXPECT_THROW(devices_per_task(req, 4), Error);
}

// ---- 2. homes ----

TEST(HomeOf, UnionOfTheOwnedDevicesHomes) {
    Topology t = model(2, 4, 2, 4);
    t.pci_devices = {gpu(0x10, t.numa_nodes[0].pus), gpu(0x20, t.numa_nodes[1].pus)};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    const IdSet all = t.all_pus();
    Home both = home_of(t, accs, {0, 1}, all);
    EXPECT_EQ(both.device_nodes, (std::vector<int>{0, 1}));
    EXPECT_EQ(both.cpus, all);
    EXPECT_TRUE(both.warnings.empty());
    Home one = home_of(t, accs, {1}, all);
    EXPECT_EQ(one.nodes, std::vector<int>{1});
    EXPECT_EQ(one.cpus, t.numa_nodes[1].pus);
}

TEST(HomeOf, NoAllowedCpuAtHomeFallsBackToTheNearestNodeWithAWarning) {
    Topology t = model(3, 2, 1, 2);
    t.distances = {{{0, 0}, 10}, {{0, 1}, 32}, {{0, 2}, 21}, {{1, 1}, 10}, {{1, 0}, 32}, {{1, 2}, 32},
                   {{2, 2}, 10}, {{2, 0}, 21}, {{2, 1}, 32}};
    t.pci_devices = {gpu(0x10, t.numa_nodes[0].pus)};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    Home h = home_of(t, accs, {0}, t.numa_nodes[1].pus | t.numa_nodes[2].pus);
    EXPECT_EQ(h.device_nodes, std::vector<int>{0});
    EXPECT_EQ(h.nodes, std::vector<int>{2});  // distance 21 beats 32
    EXPECT_EQ(h.cpus, t.numa_nodes[2].pus);
    EXPECT_TRUE(mentions(h.warnings, "no allowed CPU on NUMA node(s) 0"));
}

// ---- 3. pools and splits ----

TEST(PoolsOf, ChainedOverlapsFormOnePoolOrderedByFirstDevice) {
    Home a, b, c, d;
    a.cpus = IdSet{0, 1};
    b.cpus = IdSet{1, 2};  // overlaps a
    c.cpus = IdSet{2, 3};  // overlaps b only: same pool through the chain
    d.cpus = IdSet{8};
    const Lists devices = {{5}, {1}, {2}, {0}};
    EXPECT_EQ(pools_of({a, b, c, d}, devices), (Lists{{3}, {1, 2, 0}}));
}

TEST(SocketCpus, EveryAllowedPuOfTheTouchedPackages) {
    Topology t = model(2, 4, 2, 4);
    EXPECT_EQ(socket_cpus(t, IdSet{2}, t.all_pus()), t.packages[0].pus);
    EXPECT_EQ(socket_cpus(t, IdSet{2}, IdSet{0, 1, 2, 3}), (IdSet{0, 1, 2, 3}));
}

TEST(SplitExclusive, WholeCoresContiguousAndRemainderFirst) {
    Topology t = model(1, 5, 2, 5);
    std::vector<std::string> w;
    auto parts = split_exclusive(t, t.all_pus(), 2, "node 0", w);
    EXPECT_EQ(parts[0], cores_pus(t, 0, 3));
    EXPECT_EQ(parts[1], cores_pus(t, 3, 2));
    EXPECT_TRUE(w.empty());
}

TEST(SplitExclusive, L3EdgesWhereTheCountsAllow) {
    Topology t = model(1, 8, 1, 2);  // 4 L3s of 2 cores
    std::vector<std::string> w;
    auto parts = split_exclusive(t, t.all_pus(), 4, "node 0", w);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(parts[p], t.l3_groups[p].pus) << p;
}

// More tasks than cores: the split of hardware threads is said (12 tasks, 8-core SMT2 node).
TEST(SplitExclusive, MoreTasksThanCoresSaysHowManyShareACore) {
    Topology t = model(1, 8, 2, 8);
    std::vector<std::string> w;
    auto parts = split_exclusive(t, t.all_pus(), 12, "NUMA node(s) 0", w);
    // 16 threads over 12 tasks: tasks 0-3 get both threads of cores 0-1... in thread order.
    IdSet seen;
    for (const IdSet& p : parts) {
        EXPECT_FALSE(p.intersects(seen));
        seen |= p;
    }
    EXPECT_EQ(seen, t.all_pus());
    ASSERT_EQ(w.size(), 1u);
    // Threads 0-7 go two to a task (whole cores 0-3); tasks 4-11 get one thread each and
    // share cores 4-7 pairwise.
    EXPECT_NE(w[0].find("12 tasks on NUMA node(s) 0 but only 8 core(s): 8 task(s) share"), std::string::npos) << w[0];
    EXPECT_THROW(split_exclusive(t, t.all_pus(), 17, "NUMA node(s) 0", w), Error);
}

TEST(SplitExclusivePool, OneHomeIsTheWholeHomeSplit) {
    Topology t = model(1, 6, 1, 6);
    std::vector<Home> homes(3);
    for (Home& h : homes) h.cpus = t.all_pus(), h.nodes = {0};
    std::vector<std::string> w;
    auto parts = split_exclusive_pool(t, homes, {0, 1, 2}, w);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(parts[p], cores_pus(t, 2 * p, 2));
}

TEST(SplitExclusivePool, SmallestHomeFirstTakesItsFairShareCappedByItsHome) {
    Topology t = model(2, 4, 1, 4);  // node 0: cores 0-3, node 1: cores 4-7
    // Three tasks on node 0 and one on both nodes: fair share of node 0's group is 3/4 of
    // 8 cores = 6, capped at node 0's 4; the wide task gets node 1.
    std::vector<Home> homes(4);
    for (int i = 0; i < 3; ++i) homes[i].cpus = t.numa_nodes[0].pus, homes[i].nodes = {0};
    homes[3].cpus = t.all_pus(), homes[3].nodes = {0, 1};
    std::vector<std::string> w;
    auto parts = split_exclusive_pool(t, homes, {0, 1, 2, 3}, w);
    EXPECT_EQ(parts[0], cores_pus(t, 0, 2));
    EXPECT_EQ(parts[1], cores_pus(t, 2, 1));
    EXPECT_EQ(parts[2], cores_pus(t, 3, 1));
    EXPECT_EQ(parts[3], t.numa_nodes[1].pus);
    // One task on node 0 and three on both: node 0's task takes 8/4 = 2 cores, the three
    // wide tasks share the remaining 6.
    std::vector<Home> homes2 = {homes[0], homes[3], homes[3], homes[3]};
    auto parts2 = split_exclusive_pool(t, homes2, {0, 1, 2, 3}, w);
    EXPECT_EQ(parts2[0], cores_pus(t, 0, 2));
    EXPECT_EQ(parts2[1], cores_pus(t, 2, 2));
    EXPECT_EQ(parts2[2], cores_pus(t, 4, 2));
    EXPECT_EQ(parts2[3], cores_pus(t, 6, 2));
}

// Whole L3 groups first: on POWER9 with 1-core L3 groups, rank 0 must not get one core
// while 2-core groups stay free.
TEST(SplitCoreComplexPool, LargestFreePartFirstAmongEquallyNearOnes) {
    Topology t = model(1, 5, 4, 1);
    // L3 groups: {core 0}, {cores 1,2}, {cores 3,4}
    t.l3_groups = {{cores_pus(t, 0, 1)}, {cores_pus(t, 1, 2)}, {cores_pus(t, 3, 2)}};
    t.cores[0].l3 = 0, t.cores[1].l3 = t.cores[2].l3 = 1, t.cores[3].l3 = t.cores[4].l3 = 2;
    t.pci_devices = {gpu(0x10, t.all_pus()), gpu(0x20, t.all_pus())};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    std::vector<Home> homes(2);
    for (Home& h : homes) h.cpus = t.all_pus(), h.nodes = h.device_nodes = {0};
    std::vector<std::string> w;
    auto parts = split_core_complex_pool(t, accs, homes, {{0}, {1}}, {0, 1}, w);
    EXPECT_EQ(parts[0], t.l3_groups[1].pus);
    EXPECT_EQ(parts[1], t.l3_groups[2].pus);
    EXPECT_TRUE(w.empty());
    // A third task must take the 1-core group: that is said.
    homes.push_back(homes[0]);
    parts = split_core_complex_pool(t, accs, homes, {{0}, {1}, {0}}, {0, 2, 1}, w);
    EXPECT_EQ(parts[2], t.l3_groups[0].pus);
    EXPECT_TRUE(mentions(w, "parts of unequal size handed out (1 to 2 cores per task)"));
}

// torch.numa.binding's test_core_complex_prefers_caches_with_more_cpus: an allowed set
// that splits cores. L3 0 (PUs 0-5) keeps PUs 0 and 4 (2 cores), L3 1 (6-11) keeps 6, 7, 9
// (also 2 cores), L3 2 none: the group with more allowed hardware threads wins.
TEST(SplitCoreComplexPool, MoreAllowedHardwareThreadsFirstAmongEquallyNearOnes) {
    Topology t = model(1, 9, 2, 3);
    t.pci_devices = {gpu(0x10, t.all_pus())};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    std::vector<Home> homes(1);
    homes[0].cpus = IdSet{0, 4, 6, 7, 9}, homes[0].nodes = homes[0].device_nodes = {0};
    std::vector<std::string> w;
    auto parts = split_core_complex_pool(t, accs, homes, {{0}}, {0}, w);
    EXPECT_EQ(parts[0], IdSet({6, 7, 9}));
    // Two tasks: the 3-thread group, then the 2-thread one; the group without allowed PUs is no part.
    homes.push_back(homes[0]);
    parts = split_core_complex_pool(t, accs, homes, {{0}, {0}}, {0, 1}, w);
    EXPECT_EQ(parts[0], IdSet({6, 7, 9}));
    EXPECT_EQ(parts[1], IdSet({0, 4}));
}

// torch.numa.binding's test_core_complex_numa_binding_with_fewer_l3_than_gpu: more tasks
// than L3 groups in a home share whole groups, round-robin (counts differ by one at most),
// with a warning; no group stays unused.
TEST(SplitCoreComplexPool, MoreTasksThanGroupsShareWholeGroupsEvenly) {
    Topology t = model(1, 6, 2, 3);  // 2 L3 groups of 3 cores: PUs 0-5, 6-11
    t.pci_devices = {gpu(0x10, t.all_pus())};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    for (int n : {3, 4, 5}) {
        std::vector<Home> homes(n);
        for (Home& h : homes) h.cpus = t.all_pus(), h.nodes = h.device_nodes = {0};
        std::vector<int> pool(n);
        std::iota(pool.begin(), pool.end(), 0);
        std::vector<std::string> w;
        auto parts = split_core_complex_pool(t, accs, homes, Lists(n, {0}), pool, w);
        for (int k = 0; k < n; ++k) EXPECT_EQ(parts[k], t.l3_groups[k % 2].pus) << n << " tasks, task " << k;
        EXPECT_TRUE(mentions(w, std::to_string(n) + " tasks on NUMA node(s) 0 but only 2 L3 group(s)")) << n;
        EXPECT_TRUE(mentions(w, "shared by up to " + std::to_string((n + 1) / 2) + " tasks")) << n;
    }
}

// Overlapping homes: a node-local task whose node has one group shares it before a
// wider task gives up a group of its own; every group is used.
TEST(SplitCoreComplexPool, OverlappingHomesShareOnlyWhenTheNarrowHomeRunsOut) {
    Topology t = model(2, 2, 1, 2);  // node 0: L3 0 (PUs 0,1), node 1: L3 1 (PUs 2,3)
    t.pci_devices = {gpu(0x10, t.numa_nodes[0].pus), gpu(0x20, t.all_pus(), true)};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    std::vector<Home> homes(3);
    homes[0].cpus = homes[1].cpus = t.numa_nodes[0].pus, homes[0].nodes = homes[0].device_nodes = {0};
    homes[1].nodes = homes[1].device_nodes = {0};
    homes[2].cpus = t.all_pus(), homes[2].nodes = homes[2].device_nodes = {0, 1};
    std::vector<std::string> w;
    auto parts = split_core_complex_pool(t, accs, homes, {{0}, {0}, {1}}, {0, 1, 2}, w);
    EXPECT_EQ(parts[0], t.l3_groups[0].pus);
    EXPECT_EQ(parts[1], t.l3_groups[0].pus);  // its home has no other group
    EXPECT_EQ(parts[2], t.l3_groups[1].pus);  // the wide task takes the free one
    EXPECT_TRUE(mentions(w, "overlapping homes"));
}

// torch.numa.binding's mocked machines (test_numa_binding.py): `sockets` x 1 NUMA node, SMT2
// with siblings 2c and 2c+1, `gpus` GPUs per node in PCI order, `l3s` L3 groups of `per_l3`
// cores per node. Rank r uses GPU r, as torchrun assumes.
NodePlan torch_suite_plan(int sockets, int gpus, int l3s, int per_l3, Mode mode) {
    Topology t = model(sockets, l3s * per_l3, 2, per_l3);
    for (int n = 0; n < sockets; ++n)
        for (int g = 0; g < gpus; ++g) t.pci_devices.push_back(gpu(0x10 * (n * gpus + g + 1), t.numa_nodes[n].pus));
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.mode = mode;
    req.ntasks = sockets * gpus;
    return plan_node(t, accs, req);
}

TEST(TorchNumaBindingSuite, CoreComplexWithExtraL3) {
    // test_core_complex_numa_binding_with_extra_l3: rank 3 -> "24-29", the second L3 of node 1
    EXPECT_EQ(torch_suite_plan(2, 2, 3, 3, Mode::CoreComplex).tasks[3].cpus, IdSet::range(24, 29));
}

TEST(TorchNumaBindingSuite, CoreComplexWithFewerL3ThanGpus) {
    // test_core_complex_numa_binding_with_fewer_l3_than_gpu: rank 3 -> "6-11", shared with rank 2
    NodePlan p = torch_suite_plan(2, 2, 1, 3, Mode::CoreComplex);
    EXPECT_EQ(p.tasks[3].cpus, IdSet::range(6, 11));
    EXPECT_EQ(p.tasks[2].cpus, IdSet::range(6, 11));
}

TEST(TorchNumaBindingSuite, CoreComplexTiebreakPrefersTheFirstGroup) {
    // test_core_complex_tiebreak_prefers_lower_cache_key: two 1-core L3s -> "0-1"
    EXPECT_EQ(torch_suite_plan(1, 1, 2, 1, Mode::CoreComplex).tasks[0].cpus, IdSet::range(0, 1));
}

TEST(TorchNumaBindingSuite, ExclusiveGivesTheRemainderCoreToTheFirstTask) {
    // test_exclusive_numa_binding: 3 cores, 2 GPUs on node 0 -> "0-3" and "4-5"
    NodePlan p = torch_suite_plan(2, 2, 1, 3, Mode::Exclusive);
    EXPECT_EQ(p.tasks[0].cpus, IdSet::range(0, 3));
    EXPECT_EQ(p.tasks[1].cpus, IdSet::range(4, 5));
}

TEST(SplitCoreComplexPool, AnOwnedDevicesL3ComesFirst) {
    Topology t = model(1, 6, 1, 2);  // 3 L3s of 2 cores
    t.pci_devices = {gpu(0x10, t.l3_groups[2].pus, false, 2), gpu(0x20, t.all_pus())};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    std::vector<Home> homes(2);
    for (Home& h : homes) h.cpus = t.all_pus(), h.nodes = h.device_nodes = {0};
    std::vector<std::string> w;
    auto parts = split_core_complex_pool(t, accs, homes, {{1}, {0}}, {0, 1}, w);
    EXPECT_EQ(parts[1], t.l3_groups[2].pus);  // device 0 hangs below L3 2
    EXPECT_EQ(parts[0], t.l3_groups[0].pus);
}

// ---- 4. memory nodes ----

TEST(MemoryNodes, DeviceNodesThatAreAllowedElseTheCpuNodes) {
    Home h;
    h.device_nodes = {0, 1};
    h.nodes = {2};
    std::vector<std::string> w;
    EXPECT_EQ(memory_nodes(h, IdSet{}, MemPolicy::Prefer, w), (std::vector<int>{0, 1}));
    EXPECT_TRUE(w.empty());  // no allowed-memory set: nothing known to say
    EXPECT_EQ(memory_nodes(h, IdSet{1, 2}, MemPolicy::Prefer, w), std::vector<int>{1});
    // memory follows the GPU, CPUs come from elsewhere: said
    EXPECT_TRUE(mentions(w, "keeps memory on the devices' NUMA node(s) 1 while the CPUs come from node(s) 2"));
    w.clear();
    EXPECT_EQ(memory_nodes(h, IdSet{1, 2}, MemPolicy::None, w), std::vector<int>{1});
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(memory_nodes(h, IdSet{2}, MemPolicy::Bind, w), std::vector<int>{2});
    EXPECT_TRUE(mentions(w, "memory of NUMA node(s) 0,1 is not allowed; using node(s) 2"));
}

// ---- regressions through plan_node ----

// A task driving several GPUs is bound near all of them: not one process on GPU 0's node,
// not two tasks with eight GPUs both on socket 0.
TEST(PlanOwnership, FewerTasksThanGpusOwnBlocksAndTheirHomes) {
    Topology t = model(2, 4, 2, 4);
    for (int i = 0; i < 8; ++i) t.pci_devices.push_back(gpu(0x10 + i, t.numa_nodes[i / 4].pus));
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.mode = Mode::Node;
    req.ntasks = 1;
    NodePlan one = plan_node(t, accs, req);
    EXPECT_EQ(one.tasks[0].devices, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(one.tasks[0].device->index, 0);
    EXPECT_EQ(one.tasks[0].cpus, t.all_pus());
    EXPECT_EQ(one.tasks[0].mems, (std::vector<int>{0, 1}));
    req.ntasks = 2;
    for (Mode mode : {Mode::Node, Mode::Exclusive, Mode::CoreComplex}) {
        req.mode = mode;
        NodePlan two = plan_node(t, accs, req);
        EXPECT_EQ(two.tasks[0].cpus, t.numa_nodes[0].pus) << to_string(mode);
        EXPECT_EQ(two.tasks[1].cpus, t.numa_nodes[1].pus) << to_string(mode);
        EXPECT_EQ(two.tasks[1].devices, (std::vector<int>{4, 5, 6, 7}));
    }
}

TEST(PlanOwnership, ABlockStraddlingTwoNodesGetsCpusNextToTheOthersWithoutOverlap) {
    Topology t = model(2, 4, 1, 2);
    for (int i = 0; i < 8; ++i) t.pci_devices.push_back(gpu(0x10 + i, t.numa_nodes[i / 4].pus));
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.ntasks = 3;  // blocks 0-2 (node 0), 3-5 (nodes 0,1), 6-7 (node 1)
    for (Mode mode : {Mode::Exclusive, Mode::CoreComplex}) {
        req.mode = mode;
        NodePlan plan = plan_node(t, accs, req);
        IdSet seen;
        for (const TaskPlan& task : plan.tasks) {
            EXPECT_FALSE(task.cpus.empty()) << to_string(mode);
            EXPECT_FALSE(task.cpus.intersects(seen)) << to_string(mode);
            seen |= task.cpus;
        }
        EXPECT_TRUE(plan.tasks[0].cpus.is_subset_of(t.numa_nodes[0].pus));
        EXPECT_TRUE(plan.tasks[2].cpus.is_subset_of(t.numa_nodes[1].pus));
        EXPECT_EQ(plan.tasks[1].mems, (std::vector<int>{0, 1}));
    }
}

// A single-NUMA machine does not warn about machine-level devices.
TEST(PlanWarnings, NoMachineLevelWarningOnASingleNumaMachine) {
    Topology t = model(1, 4, 2, 4);
    t.pci_devices = {gpu(0x10, t.all_pus(), true)};
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    ASSERT_EQ(accs.size(), 1u);
    EXPECT_TRUE(accs[0].home_warning.empty()) << accs[0].home_warning;
    PlanRequest req;
    NodePlan plan = plan_node(t, accs, req);
    EXPECT_TRUE(plan.tasks[0].warnings.empty());
    // Two nodes: now it is a guess, and said.
    Topology t2 = model(2, 4, 2, 4);
    t2.pci_devices = {gpu(0x10, t2.all_pus(), true)};
    EXPECT_FALSE(find_accelerators(t2, DeviceMatcher::builtin())[0].home_warning.empty());
}

// `--device-match 1bcf` finds the NEC Vector Engine (class 0b40).
TEST(DeviceMatch, BareVendorCoversCoProcessorsAndProcessingAccelerators) {
    PciDevice ve;
    ve.vendor = 0x1bcf;
    ve.class_id = 0x0b40;
    EXPECT_TRUE(DeviceMatcher::parse("1bcf").matches(ve));
    ve.class_id = 0x1200;
    EXPECT_TRUE(DeviceMatcher::parse("1bcf").matches(ve));
    ve.class_id = 0x0200;  // its NIC is not an accelerator
    EXPECT_FALSE(DeviceMatcher::parse("1bcf").matches(ve));
    ve.class_id = 0x0b40;
    EXPECT_FALSE(DeviceMatcher::builtin().matches(ve));  // unknown vendors need a match
}

}  // namespace

// No task gets fewer CPUs than Slurm gave it; one thread per core.

namespace {

NodePlan plan_min(const Topology& t, Mode mode, int ntasks, int min_cpus, std::vector<std::vector<int>> own = {},
                  bool one_thread = false) {
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.mode = mode;
    req.ntasks = ntasks;
    req.per_task_devices = std::move(own);
    req.min_cpus = min_cpus;
    req.one_thread_per_core = one_thread;
    return plan_node(t, accs, req);
}

std::vector<std::string> all_warnings(const NodePlan& p) {
    std::vector<std::string> w = p.warnings;
    for (const TaskPlan& t : p.tasks) w.insert(w.end(), t.warnings.begin(), t.warnings.end());
    return w;
}

}  // namespace

// srun -c12 on 8-PU NUMA nodes: the home's CPUs first, then the nearest node (by distance),
// and the step says so.
TEST(MinCpus, NodeModeExtendsToTheNearestNode) {
    Topology t = model(3, 4, 2, 4);  // 8 PUs per node
    t.distances = {{{0, 0}, 10}, {{0, 1}, 32}, {{0, 2}, 21}, {{1, 0}, 32}, {{1, 1}, 10},
                   {{1, 2}, 32}, {{2, 0}, 21}, {{2, 1}, 32}, {{2, 2}, 10}};
    t.pci_devices.push_back(gpu(0x10, t.numa_nodes[0].pus));
    NodePlan p = plan_min(t, Mode::Node, 1, 12);
    const IdSet& cpus = p.tasks[0].cpus;
    EXPECT_GE(cpus.size(), 12);
    EXPECT_TRUE(t.numa_nodes[0].pus.is_subset_of(cpus)) << cpus.to_string();
    EXPECT_TRUE(cpus.is_subset_of(t.numa_nodes[0].pus | t.numa_nodes[2].pus)) << cpus.to_string();  // 2 is nearer than 1
    EXPECT_TRUE(mentions(all_warnings(p), "extended to the nearest node(s) 0,2"));
    EXPECT_EQ(p.tasks[0].mems, std::vector<int>{0});  // memory stays on the GPU's node
    // without a minimum (or one that fits) nothing changes
    EXPECT_EQ(plan_min(t, Mode::Node, 1, 0).tasks[0].cpus, t.numa_nodes[0].pus);
    EXPECT_EQ(plan_min(t, Mode::Node, 1, 8).tasks[0].cpus, t.numa_nodes[0].pus);
    EXPECT_TRUE(all_warnings(plan_min(t, Mode::Node, 1, 8)).empty());
}

// Exclusive: two tasks of one GPU with -c6 on an 8-PU node need 12: the home grows before
// the split, the sets stay disjoint and each holds at least 6.
TEST(MinCpus, ExclusiveSplitsTheWidenedHome) {
    Topology t = model(2, 4, 2, 4);
    t.pci_devices.push_back(gpu(0x10, t.numa_nodes[0].pus));
    NodePlan p = plan_min(t, Mode::Exclusive, 2, 6);
    EXPECT_GE(p.tasks[0].cpus.size(), 6);
    EXPECT_GE(p.tasks[1].cpus.size(), 6);
    EXPECT_FALSE(p.tasks[0].cpus.intersects(p.tasks[1].cpus));
    EXPECT_TRUE(p.tasks[0].cpus.is_subset_of(t.numa_nodes[0].pus));  // the home's CPUs go first
    // a site default exclusive with -c16 on the same node: 16, not 8
    NodePlan big = plan_min(t, Mode::Exclusive, 1, 16);
    EXPECT_EQ(big.tasks[0].cpus, t.all_pus());
}

// More CPUs asked than the node has free for disjoint sets: never fewer than asked, shared,
// and said.
TEST(MinCpus, NotEnoughFreeCpusAreSharedAndSaid) {
    Topology t = model(2, 4, 2, 4);
    t.pci_devices.push_back(gpu(0x10, t.numa_nodes[0].pus));
    t.pci_devices.push_back(gpu(0x20, t.numa_nodes[1].pus));
    NodePlan p = plan_min(t, Mode::Exclusive, 2, 10, {{0}, {1}});
    EXPECT_GE(p.tasks[0].cpus.size(), 10);
    EXPECT_GE(p.tasks[1].cpus.size(), 10);
    EXPECT_TRUE(mentions(all_warnings(p), "share some with other tasks"));
    EXPECT_TRUE(t.numa_nodes[0].pus.is_subset_of(p.tasks[0].cpus) || p.tasks[0].cpus.size() >= 10);
}

// --hint=nomultithread: one hardware thread per core (the first sibling), in every mode.
TEST(OneThreadPerCore, FirstSiblingOfEachCore) {
    Topology t = model(2, 4, 2, 2);
    t.pci_devices.push_back(gpu(0x10, t.numa_nodes[0].pus));
    IdSet firsts;
    for (int c = 0; c < 4; ++c) firsts.insert(t.cores[c].pus.ids().front());
    for (Mode m : {Mode::Node, Mode::Socket}) EXPECT_EQ(plan_min(t, m, 1, 0, {}, true).tasks[0].cpus, firsts);
    for (Mode m : {Mode::Exclusive, Mode::CoreComplex}) {
        NodePlan p = plan_min(t, m, 2, 0, {}, true);
        EXPECT_EQ(p.tasks[0].cpus | p.tasks[1].cpus, firsts);
        EXPECT_FALSE(p.tasks[0].cpus.intersects(p.tasks[1].cpus));
    }
    // an allowed set without a core's first thread keeps the thread it has
    EXPECT_EQ(one_thread_per_core(t, IdSet{1, 2, 3}), (IdSet{1, 2}));
}
