// Parsing of everything a user or launcher hands in: modes, policies, match specs,
// visible-device variables, local-rank variables. Bad input names itself.
#include <gtest/gtest.h>

#include <cctype>
#include <map>

#include "core/local_rank.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "numabind/error.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

template <typename Fn>
std::string usage_error(Fn&& fn) {
    try {
        fn();
    } catch (const UsageError& e) {
        std::string msg = e.what();
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
        return msg;
    }
    ADD_FAILURE() << "no UsageError";
    return "";
}

PciDevice pci(uint16_t vendor, uint16_t device, uint16_t cls) {
    PciDevice d;
    d.vendor = vendor;
    d.device = device;
    d.class_id = cls;
    return d;
}

TEST(Options, ModesAndPoliciesNameTheValidChoices) {
    EXPECT_EQ(parse_mode("core-complex"), Mode::CoreComplex);
    EXPECT_EQ(parse_mem_policy("interleave"), MemPolicy::Interleave);
    std::string m = usage_error([] { parse_mode("cores"); });
    EXPECT_NE(m.find("'cores'"), std::string::npos);
    EXPECT_NE(m.find("none, node, socket, exclusive, core-complex"), std::string::npos);
    std::string p = usage_error([] { parse_mem_policy("local"); });
    EXPECT_NE(p.find("'local'"), std::string::npos);
    EXPECT_NE(p.find("prefer, bind, interleave, none"), std::string::npos);
    for (Mode mode : {Mode::None, Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex})
        EXPECT_EQ(parse_mode(to_string(mode)), mode);
}

TEST(DeviceMatch, BuiltinTableCountsGpusOnly) {
    DeviceMatcher b = DeviceMatcher::builtin();
    EXPECT_TRUE(b.matches(pci(0x10de, 0x20b0, 0x0302)));   // A100
    EXPECT_TRUE(b.matches(pci(0x10de, 0x1eb8, 0x0300)));   // T4 as VGA
    EXPECT_FALSE(b.matches(pci(0x10de, 0x1af1, 0x0680)));  // NVSwitch (bridge)
    EXPECT_FALSE(b.matches(pci(0x10de, 0x10f0, 0x0403)));  // GPU audio function
    EXPECT_TRUE(b.matches(pci(0x1002, 0x74a0, 0x1200)));   // MI300A
    EXPECT_TRUE(b.matches(pci(0x1002, 0x740c, 0x0380)));   // MI250X
    EXPECT_FALSE(b.matches(pci(0x1002, 0x515e, 0x0300)));  // ES1000 BMC chip
    EXPECT_TRUE(b.matches(pci(0x8086, 0x0bd5, 0x0380)));   // Data Center GPU Max
    EXPECT_FALSE(b.matches(pci(0x8086, 0x56a0, 0x0300)));  // client/integrated graphics
    EXPECT_FALSE(b.matches(pci(0x8086, 0x0b2b, 0x1200)));  // FPGA card
    EXPECT_TRUE(b.matches(pci(0x1da3, 0x1020, 0x1200)));   // Gaudi2
    EXPECT_FALSE(b.matches(pci(0x1a03, 0x2000, 0x0300)));  // ASPEED BMC VGA
    EXPECT_FALSE(b.matches(pci(0x15b3, 0x101b, 0x0207)));  // InfiniBand NIC
}

TEST(DeviceMatch, SpecsOverrideTheTable) {
    DeviceMatcher v = DeviceMatcher::parse("1234");
    EXPECT_TRUE(v.matches(pci(0x1234, 0x1111, 0x0300)));    // QEMU VGA
    EXPECT_FALSE(v.matches(pci(0x1234, 0x1111, 0x0200)));   // a bare vendor means its GPUs only
    EXPECT_FALSE(v.matches(pci(0x10de, 0x20b0, 0x0302)));   // the table no longer applies
    DeviceMatcher d = DeviceMatcher::parse("10de:1af1,class=0x12");
    EXPECT_TRUE(d.matches(pci(0x10de, 0x1af1, 0x0680)));    // explicit device id: any class
    EXPECT_TRUE(d.matches(pci(0x8086, 0x0b2b, 0x1200)));    // base class 0x12
    EXPECT_FALSE(d.matches(pci(0x10de, 0x20b0, 0x0302)));
    DeviceMatcher c = DeviceMatcher::parse("class=0x0302");
    EXPECT_TRUE(c.matches(pci(0, 0, 0x0302)));
    EXPECT_FALSE(c.matches(pci(0, 0, 0x0300)));
    for (const char* bad : {"", "10de:", "xyz", "10d", "class=0x3", "class=", "10de,,1002", "10de:20b0:1", "0x10de0"}) {
        std::string m = usage_error([&] { DeviceMatcher::parse(bad); });
        EXPECT_NE(m.find("VVVV[:DDDD]"), std::string::npos) << bad << ": " << m;
    }
}

