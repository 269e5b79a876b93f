// Which device a task owns when the devices outnumber the tasks: torchrun's local rank gets
// torch.numa.binding's rule (worker r on device r), other launchers the blocks, and local
// rank 0 says once what the blocks are. Expected CPUs from hwloc-calc on the generated file.
#include <gtest/gtest.h>

#include <string>

#include "api/task_planner.hpp"
#include "core/local_rank.hpp"
#include "numabind/plan.hpp"
#include "test_support.hpp"

namespace numabind {
namespace {

using Lists = std::vector<std::vector<int>>;

TEST(DeviceRule, LocalRankGivesTaskRDeviceRAlone) {
    EXPECT_EQ(assign_devices(2, {0, 1, 2, 3, 4, 5, 6, 7}, {}, DeviceRule::LocalRank), (Lists{{0}, {1}}));
    // the visible list's order, as CUDA numbers it (CUDA_VISIBLE_DEVICES=5,4,3)
    EXPECT_EQ(assign_devices(2, {5, 4, 3}, {}, DeviceRule::LocalRank), (Lists{{5}, {4}}));
    // more workers than devices: r mod n, as the block rule does
    EXPECT_EQ(assign_devices(5, {4, 6}, {}, DeviceRule::LocalRank), (Lists{{4}, {6}, {4}, {6}, {4}}));
    // a task's own list still wins
    EXPECT_EQ(assign_devices(2, {0, 1, 2, 3}, {{3}, {}}, DeviceRule::LocalRank), (Lists{{3}, {1}}));
    EXPECT_EQ(to_string(DeviceRule::LocalRank), "local-rank");
    EXPECT_EQ(to_string(DeviceRule::Blocks), "blocks");
}

TEST(DeviceRule, FollowsWhereTheLocalRankCameFrom) {
    LocalRank torchrun{1, 2, "LOCAL_RANK", "LOCAL_WORLD_SIZE", true};
    LocalRank srun{1, 2, "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", false};
    EXPECT_EQ(device_rule_for(torchrun), DeviceRule::LocalRank);
    EXPECT_EQ(device_rule_for(srun), DeviceRule::Blocks);
}

// A DGX H100-like node: 8 GPUs, 4 per socket (one NUMA node each), torchrun with 2 workers.
TEST(DeviceRule, TwoTorchrunWorkersOnAnEightGpuTwoSocketNodeStayOnGpu0sSocket) {
    const std::string file = test::generated("dgx-h100");
    auto topo = test::load(file);
    auto accs = find_accelerators(topo->model(), DeviceMatcher::builtin());
    ASSERT_EQ(accs.size(), 8u);
    PlanRequest req;
    req.mode = Mode::Node;
    req.ntasks = 2;
    req.device_rule = DeviceRule::LocalRank;
    NodePlan plan = plan_node(topo->model(), accs, req);
    for (int r = 0; r < 2; ++r) {
        const TaskPlan& t = plan.tasks[r];
        ASSERT_NE(t.device, nullptr);
        EXPECT_EQ(t.devices, std::vector<int>{r});
        EXPECT_EQ(t.cpus, test::calc_pus(file, "pci=" + accs[r].pci)) << "worker " << r;
        EXPECT_EQ(t.mems, test::calc_physical(file, "numa", "pci=" + accs[r].pci)) << "worker " << r;
    }
    // The block rule puts task 1 on GPUs 4-7, the other socket (what a torchrun worker 1
    // driving cuda:1 must not get).
    req.device_rule = DeviceRule::Blocks;
    NodePlan blocks = plan_node(topo->model(), accs, req);
    EXPECT_EQ(blocks.tasks[1].devices, (std::vector<int>{4, 5, 6, 7}));
    EXPECT_EQ(blocks.tasks[1].cpus, test::calc_pus(file, "pci=" + accs[4].pci));
    EXPECT_NE(blocks.tasks[1].cpus, test::calc_pus(file, "pci=" + accs[1].pci));
}

NodePlan plan_with_devices(const Lists& devices) {
    NodePlan p;
    for (size_t r = 0; r < devices.size(); ++r) {
        TaskPlan t;
        t.local_rank = static_cast<int>(r);
        t.devices = devices[r];
        p.tasks.push_back(t);
    }
    return p;
}

TEST(DeviceBlockNotice, SaidOnceByTaskZeroOfALauncherWhenBlocksHoldSeveralDevices) {
    const NodePlan blocks = plan_with_devices({{0, 1, 2, 3}, {4, 5, 6, 7}});
    LocalRank srun0{0, 2, "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", false};
    auto line = device_block_notice(blocks, srun0);
    ASSERT_TRUE(line);
    EXPECT_EQ(line->find('\n'), std::string::npos);
    for (const char* part : {"2 tasks (SLURM_LOCALID)", "task 0: 0,1,2,3", "task 1: 4,5,6,7", "cuda:LOCAL_RANK",
                             "cuda_index()", "--gpus-per-task"})
        EXPECT_NE(line->find(part), std::string::npos) << part << " in: " << *line;
    LocalRank srun1 = srun0;
    srun1.rank = 1;
    EXPECT_FALSE(device_block_notice(blocks, srun1)) << "task 0 speaks for the step";
    LocalRank torchrun{0, 2, "LOCAL_RANK", "LOCAL_WORLD_SIZE", true};
    EXPECT_FALSE(device_block_notice(blocks, torchrun));
    LocalRank given{0, 2, "--local-rank", "--ntasks", false};
    EXPECT_FALSE(device_block_notice(blocks, given));
    EXPECT_FALSE(device_block_notice(plan_with_devices({{0}, {1}}), srun0)) << "one device each: nothing to say";
}

}  // namespace
}  // namespace numabind
