// resolve_local_rank (src/core/local_rank.cpp) with the PMIx adapter (pmix/): which launcher
// variable wins when launchers nest, what --local-rank/--ntasks override, the PMIx source's errors.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>

#include "numabind/error.hpp"
#include "pmix_rank.hpp"

namespace nb = numabind;

namespace {

nb::EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

nb::LocalRank resolve(const std::map<std::string, std::string>& vars, const std::string& rank = "",
                      const std::string& ntasks = "", const std::string& source = "auto") {
    return nb::resolve_local_rank(rank, ntasks, source, env_of(vars), nb::pmix_rank_source());
}

// What an Open MPI rank started by mpirun inside salloc/sbatch sees: the orted's Slurm
// step variables (one orted per node) plus Open MPI's own.
const std::map<std::string, std::string> kMpirunInSalloc = {
    {"SLURM_LOCALID", "0"},          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NODEID", "1"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
};

}  // namespace

TEST(RankSource, SrunAlone) {
    auto lr = resolve({{"SLURM_LOCALID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "3,2"}, {"SLURM_NODEID", "1"}});
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 2);
    EXPECT_EQ(lr.source, "SLURM_LOCALID");
    EXPECT_EQ(lr.size_source, "SLURM_STEP_TASKS_PER_NODE");
}

TEST(RankSource, MpirunAlone) {
    auto lr = resolve({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 2);
    EXPECT_EQ(lr.source, "OMPI_COMM_WORLD_LOCAL_RANK");
}

TEST(RankSource, MpirunInsideSallocIgnoresTheOrtedStep) {
    auto lr = resolve(kMpirunInSalloc);
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 2);
    EXPECT_EQ(lr.source.rfind("OMPI_COMM_WORLD_LOCAL_RANK", 0), 0u) << lr.source;
    EXPECT_NE(lr.source.find("SLURM_LOCALID"), std::string::npos) << "verbose should say SLURM_LOCALID was ignored";
    EXPECT_EQ(lr.size_source, "OMPI_COMM_WORLD_LOCAL_SIZE");
    EXPECT_EQ(resolve(kMpirunInSalloc, "", "", "env").rank, 1);
}

TEST(RankSource, HydraAndMvapichAndPalsInsideSlurm) {
    for (auto [rank, size] : {std::pair{"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                              std::pair{"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
                              std::pair{"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"}}) {
        auto lr = resolve({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}, {rank, "3"}, {size, "4"}});
        EXPECT_EQ(lr.rank, 3) << rank;
        EXPECT_EQ(lr.size, 4) << rank;
    }
}

TEST(RankSource, TorchrunInsideSrunAndMpirun) {
    auto vars = kMpirunInSalloc;
    vars["LOCAL_RANK"] = "3";
    vars["LOCAL_WORLD_SIZE"] = "4";
    vars["TORCHELASTIC_RUN_ID"] = "job";
    auto lr = resolve(vars);
    EXPECT_EQ(lr.rank, 3);
    EXPECT_EQ(lr.size, 4);
    EXPECT_EQ(lr.size_source, "LOCAL_WORLD_SIZE");
    // srun -> torchrun
    lr = resolve({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}, {"LOCAL_RANK", "2"},
                  {"LOCAL_WORLD_SIZE", "4"}, {"TORCHELASTIC_RUN_ID", "x"}});
    EXPECT_EQ(lr.rank, 2);
    EXPECT_EQ(lr.size, 4);
    // GROUP_RANK marks torchrun as well
    vars.erase("TORCHELASTIC_RUN_ID");
    vars["GROUP_RANK"] = "0";
    EXPECT_EQ(resolve(vars).rank, 3);
}

TEST(RankSource, BareLocalRankBeatsSlurmButNotMpi) {
    auto lr = resolve({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}, {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"}});
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.source.rfind("LOCAL_RANK", 0), 0u);
    auto vars = kMpirunInSalloc;
    vars["LOCAL_RANK"] = "0";  // no TORCHELASTIC_RUN_ID: not known to be torchrun's
    EXPECT_EQ(resolve(vars).source.rfind("OMPI_COMM_WORLD_LOCAL_RANK", 0), 0u);
}

TEST(RankSource, OptionsBeatVariables) {
    auto lr = resolve(kMpirunInSalloc, "0", "");
    EXPECT_EQ(lr.rank, 0);
    EXPECT_EQ(lr.source, "--local-rank");
    EXPECT_EQ(lr.size, 2);  // the size still comes from the launcher
    lr = resolve(kMpirunInSalloc, "", "4");
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 4);
    EXPECT_EQ(lr.size_source, "--ntasks");
    lr = resolve({}, "1", "2");
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 2);
    EXPECT_THROW(resolve({}, "2", "2"), nb::UsageError);
    EXPECT_THROW(resolve({}, "x", "2"), nb::UsageError);
    EXPECT_THROW(resolve({}, "0", "1", "mpi"), nb::UsageError);
}

