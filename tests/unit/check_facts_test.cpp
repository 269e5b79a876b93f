// `numabind check` helpers and the placement picture's styles (src/cli/check_facts.cpp,
// draw_style.cpp). Expected values are written out from the input texts.
#include <gtest/gtest.h>

#include "check_facts.hpp"
#include "draw_style.hpp"
#include "numabind/error.hpp"

using namespace numabind;
using namespace numabind::check;

TEST(CheckRows, ExitStatusIsOneOnlyWithAFail) {
    EXPECT_EQ(exit_status({}), 0);
    EXPECT_EQ(exit_status({{"a", "b", Status::Ok, "", ""}, {"a", "c", Status::Warn, "", "x"}}), 0);
    EXPECT_EQ(exit_status({{"a", "b", Status::Ok, "", ""}, {"a", "c", Status::Fail, "", "x"}}), 1);
}

TEST(CheckRows, TablePrintsFixUnderTheRowAndCounts) {
    const std::string t = rows_to_table({{"kernel", "cgroup", Status::Ok, "v2", ""},
                                         {"slurm", "gres.conf order", Status::Warn, "out of order", "list in PCI order"}});
    EXPECT_NE(t.find("OK      kernel  cgroup           v2\n"), std::string::npos) << t;
    EXPECT_NE(t.find("WARN    slurm   gres.conf order  out of order\n          fix: list in PCI order\n"), std::string::npos) << t;
    EXPECT_NE(t.find("1 OK, 1 WARN, 0 FAIL"), std::string::npos);
    const auto j = rows_to_json({{"kernel", "cgroup", Status::Fail, "none", "mount"}});
    EXPECT_EQ(j["rows"][0]["status"], "FAIL");
    EXPECT_EQ(j["summary"]["fail"], 1);
    EXPECT_EQ(j["exit_status"], 1);
}

TEST(Plugstack, LineSplitsControlPluginArgs) {
    const PlugstackLine p = parse_plugstack_line("required  /usr/lib/spank_numabind.so default=node\tfallback=warn # c");
    EXPECT_EQ(p.control, "required");
    EXPECT_EQ(p.plugin, "/usr/lib/spank_numabind.so");
    EXPECT_EQ(p.args, (std::vector<std::string>{"default=node", "fallback=warn"}));
    EXPECT_THROW(parse_plugstack_line("requird /x.so"), UsageError);
    EXPECT_THROW(parse_plugstack_line("optional"), UsageError);
    EXPECT_THROW(parse_plugstack_line("  # only a comment"), UsageError);
}

TEST(SlurmConf, KeyValuesLowerCaseLastWinsNodeLinesSkipped) {
    const auto kv = parse_key_values("TaskPlugin=task/affinity\n# TaskPlugin=task/none\nNodeName=n1 CPUs=4 TaskPlugin=x\n"
                                     "taskplugin=task/cgroup,task/affinity\nConstrainDevices=yes\n");
    EXPECT_EQ(kv.at("taskplugin"), "task/cgroup,task/affinity");
    EXPECT_EQ(kv.at("constraindevices"), "yes");
    EXPECT_EQ(kv.count("cpus"), 0u);
    EXPECT_TRUE(is_yes("YES"));
    EXPECT_FALSE(is_yes("no"));
}

TEST(SlurmConf, TaskPluginRow) {
    EXPECT_EQ(task_plugin_row(std::string("task/cgroup,task/affinity")).status, Status::Ok);
    EXPECT_EQ(task_plugin_row(std::string("task/affinity")).status, Status::Warn);
    EXPECT_EQ(task_plugin_row(std::nullopt).status, Status::Warn);
    EXPECT_FALSE(task_plugin_row(std::nullopt).fix.empty());
}

