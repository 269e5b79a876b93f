// One hardware thread per core (smt=1) in every mode, against hwloc-calc's first PU of each
// core; and the OpenMP variables of a task (omp), against hwloc-calc's cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/omp.hpp"
#include "numabind/error.hpp"
#include "numabind/plan.hpp"
#include "test_support.hpp"

namespace numabind {
namespace {

using test::calc_pus;
using test::hwloc_calc;

const Mode kModes[] = {Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex};

// hwloc-calc's location syntax for a set: "pu:0-3 pu:10" (physical indexes with --pi).
std::string pu_location(const IdSet& s) {
    std::string out;
    for (const std::string& range : test::split_csv(s.to_string())) out += (out.empty() ? "pu:" : " pu:") + range;
    return out;
}

std::string usage_message(const std::function<void()>& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Smt, Spelling) {
    EXPECT_TRUE(parse_smt("1", "--smt"));
    EXPECT_FALSE(parse_smt("all", "--smt"));
    EXPECT_EQ(usage_message([] { parse_smt("3", "--smt"); }), "invalid --smt '3' (valid: 1, all)");
    EXPECT_EQ(usage_message([] { parse_smt("", "smt"); }), "invalid smt '' (valid: 1, all)");
    EXPECT_EQ(usage_message([] { parse_smt("ALL", "smt"); }), "invalid smt 'ALL' (valid: 1, all)");
}

// Every generated shape and every recorded GPU server, every mode: with smt=1 each task's
// CPUs are first PUs of cores (hwloc-calc core:all.pu:0), i.e. one per core; node and
// socket keep the same cores as with all siblings.
class OneThreadPerCore : public ::testing::TestWithParam<std::string> {};

TEST_P(OneThreadPerCore, EveryModeTakesTheFirstSiblingOfEachCore) {
    const std::string& name = GetParam();
    NUMABIND_REQUIRE_CORPUS_PARAM(name);
    if (name.front() != '/') NUMABIND_REQUIRE_CORPUS();
    auto topo = test::load(name);
    auto accs = find_accelerators(topo->model(), DeviceMatcher::builtin());
    if (accs.empty()) GTEST_SKIP() << name << ": no accelerator";
    const IdSet first_pus = calc_pus(name, "core:all.pu:0");
    const IdSet allowed = topo->allowed().cpus;
    int compared = 0;
    for (Mode mode : kModes) {
        PlanRequest req;
        req.mode = mode;
        // One task per GPU, fewer where one thread per core leaves fewer PUs (the trimmed DGX-2).
        req.ntasks = std::max(1, std::min(static_cast<int>(accs.size()), static_cast<int>((first_pus & allowed).size())));
        req.allowed_cpus = allowed;
        NodePlan all_siblings;
        try {
            all_siblings = plan_node(topo->model(), accs, req);
        } catch (const Error&) {
            continue;  // not plannable at all (more tasks than PUs): nothing to compare
        }
        req.one_thread_per_core = true;
        if (static_cast<int>((first_pus & allowed).size()) < req.ntasks) continue;
        NodePlan one = plan_node(topo->model(), accs, req);
        ++compared;
        ASSERT_EQ(one.tasks.size(), all_siblings.tasks.size());
        for (size_t r = 0; r < one.tasks.size(); ++r) {
            const IdSet& cpus = one.tasks[r].cpus;
            EXPECT_FALSE(cpus.empty()) << name << " " << to_string(mode) << " task " << r;
            EXPECT_TRUE(cpus.is_subset_of(first_pus))
                << name << " " << to_string(mode) << " task " << r << ": " << cpus.to_string() << " not within "
                << first_pus.to_string();
            if (mode == Mode::Node || mode == Mode::Socket)
                EXPECT_EQ(cpus, all_siblings.tasks[r].cpus & first_pus) << name << " " << to_string(mode) << " task " << r;
            EXPECT_EQ(one.tasks[r].mems, all_siblings.tasks[r].mems) << name << " " << to_string(mode) << " task " << r;
        }
    }
    EXPECT_GE(compared, 2) << name << ": too few modes plannable to say anything";
}

std::vector<std::string> smt_topologies() {
    std::vector<std::string> out;
    for (const std::string& p : test::presets()) out.push_back(test::generated(p));
    for (const std::string& f : test::corpus_params(test::corpus_gpu_files())) out.push_back(f);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Topologies, OneThreadPerCore, ::testing::ValuesIn(smt_topologies()), [](const auto& info) {
    std::string n = info.param.substr(info.param.rfind('/') + 1);
    for (char& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
});

// smt=1 without --hint=nomultithread: Slurm's -c counted threads, the minimum is in cores.
TEST(Smt, CpusPerTaskMinimumCountsCores) {
    Topology t;
    t.cores.push_back({IdSet{0, 2}, -1, 0});
    t.cores.push_back({IdSet{1, 3}, -1, 0});
    t.cores.push_back({IdSet{4}, -1, 0});
    EXPECT_EQ(min_cpus_one_thread(t, IdSet{0, 1, 2, 3, 4}, 4), 2);
    EXPECT_EQ(min_cpus_one_thread(t, IdSet{0, 1, 2, 3, 4}, 3), 2);
    EXPECT_EQ(min_cpus_one_thread(t, IdSet{0, 1, 4}, 3), 3);  // no sibling allowed: threads are cores
    EXPECT_EQ(min_cpus_one_thread(t, IdSet{0, 2}, 0), 0);
}

// ---- OpenMP variables ----

// Two cores of two threads with Linux's usual sibling numbering (0,2 / 1,3), and a PU that
// no core holds.
Topology small_smt_node() {
    Topology t;
    t.cores.push_back({IdSet{0, 2}, -1, 0});
    t.cores.push_back({IdSet{1, 3}, -1, 0});
    return t;
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

TEST(Omp, OnePlacePerCoreInCoreOrder) {
    const Topology t = small_smt_node();
    EXPECT_EQ(omp_places(t, IdSet{0, 1, 2, 3}), "{0,2},{1,3}");
    EXPECT_EQ(omp_places(t, IdSet{0, 1}), "{0},{1}");  // smt=1
    EXPECT_EQ(omp_places(t, IdSet{3}), "{3}");
    EXPECT_EQ(omp_places(t, IdSet{1, 3, 7}), "{1,3},{7}");  // a PU outside every core: a place of its own
    EXPECT_EQ(omp_places(t, IdSet{}), "");
}

TEST(Omp, EnvironmentKeepsWhatTheUserSet) {
    const Topology t = small_smt_node();
    auto vars = omp_environment(t, IdSet{0, 1, 2, 3}, env_of({}));
    ASSERT_EQ(vars.size(), 3u);
    EXPECT_EQ(vars[0].name, "OMP_NUM_THREADS");
    EXPECT_EQ(vars[0].value, "2");  // one thread per core, not per hardware thread
    EXPECT_EQ(vars[1].name, "OMP_PLACES");
    EXPECT_EQ(vars[1].value, "{0,2},{1,3}");
    EXPECT_EQ(vars[2].name, "OMP_PROC_BIND");
    EXPECT_EQ(vars[2].value, "close");
    for (const auto& v : vars) EXPECT_FALSE(v.kept) << v.name;
    EXPECT_EQ(omp_summary(vars), "OMP_NUM_THREADS=2 OMP_PLACES={0,2},{1,3} OMP_PROC_BIND=close set");

    auto user = omp_environment(t, IdSet{0, 1}, env_of({{"OMP_NUM_THREADS", "7"}, {"OMP_PROC_BIND", ""}}));
    EXPECT_TRUE(user[0].kept);
    EXPECT_FALSE(user[1].kept);
    EXPECT_FALSE(user[2].kept);  // set but empty: means nothing to the runtime
    EXPECT_EQ(user[1].value, "{0},{1}");
    EXPECT_EQ(omp_summary(user), "OMP_PLACES={0},{1} OMP_PROC_BIND=close set; OMP_NUM_THREADS kept (already set)");
}

TEST(Omp, ThreadsOverrideIsAWholeNumberInRange) {
    EXPECT_EQ(parse_threads("14", "--threads"), 14);
    for (const char* bad : {"0", "-1", "x", "1.5", "", "65537"}) {
        const std::string m = usage_message([&] { parse_threads(bad, "--threads"); });
        EXPECT_NE(m.find(std::string("--threads '") + bad + "'"), std::string::npos) << m;
        EXPECT_NE(m.find("1 to 65536"), std::string::npos) << m;
    }
}

// torchrun sets OMP_NUM_THREADS=1 for its workers when the user set none; only its workers'
// 1 is torchrun's default.
TEST(Omp, TorchrunDefaultIsOneInATorchrunWorker) {
    EXPECT_TRUE(omp_is_torchrun_default(env_of({{"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "x"}, {"OMP_NUM_THREADS", "1"}})));
    EXPECT_FALSE(omp_is_torchrun_default(env_of({{"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "x"}, {"OMP_NUM_THREADS", "4"}})));
    EXPECT_FALSE(omp_is_torchrun_default(env_of({{"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "x"}})));
    EXPECT_FALSE(omp_is_torchrun_default(env_of({{"SLURM_LOCALID", "0"}, {"OMP_NUM_THREADS", "1"}})));
    const std::string line = torchrun_omp_notice(14, "--threads N");
    EXPECT_EQ(line.find('\n'), std::string::npos);
    for (const char* part : {"OMP_NUM_THREADS=1", "torchrun", "14 CPUs", "--threads N"})
        EXPECT_NE(line.find(part), std::string::npos) << part << " in: " << line;
}

// On a generated DGX-like node (sibling PUs apart: 0 and 128): each place is one core as
// hwloc-calc sees it, for all siblings and for smt=1.
TEST(Omp, PlacesAreHwlocCores) {
    const std::string file = test::generated("dgx-a100");
    auto topo = test::load(file);
    auto accs = find_accelerators(topo->model(), DeviceMatcher::builtin());
    ASSERT_FALSE(accs.empty());
    for (bool one_thread : {false, true}) {
        PlanRequest req;
        req.mode = Mode::Exclusive;
        req.ntasks = static_cast<int>(accs.size());
        req.one_thread_per_core = one_thread;
        const NodePlan plan = plan_node(topo->model(), accs, req);
        for (size_t r : {size_t{0}, plan.tasks.size() - 1}) {
            const IdSet& cpus = plan.tasks[r].cpus;
            std::string want;
            int ncores = 0;
            for (const std::string& core : test::split_csv(hwloc_calc(file, "--pi --intersect core", pu_location(cpus)))) {
                const IdSet place = calc_pus(file, "core:" + core) & cpus;
                std::string p;
                for (int pu : place.ids()) p += (p.empty() ? "" : ",") + std::to_string(pu);
                want += (want.empty() ? "{" : ",{") + p + "}";
                ++ncores;
            }
            const auto vars = omp_environment(topo->model(), cpus, env_of({}));
            EXPECT_EQ(vars[1].value, want) << "task " << r << " smt=" << (one_thread ? "1" : "all");
            EXPECT_EQ(vars[0].value, std::to_string(ncores)) << "task " << r;
        }
    }
}

}  // namespace
}  // namespace numabind
