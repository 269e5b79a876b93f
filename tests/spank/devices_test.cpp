// Unit tests of the rule "a task's GPUs are the ones it can open, runtime variables on top"
// and of how the local tasks' sets become one node request (spank/devices.hpp).
#include <gtest/gtest.h>

#include <map>

#include "devices.hpp"
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
    EXPECT_TRUE(t.per_task);
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

TEST(TaskGpus, WithoutDeviceFilesVariablesAreTrustedOnlyWithoutAConstraint) {
    GpuFacts open;
    open.constrained = false;
    open.step_gpus = "2";
    EXPECT_EQ(resolve(open, {{"CUDA_VISIBLE_DEVICES", "2"}}).devices, std::vector<int>{2});
    EXPECT_TRUE(resolve(open, {{"CUDA_VISIBLE_DEVICES", "2"}}).per_task);
    for (std::optional<bool> c : {std::optional<bool>(true), std::optional<bool>()}) {
        GpuFacts f;
        f.constrained = c;
        f.step_gpus = "1,2";
        TaskGpus t = resolve(f, {{"CUDA_VISIBLE_DEVICES", "0"}});
        EXPECT_FALSE(t.per_task);  // the step's list, shared by the ownership rule
        EXPECT_EQ(t.devices, (std::vector<int>{1, 2}));
    }
    GpuFacts none;
    EXPECT_FALSE(resolve(none).gpu_step);
}

TEST(NodeDevicesRule, IdenticalListsAreSharedByTheOwnershipRule) {
    std::vector<Published> all(4, Published{Published::State::Devices, true, {0, 1, 2, 3}});
    NodeDevices nd = combine_node_devices(4, all);
    EXPECT_EQ(nd.shared, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(nd.per_task.empty());
    // a late task in a shared step takes its share like the others
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