// Generated shapes (gen_topology.py): nps4 has 4 A100 at 03:00.0, 44:00.0, 84:00.0,
// c4:00.0 (PCI order = device index); mixed-vendors an A100 at 08:00.0 and an MI210 at 44:00.0.
class Visible : public ::testing::Test {
protected:
    void SetUp() override {
        nps4 = load(generated("nps4"));
        accs = find_accelerators(nps4->model(), DeviceMatcher::builtin());
        ASSERT_EQ(accs.size(), 4u);
        ASSERT_EQ(accs[2].pci, "0000:84:00.0");
        two_vendors = load(generated("mixed-vendors"));
        mixed = find_accelerators(two_vendors->model(), DeviceMatcher::builtin());
        ASSERT_EQ(mixed.size(), 2u);
    }
    std::unique_ptr<HwlocTopology> nps4, two_vendors;
    std::vector<Accelerator> accs, mixed;
};

TEST_F(Visible, CudaIndexesInOrderAndEmptyMeansNone) {
    auto v = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", "2,0"}}), nullptr);
    EXPECT_TRUE(v.restricted);
    EXPECT_EQ(v.indexes, (std::vector<int>{2, 0}));
    EXPECT_EQ(v.source, "CUDA_VISIBLE_DEVICES");
    auto empty = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", ""}}), nullptr);
    EXPECT_TRUE(empty.restricted);
    EXPECT_TRUE(empty.indexes.empty());
    auto unset = visible_from_env(accs, env_of({}), nullptr);
    EXPECT_FALSE(unset.restricted);
}

// White space around entries and around a blank value, as the C locale's isspace has it.
TEST_F(Visible, WhiteSpaceAroundEntriesIsIgnored) {
    auto v = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", " 2 ,\t0\n"}}), nullptr);
    EXPECT_EQ(v.indexes, (std::vector<int>{2, 0}));
    auto blank = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", " \t\r\n\f\v"}}), nullptr);
    EXPECT_TRUE(blank.restricted);
    EXPECT_TRUE(blank.indexes.empty());
    for (int c = 0; c < 256; ++c)
        EXPECT_EQ(is_space(static_cast<char>(c)), c < 128 && std::isspace(c) != 0) << "character " << c;
    EXPECT_EQ(trimmed(" \t a b \n"), "a b");
    EXPECT_EQ(trimmed(" \v "), "");
}

TEST_F(Visible, UuidsResolveThroughNvmlOrWarn) {
    auto resolver = [](const std::string& uuid) -> std::optional<std::string> {
        if (uuid == "GPU-8c1e") return std::string("0000:84:00.0");
        return std::nullopt;
    };
    auto v = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", "GPU-8c1e"}}), resolver);
    EXPECT_EQ(v.indexes, std::vector<int>{2});  // 84:00.0 is third in PCI order
    auto w = visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", "MIG-77"}}), resolver);
    EXPECT_FALSE(w.restricted);
    ASSERT_EQ(w.warnings.size(), 1u);
    EXPECT_NE(w.warnings[0].find("NVML"), std::string::npos);
}

