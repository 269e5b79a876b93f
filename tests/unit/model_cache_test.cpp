// The node model as text (the step engine's model cache) and the cache itself: a model read
// back plans exactly as the one hwloc built, on every generated shape and corpus server; the
// cache is used only under its own key and only when root wrote it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <fstream>
#include <string>

#include "core/model_text.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/plan.hpp"
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
                for (const nb::Nic& n : t.nics) out += "n" + n.name + "@" + n.pci + "=" + n.ucx;
                out += ";";
            }
        } catch (const std::exception& e) {
            out += std::string("error ") + e.what();
        }
        out += "\n";
    }
    return out;
}

// `body` with the end line model_to_text writes: its line count and FNV-1a 64 (the
// published algorithm: offset basis 14695981039346656037, prime 1099511628211).
std::string with_end(const std::string& body) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return body + "end " + std::to_string(std::count(body.begin(), body.end(), '\n')) + " " + hex + "\n";
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
    EXPECT_EQ(error_of(with_end("numabind-model 2\ncore 0 x 0\n")), "model cache line 2: 'x' is not a number");
    EXPECT_EQ(error_of(with_end("numabind-model 2\ncore 0\n")), "model cache line 2: a field is missing");
    EXPECT_EQ(error_of(with_end("numabind-model 2\nwhat 1\n")), "model cache line 2: unknown kind 'what'");
    EXPECT_EQ(error_of(with_end("numabind-model 2\ncore 0 3 -1\n")),
              "model cache: a core refers to an L3 group or package that is not there");
    EXPECT_EQ(error_of("numabind-model 2\ncore 0 -1 -1\n"), "model cache: cut short (no end line)");
}

// A NIC name goes into UCX_NET_DEVICES: a cache whose name has anything outside the
// characters of interface and RDMA device names is refused, naming the name escaped.
TEST(ModelText, NicNamesOutsideTheirCharactersAreRefused) {
    const auto topo = nb::test::load(nb::test::generated("dgx-h100"));
    const std::string text = nb::model_to_text(topo->model());
    const size_t net = text.find("\nnet ");
    ASSERT_NE(net, std::string::npos) << "dgx-h100 has fabric NICs";
    const size_t eol = text.find('\n', net + 1);
    const std::string body = text.substr(0, text.rfind("end "));
    const std::string line = text.substr(net + 1, eol - net - 1);
    const std::string name = line.substr(line.rfind(' ') + 1);
    EXPECT_NO_THROW(nb::model_from_text(with_end(body)));
    for (const std::string bad : {name + ",mlx5_9:1", name + "\x1b[31m", name + ";x", std::string("a/b")}) {
        std::string changed = body;
        changed.replace(net + 1 + line.size() - name.size(), name.size(), bad);
        try {
            nb::model_from_text(with_end(changed));
            ADD_FAILURE() << bad << ": accepted";
        } catch (const nb::Error& e) {
            EXPECT_NE(std::string(e.what()).find("has characters outside [A-Za-z0-9_.:-]"), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos) << "the name is escaped";
        }
    }
}

// A file cut at any line boundary, or with one byte changed, or with a line added after its
// end, is refused: never a smaller model (one without its GPUs, say).
TEST(ModelText, ACutOrChangedTextIsRefused) {
    const auto topo = nb::test::load(nb::test::generated(nb::test::presets().front()));
    const std::string text = nb::model_to_text(topo->model());
    ASSERT_GT(topo->model().pci_devices.size(), 0u);
    EXPECT_NO_THROW(nb::model_from_text(text));
    int cuts = 0;
    for (size_t eol = text.find('\n'); eol + 1 < text.size(); eol = text.find('\n', eol + 1), ++cuts)
        EXPECT_THROW(nb::model_from_text(text.substr(0, eol + 1)), nb::Error) << "cut after byte " << eol;
    EXPECT_GT(cuts, 5);
    for (size_t i = 20; i + 30 < text.size(); i += 97) {  // one byte changed (a digit or letter)
        std::string changed = text;
        changed[i] = changed[i] == '1' ? '2' : '1';
        if (changed[i] == text[i]) continue;
        EXPECT_THROW(nb::model_from_text(changed), nb::Error) << "byte " << i << " changed";
    }
    EXPECT_THROW(nb::model_from_text(text + "core 0 -1 -1\n"), nb::Error);
}

