// The rules of `numabind show --pid`: numa_maps parsing (lines in the kernel's format, as
// Linux 6.1 writes them) and the mismatch rules.
#include <gtest/gtest.h>

#include "core/process_audit.hpp"

using namespace numabind;

namespace {

const char* kMaps =
    "55ebf58fa000 default file=/usr/bin/python3.11 mapped=2 N0=2 kernelpagesize_kB=4\n"
    "5601df901000 prefer:1 heap anon=10 dirty=10 active=0 N0=4 N1=6 kernelpagesize_kB=4\n"
    "7f0000000000 prefer (many):0-1 anon=512 dirty=512 N0=2 N1=1 kernelpagesize_kB=2048\n"
    "7f1000000000 bind=static:3 file=/dev/shm/x mapped=5 N3=5 kernelpagesize_kB=4\n"
    "7fff0626c000 default stack anon=3 dirty=3 active=1 N2=3 kernelpagesize_kB=4\n"
    "garbage\n";

AuditedThread thread(int tid, const char* cpus, const char* policy) {
    return AuditedThread{tid, "t" + std::to_string(tid), IdSet::parse(cpus), policy};
}

EnvPlan plan(const char* cpus, std::vector<int> mems, const char* mem) {
    EnvPlan p;
    p.present = true;
    p.cpus = IdSet::parse(cpus);
    p.mems = std::move(mems);
    p.mem_policy = mem;
    return p;
}

}  // namespace

TEST(NumaMaps, ParsesPoliciesFilesAndPagesPerNode) {
    auto maps = parse_numa_maps(kMaps);
    ASSERT_EQ(maps.size(), 5u);  // the unreadable line is skipped
    EXPECT_EQ(maps[0].file, "/usr/bin/python3.11");
    EXPECT_EQ(maps[1].policy, "prefer:1");
    EXPECT_TRUE(maps[1].heap);
    EXPECT_EQ(maps[1].pages.at(1), 6);
    EXPECT_EQ(maps[2].policy, "prefer (many):0-1");  // the kernel's spelling, with a space
    EXPECT_EQ(maps[2].page_kb, 2048);
    EXPECT_TRUE(maps[4].stack);
    EXPECT_TRUE(maps[4].anonymous());
}

TEST(NumaMaps, PagesByNodeAllAndAnonymousOnly) {
    auto maps = parse_numa_maps(kMaps);
    auto all = pages_by_node(maps, false);
    EXPECT_EQ(all, (std::map<int, long>{{0, 8}, {1, 7}, {2, 3}, {3, 5}}));
    auto anon = pages_by_node(maps, true);
    EXPECT_EQ(anon, (std::map<int, long>{{0, 6}, {1, 7}, {2, 3}}));
}

TEST(NumaMaps, TaskPolicyIsTheFirstFileMappings) {
    EXPECT_EQ(task_policy_from_numa_maps(parse_numa_maps(kMaps)).value(), "default");
    EXPECT_EQ(task_policy_from_numa_maps(parse_numa_maps("1000 prefer:0 file=/bin/x N0=1\n")).value(), "prefer:0");
    EXPECT_FALSE(task_policy_from_numa_maps(parse_numa_maps("1000 bind:0 anon=1 N0=1\n")).has_value());
}

TEST(NumaMaps, PolicyKindAndNodes) {
    EXPECT_EQ(parse_numa_policy("prefer (many):0-1").kind, "prefer");
    EXPECT_EQ(parse_numa_policy("prefer (many):0-1").nodes, IdSet({0, 1}));
    EXPECT_EQ(parse_numa_policy("bind=static:3").kind, "bind");
    EXPECT_EQ(parse_numa_policy("bind=static:3").nodes, IdSet({3}));
    EXPECT_EQ(parse_numa_policy("default").kind, "default");
    EXPECT_TRUE(parse_numa_policy("default").nodes.empty());
    EXPECT_EQ(parse_numa_policy("interleave:0,2").nodes, IdSet({0, 2}));
}

