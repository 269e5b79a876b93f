// Unit tests of the rule "a task's GPUs are the ones it can open, runtime variables on top"
// and of how the local tasks' sets become one node request (spank/engine/devices.hpp).
#include <gtest/gtest.h>

#include <map>

#include "engine/devices.hpp"
#include "numabind/error.hpp"
#include "numabind/plan.hpp"

namespace nb = numabind;
using namespace numabind::spank;

namespace {

std::vector<nb::Accelerator> gpus(int n, nb::Vendor vendor = nb::Vendor::Nvidia) {
    std::vector<nb::Accelerator> out;
    for (int i = 0; i < n; ++i) {
        nb::Accelerator a;
        a.index = i;
        a.pci = "0000:" + std::to_string(17 + 10 * i) + ":00.0";
        a.vendor = vendor;
        out.push_back(a);
    }
    return out;
}

nb::EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& k) -> std::optional<std::string> {
        auto it = vars.find(k);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

TaskGpus resolve(const GpuFacts& f, std::map<std::string, std::string> vars = {}, int n = 4) {
    return resolve_task_gpus(gpus(n), f, env_of(std::move(vars)), nullptr);
}

GpuFacts held(std::vector<int> h, std::optional<std::string> step = std::nullopt) {
    GpuFacts f;
    f.held = std::move(h);
    f.step_gpus = std::move(step);
    return f;
}

}  // namespace

// ConstrainDevices=yes, --gpus-per-task=1, job holding GPUs 1,2 of 4: Slurm sets
// CUDA_VISIBLE_DEVICES=0 in both tasks; the cgroup lets task 0 open GPU 1, task 1 GPU 2.
TEST(TaskGpus, ConstrainedLocalIndexCountsOverWhatTheTaskCanOpen) {
    EXPECT_EQ(resolve(held({1}, "1"), {{"CUDA_VISIBLE_DEVICES", "0"}}).devices, std::vector<int>{1});
    EXPECT_EQ(resolve(held({2}, "1"), {{"CUDA_VISIBLE_DEVICES", "0"}}).devices, std::vector<int>{2});
    // a step-level allocation of 2 GPUs, both open to the task: 0,1 are the held ones
    TaskGpus t = resolve(held({1, 2}, "1,2"), {{"CUDA_VISIBLE_DEVICES", "0,1"}});
    EXPECT_EQ(t.devices, (std::vector<int>{1, 2}));
    EXPECT_FALSE(t.per_task);  // it sees the step's whole list: the tasks share it
    EXPECT_TRUE(t.gpu_step);
    // the runtime's order is kept
    EXPECT_EQ(resolve(held({1, 2}, "1,2"), {{"CUDA_VISIBLE_DEVICES", "1,0"}}).devices, (std::vector<int>{2, 1}));
}

// ConstrainDevices=no: every GPU opens; CUDA_VISIBLE_DEVICES is Slurm's gres index.
TEST(TaskGpus, UnconstrainedVariableCountsOverAllAccelerators) {
    EXPECT_EQ(resolve(held({0, 1, 2, 3}, "2,3"), {{"CUDA_VISIBLE_DEVICES", "2,3"}}).devices, (std::vector<int>{2, 3}));
    EXPECT_EQ(resolve(held({0, 1, 2, 3}, "1"), {{"CUDA_VISIBLE_DEVICES", "1"}}).devices, std::vector<int>{1});
}

TEST(TaskGpus, CpuOnlyStepsHaveNoGpu) {
    EXPECT_FALSE(resolve(held({0, 1, 2, 3})).gpu_step);  // no constraint, nothing allocated
    EXPECT_FALSE(resolve(held({})).gpu_step);            // constrained, nothing allocated
    EXPECT_TRUE(resolve(held({})).devices.empty());
    // the cgroup alone names the GPU (a runtime variable removed by the user)
    TaskGpus t = resolve(held({3}));
    EXPECT_TRUE(t.gpu_step);
    EXPECT_EQ(t.devices, std::vector<int>{3});
    // a variable naming nothing the task can open
    EXPECT_THROW(resolve(held({1}, "1"), {{"CUDA_VISIBLE_DEVICES", "1"}}), nb::UsageError);
    EXPECT_TRUE(resolve(held({1}, "1"), {{"CUDA_VISIBLE_DEVICES", ""}}).devices.empty());
}