// Ids past the machine's possible CPUs or nodes, or a text past the size cap, are refused
// before anything is filled: a hostile file costs no more than the machine it claims.
TEST(ModelText, LimitsRefuseIdsAndSizesPastTheMachine) {
    nb::ModelLimits small;
    small.max_pu = 63;
    small.max_node = 1;
    auto error_of = [&](const std::string& body) {
        try {
            nb::model_from_text(with_end(body), small);
        } catch (const nb::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error_of("numabind-model 2\ncore 0-63 -1 -1\n"), "no error");
    EXPECT_EQ(error_of("numabind-model 2\ncore 0-1048575 -1 -1\n"),
              "model cache line 2: '0-1048575' is not a CPU list within 0-63");
    EXPECT_EQ(error_of("numabind-model 2\ncore 0 -1 -1\nnuma 2 0 - \n"),
              "model cache line 3: NUMA node 2 is outside 0-1");
    EXPECT_EQ(error_of("numabind-model 2\ncore 0 -1 -1\ndistance 0 7 10\n"),
              "model cache line 3: NUMA node 7 is outside 0-1");
    std::string many = "numabind-model 2\n";
    for (int i = 0; i < 65; ++i) many += "core " + std::to_string(i % 64) + " -1 -1\n";
    EXPECT_EQ(error_of(many), "model cache: more cores than the 64 the limits allow");
    small.max_bytes = 100;
    EXPECT_NE(error_of(many).find("more than the 100 a node model may have"), std::string::npos) << error_of(many);
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
    // what came from the cache says so (and what the cache was built from)
    EXPECT_EQ(b.source, "model cache " + first.path + " (of " + a.source + ")");
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
    std::ofstream(first.path, std::ios::trunc) << key << "\nlive\n" << with_end("numabind-model 2\ncore zero\n");
    const nb::LoadedModel b = nb::load_node_model(xml_, opts_, &garbage);
    EXPECT_FALSE(garbage.hit);
    EXPECT_NE(garbage.detail.find("unusable"), std::string::npos) << garbage.detail;
    EXPECT_EQ(nb::model_to_text(b.model), nb::model_to_text(a.model));
    // rewritten by that miss; now make it writable by others: not trusted any more
    ASSERT_EQ(chmod(first.path.c_str(), 0666), 0);
    nb::load_node_model(xml_, opts_, &loose);
    EXPECT_FALSE(loose.hit) << "a file others may write must not be read";
}

namespace {
std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

// A file cut at a line boundary (the GPUs' lines lost): refused, rebuilt at once, and said
// once per boot; the rebuilt file is whole again and hit by the next step.
TEST_F(ModelCache, ACutFileIsRefusedRebuiltAndSaidOncePerBoot) {
    nb::ModelOutcome first, cut, again, recut;
    const nb::LoadedModel a = nb::load_node_model(xml_, opts_, &first);
    const std::string whole = read_file(first.path);
    ASSERT_NE(whole.find("\npci "), std::string::npos);
    const std::string cut_text = whole.substr(0, whole.find("\npci ") + 1);  // up to the PCI devices
    std::ofstream(first.path, std::ios::trunc) << cut_text;
    const nb::LoadedModel b = nb::load_node_model(xml_, opts_, &cut);
    EXPECT_FALSE(cut.hit);
    EXPECT_EQ(b.model.pci_devices.size(), a.model.pci_devices.size()) << "planned from a cut model";
    EXPECT_NE(cut.detail.find("cut short"), std::string::npos) << cut.detail;
    EXPECT_NE(cut.detail.find("rebuilt"), std::string::npos) << cut.detail;
    EXPECT_TRUE(cut.should_report) << cut.detail;
    const std::vector<std::string> lines = nb::cache_report_lines(cut);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find(first.path), std::string::npos) << lines[0];
    EXPECT_EQ(read_file(first.path), whole) << "not rebuilt whole";
    nb::load_node_model(xml_, opts_, &again);
    EXPECT_TRUE(again.hit) << again.detail;
    EXPECT_FALSE(again.should_report);
    std::ofstream(first.path, std::ios::trunc) << cut_text;
    nb::load_node_model(xml_, opts_, &recut);
    EXPECT_FALSE(recut.hit);
    EXPECT_FALSE(recut.should_report) << "said twice in one boot";
    EXPECT_TRUE(nb::cache_report_lines(recut).empty());
}

// A first step (no file yet) is no problem to report.
TEST_F(ModelCache, AMissingFileIsNotReported) {
    nb::ModelOutcome first;
    nb::load_node_model(xml_, opts_, &first);
    EXPECT_FALSE(first.should_report) << first.detail;
}

// Writing a model removes the model files whose key is dead (their XML gone or changed),
// keeps those of keys still live (another node's XML), and leaves other files alone.
TEST_F(ModelCache, ModelFilesOfDeadKeysAreRemoved) {
    const std::string other = base_ + "/other.xml", gone = base_ + "/gone.xml";
    std::system(("cp '" + xml_ + "' '" + other + "' && cp '" + xml_ + "' '" + gone + "'").c_str());
    nb::ModelOutcome live_other, dead, mine;
    nb::load_node_model(other, opts_, &live_other);
    nb::load_node_model(gone, opts_, &dead);
    ASSERT_EQ(access(dead.path.c_str(), F_OK), 0);
    unlink(gone.c_str());
    std::ofstream(opts_.dir + "/notes.txt") << "not ours\n";
    nb::load_node_model(xml_, opts_, &mine);
    EXPECT_EQ(access(mine.path.c_str(), F_OK), 0);
    EXPECT_EQ(access(live_other.path.c_str(), F_OK), 0) << "a live key's model was removed";
    EXPECT_NE(access(dead.path.c_str(), F_OK), 0) << "a dead key's model was kept";
    EXPECT_EQ(access((opts_.dir + "/notes.txt").c_str(), F_OK), 0);
}
