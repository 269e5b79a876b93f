// The step's plan made once in slurmstepd: each task's entry is what that task would plan by
// itself (the per-task rules are the reference), a task takes it only when it found exactly
// what was expected, and the tasks that found otherwise plan beside those that took it. The
// CPUs near each GPU come from hwloc-calc.
#include <gtest/gtest.h>

#include "engine/context.hpp"
#include "engine/node_share.hpp"
#include "engine/task_plan.hpp"
#include "numabind/error.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::spank;
using namespace numabind::test;

namespace {

struct Step {
    std::string file = generated("dgx-a100");
    std::unique_ptr<HwlocTopology> topo = load(file);
    State st;
    AllowedSets allowed;
    int gpus = 0;

    explicit Step(Mode mode) {
        st.decision.mode = mode;
        st.model = topo->model();
        st.accelerators = find_accelerators(st.model, DeviceMatcher::builtin());
        gpus = static_cast<int>(st.accelerators.size());
        std::string list;
        for (int g = 0; g < gpus; ++g) list += (g ? "," : "") + std::to_string(g);
        st.step_gpus = list;
        allowed.cpus = st.model.all_pus();
        for (const NumaNode& n : st.model.numa_nodes) allowed.mems.insert(n.os_index);
    }
    Published shared_list() const {
        Published p{Published::State::Devices, false, {}};
        for (int g = 0; g < gpus; ++g) p.devices.push_back(g);
        return p;
    }
    IdSet near(int gpu) const { return calc_pus(file, "pci=" + st.accelerators.at(static_cast<size_t>(gpu)).pci); }
};

bool same_entry(const TaskPlan& a, const TaskPlan& b) {
    return a.local_rank == b.local_rank && a.devices == b.devices && a.cpus == b.cpus && a.mems == b.mems &&
           a.mem == b.mem;
}

TEST(StepPlan, ExclusiveEntriesAreEachTasksOwnPlanDisjointAndNearTheirGpu) {
    Step s(Mode::Exclusive);
    ASSERT_EQ(s.gpus, 8);
    std::vector<std::string> warnings, unused;
    const std::vector<TaskPlan> step = plan_step(s.st, std::vector<Published>(8, s.shared_list()), s.allowed, warnings);
    const std::vector<TaskPlan> by_exchange =
        plan_with_late(s.st, std::vector<Published>(8, s.shared_list()), s.allowed, unused);
    ASSERT_EQ(step.size(), 8u);
    IdSet seen;
    for (int r = 0; r < 8; ++r) {
        const TaskPlan& t = step[static_cast<size_t>(r)];
        EXPECT_TRUE(same_entry(t, *entry_of(by_exchange, r))) << "rank " << r;
        ASSERT_EQ(t.devices, std::vector<int>{r});
        EXPECT_TRUE((t.cpus - s.near(r)).empty()) << "rank " << r << " CPUs " << t.cpus.to_string();
        EXPECT_TRUE((t.cpus & seen).empty()) << "rank " << r << " overlaps";
        seen |= t.cpus;
    }
}

TEST(StepPlan, NodeModeEntriesEqualWhatEachTaskPlansAlone) {
    for (bool per_task : {false, true}) {
        Step s(Mode::Node);
        Published expected = s.shared_list();
        expected.per_task = per_task;
        if (per_task) expected.devices = {5};
        std::vector<std::string> warnings, unused;
        const std::vector<TaskPlan> step = plan_step(s.st, std::vector<Published>(4, expected), s.allowed, warnings);
        ASSERT_EQ(step.size(), 4u);
        for (int r = 0; r < 4; ++r) {
            const TaskPlan alone = plan_alone(s.st, expected, s.allowed, 4, r, unused);
            EXPECT_TRUE(same_entry(step[static_cast<size_t>(r)], alone)) << "per_task " << per_task << " rank " << r;
            const int gpu = step[static_cast<size_t>(r)].devices.front();
            EXPECT_EQ(step[static_cast<size_t>(r)].cpus, s.near(gpu)) << "rank " << r;
        }
    }
}

TEST(StepPlan, TakenOnlyWhenTheTaskFoundExactlyWhatWasExpected) {
    Step s(Mode::Exclusive);
    StepPlan plan;
    const Published shared = s.shared_list();
    plan.expected.assign(8, shared);
    plan.expected[7] = Published{Published::State::Devices, true, {7}};
    std::vector<std::string> warnings;
    plan.tasks = plan_step(s.st, plan.expected, s.allowed, warnings);
    EXPECT_FALSE(takes_step_plan(plan, shared, 0)) << "not ready";
    plan.ready = true;
    EXPECT_TRUE(takes_step_plan(plan, shared, 3));
    EXPECT_FALSE(takes_step_plan(plan, shared, 7)) << "rank 7 was expected to find GPU 7 alone";
    EXPECT_TRUE(takes_step_plan(plan, plan.expected[7], 7));
    EXPECT_FALSE(takes_step_plan(plan, plan.expected[7], 6));
    EXPECT_FALSE(takes_step_plan(plan, shared, 8)) << "no task 8";
    Published own = shared;
    own.per_task = true;
    EXPECT_FALSE(takes_step_plan(plan, own, 3)) << "its own list, not the step's";
    own = shared;
    own.devices.pop_back();
    EXPECT_FALSE(takes_step_plan(plan, own, 3)) << "fewer GPUs";
    own = shared;
    std::swap(own.devices[0], own.devices[1]);
    EXPECT_FALSE(takes_step_plan(plan, own, 3)) << "another order";
    EXPECT_FALSE(takes_step_plan(plan, Published{}, 3)) << "found nothing (Missing)";
    StepPlan no_gpu;
    no_gpu.ready = true;
    no_gpu.expected.assign(6, Published{Published::State::Devices, true, {}});
    EXPECT_TRUE(takes_step_plan(no_gpu, no_gpu.expected[5], 5)) << "a step without GPUs here";
}

TEST(StepPlan, TasksThatFoundOtherGpusPlanBesideThoseThatTookIt) {
    Step s(Mode::Exclusive);
    std::vector<std::string> warnings;
    const std::vector<TaskPlan> step = plan_step(s.st, std::vector<Published>(8, s.shared_list()), s.allowed, warnings);
    std::vector<Published> all(8, s.shared_list());
    for (int r = 0; r < 6; ++r) all[static_cast<size_t>(r)].committed = true;
    all[6] = Published{Published::State::Devices, true, {7}};
    all[7] = Published{Published::State::Devices, true, {6}};
    const std::vector<TaskPlan> rest = plan_beside_committed(s.st, all, step, s.allowed, warnings);
    ASSERT_EQ(rest.size(), 2u);
    IdSet taken;
    for (int r = 0; r < 6; ++r) taken |= step[static_cast<size_t>(r)].cpus;
    for (int r : {6, 7}) {
        const TaskPlan* t = entry_of(rest, r);
        ASSERT_NE(t, nullptr) << "rank " << r;
        EXPECT_EQ(t->devices, std::vector<int>{13 - r}) << "rank " << r;
        EXPECT_FALSE(t->cpus.empty());
        EXPECT_TRUE((t->cpus & taken).empty()) << "rank " << r << " on a committed task's CPUs";
        EXPECT_TRUE((t->cpus - s.near(13 - r)).empty()) << "rank " << r << " CPUs " << t->cpus.to_string();
    }
    EXPECT_TRUE((entry_of(rest, 6)->cpus & entry_of(rest, 7)->cpus).empty());
    // Every CPU taken: infeasible, never "every CPU" (an empty allowed set).
    for (size_t r = 0; r < 7; ++r) all[r].committed = true;
    std::vector<TaskPlan> whole(8);
    for (int r = 0; r < 8; ++r) {
        whole[static_cast<size_t>(r)] = step[static_cast<size_t>(r)];
        whole[static_cast<size_t>(r)].cpus = r == 0 ? s.allowed.cpus : IdSet{};
    }
    EXPECT_THROW(plan_beside_committed(s.st, all, whole, s.allowed, warnings), Error);
}

TEST(StepPlan, PerTaskFindingsArePlannedAsTheExchangeWouldPlanThem) {
    for (Mode mode : {Mode::Exclusive, Mode::Node, Mode::CoreComplex}) {
        Step s(mode);
        std::vector<Published> expected;
        for (int r = 0; r < 4; ++r) expected.push_back(Published{Published::State::Devices, true, {7 - 2 * r}});
        std::vector<std::string> warnings, unused;
        const std::vector<TaskPlan> step = plan_step(s.st, expected, s.allowed, warnings);
        const std::vector<TaskPlan> by_exchange = plan_with_late(s.st, expected, s.allowed, unused);
        ASSERT_EQ(step.size(), 4u);
        for (int r = 0; r < 4; ++r) {
            const TaskPlan& t = step[static_cast<size_t>(r)];
            EXPECT_EQ(t.devices, std::vector<int>{7 - 2 * r}) << to_string(mode) << " rank " << r;
            if (disjoint(mode))
                EXPECT_TRUE(same_entry(t, *entry_of(by_exchange, r))) << to_string(mode) << " rank " << r;
            else
                EXPECT_TRUE(same_entry(t, plan_alone(s.st, expected[static_cast<size_t>(r)], s.allowed, 4, r, unused)));
            EXPECT_TRUE((t.cpus - s.near(7 - 2 * r)).empty()) << to_string(mode) << " rank " << r;
        }
    }
}

TEST(StepPlan, TheShareCarriesWhichTasksTookTheStepsPlan) {
    NodeShare share;
    ASSERT_TRUE(share.create(3, 4));
    Published took{Published::State::Devices, false, {0, 1, 2, 3}};
    took.committed = true;
    EXPECT_TRUE(share.publish(0, took));
    EXPECT_TRUE(share.publish(1, Published{Published::State::Devices, true, {2}}));
    EXPECT_TRUE(share.publish(2, Published{}));
    const std::vector<Published> all = share.wait_all(100);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_TRUE(all[0].committed);
    EXPECT_FALSE(all[0].per_task);
    EXPECT_EQ(all[0].devices, took.devices);
    EXPECT_FALSE(all[1].committed);
    EXPECT_TRUE(all[1].per_task);
    EXPECT_EQ(all[2].state, Published::State::Missing);
    EXPECT_FALSE(all[2].committed);
}

}  // namespace

