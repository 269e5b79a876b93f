// Accelerator discovery on every recorded GPU server against the corpus INDEX
// (per-GPU locality computed independently with hwloc-calc). The corpus is read in place
// (NUMABIND_TOPOLOGY_CORPUS); without it these tests skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "numabind/report.hpp"
#include "test_support.hpp"

using namespace numabind;
using namespace numabind::test;

namespace {

nlohmann::json expected() {
    std::ifstream in(corpus("expected_gpu_locality.json"));
    return nlohmann::json::parse(in);
}

// Fixed when CMake ran, so that the test names are the same with or without the corpus.
std::vector<std::string> gpu_files() { return corpus_params(corpus_gpu_files()); }

// Memory-only nodes (GPU memory, empty cpusets) are never homes.
std::vector<int> cpu_nodes_in(const nlohmann::json& entry, const std::string& list) {
    std::vector<int> out;
    IdSet wanted = IdSet::parse(list);
    for (auto& n : entry["numa"]) {
        int os = std::stoi(n["os_index"].get<std::string>());
        bool memory_only = !n["subtype"].is_null() || n["pus"].get<std::string>().empty() ||
                           n["pus"].get<std::string>() == "-";
        if (wanted.contains(os) && !memory_only) out.push_back(os);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<int> all_cpu_nodes(const nlohmann::json& entry) {
    std::string all;
    for (auto& n : entry["numa"]) all += (all.empty() ? "" : ",") + n["os_index"].get<std::string>();
    return cpu_nodes_in(entry, all);
}

class CorpusLocality : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusLocality, AcceleratorsMatchIndex) {
    NUMABIND_REQUIRE_CORPUS();
    NUMABIND_REQUIRE_CORPUS_PARAM(GetParam());
    const std::string file = GetParam();
    const nlohmann::json entry = expected()[file];
    auto topo = load(file);
    // The one corpus file whose PCI ids were blanked needs a class match, as a user would give.
    const bool blanked = file.find("keptgpunuma") != std::string::npos ||
                         file == "hwloc-linux_nvidiagpunumanodes.xml";
    auto accs = find_accelerators(topo->model(), blanked ? DeviceMatcher::parse("class=0x0300")
                                                         : DeviceMatcher::builtin());

    std::vector<nlohmann::json> gpus;
    for (auto& g : entry["gpus"])
        if (g["compute"].get<bool>()) gpus.push_back(g);
    std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) {
        return a["busid"].template get<std::string>() < b["busid"].template get<std::string>();
    });

    size_t next = 0;
    for (const auto& g : gpus) {
        const std::string busid = g["busid"];
        int rsmi = 0;
        for (auto& os : g["osdevs"]) rsmi += os.get<std::string>().rfind("rsmi", 0) == 0;
        const int logical = std::max(1, rsmi);
        for (int s = 0; s < logical; ++s, ++next) {
            ASSERT_LT(next, accs.size()) << file << ": missing accelerator " << busid;
            const Accelerator& a = accs[next];
            SCOPED_TRACE(file + " " + busid);
            EXPECT_EQ(a.index, static_cast<int>(next));
            EXPECT_EQ(a.pci, busid);
            EXPECT_EQ(a.sub_index, s);
            EXPECT_EQ(a.sub_count, logical);
            const std::string pus = g["pus"];
            // hwloc-calc saw the recorded process's allowed CPUs only; numabind also keeps
            // disallowed ones (so a device on a disallowed package still has a home).
            EXPECT_EQ(a.locality & topo->allowed_cpus(), (pus == "(empty)" || pus.empty()) ? IdSet() : IdSet::parse(pus));
            const std::string parent = g["parent"];
            if ((pus == "(empty)" || pus.empty())) {
                EXPECT_FALSE(a.home_nodes.empty());
                for (int n : a.home_nodes) EXPECT_FALSE(topo->model().numa_by_os(n)->pus.intersects(topo->allowed_cpus()));
            } else if (parent.rfind("Machine", 0) == 0) {
                EXPECT_EQ(a.home_nodes, all_cpu_nodes(entry));
                EXPECT_FALSE(a.home_warning.empty());
            } else {
                EXPECT_EQ(a.home_nodes, cpu_nodes_in(entry, g["numa_isect"]));
                EXPECT_TRUE(a.home_warning.empty()) << a.home_warning;
            }
            if (!g["l3"].get<std::string>().empty() && topo->model().cache_level_name == "L3")
                EXPECT_EQ(l3_groups_of(topo->model(), a.locality & topo->allowed_cpus()), IdSet::parse(g["l3"].get<std::string>()).ids());
        }
    }
    EXPECT_EQ(next, accs.size()) << file << ": extra accelerators found";
}

INSTANTIATE_TEST_SUITE_P(Index, CorpusLocality, ::testing::ValuesIn(gpu_files()),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

TEST(CorpusLocality, NumaNodesKeepMemoryOnlyNodesCpuLess) {
    NUMABIND_REQUIRE_CORPUS();
    auto topo = load("hwloc-linux_nvidiagpunumanodes-keptgpunuma.xml");
    for (const NumaNode& n : topo->model().numa_nodes) {
        if (n.subtype == "GPUMemory") {
            EXPECT_FALSE(n.has_cpus()) << n.os_index;
        } else {
            EXPECT_EQ(n.pus, n.locality) << n.os_index;
        }
    }
    auto lassen = load("mpibind_coral-lassen-hwloc1.xml");
    for (int os : {252, 253, 254, 255}) {
        ASSERT_NE(lassen->model().numa_by_os(os), nullptr);
        EXPECT_FALSE(lassen->model().numa_by_os(os)->has_cpus());
    }
}

}  // namespace