TEST(Gres, BracketsExpandInOrderKeepingWidth) {
    EXPECT_EQ(expand_brackets("/dev/nvidia[0-2,5]"),
              (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia5"}));
    EXPECT_EQ(expand_brackets("gpu[08-10]"), (std::vector<std::string>{"gpu08", "gpu09", "gpu10"}));
    EXPECT_EQ(expand_brackets("plain"), (std::vector<std::string>{"plain"}));
    EXPECT_THROW(expand_brackets("/dev/nvidia[3-1]"), UsageError);
    EXPECT_THROW(expand_brackets("/dev/nvidia[a]"), UsageError);
    EXPECT_THROW(expand_brackets("/dev/nvidia[0"), UsageError);
    // a trailing comma adds nothing; an empty item between two is an error
    EXPECT_EQ(expand_brackets("n[1,]"), (std::vector<std::string>{"n1"}));
    EXPECT_THROW(expand_brackets("n[1,,2]"), UsageError);
}

TEST(SlurmConf, WordsSplitAtAnyBlankAndStopAtAComment) {
    EXPECT_EQ(words_of(" NodeName=n1\tName=gpu  File=/dev/nvidia0\r# File=/dev/nvidia1"),
              (std::vector<std::string>{"NodeName=n1", "Name=gpu", "File=/dev/nvidia0"}));
    EXPECT_TRUE(words_of("   ").empty());
    EXPECT_TRUE(words_of("# all comment").empty());
}

TEST(Gres, FilesOfThisNodeInIndexOrder) {
    const std::string text =
        "AutoDetect=off\n"
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia1\n"
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia0\n"
        "NodeName=other Name=gpu File=/dev/nvidia7\n"
        "Name=mps Count=100\n"
        "NodeName=n1,n3 Name=gpu Type=a100 File=/dev/nvidia[2-3]\n";
    const GresGpus g = parse_gres_conf(text, "n1");
    EXPECT_FALSE(g.autodetect);
    EXPECT_EQ(g.files, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3"}));
    EXPECT_EQ(parse_gres_conf(text, "n2").files.size(), 2u);
    EXPECT_TRUE(parse_gres_conf("AutoDetect=nvml\n", "n1").autodetect);
}

TEST(Gres, PciOrder) {
    EXPECT_TRUE(pci_order({"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0"}).in_order);
    const OrderCheck c = pci_order({"0000:07:00.0", "0000:47:00.0", "0000:0f:00.0"});
    EXPECT_FALSE(c.in_order);
    EXPECT_EQ(c.first_bad, 1);
}

TEST(GpuRule, AllKnownOneUnknownSeveralUnknown) {
    EXPECT_EQ(gpu_rule_row(8, 8, 0, std::nullopt, std::nullopt).status, Status::Ok);
    EXPECT_NE(gpu_rule_row(8, 8, 0, true, false).detail.find("open()"), std::string::npos);
    EXPECT_EQ(gpu_rule_row(7, 8, 0, true, false).status, Status::Ok);  // still per device
    EXPECT_NE(gpu_rule_row(7, 8, 0, true, false).detail.find("per device"), std::string::npos);
    // gres.conf's files stand in: right when gres.conf is in PCI order
    EXPECT_EQ(gpu_rule_row(0, 8, 8, true, true).status, Status::Ok);
    EXPECT_NE(gpu_rule_row(0, 8, 8, true, true).detail.find("gres.conf's File="), std::string::npos);
    EXPECT_EQ(gpu_rule_row(0, 8, 8, true, false).status, Status::Warn);
    // no constraint: the gres index
    EXPECT_NE(gpu_rule_row(0, 8, 0, false, true).detail.find("gres index"), std::string::npos);
    // a guess, as the plugin says once per step
    EXPECT_EQ(gpu_rule_row(6, 8, 0, true, true).status, Status::Warn);
    EXPECT_NE(gpu_rule_row(6, 8, 0, true, true).detail.find("guess"), std::string::npos);
    EXPECT_EQ(gpu_rule_row(0, 8, 0, std::nullopt, std::nullopt).status, Status::Warn);
    EXPECT_EQ(gpu_rule_row(0, 0, 0, std::nullopt, std::nullopt).status, Status::Ok);
}

TEST(Tools, NvidiaSmiTopoNumaColumn) {
    const std::string out =
        "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV12\tSYS\tPXB\t48-63,176-191\t3\t\tN/A\n"
        "GPU1\tNV12\t X \tSYS\tSYS\t16-31,144-159\t1\t\tN/A\n"
        "GPU2\tSYS\tSYS\t X \tSYS\t0-255\tN/A\t\tN/A\n"
        "NIC0\tPXB\tSYS\tSYS\t X \n\nLegend:\n\n  X    = Self\n";
    const auto m = parse_nvidia_smi_topo(out);
    EXPECT_EQ(m, (std::map<int, int>{{0, 3}, {1, 1}, {2, -1}}));
    // Garbage never throws: an absurd index or affinity is skipped or unknown.
    EXPECT_EQ(parse_nvidia_smi_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU99999999999\t X \t0-3\t1\n"
                                    "GPU1\t X \t0-3\t99999999999\n"),
              (std::map<int, int>{{1, -1}}));
}

TEST(Tools, RocmSmiNumaNode) {
    const std::string out =
        "============ ROCm System Management Interface ============\n"
        "GPU[0]\t\t: (Topology) Numa Node: 0\nGPU[0]\t\t: (Topology) Numa Affinity: 0\n"
        "GPU[1]\t\t: (Topology) Numa Node: 3\nGPU[1]\t\t: (Topology) Numa Affinity: -1\n";
    EXPECT_EQ(parse_rocm_smi_numa(out), (std::map<int, int>{{0, 0}, {1, 3}}));
}

TEST(Gres, BracketExpansionIsBoundedInProduct) {
    // Each range within bounds, their product not: refused before anything is built.
    try {
        expand_brackets("n[0-4096]x[0-4096]y[0-4096]");
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("more than 65536 names"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_gres_conf("NodeName=n[0-4096][0-4096][0-4096] Name=gpu File=/dev/nvidia0\n", "n0"), UsageError);
    EXPECT_EQ(expand_brackets("a[0-1]b[7,9]").size(), 4u);
    EXPECT_EQ(expand_brackets("a[0-1]b[7,9]")[3], "a1b9");
    EXPECT_THROW(expand_brackets(std::string(5000, 'x')), UsageError);
}

TEST(Kernel, Version) {
    EXPECT_EQ(kernel_version("6.1.0-18-amd64"), std::make_pair(6, 1));
    EXPECT_EQ(kernel_version("5.15"), std::make_pair(5, 15));
    EXPECT_FALSE(kernel_version("linux"));
}

TEST(DrawStyle, EachTaskOneColourSharedObjectsGrey) {
    using namespace numabind::draw;
    const Styles s = paint({{"task 0", IdSet::parse("0-1"), {"0000:07:00.0"}, "GPU 0"},
                            {"task 1", IdSet::parse("2-3"), {"0000:0f:00.0"}, "GPU 1"},
                            {"task 2", IdSet::parse("3-4"), {"0000:0f:00.0"}, "GPU 1"}});
    const std::string c0 = style_of(palette()[0]), c1 = style_of(palette()[1]), c2 = style_of(palette()[2]),
                      grey = style_of(shared_colour());
    EXPECT_EQ(s.pu.at(0), c0);
    EXPECT_EQ(s.pu.at(1), c0);
    EXPECT_EQ(s.pu.at(2), c1);
    EXPECT_EQ(s.pu.at(3), grey);
    EXPECT_EQ(s.pu.at(4), c2);
    EXPECT_EQ(s.pci.at("0000:07:00.0"), c0);
    EXPECT_EQ(s.pci.at("0000:0f:00.0"), grey);
    ASSERT_EQ(s.legend.size(), 4u);
    EXPECT_NE(s.legend[0].find("task 0, CPUs 0-1, GPU 0 (0000:07:00.0)"), std::string::npos) << s.legend[0];
    EXPECT_NE(s.legend[3].find("more than one task"), std::string::npos);
}

// The plugin and check read Slurm's device constraint the same way: task/cgroup in
// TaskPlugin and ConstrainDevices=yes, Slurm's default no; unknown without slurm.conf.
TEST(SlurmConf, DevicesConstrainedNeedsTaskCgroupAndConstrainDevices) {
    const std::string cgroup_yes = "CgroupPlugin=autodetect\nConstrainDevices=yes\n";
    EXPECT_EQ(devices_constrained(std::string("TaskPlugin=task/cgroup,task/affinity\n"), cgroup_yes), true);
    EXPECT_EQ(devices_constrained(std::string("TaskPlugin=task/affinity\n"), cgroup_yes), false);
    EXPECT_EQ(devices_constrained(std::string("TaskPlugin=task/cgroup\n"), std::string("ConstrainDevices=no\n")), false);
    EXPECT_EQ(devices_constrained(std::string("TaskPlugin=task/cgroup\n"), std::string("ConstrainCores=yes\n")), false);
    EXPECT_EQ(devices_constrained(std::string("TaskPlugin=task/cgroup\n"), std::nullopt), false);
    EXPECT_EQ(devices_constrained(std::nullopt, cgroup_yes), std::nullopt);
}

TEST(SlurmConf, TheDirectoryOfSlurmConf) {
    EXPECT_EQ(numabind::spank::slurm_conf_dir(std::nullopt), "/etc/slurm");
    EXPECT_EQ(numabind::spank::slurm_conf_dir(std::string("/run/slurm/conf/slurm.conf")), "/run/slurm/conf");
    EXPECT_EQ(numabind::spank::slurm_conf_dir(std::string("")), "/etc/slurm");
}

// Which way the plugin tells a task's GPU, the same function for the engine and `check`.
TEST(SlurmConf, GpuIdentityRule) {
    using numabind::spank::gpu_identity;
    using numabind::spank::GpuIdentity;
    EXPECT_EQ(gpu_identity(4, 4, 0, std::nullopt), GpuIdentity::DeviceFiles);
    EXPECT_EQ(gpu_identity(4, 2, 4, true), GpuIdentity::SlurmDeviceFiles);
    EXPECT_EQ(gpu_identity(4, 0, 3, false), GpuIdentity::GresIndex);
    EXPECT_EQ(gpu_identity(4, 0, 0, true), GpuIdentity::Guess);
    EXPECT_EQ(gpu_identity(4, 0, 0, std::nullopt), GpuIdentity::Guess);
    EXPECT_EQ(gpu_identity(5, 0, 4, true), GpuIdentity::Guess);  // one File= per accelerator or none
    EXPECT_EQ(gpu_identity(4, 3, 0, true), GpuIdentity::OneUnknown);
    EXPECT_EQ(gpu_identity(4, 3, 0, false), GpuIdentity::GresIndex);
}