TEST_F(Visible, BadEntriesNameTheVariableAndValue) {
    std::string m = usage_error([&] { visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", "0,x"}}), nullptr); });
    EXPECT_NE(m.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
    EXPECT_NE(m.find("'x'"), std::string::npos);
    std::string r = usage_error([&] { visible_from_env(accs, env_of({{"CUDA_VISIBLE_DEVICES", "7"}}), nullptr); });
    EXPECT_NE(r.find("out of range"), std::string::npos);
}

TEST_F(Visible, EachRuntimeCountsItsOwnVendor) {
    // mixed-vendors: index 0 = NVIDIA 08:00.0, index 1 = AMD 44:00.0
    EXPECT_EQ(visible_from_env(mixed, env_of({{"CUDA_VISIBLE_DEVICES", "0"}}), nullptr).indexes, std::vector<int>{0});
    EXPECT_EQ(visible_from_env(mixed, env_of({{"ROCR_VISIBLE_DEVICES", "0"}}), nullptr).indexes, std::vector<int>{1});
    EXPECT_EQ(visible_from_env(mixed, env_of({{"HIP_VISIBLE_DEVICES", "0"}}), nullptr).indexes, std::vector<int>{1});
    EXPECT_THROW(visible_from_env(mixed, env_of({{"ROCR_VISIBLE_DEVICES", "1"}}), nullptr), UsageError);
    // HIP numbers what ROCr left: ROCR=2,0 then HIP=1 -> device 0 (nps4 has no AMD: generic order)
    auto v = visible_from_env(accs, env_of({{"ROCR_VISIBLE_DEVICES", "2,0"}, {"HIP_VISIBLE_DEVICES", "1"}}), nullptr);
    EXPECT_EQ(v.indexes, std::vector<int>{0});
    auto ze = visible_from_env(accs, env_of({{"ZE_AFFINITY_MASK", "3.1,1,3.0"}}), nullptr);
    EXPECT_EQ(ze.indexes, (std::vector<int>{3, 1}));
}

TEST_F(Visible, ExplicitDeviceList) {
    EXPECT_EQ(parse_device_list("3,0-1", 4), (std::vector<int>{3, 0, 1}));
    EXPECT_NE(usage_error([] { parse_device_list("4", 4); }).find("out of range (0-3)"), std::string::npos);
    EXPECT_NE(usage_error([] { parse_device_list("a", 4); }).find("'a'"), std::string::npos);
}

TEST(LocalRank, LauncherVariablesInOrder) {
    auto s = local_rank_from_env(env_of({{"SLURM_LOCALID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                                         {"SLURM_NODEID", "1"}}));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->rank, 1);
    EXPECT_EQ(s->size, 3);
    EXPECT_EQ(s->source, "SLURM_LOCALID");
    // mpirun inside salloc: the ranks inherit the orted step's SLURM_LOCALID=0; mpirun's own wins.
    auto o = local_rank_from_env(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                         {"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}}));
    EXPECT_EQ(o->source, "OMPI_COMM_WORLD_LOCAL_RANK");
    EXPECT_EQ(o->rank, 3);
    EXPECT_EQ(o->size, 4);
    auto t = local_rank_from_env(env_of({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "8"}}));
    EXPECT_EQ(t->source, "LOCAL_RANK");
    EXPECT_EQ(t->size, 8);
    // torchrun (marked by its elastic agent) inside mpirun: torchrun's rank wins.
    auto tm = local_rank_from_env(env_of({{"LOCAL_RANK", "5"}, {"LOCAL_WORLD_SIZE", "8"}, {"TORCHELASTIC_RUN_ID", "x"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}));
    EXPECT_EQ(tm->rank, 5);
    // a bare LOCAL_RANK does not beat mpirun's variable
    auto bare = local_rank_from_env(env_of({{"LOCAL_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
    EXPECT_EQ(bare->rank, 1);
    auto m = local_rank_from_env(env_of({{"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}));
    EXPECT_EQ(m->rank, 1);
    EXPECT_FALSE(local_rank_from_env(env_of({})));
}

// Flux's task variables (flux-environment(7)): FLUX_TASK_LOCAL_ID, and only job-wide counts.
TEST(LocalRank, Flux) {
    auto one = local_rank_from_env(env_of({{"FLUX_TASK_LOCAL_ID", "2"}, {"FLUX_TASK_RANK", "2"}, {"FLUX_JOB_SIZE", "4"},
                                           {"FLUX_JOB_NNODES", "1"}}));
    ASSERT_TRUE(one);
    EXPECT_EQ(one->rank, 2);
    EXPECT_EQ(one->source, "FLUX_TASK_LOCAL_ID");
    EXPECT_EQ(one->size, 4);  // one node: the job's tasks are the node's
    EXPECT_EQ(one->size_source, "FLUX_JOB_SIZE (FLUX_JOB_NNODES=1)");
    // Two nodes: Flux says nothing per node (-N2 -n5 puts 3 and 2): unknown, not guessed.
    auto two = local_rank_from_env(env_of({{"FLUX_TASK_LOCAL_ID", "1"}, {"FLUX_TASK_RANK", "5"}, {"FLUX_JOB_SIZE", "8"},
                                           {"FLUX_JOB_NNODES", "2"}}));
    ASSERT_TRUE(two);
    EXPECT_EQ(two->rank, 1);
    EXPECT_EQ(two->size, 0);
    // Flux inside a Slurm allocation (srun flux start): Flux's task is the inner one.
    auto in_slurm = local_rank_from_env(env_of({{"FLUX_TASK_LOCAL_ID", "3"}, {"FLUX_JOB_SIZE", "4"},
                                                {"FLUX_JOB_NNODES", "1"}, {"SLURM_LOCALID", "0"},
                                                {"SLURM_STEP_TASKS_PER_NODE", "1"}}));
    EXPECT_EQ(in_slurm->source, "FLUX_TASK_LOCAL_ID");
    EXPECT_EQ(in_slurm->rank, 3);
    // An MPI launcher started inside a Flux job is inner to Flux.
    auto mpi = local_rank_from_env(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                           {"FLUX_TASK_LOCAL_ID", "0"}}));
    EXPECT_EQ(mpi->source, "OMPI_COMM_WORLD_LOCAL_RANK");
    EXPECT_NE(usage_error([] { local_rank_from_env(env_of({{"FLUX_TASK_LOCAL_ID", "x"}})); }).find("FLUX_TASK_LOCAL_ID"),
              std::string::npos);
    EXPECT_NE(usage_error([] {
                  local_rank_from_env(env_of({{"FLUX_TASK_LOCAL_ID", "4"}, {"FLUX_JOB_SIZE", "4"}, {"FLUX_JOB_NNODES", "1"}}));
              }).find("FLUX_JOB_SIZE"),
              std::string::npos);
}

TEST(LocalRank, MalformedOrInconsistentValuesAreRefused) {
    EXPECT_NE(usage_error([] { local_rank_from_env(env_of({{"SLURM_LOCALID", "one"}})); }).find("SLURM_LOCALID"),
              std::string::npos);
    usage_error([] { local_rank_from_env(env_of({{"LOCAL_RANK", "-1"}})); });
    usage_error([] { local_rank_from_env(env_of({{"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}})); });
    usage_error([] {
        local_rank_from_env(env_of({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x"}}));
    });
}

TEST(LocalRank, TorchrunIsMarkedOnlyWithItsAgent) {
    auto t = local_rank_from_env(env_of({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "x"}}));
    ASSERT_TRUE(t);
    EXPECT_TRUE(t->torchrun);
    auto g = local_rank_from_env(env_of({{"LOCAL_RANK", "1"}, {"GROUP_RANK", "0"}}));
    EXPECT_TRUE(g->torchrun);
    auto bare = local_rank_from_env(env_of({{"LOCAL_RANK", "1"}}));
    EXPECT_FALSE(bare->torchrun);
    auto srun = local_rank_from_env(env_of({{"SLURM_LOCALID", "0"}, {"TORCHELASTIC_RUN_ID", "x"}}));
    EXPECT_FALSE(srun->torchrun);
    EXPECT_TRUE(torchrun_worker(env_of({{"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "x"}})));
    EXPECT_FALSE(torchrun_worker(env_of({{"TORCHELASTIC_RUN_ID", "x"}})));
}

// A count past the limit is a usage error naming the value and the limit, not bad_alloc.
TEST(LocalRank, TaskCountsAndRanksHaveALimit) {
    EXPECT_EQ(parse_task_count("65536", "--ntasks"), kMaxLocalTasks);
    std::string m = usage_error([] { parse_task_count("1000000000", "--ntasks"); });
    EXPECT_NE(m.find("--ntasks '1000000000'"), std::string::npos) << m;
    EXPECT_NE(m.find("at most 65536"), std::string::npos) << m;
    EXPECT_NE(usage_error([] { parse_local_rank("65536", "--local-rank"); }).find("at most 65535"), std::string::npos);
    EXPECT_NE(usage_error([] { local_rank_from_env(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2000000000"}})); })
                  .find("OMPI_COMM_WORLD_LOCAL_SIZE"),
              std::string::npos);
    EXPECT_NE(usage_error([] { local_rank_from_env(env_of({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "99999(x2)"}})); })
                  .find("SLURM_STEP_TASKS_PER_NODE '99999'"),
              std::string::npos);
}

}  // namespace