TEST(TaskGpus, AmdAndIntelVariablesToo) {
    auto amd = gpus(4, nb::Vendor::Amd);
    EXPECT_EQ(resolve_task_gpus(amd, held({2, 3}, "2,3"), env_of({{"ROCR_VISIBLE_DEVICES", "1"}}), nullptr).devices,
              std::vector<int>{3});
    EXPECT_EQ(resolve_task_gpus(amd, held({2, 3}, "2,3"),
                                env_of({{"ROCR_VISIBLE_DEVICES", "0,1"}, {"HIP_VISIBLE_DEVICES", "1"}}), nullptr)
                  .devices,
              std::vector<int>{3});
    auto intel = gpus(2, nb::Vendor::Intel);
    EXPECT_EQ(resolve_task_gpus(intel, held({1}, "1"), env_of({{"ZE_AFFINITY_MASK", "0.1"}}), nullptr).devices,
              std::vector<int>{1});
}

// Without device files, Slurm's per-task CUDA_VISIBLE_DEVICES=0 (a local
// index under ConstrainDevices=yes, whatever devices.list says on cgroup v1) is never read as
// global GPU 0: the tasks share the step's list by the ownership rule.
TEST(TaskGpus, WithoutDeviceFilesTheStepListIsShared) {
    GpuFacts f;
    f.step_gpus = "0,1,2,3";
    for (const char* cuda : {"0", "2"}) {
        TaskGpus t = resolve(f, {{"CUDA_VISIBLE_DEVICES", cuda}});
        EXPECT_FALSE(t.per_task);
        EXPECT_EQ(t.devices, (std::vector<int>{0, 1, 2, 3}));
    }
    // -n4 --gpus-per-task=1: task r gets step GPU r, not GPU 0 four times
    auto owned = nb::assign_devices(4, {0, 1, 2, 3}, {});
    EXPECT_EQ(owned, (std::vector<std::vector<int>>{{0}, {1}, {2}, {3}}));
    GpuFacts none;
    EXPECT_FALSE(resolve(none).gpu_step);
}

// Per device: one accelerator's file unknown (a missing device_files= entry, no driver
// information for one GPU) does not throw the others' files away.
TEST(TaskGpus, OneUnknownFileIsDecidedByTheVariablesLength) {
    GpuFacts only_unknown = held({}, "0,1,2,3");
    only_unknown.unknown = {3};
    EXPECT_EQ(resolve(only_unknown, {{"CUDA_VISIBLE_DEVICES", "0"}}).devices, std::vector<int>{3});
    GpuFacts both = held({0}, "0,1,2,3");
    both.unknown = {3};
    EXPECT_EQ(resolve(both, {{"CUDA_VISIBLE_DEVICES", "0"}}).devices, std::vector<int>{0});        // one GPU: the known one
    EXPECT_EQ(resolve(both, {{"CUDA_VISIBLE_DEVICES", "0,1"}}).devices, (std::vector<int>{0, 3}));  // two: with the unknown
    EXPECT_TRUE(resolve(both, {{"CUDA_VISIBLE_DEVICES", "0"}}).per_task);
    // two unknown: nothing to tell them apart, the step's list is shared
    GpuFacts two = held({0}, "0,1,2,3");
    two.unknown = {2, 3};
    TaskGpus t = resolve(two, {{"CUDA_VISIBLE_DEVICES", "0"}});
    EXPECT_FALSE(t.per_task);
    EXPECT_EQ(t.devices, (std::vector<int>{0, 1, 2, 3}));
}

// ConstrainDevices=no, one file unknown, the task opens as many known GPUs as the step has:
// the gres-index variable does not index the known list; the step's list is shared, no error.
TEST(TaskGpus, AVariableThatDoesNotIndexTheListIsNotUsed) {
    GpuFacts f = held({0, 1, 2}, "1,2,3");
    f.unknown = {3};
    TaskGpus t = resolve(f, {{"CUDA_VISIBLE_DEVICES", "1,2,3"}});
    EXPECT_FALSE(t.per_task);
    EXPECT_EQ(t.devices, (std::vector<int>{1, 2, 3}));
}

