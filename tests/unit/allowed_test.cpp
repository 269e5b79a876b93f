// What a process may use: the kernel's cpuset reader against hwloc's own reading of the
// cgroup, the calling thread's affinity left as it was, and the pure restriction to a
// topology.
#include <gtest/gtest.h>
#include <hwloc.h>
#include <sched.h>

#include "numabind/error.hpp"
#include "numabind/topology.hpp"
#include "sys/binding.hpp"

namespace nb = numabind;

namespace {

nb::IdSet from_bitmap(hwloc_const_bitmap_t b) {
    nb::IdSet s;
    for (int i = hwloc_bitmap_first(b); i >= 0; i = hwloc_bitmap_next(b, i)) s.insert(i);
    return s;
}

nb::IdSet affinity() {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    nb::IdSet s;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) s.insert(c);
    return s;
}

bool set_affinity(const nb::IdSet& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus.ids()) CPU_SET(c, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

nb::Topology two_nodes() {  // PUs 0-7 on nodes 0 (0-3) and 1 (4-7)
    nb::Topology t;
    for (int c = 0; c < 8; ++c) t.cores.push_back({nb::IdSet::range(c, c), -1, c / 4});
    t.numa_nodes.push_back({0, nb::IdSet::range(0, 3), nb::IdSet::range(0, 3), ""});
    t.numa_nodes.push_back({1, nb::IdSet::range(4, 7), nb::IdSet::range(4, 7), ""});
    return t;
}

}  // namespace

// hwloc reads the cgroup's cpuset files for a live topology's allowed sets; the kernel
// reader must find the same CPUs and nodes, here in whatever cgroup the tests run.
TEST(KernelAllowed, MatchesHwlocsCgroupReading) {
    hwloc_topology_t t;
    ASSERT_EQ(hwloc_topology_init(&t), 0);
    ASSERT_EQ(hwloc_topology_load(t), 0);
    const nb::IdSet hw_cpus = from_bitmap(hwloc_topology_get_allowed_cpuset(t));
    const nb::IdSet hw_mems = from_bitmap(hwloc_topology_get_allowed_nodeset(t));
    hwloc_topology_destroy(t);
    const nb::AllowedSets k = nb::kernel_allowed();
    EXPECT_EQ(k.cpus, hw_cpus);
    EXPECT_EQ(k.mems, hw_mems);
}

// A launcher's narrower affinity neither shrinks the answer nor is changed by asking.
TEST(KernelAllowed, IgnoresAndKeepsANarrowedAffinity) {
    const nb::IdSet before = affinity();
    const nb::AllowedSets full = nb::kernel_allowed();
    ASSERT_FALSE(full.cpus.empty());
    ASSERT_TRUE(before.is_subset_of(full.cpus));
    const nb::IdSet one = nb::IdSet::range(full.cpus.ids().back(), full.cpus.ids().back());
    ASSERT_TRUE(set_affinity(one));
    const nb::AllowedSets again = nb::kernel_allowed();
    EXPECT_EQ(affinity(), one) << "the calling thread's affinity must be put back";
    EXPECT_EQ(again.cpus, full.cpus);
    EXPECT_EQ(again.mems, full.mems);
    ASSERT_TRUE(set_affinity(before));
}

TEST(AllowedIn, RestrictsTheKernelsSetsToTheTopology) {
    const nb::AllowedSets a = nb::allowed_in(two_nodes(), {nb::IdSet::parse("2-9"), nb::IdSet::parse("1-2")}, "t.xml");
    EXPECT_EQ(a.cpus, nb::IdSet::parse("2-7"));
    EXPECT_EQ(a.mems, nb::IdSet::parse("1"));
}

TEST(AllowedIn, NothingInCommonIsAnErrorNotEverything) {
    try {
        nb::allowed_in(two_nodes(), {nb::IdSet::parse("8-9"), nb::IdSet::parse("0")}, "other.xml");
        FAIL() << "no error";
    } catch (const nb::Error& e) {
        EXPECT_NE(std::string(e.what()).find("none of the CPUs this process may use (8-9)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("other.xml"), std::string::npos) << e.what();
    }
    EXPECT_THROW(nb::allowed_in(two_nodes(), {nb::IdSet::parse("0-1"), nb::IdSet::parse("3")}, "x"), nb::Error);
}