TEST(PlanSources, EnvironmentAndMarker) {
    EnvPlan p = plan_from_environ({{"NUMABIND_MODE", "exclusive"}, {"NUMABIND_CPUS", "4-7"}, {"NUMABIND_MEMS", "1"},
                                   {"NUMABIND_MEM_POLICY", "bind"}});
    EXPECT_TRUE(p.present);
    EXPECT_EQ(p.cpus, IdSet::range(4, 7));
    EXPECT_EQ(p.mems, std::vector<int>{1});
    EXPECT_FALSE(plan_from_environ({{"NUMABIND_MODE", "none"}, {"NUMABIND_CPUS", "0"}}).present);
    EXPECT_FALSE(plan_from_environ({{"NUMABIND_MODE", "node"}, {"NUMABIND_CPUS", "x"}}).present);

    std::vector<int> devices;
    auto m = plan_from_maps(
        "7f00 r--s 00000000 00:01 12 /memfd:numabind-plan:mode=node;cpus=0-3;mems=0,1;mem=prefer;devices=2,3 (deleted)\n",
        &devices);
    ASSERT_TRUE(m && m->present);
    EXPECT_EQ(m->cpus, IdSet::range(0, 3));
    EXPECT_EQ(m->mems, (std::vector<int>{0, 1}));
    EXPECT_EQ(m->mem_policy, "prefer");
    EXPECT_EQ(devices, (std::vector<int>{2, 3}));
    EXPECT_FALSE(plan_from_maps("7f00 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n").has_value());
}

TEST(Mismatches, ThreadOutsideThePlanIsNamed) {
    auto out = process_mismatches({thread(10, "2", "prefer:0"), thread(11, "0-3", "prefer:0")}, plan("2-3", {0}, "prefer"),
                                  {}, {}, {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out[0].find("thread 11"), std::string::npos);
    EXPECT_NE(out[0].find("0-3"), std::string::npos);
}

TEST(Mismatches, ThreadInsideThePlanIsFine) {
    EXPECT_TRUE(process_mismatches({thread(10, "3", "prefer:0")}, plan("2-3", {0}, "prefer"), {{0, 100}}, {}, {}).empty());
}

TEST(Mismatches, MemoryPolicyOfEachThread) {
    auto out = process_mismatches({thread(1, "0", "default"), thread(2, "0", "prefer:1"), thread(3, "0", "bind:0"),
                                   thread(4, "0", "prefer (many):0")},
                                  plan("0", {0}, "prefer"), {}, {}, {});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_NE(out[0].find("thread 1 "), std::string::npos);
    EXPECT_NE(out[1].find("prefer:1"), std::string::npos);
    EXPECT_NE(out[2].find("bind:0"), std::string::npos);
    // No policy in the plan (mem none): nothing to compare.
    EXPECT_TRUE(process_mismatches({thread(1, "0", "default")}, plan("0", {0}, "none"), {}, {}, {}).empty());
}

TEST(Mismatches, PagesOffTheHomeNodes) {
    auto out = process_mismatches({}, plan("0", {1}, "bind"), {{0, 12}, {1, 900}, {2, 0}}, {}, {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out[0].find("12 on node 0"), std::string::npos);
    EXPECT_EQ(out[0].find("node 2"), std::string::npos);
}

TEST(Mismatches, DeviceOnAnotherNodeThanTheCpus) {
    std::vector<AuditedDevice> dev{{3, "0000:41:00.0", {1}}};
    auto out = process_mismatches({}, EnvPlan{}, {}, dev, {0});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out[0].find("device 3 (0000:41:00.0)"), std::string::npos);
    EXPECT_TRUE(process_mismatches({}, EnvPlan{}, {}, dev, {1}).empty());
    // Two devices: the home is the union.
    dev.push_back({4, "0000:61:00.0", {2}});
    EXPECT_TRUE(process_mismatches({}, EnvPlan{}, {}, dev, {1, 2}).empty());
    EXPECT_EQ(process_mismatches({}, EnvPlan{}, {}, dev, {0, 1}).size(), 1u);
}

TEST(Mismatches, NoPlanNoThreadRules) {
    EXPECT_TRUE(process_mismatches({thread(1, "0-63", "default")}, EnvPlan{}, {{5, 10}}, {}, {}).empty());
}
