// Exclusive modes never give one CPU to two tasks, also when device homes overlap
// (a device without NUMA affinity is local to every node). A hand-built model keeps the
// shape obvious: 2 NUMA nodes x 2 cores x 2 threads, one L3 per node.
#include <gtest/gtest.h>

#include "numabind/error.hpp"
#include "numabind/plan.hpp"

using namespace numabind;

namespace {

Topology two_nodes() {
    Topology t;
    for (int c = 0; c < 4; ++c) t.cores.push_back({IdSet{c, c + 4}, c / 2, c / 2});
    t.l3_groups = {{IdSet{0, 1, 4, 5}}, {IdSet{2, 3, 6, 7}}};
    t.packages = {{0, IdSet{0, 1, 4, 5}}, {1, IdSet{2, 3, 6, 7}}};
    for (int n = 0; n < 2; ++n) {
        NumaNode node;
        node.os_index = n;
        node.pus = node.locality = t.l3_groups[n].pus;
        t.numa_nodes.push_back(node);
    }
    PciDevice machine_level, on_node0;
    machine_level.address = "0000:00:04.0";
    machine_level.vendor = 0x10de;
    machine_level.class_id = 0x0302;
    machine_level.locality = IdSet::range(0, 7);
    machine_level.machine_level = true;
    on_node0 = machine_level;
    on_node0.address = "0000:21:00.0";
    on_node0.locality = t.numa_nodes[0].pus;
    on_node0.machine_level = false;
    t.pci_devices = {machine_level, on_node0};
    return t;
}

void expect_disjoint(const NodePlan& plan) {
    for (size_t a = 0; a < plan.tasks.size(); ++a)
        for (size_t b = a + 1; b < plan.tasks.size(); ++b)
            EXPECT_FALSE(plan.tasks[a].cpus.intersects(plan.tasks[b].cpus))
                << a << ": " << plan.tasks[a].cpus.to_string() << " vs " << b << ": " << plan.tasks[b].cpus.to_string();
}

TEST(OverlappingHomes, SpecificHomeChoosesFirstAndTheWideHomeTakesTheRest) {
    Topology t = two_nodes();
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    ASSERT_EQ(accs.size(), 2u);
    ASSERT_EQ(accs[0].home_nodes, (std::vector<int>{0, 1}));  // machine level
    ASSERT_EQ(accs[1].home_nodes, std::vector<int>{0});
    for (Mode mode : {Mode::Exclusive, Mode::CoreComplex}) {
        PlanRequest req;
        req.mode = mode;
        req.ntasks = 2;
        NodePlan plan = plan_node(t, accs, req);
        EXPECT_EQ(plan.tasks[1].cpus, t.numa_nodes[0].pus) << to_string(mode);  // its own node
        EXPECT_EQ(plan.tasks[0].cpus, t.numa_nodes[1].pus) << to_string(mode);  // what is left
        expect_disjoint(plan);
    }
}

TEST(OverlappingHomes, WideHomeKeepsACoreWhenTheSpecificHomeIsTheWholeAllowedSet) {
    Topology t = two_nodes();
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.mode = Mode::Exclusive;
    req.ntasks = 2;
    req.allowed_cpus = t.numa_nodes[0].pus;  // only node 0 allowed: both homes are node 0's cores
    NodePlan plan = plan_node(t, accs, req);
    expect_disjoint(plan);
    EXPECT_EQ(plan.tasks[0].cpus.size() + plan.tasks[1].cpus.size(), 4);
    EXPECT_FALSE(plan.tasks[0].cpus.empty());
    EXPECT_FALSE(plan.tasks[1].cpus.empty());
}

TEST(OverlappingHomes, SharedModesStayShared) {
    Topology t = two_nodes();
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    PlanRequest req;
    req.mode = Mode::Node;
    req.ntasks = 2;
    NodePlan plan = plan_node(t, accs, req);
    EXPECT_EQ(plan.tasks[0].cpus, IdSet::range(0, 7));
    EXPECT_EQ(plan.tasks[1].cpus, t.numa_nodes[0].pus);
}

// Found by fuzz_topology_xml: an XML that repeats a NUMA OS index, first as a CPU-less
// node, then with CPUs. The device's home must still give its task those CPUs.
TEST(MalformedTopology, RepeatedNumaIndexStillGivesCpus) {
    Topology t = two_nodes();
    NumaNode memory_only;
    memory_only.os_index = 1;
    t.numa_nodes.insert(t.numa_nodes.begin(), memory_only);  // CPU-less "node 1" listed first
    t.pci_devices[1].locality = t.l3_groups[1].pus;          // the node-local device on node 1
    auto accs = find_accelerators(t, DeviceMatcher::builtin());
    ASSERT_EQ(accs[1].home_nodes, std::vector<int>{1});
    for (Mode mode : {Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex}) {
        PlanRequest req;
        req.mode = mode;
        req.ntasks = 1;
        req.visible_devices = {1};
        NodePlan plan = plan_node(t, accs, req);
        EXPECT_EQ(plan.tasks[0].cpus, IdSet({2, 3, 6, 7})) << to_string(mode);
    }
}

}  // namespace
