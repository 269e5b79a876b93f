// Slurm's CPU allocation on a node: its core ids mapped to OS CPUs (against hwloc-calc's
// logical cores on recorded servers, where OS numbering interleaves the threads), and the
// rule that a task's CPUs are the allocation inside the cpuset, never wider.
#include <gtest/gtest.h>

#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/topology.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

// hwloc-calc's OS indexes of the PUs of logical cores `cores` ("core:0 core:5 ...").
IdSet hwloc_calc_pus(const std::string& file, const std::vector<int>& cores) {
    std::string cmd = "hwloc-calc --input '" + topology_path(file) + "' --po -I pu";
    for (int c : cores) cmd += " core:" + std::to_string(c);
    return IdSet::parse(run_command(cmd + " 2>/dev/null"));
}

std::string list_of(const std::vector<int>& cores) {
    std::string out;
    for (int c : cores) out += (out.empty() ? "" : ",") + std::to_string(c);
    return out;
}

}  // namespace

class SlurmCores : public ::testing::TestWithParam<std::string> {};

// Threads numbered apart from their core (Intel: PU 0 and PU 12 share core 0), EPYC, POWER.
TEST_P(SlurmCores, AreHwlocLogicalCoresWithAllTheirThreads) {
    NUMABIND_REQUIRE_CORPUS();
    auto topo = load(GetParam());
    const int ncores = static_cast<int>(topo->model().cores.size());
    ASSERT_GT(ncores, 3);
    for (const std::vector<int>& cores :
         {std::vector<int>{0}, std::vector<int>{1, ncores - 1}, std::vector<int>{0, ncores / 2, ncores / 2 + 1}}) {
        EXPECT_EQ(cpus_of_slurm_cores(topo->model(), list_of(cores)), hwloc_calc_pus(GetParam(), cores))
            << GetParam() << " cores " << list_of(cores);
    }
    EXPECT_THROW(cpus_of_slurm_cores(topo->model(), std::to_string(ncores)), Error);  // beyond the node
    EXPECT_THROW(cpus_of_slurm_cores(topo->model(), "0-x"), Error);
    EXPECT_THROW(cpus_of_slurm_cores(topo->model(), ""), Error);
}

INSTANTIATE_TEST_SUITE_P(Corpus, SlurmCores,
                         ::testing::Values("hwloc_24em64t-2n6c2t-pci.xml", "hwloc_32em64t-2n8c2t-pci-wholeio.xml",
                                           "mpibind_epyc-corona.xml", "mpibind_coral-lassen.xml"),
                         [](const auto& info) {
                             std::string n = info.param.substr(0, info.param.find('.'));
                             for (char& c : n)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

// task/affinity alone: the cpuset is the whole node; the task gets Slurm's CPUs only.
TEST(WithinAllocation, NoCpusetMeansTheAllocation) {
    std::string note;
    const AllowedSets kernel{IdSet::range(0, 7), {0, 1}};
    const AllowedSets got = within_allocation(kernel, {2, 3}, IdSet::range(0, 7), note);
    EXPECT_EQ(got.cpus, (IdSet{2, 3}));
    EXPECT_EQ(got.mems, (IdSet{0, 1}));
    EXPECT_EQ(note, "");
}

// ConstrainCores=yes: the cpuset is the allocation; nothing is narrowed.
TEST(WithinAllocation, ACpusetEqualToTheAllocationIsKept) {
    std::string note;
    const AllowedSets kernel{{2, 3, 10, 11}, {0}};
    EXPECT_EQ(within_allocation(kernel, {2, 3, 10, 11}, IdSet::range(0, 15), note).cpus, (IdSet{2, 3, 10, 11}));
    EXPECT_EQ(note, "");
}

// A cpuset wider than the allocation but narrower than the node is not Slurm's (slurmd in a
// container's cpuset): the allocation bounds the tasks, and the step is told.
TEST(WithinAllocation, AnAllocationNarrowerThanAForeignCpusetIsUsedAndSaid) {
    std::string note;
    const AllowedSets kernel{IdSet::range(0, 3), {0}};
    EXPECT_EQ(within_allocation(kernel, {2, 3}, IdSet::range(0, 7), note).cpus, (IdSet{2, 3}));
    EXPECT_NE(note.find("narrower than the cpuset"), std::string::npos) << note;
}

// An allocation that does not fit the cpuset Slurm built was read against another layout:
// the kernel's cpuset wins, and the step is told.
TEST(WithinAllocation, AnAllocationOutsideTheCpusetGivesTheCpusetAndANote) {
    std::string note;
    const AllowedSets kernel{{2, 3}, {0}};
    EXPECT_EQ(within_allocation(kernel, {3, 4}, IdSet::range(0, 7), note).cpus, (IdSet{2, 3}));
    EXPECT_NE(note.find("CPUs 3-4"), std::string::npos) << note;
    EXPECT_NE(note.find("the cpuset is used"), std::string::npos) << note;
}

// No cpuset, some allocated CPUs offline: the online ones; none online: the cpuset, said.
TEST(WithinAllocation, OfflineAllocatedCpusAreLeftOut) {
    std::string note;
    EXPECT_EQ(within_allocation({{0, 1, 2}, {0}}, {2, 3}, IdSet::range(0, 2), note).cpus, (IdSet{2}));
    EXPECT_EQ(note, "");
    EXPECT_EQ(within_allocation({{0, 1, 2}, {0}}, {5}, IdSet::range(0, 2), note).cpus, (IdSet{0, 1, 2}));
    EXPECT_NE(note, "");
}
