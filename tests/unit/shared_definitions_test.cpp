// Names and helpers defined once: the NUMABIND_* variables (binding_env.hpp's
// kExportedVariables, which the plugin clears from every task), the GPU runtimes' variables
// (visible.hpp's kRuntimeVariables), the index-list join and the /proc status field reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/binding_env.hpp"
#include "core/process_audit.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "numabind/plan.hpp"
#include "numabind/report.hpp"

namespace nb = numabind;

namespace {

std::set<std::string> exported_list() {
    return std::set<std::string>(std::begin(nb::kExportedVariables), std::end(nb::kExportedVariables));
}

// Every name the setters set or unset, over a bound task with devices and NICs and every
// UCX_NET_DEVICES case (none, the user's, numabind's own, a stale marker), and a task with none.
std::set<std::string> names_the_setters_touch() {
    nb::Accelerator gpu;
    gpu.index = 1;
    gpu.pci = "0000:41:00.0";
    nb::TaskPlan bound;
    bound.device = &gpu;
    bound.devices = {1, 3};
    bound.cpus = nb::IdSet::parse("0-7");
    bound.mems = {0, 1};
    bound.mem = nb::MemPolicy::Prefer;
    bound.nics = {{0, "mlx5_0", "0000:42:00.0", "mlx5_0:1"}};
    const nb::TaskPlan unbound;
    using Opt = std::optional<std::string>;
    std::set<std::string> touched;
    auto set = [&](const char* k, const std::string&) { touched.insert(k); };
    auto unset = [&](const char* k) { touched.insert(k); };
    for (const nb::TaskPlan* task : {static_cast<const nb::TaskPlan*>(&bound), &unbound}) {
        for (nb::Mode mode : {nb::Mode::Node, nb::Mode::None}) nb::export_binding_env(mode, *task, set);
        for (bool ucx : {false, true})
            for (const auto& [current, marker] : {std::pair<Opt, Opt>{}, {Opt("mine:1"), Opt()},
                                                  {Opt("mlx5_9:1"), Opt("mlx5_9:1")}, {Opt("mine:1"), Opt("mlx5_9:1")},
                                                  {Opt(), Opt("mlx5_9:1")}})
                nb::export_nic_env(*task, ucx, current, marker, set, unset);
    }
    return touched;
}

}  // namespace

// A variable the setters export but the list lacks would survive into later steps (the
// plugin clears the list); one listed that no setter touches is stale.
TEST(ExportedVariables, TheClearedListIsExactlyWhatTheSettersExport) {
    std::set<std::string> ours = names_the_setters_touch();
    ours.erase("UCX_NET_DEVICES");  // the user's variable, set only where the user has not
    EXPECT_EQ(ours, exported_list());
    EXPECT_EQ(exported_list().size(), std::size(nb::kExportedVariables)) << "a name listed twice";
    for (const std::string& name : exported_list()) EXPECT_EQ(name.rfind("NUMABIND_", 0), 0u) << name;
    EXPECT_EQ(exported_list().count("UCX_NET_DEVICES"), 0u);
}

// The list the plugin and `show --pid` use is what visible_from_env reads.
TEST(RuntimeVariables, AreWhatVisibleFromEnvReads) {
    std::vector<std::string> asked;
    const nb::EnvLookup nothing_set = [&](const std::string& name) {
        asked.push_back(name);
        return std::optional<std::string>();
    };
    nb::Accelerator a;
    a.index = 0;
    a.pci = "0000:01:00.0";
    const nb::VisibleDevices v = nb::visible_from_env({a}, nothing_set, nullptr);
    EXPECT_FALSE(v.restricted);
    EXPECT_EQ(asked, std::vector<std::string>(std::begin(nb::kRuntimeVariables), std::end(nb::kRuntimeVariables)));
    for (const char* name : nb::kRuntimeVariables) {
        const nb::EnvLookup one = [&](const std::string& n) {
            return n == name ? std::optional<std::string>("0") : std::nullopt;
        };
        const nb::VisibleDevices w = nb::visible_from_env({a}, one, nullptr);
        EXPECT_TRUE(w.restricted) << name;
        EXPECT_EQ(w.source, name);
    }
}

TEST(JoinInts, CommaListsAndTheEmptyText) {
    EXPECT_EQ(nb::join_ints({}), "");
    EXPECT_EQ(nb::join_ints({}, ",", "-"), "-");
    EXPECT_EQ(nb::join_ints({3}), "3");
    EXPECT_EQ(nb::join_ints({0, 2, 10}), "0,2,10");
    EXPECT_EQ(nb::join_ints({0, 2}, ", ", "-"), "0, 2");
    EXPECT_EQ(nb::join({4, 5}), "4,5");  // the public spelling is the same function
}

TEST(StatusField, WholeFieldNamesAtALineStart) {
    const std::string status =
        "Name:\tpython3\nState:\tS (sleeping)\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\n"
        "Mems_allowed_list:\t0-1\nSigBlk:\t0000000000000004\nEmpty:\n";
    EXPECT_EQ(nb::status_field(status, "Name"), "python3");
    EXPECT_EQ(nb::status_field(status, "Cpus_allowed"), "ff");  // not Cpus_allowed_list
    EXPECT_EQ(nb::status_field(status, "Cpus_allowed_list"), "0-7");
    EXPECT_EQ(nb::status_field(status, "Mems_allowed_list"), "0-1");
    EXPECT_EQ(nb::status_field(status, "SigBlk"), "0000000000000004");
    EXPECT_EQ(nb::status_field(status, "Empty"), "");
    EXPECT_EQ(nb::status_field(status, "Threads"), "");
    EXPECT_EQ(nb::status_field(status, "allowed_list"), "");  // whole names only, at a line's start
    EXPECT_EQ(nb::status_field("Mems_allowed_list:  2,3", "Mems_allowed_list"), "2,3");  // no final newline
}

// An unbound step removes numabind's own UCX_NET_DEVICES with its marker; a user's stays.
TEST(UcxMarker, OnlyAValueEqualToTheMarkerIsNumabinds) {
    EXPECT_TRUE(nb::ucx_is_numabinds(std::string("mlx5_1:1"), std::string("mlx5_1:1")));
    EXPECT_FALSE(nb::ucx_is_numabinds(std::string("mlx5_0:1"), std::string("mlx5_1:1")));
    EXPECT_FALSE(nb::ucx_is_numabinds(std::string("mlx5_0:1"), std::nullopt));
    EXPECT_FALSE(nb::ucx_is_numabinds(std::nullopt, std::string("mlx5_1:1")));
}
