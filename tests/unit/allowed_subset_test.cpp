// Security property: a binding never reaches CPUs or memory nodes outside what
// the task was allowed. For every generated shape and every corpus topology (read in place;
// skipped without it), every mode and several task counts,
// with random allowed CPU and memory-node subsets (fixed seed, so failures reproduce),
// every planned task's CPUs are inside the allowed CPUs and its memory nodes inside the
// allowed memory nodes; GPU modes never hand out an empty CPU set.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"
#include "test_support.hpp"

namespace nb = numabind;
namespace nt = numabind::test;

namespace {

// Every generated shape ("gen:<preset>") and every corpus XML known when CMake ran (those
// skip when the corpus is absent at run time).
std::vector<std::string> topologies() {
    std::vector<std::string> out;
    for (const std::string& p : nt::presets()) out.push_back("gen:" + p);
    for (const std::string& f : nt::corpus_params(nt::corpus_xml_files())) out.push_back(f);
    return out;
}

class AllowedSubset : public ::testing::TestWithParam<std::string> {};

TEST_P(AllowedSubset, TasksStayInsideAllowedCpusAndMems) {
    const bool gen = GetParam().rfind("gen:", 0) == 0;
    if (!gen) {
        NUMABIND_REQUIRE_CORPUS();
        NUMABIND_REQUIRE_CORPUS_PARAM(GetParam());
    }
    const std::string path = gen ? nt::generated(GetParam().substr(4)) : nt::corpus(GetParam());
    nb::HwlocTopology topo(nb::LoadOptions(path, false));
    const nb::Topology& m = topo.model();
    const auto accs = nb::find_accelerators(m, nb::DeviceMatcher::builtin());
    const std::vector<int> pus = m.all_pus().ids();
    std::vector<int> nodes;
    for (const nb::NumaNode& n : m.numa_nodes) nodes.push_back(n.os_index);

    std::mt19937 rng(20240611u ^ static_cast<unsigned>(std::hash<std::string>{}(GetParam())));
    int planned = 0, refused = 0;
    for (int round = 0; round < 24; ++round) {
        // Allowed CPUs: a random subset of 1..all PUs (the first round: all of them, as in an
        // unconstrained step); sometimes a contiguous block, like a Slurm cpuset.
        nb::IdSet allowed;
        if (round == 0) {
            allowed = m.all_pus();
        } else if (round % 3 == 0) {
            size_t len = 1 + rng() % pus.size(), start = rng() % (pus.size() - len + 1);
            for (size_t i = start; i < start + len; ++i) allowed.insert(pus[i]);
        } else {
            const unsigned keep = 1 + rng() % 100;  // percent
            for (int pu : pus)
                if (rng() % 100 < keep) allowed.insert(pu);
            if (allowed.empty()) allowed.insert(pus[rng() % pus.size()]);
        }
        nb::IdSet allowed_mems;
        if (round % 2 == 1) {
            for (int n : nodes)
                if (rng() % 2) allowed_mems.insert(n);
            if (allowed_mems.empty()) allowed_mems.insert(nodes[rng() % nodes.size()]);
        }
        for (nb::Mode mode : {nb::Mode::None, nb::Mode::Node, nb::Mode::Socket, nb::Mode::Exclusive,
                              nb::Mode::CoreComplex}) {
            for (int ntasks : {1, 2, static_cast<int>(1 + rng() % 16)}) {
                nb::PlanRequest req;
                req.mode = mode;
                req.mem = static_cast<nb::MemPolicy>(rng() % 4);
                req.ntasks = ntasks;
                req.allowed_cpus = allowed;
                req.allowed_mems = allowed_mems;
                if (!accs.empty() && rng() % 3 == 0) {
                    req.visible_devices.push_back(static_cast<int>(rng() % accs.size()));
                    req.visible_devices.push_back(static_cast<int>(rng() % accs.size()));
                }
                nb::NodePlan plan;
                try {
                    plan = nb::plan_node(m, accs, req);
                } catch (const nb::Error&) {
                    ++refused;  // refusing is always safe
                    continue;
                }
                ++planned;
                ASSERT_EQ(static_cast<int>(plan.tasks.size()), ntasks);
                for (const nb::TaskPlan& t : plan.tasks) {
                    const std::string where = GetParam() + " mode " + nb::to_string(mode) + " ntasks " +
                                              std::to_string(ntasks) + " allowed " + allowed.to_string() +
                                              " mems " + allowed_mems.to_string() + " rank " +
                                              std::to_string(t.local_rank);
                    EXPECT_TRUE(t.cpus.is_subset_of(allowed)) << where << ": cpus " << t.cpus.to_string();
                    if (mode != nb::Mode::None) EXPECT_FALSE(t.cpus.empty()) << where;
                    for (int n : t.mems) {
                        // Reported nodes (NUMABIND_MEMS) stay inside the allowed set, policy or not.
                        if (!allowed_mems.empty())
                            EXPECT_TRUE(allowed_mems.contains(n)) << where << ": mem node " << n;
                        EXPECT_NE(m.numa_by_os(n), nullptr) << where << ": mem node " << n;
                    }
                    if (t.mems.empty()) EXPECT_EQ(t.mem, nb::MemPolicy::None) << where;
                    if (req.mem == nb::MemPolicy::None) EXPECT_EQ(t.mem, nb::MemPolicy::None) << where;
                }
            }
        }
    }
    EXPECT_GT(planned, 0) << GetParam() << ": nothing could be planned (" << refused << " refused)";
}

INSTANTIATE_TEST_SUITE_P(Topology, AllowedSubset, ::testing::ValuesIn(topologies()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string n = info.param;
                             for (char& c : n)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

}  // namespace