// ConstrainDevices=no with a file unknown: opening more GPUs than the step has proves there
// is no constraint, so the variable is the gres index over all accelerators.
TEST(TaskGpus, OpeningMoreThanTheStepHasProvesNoConstraint) {
    GpuFacts f = held({0, 1, 2}, "1");
    f.unknown = {3};
    EXPECT_EQ(resolve(f, {{"CUDA_VISIBLE_DEVICES", "1"}}).devices, std::vector<int>{1});
    GpuFacts g = held({0, 1, 2}, "3");
    g.unknown = {3};
    EXPECT_EQ(resolve(g, {{"CUDA_VISIBLE_DEVICES", "3"}}).devices, std::vector<int>{3});
}

// A task that sees all of the step's GPUs holds nothing of its own (--gpus-per-node under
// ConstrainDevices): its list is the step's, shared.
TEST(TaskGpus, SeeingTheWholeStepIsASharedView) {
    EXPECT_FALSE(resolve(held({1, 2}, "1,2"), {{"CUDA_VISIBLE_DEVICES", "0,1"}}).per_task);
    EXPECT_TRUE(resolve(held({2}, "1,2"), {{"CUDA_VISIBLE_DEVICES", "0"}}).per_task);
}

TEST(NodeDevicesRule, IdenticalListsAreSharedByTheOwnershipRule) {
    std::vector<Published> all(4, Published{Published::State::Devices, true, {0, 1, 2, 3}});
    NodeDevices nd = combine_node_devices(4, all);
    EXPECT_EQ(nd.shared, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(nd.per_task.empty());
    // a late task in a step whose tasks publish the step's list takes its share like the others
    for (Published& p : all) p.per_task = false;
    all[2].state = Published::State::Late;
    all[2].devices.clear();
    EXPECT_EQ(combine_node_devices(4, all).shared, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(combine_node_devices(4, all).stand_ins.empty());
}

// --gpu-bind=map_gpu:0,0,2,2: each task owns what it holds.
TEST(NodeDevicesRule, DifferentListsAreOwned) {
    std::vector<Published> all = {{Published::State::Devices, true, {0}},
                                  {Published::State::Devices, true, {0}},
                                  {Published::State::Devices, true, {2}},
                                  {Published::State::Devices, true, {2}}};
    NodeDevices nd = combine_node_devices(4, all);
    ASSERT_EQ(nd.per_task.size(), 4u);
    EXPECT_EQ(nd.per_task[1], std::vector<int>{0});
    EXPECT_EQ(nd.per_task[3], std::vector<int>{2});
    auto owned = nb::assign_devices(4, nd.shared, nd.per_task);
    EXPECT_EQ(owned, (std::vector<std::vector<int>>{{0}, {0}, {2}, {2}}));
}

TEST(NodeDevicesRule, MissingTasksStandOnGpusNobodyHolds) {
    std::vector<Published> all = {{Published::State::Devices, true, {1}},
                                  {Published::State::Late, true, {}},
                                  {Published::State::Devices, true, {2}}};
    NodeDevices nd = combine_node_devices(4, all);
    EXPECT_EQ(nd.stand_ins, std::vector<int>{1});
    EXPECT_EQ(nd.shared, (std::vector<int>{0, 3}));
    auto owned = nb::assign_devices(3, nd.shared, nd.per_task);
    EXPECT_EQ(owned[0], std::vector<int>{1});
    EXPECT_EQ(owned[2], std::vector<int>{2});
    EXPECT_EQ(owned[1], std::vector<int>{3});  // r mod n over {0,3}: never a held GPU
    // every GPU held: the stand-in shares them all
    all.push_back({Published::State::Devices, true, {0, 3}});
    EXPECT_EQ(combine_node_devices(4, all).shared, (std::vector<int>{0, 1, 2, 3}));
    // nobody holds anything: no GPU in the step
    std::vector<Published> none(2, Published{Published::State::Devices, true, {}});
    EXPECT_TRUE(combine_node_devices(4, none).shared.empty());
    EXPECT_TRUE(combine_node_devices(4, none).per_task.empty());
}

// One task holding GPU 0 on time and one late: the on-time task's own list
// is not the step's; the late task is planned on GPUs nobody holds, never on GPU 0.
TEST(NodeDevicesRule, OneOnTimeListIsNotTheStepsList) {
    std::vector<Published> all = {{Published::State::Devices, true, {0}}, {Published::State::Late, true, {}}};
    NodeDevices nd = combine_node_devices(4, all);
    ASSERT_EQ(nd.per_task.size(), 2u);
    EXPECT_EQ(nd.per_task[0], std::vector<int>{0});
    EXPECT_EQ(nd.stand_ins, std::vector<int>{1});
    EXPECT_EQ(nd.shared, (std::vector<int>{1, 2, 3}));
    // the same with every task in time and the same list: shared (all can open the same GPUs)
    std::vector<Published> same = {{Published::State::Devices, true, {0}}, {Published::State::Devices, true, {0}}};
    EXPECT_EQ(combine_node_devices(4, same).shared, std::vector<int>{0});
}

// --gpus=2 --gpu-bind=mask_gpu:0x3,0x1 on a 4-GPU node whose step holds GPUs 0 and 1: task 0
// sees the step's list, task 1 its own GPU 0. Task 0 stands in on the step's other GPU, never
// on GPU 2 or 3 (another job's); a late task likewise.
TEST(NodeDevicesRule, StandInsStayWithinTheStepsList) {
    std::vector<Published> all = {{Published::State::Devices, false, {0, 1}}, {Published::State::Devices, true, {0}}};
    NodeDevices nd = combine_node_devices(4, all);
    EXPECT_EQ(nd.stand_ins, std::vector<int>{0});
    EXPECT_EQ(nd.shared, std::vector<int>{1});
    EXPECT_EQ(nb::assign_devices(2, nd.shared, nd.per_task)[0], std::vector<int>{1});
    all.push_back({Published::State::Late, true, {}});
    nd = combine_node_devices(4, all);
    EXPECT_EQ(nd.stand_ins, (std::vector<int>{0, 2}));
    EXPECT_EQ(nd.shared, std::vector<int>{1});
    // every GPU of the step held by a task of its own: the stand-ins share the step's, still not 2 or 3
    all[1].devices = {0, 1};
    EXPECT_EQ(combine_node_devices(4, all).shared, (std::vector<int>{0, 1}));
}

// No device file known, Slurm's configuration says it does not constrain devices
// (ConstrainDevices=no or no task/cgroup): the variable is the gres index, --gpu-bind maps
// included (map_gpu:2,0 gives task 0 CUDA_VISIBLE_DEVICES=2).
TEST(TaskGpus, UnconstrainedBySlurmTheVariableIsTheGresIndex) {
    GpuFacts f;  // no file known
    f.step_gpus = "0,1,2,3";
    f.devices_constrained = false;
    TaskGpus t = resolve(f, {{"CUDA_VISIBLE_DEVICES", "2"}});
    EXPECT_EQ(t.devices, std::vector<int>{2});
    EXPECT_TRUE(t.per_task);
    EXPECT_TRUE(t.warnings.empty());
    EXPECT_EQ(resolve(f, {{"CUDA_VISIBLE_DEVICES", "0"}}).devices, std::vector<int>{0});
    // the whole step: a shared view, as with device files
    EXPECT_FALSE(resolve(f, {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}).per_task);
}

// No device file, devices constrained (or Slurm's configuration unreadable), a task's
// variable narrower than the step: the tasks share the step's list, and a warning says it is a
// guess and names device_files=. A task that sees the whole step is no guess.
TEST(TaskGpus, AnUnknowableIdentityIsSaidToBeAGuess) {
    for (std::optional<bool> constrained : {std::optional<bool>(true), std::optional<bool>()}) {
        GpuFacts f;
        f.step_gpus = "0,1,2,3";
        f.devices_constrained = constrained;
        TaskGpus t = resolve(f, {{"CUDA_VISIBLE_DEVICES", "0"}});
        EXPECT_FALSE(t.per_task);
        EXPECT_EQ(t.devices, (std::vector<int>{0, 1, 2, 3}));
        ASSERT_EQ(t.warnings.size(), 1u);
        EXPECT_NE(t.warnings[0].find("device_files="), std::string::npos) << t.warnings[0];
        EXPECT_TRUE(resolve(f, {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}).warnings.empty());
        EXPECT_TRUE(resolve(f).warnings.empty());
    }
}