TEST(RankSource, NoLauncherIsAClearError) {
    try {
        resolve({{"PMIX_NAMESPACE", "x"}, {"PMIX_SERVER_URI4", "x"}});  // auto never uses PMIx
        FAIL() << "expected an error";
    } catch (const nb::UsageError&) {
        FAIL() << "not a usage error";
    } catch (const nb::Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("cannot determine the local rank"), std::string::npos) << m;
        EXPECT_NE(m.find("--local-rank"), std::string::npos) << m;
        EXPECT_NE(m.find("OMPI_COMM_WORLD_LOCAL_RANK"), std::string::npos) << m;
        EXPECT_EQ(m.find("--rank-source pmix") != std::string::npos, nb::pmix_available()) << m;
    }
}

TEST(RankSource, PmixWithoutServerFailsAtOnce) {
    for (const char* v : {"PMIX_NAMESPACE", "PMIX_SERVER_URI", "PMIX_SERVER_URI2", "PMIX_SERVER_URI21",
                          "PMIX_SERVER_URI3", "PMIX_SERVER_URI4", "PMIX_SERVER_URI41"})
        unsetenv(v);
    try {
        resolve({{"SLURM_LOCALID", "0"}}, "", "", "pmix");  // pmix asked for: no fallback to variables
        FAIL() << "expected an error";
    } catch (const nb::Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("--rank-source pmix"), std::string::npos) << m;
#ifdef NUMABIND_TEST_HAVE_PMIX
        EXPECT_NE(m.find("PMIX_NAMESPACE"), std::string::npos) << m;
#else
        EXPECT_NE(m.find("without PMIx"), std::string::npos) << m;
#endif
    }
    // With --local-rank and --ntasks nothing needs PMIx.
    auto lr = resolve({}, "0", "1", "pmix");
    EXPECT_EQ(lr.source, "--local-rank");
}

// --rank-source pmix with a launcher variable present: both sources must agree; the verbose
// source says they did, a disagreement is a warning (PMIx, asked for, wins). The PMIx answer
// is injected here; tests/mpi/mpi_binding_test.sh compares against real servers.
namespace {
std::function<std::optional<nb::LocalRank>(std::string&)> pmix_says(int rank, int size) {
    return [rank, size](std::string&) -> std::optional<nb::LocalRank> {
        nb::LocalRank lr;
        lr.rank = rank;
        lr.size = size;
        lr.source = "PMIx PMIX_LOCAL_RANK (ns rank 7)";
        lr.size_source = "PMIx PMIX_LOCAL_SIZE";
        return lr;
    };
}
}  // namespace

TEST(RankSource, PmixAgreesWithTheLauncher) {
    std::vector<std::string> warnings;
    auto lr = nb::resolve_local_rank("", "", "pmix", env_of(kMpirunInSalloc), nb::PmixRankSource{pmix_says(1, 2), nb::pmix_available()}, &warnings);
    EXPECT_EQ(lr.rank, 1);
    EXPECT_EQ(lr.size, 2);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(lr.source.rfind("PMIx PMIX_LOCAL_RANK", 0), 0u) << lr.source;
    EXPECT_NE(lr.source.find("agrees with OMPI_COMM_WORLD_LOCAL_RANK"), std::string::npos) << lr.source;
}

TEST(RankSource, PmixDisagreeingWithTheLauncherIsAWarning) {
    std::vector<std::string> warnings;
    auto lr = nb::resolve_local_rank("", "", "pmix", env_of({{"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2"}}),
                                     nb::PmixRankSource{pmix_says(1, 4), nb::pmix_available()}, &warnings);
    EXPECT_EQ(lr.rank, 1);  // PMIx was asked for
    EXPECT_EQ(lr.size, 4);
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_NE(warnings[0].find("local rank 1 but SLURM_LOCALID=0"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[1].find("4 local tasks but SLURM_STEP_TASKS_PER_NODE says 2"), std::string::npos) << warnings[1];
    EXPECT_EQ(lr.source.find("agrees"), std::string::npos) << lr.source;
}

TEST(RankSource, PmixWithoutLauncherVariableNeedsNoComparison) {
    std::vector<std::string> warnings;
    auto lr = nb::resolve_local_rank("", "", "pmix", env_of({}), nb::PmixRankSource{pmix_says(3, 4), nb::pmix_available()}, &warnings);
    EXPECT_EQ(lr.rank, 3);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(lr.source, "PMIx PMIX_LOCAL_RANK (ns rank 7)");
}

TEST(RankSource, PmixUnknownSizeComparesTheRankOnly) {
    auto no_size = pmix_says(0, 0);
    std::vector<std::string> warnings;
    auto lr = nb::resolve_local_rank("", "", "pmix", env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                                     nb::PmixRankSource{no_size, nb::pmix_available()}, &warnings);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(lr.size, 2);
    EXPECT_EQ(lr.size_source, "OMPI_COMM_WORLD_LOCAL_SIZE (the PMIx server gave none)");
}

TEST(RankSource, PmixWithoutSizeTakesTheLaunchersSize) {
    std::vector<std::string> warnings;
    auto lr = nb::resolve_local_rank("", "", "pmix", env_of({{"SLURM_LOCALID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}}),
                                     nb::PmixRankSource{pmix_says(1, 0), nb::pmix_available()}, &warnings);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(lr.size, 2);
    EXPECT_EQ(lr.size_source, "SLURM_STEP_TASKS_PER_NODE (the PMIx server gave none)");
}
