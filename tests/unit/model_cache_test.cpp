// The node model as text (the step engine's model cache) and the cache itself: a model read
// back plans exactly as the one hwloc built, on every generated shape and corpus server; the
// cache is used only under its own key and only when root wrote it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/model_text.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology_cache.hpp"
#include "test_support.hpp"

namespace nb = numabind;

namespace {

std::vector<std::string> all_topologies() {
    std::vector<std::string> out;
    for (const std::string& p : nb::test::presets()) out.push_back(nb::test::generated(p));
    if (nb::test::corpus_present())
        for (const std::string& f : nb::test::corpus_xml_files()) out.push_back(f);
    return out;
}

// Every mode's plan as text: CPUs, memory nodes and devices of each task, or the error.
std::string plans(const nb::Topology& m) {
    const std::vector<nb::Accelerator> accs = nb::find_accelerators(m, nb::DeviceMatcher::builtin());
    std::string out;
    for (nb::Mode mode : {nb::Mode::Node, nb::Mode::Socket, nb::Mode::Exclusive, nb::Mode::CoreComplex}) {
        nb::PlanRequest req;
        req.mode = mode;
        req.ntasks = accs.empty() ? 2 : static_cast<int>(accs.size());
        try {
            for (const nb::TaskPlan& t : nb::plan_node(m, accs, req).tasks) {
                out += t.cpus.to_string() + "/";
                for (int n : t.mems) out += std::to_string(n) + ",";
                for (int d : t.devices) out += "d" + std::to_string(d);
                out += ";";
            }
        } catch (const std::exception& e) {
            out += std::string("error ") + e.what();
        }
        out += "\n";
    }
    return out;
}

}  // namespace

class ModelText : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelText, ReadBackPlansAsHwlocsModel) {
    const auto topo = nb::test::load(GetParam());
    const std::string text = nb::model_to_text(topo->model());
    const nb::Topology back = nb::model_from_text(text);
    EXPECT_EQ(nb::model_to_text(back), text);
    EXPECT_EQ(back.all_pus(), topo->model().all_pus());
    EXPECT_EQ(back.numa_nodes.size(), topo->model().numa_nodes.size());
    EXPECT_EQ(back.pci_devices.size(), topo->model().pci_devices.size());
    EXPECT_EQ(back.distances, topo->model().distances);
    EXPECT_EQ(plans(back), plans(topo->model()));
}

INSTANTIATE_TEST_SUITE_P(Topologies, ModelText, ::testing::ValuesIn(all_topologies()), [](const auto& info) {
    std::string name = info.param.substr(info.param.rfind('/') + 1);
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return name;
});

TEST(ModelText, MalformedIsAnErrorNamingTheLine) {
    EXPECT_THROW(nb::model_from_text(""), nb::Error);
    EXPECT_THROW(nb::model_from_text("{\"format\": 1}"), nb::Error);
    auto error_of = [](const std::string& text) {
        try {
            nb::model_from_text(text);
        } catch (const nb::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error_of("numabind-model 1\ncore 0 x 0\n"), "model cache line 2: 'x' is not a number");
    EXPECT_EQ(error_of("numabind-model 1\ncore 0\n"), "model cache line 2: a field is missing");
    EXPECT_EQ(error_of("numabind-model 1\nwhat 1\n"), "model cache line 2: unknown kind 'what'");
    EXPECT_EQ(error_of("numabind-model 1\ncore 0 3 -1\n"),
              "model cache: a core refers to an L3 group or package that is not there");
}

class ModelCache : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "only root writes the model cache";
        char tmpl[] = "/tmp/nb-model-cache.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        base_ = tmpl;
        opts_.dir = base_ + "/cache";
        opts_.report_marker = base_ + "/reported";
        xml_ = base_ + "/node.xml";
        std::ifstream in(nb::test::generated(nb::test::presets().front()), std::ios::binary);
        std::ofstream(xml_, std::ios::binary) << in.rdbuf();
    }
    void TearDown() override {
        if (!base_.empty()) std::system(("rm -rf '" + base_ + "'").c_str());
    }
    std::string base_, xml_;
    nb::TopologyCacheOptions opts_;
};

TEST_F(ModelCache, MissWritesHitReadsTheSameModel) {
    nb::ModelOutcome first, second;
    const nb::LoadedModel a = nb::load_node_model(xml_, opts_, &first);
    EXPECT_FALSE(first.hit) << first.detail;
    struct stat st {};
    ASSERT_EQ(stat(first.path.c_str(), &st), 0) << "no model cache written: " << first.detail;
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    const nb::LoadedModel b = nb::load_node_model(xml_, opts_, &second);
    EXPECT_TRUE(second.hit) << second.detail;
    EXPECT_EQ(second.path, first.path);
    EXPECT_EQ(nb::model_to_text(b.model), nb::model_to_text(a.model));
    EXPECT_EQ(b.source, a.source);
}

TEST_F(ModelCache, AChangedXmlFileIsANewKey) {
    nb::ModelOutcome first, again;
    nb::load_node_model(xml_, opts_, &first);
    std::ofstream(xml_, std::ios::app) << "\n";  // same content for hwloc, another size and mtime
    nb::load_node_model(xml_, opts_, &again);
    EXPECT_FALSE(again.hit);
    EXPECT_NE(again.path, first.path);
}

TEST_F(ModelCache, UnusableOrUntrustedFilesAreIgnored) {
    nb::ModelOutcome first, garbage, loose;
    const nb::LoadedModel a = nb::load_node_model(xml_, opts_, &first);
    const std::string key = nb::node_model_key(xml_);
    std::ofstream(first.path, std::ios::trunc) << key << "\nlive\nnumabind-model 1\ncore zero\n";
    const nb::LoadedModel b = nb::load_node_model(xml_, opts_, &garbage);
    EXPECT_FALSE(garbage.hit);
    EXPECT_NE(garbage.detail.find("unusable"), std::string::npos) << garbage.detail;
    EXPECT_EQ(nb::model_to_text(b.model), nb::model_to_text(a.model));
    // rewritten by that miss; now make it writable by others: not trusted any more
    ASSERT_EQ(chmod(first.path.c_str(), 0666), 0);
    nb::load_node_model(xml_, opts_, &loose);
    EXPECT_FALSE(loose.hit) << "a file others may write must not be read";
}
