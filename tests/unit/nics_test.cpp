// The NIC rule (nics.hpp) on small hand-made models: which functions are fabric NICs, and
// the order bridge > home NUMA node > package > none. The recorded and generated servers
// are checked against hwloc's own PCI tree by tests/cli/nics_test.py (tests/tools/nic_oracle.py).
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "core/binding_env.hpp"
#include "core/model_text.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/nics.hpp"
#include "numabind/plan.hpp"
#include "sys/binding.hpp"

namespace nb = numabind;

namespace {

nb::PciDevice pci(const std::string& address, uint16_t vendor, uint16_t device, uint16_t cls,
                  std::vector<int> bridges, const nb::IdSet& locality) {
    nb::PciDevice d;
    d.address = address;
    d.vendor = vendor;
    d.device = device;
    d.class_id = cls;
    d.bridges = std::move(bridges);
    d.locality = locality;
    return d;
}

nb::PciDevice gpu(const std::string& address, std::vector<int> bridges, const nb::IdSet& locality) {
    return pci(address, 0x10de, 0x20b0, 0x0302, std::move(bridges), locality);
}

nb::PciDevice hca(const std::string& address, const std::string& name, std::vector<int> bridges,
                  const nb::IdSet& locality, std::vector<std::pair<int, int>> ports = {{1, 4}}) {
    nb::PciDevice d = pci(address, 0x15b3, 0x101b, 0x0207, std::move(bridges), locality);
    d.net_devices.push_back({"ib" + name.substr(name.size() - 1), false, "", {}});
    d.net_devices.push_back({name, true, "", std::move(ports)});
    return d;
}

// Two packages of one NUMA node each (PUs 0-3 and 4-7).
nb::Topology two_sockets() {
    nb::Topology t;
    for (int c = 0; c < 8; ++c) {
        nb::Core core;
        core.pus.insert(c);
        core.package = c / 4;
        t.cores.push_back(core);
    }
    for (int p = 0; p < 2; ++p) {
        nb::IdSet pus = nb::IdSet::parse(p == 0 ? "0-3" : "4-7");
        t.packages.push_back({p, pus});
        nb::NumaNode n;
        n.os_index = p;
        n.pus = n.locality = pus;
        t.numa_nodes.push_back(n);
    }
    return t;
}

std::vector<std::string> names(const std::vector<nb::Nic>& nics) {
    std::vector<std::string> out;
    for (const nb::Nic& n : nics) out.push_back(n.name);
    return out;
}

// Per accelerator (physical order), the names of its nearest NICs joined by '+'.
std::vector<std::string> nearest(const nb::Topology& t) {
    const auto accs = nb::find_accelerators(t, nb::DeviceMatcher::builtin());
    const auto nics = nb::fabric_nics(t);
    std::vector<std::string> out;
    for (const nb::Accelerator& a : accs) {
        std::string s;
        for (int i : nb::nearest_nics(t, nics, a)) s += (s.empty() ? "" : "+") + nics[i].name;
        out.push_back(s);
    }
    return out;
}

const nb::IdSet kS0 = nb::IdSet::parse("0-3"), kS1 = nb::IdSet::parse("4-7");

}  // namespace

TEST(Nics, FabricNicsAreRdmaOrSlingshotNotPlainEthernet) {
    nb::Topology t = two_sockets();
    t.pci_devices.push_back(hca("0000:02:00.0", "mlx5_1", {0}, kS0));
    nb::PciDevice mgmt = pci("0000:01:00.0", 0x8086, 0x1521, 0x0200, {0}, kS0);  // i350, 1 GbE
    mgmt.net_devices.push_back({"eno1", false, "", {}});
    t.pci_devices.push_back(mgmt);
    nb::PciDevice roce = pci("0000:03:00.0", 0x15b3, 0x1017, 0x0200, {1}, kS0);  // ConnectX-5 Ethernet, RoCE
    roce.net_devices.push_back({"ens3", false, "", {}});
    roce.net_devices.push_back({"mlx5_0", true, "", {{1, 1}, {2, 4}}});
    t.pci_devices.push_back(roce);
    nb::PciDevice cassini = pci("0000:04:00.0", 0x17db, 0x0501, 0x0200, {2}, kS1);
    cassini.net_devices.push_back({"hsi0", false, "Slingshot", {}});
    t.pci_devices.push_back(cassini);
    nb::PciDevice storage = pci("0000:05:00.0", 0x15b3, 0x101b, 0x0108, {2}, kS1);  // not a network class
    storage.net_devices.push_back({"mlx5_9", true, "", {}});
    t.pci_devices.push_back(storage);
    nb::PciDevice nameless = pci("0000:06:00.0", 0x17db, 0x0501, 0x0200, {2}, kS1);  // nothing to name it by
    t.pci_devices.push_back(nameless);
    const auto nics = nb::fabric_nics(t);
    EXPECT_EQ(names(nics), (std::vector<std::string>{"mlx5_1", "mlx5_0", "hsi0"}));  // PCI order
    ASSERT_EQ(nics.size(), 3u);
    EXPECT_EQ(nics[0].pci, "0000:02:00.0");
    EXPECT_EQ(nics[0].ucx, "mlx5_1:1");
    EXPECT_EQ(nics[1].ucx, "mlx5_0:2");  // the first ACTIVE port
    EXPECT_EQ(nics[2].ucx, "hsi0");
    EXPECT_EQ(nb::nic_names(nics), "mlx5_1,mlx5_0,hsi0");
    EXPECT_EQ(nb::ucx_net_devices(nics), "mlx5_1:1,mlx5_0:2,hsi0");
}

TEST(Nics, WhereEfaIsPresentOnlyEfaCounts) {
    nb::Topology t = two_sockets();
    t.pci_devices.push_back(hca("0000:10:00.0", "mlx5_0", {0}, kS0));
    nb::PciDevice efa = pci("0000:20:00.0", 0x1d0f, 0xefa1, 0x0200, {1}, kS0);
    efa.net_devices.push_back({"rdmap32s0", true, "", {{1, 4}}});
    t.pci_devices.push_back(efa);
    nb::PciDevice ena = pci("0000:30:00.0", 0x1d0f, 0xec20, 0x0200, {1}, kS0);
    ena.net_devices.push_back({"ens32", false, "", {}});
    t.pci_devices.push_back(ena);
    EXPECT_EQ(names(nb::fabric_nics(t)), std::vector<std::string>{"rdmap32s0"});
}

TEST(Nics, NearestSharesTheDeepestBridge) {
    nb::Topology t = two_sockets();
    // Host bridge 0 > switch 1 > {port 2: GPU a + mlx5_0, port 3: GPU b + mlx5_1}; host bridge 4: mlx5_2.
    t.pci_devices.push_back(gpu("0000:03:00.0", {0, 1, 2}, kS0));
    t.pci_devices.push_back(hca("0000:04:00.0", "mlx5_0", {0, 1, 2}, kS0));
    t.pci_devices.push_back(gpu("0000:05:00.0", {0, 1, 3}, kS0));
    t.pci_devices.push_back(hca("0000:06:00.0", "mlx5_1", {0, 1, 3}, kS0));
    t.pci_devices.push_back(hca("0000:40:00.0", "mlx5_2", {4}, kS0));
    // Host bridge 5: a GPU alone on socket 1, with no NIC there at all.
    t.pci_devices.push_back(gpu("0000:80:00.0", {5}, kS1));
    EXPECT_EQ(nearest(t), (std::vector<std::string>{"mlx5_0", "mlx5_1", ""}));
}

TEST(Nics, ThenTheHomeNodeThenThePackageThenNone) {
    nb::Topology t = two_sockets();
    // Split socket 0 into two NUMA nodes (0: 0-1, 2: 2-3) to tell node from package.
    t.numa_nodes[0].pus = t.numa_nodes[0].locality = nb::IdSet::parse("0-1");
    nb::NumaNode n2;
    n2.os_index = 2;
    n2.pus = n2.locality = nb::IdSet::parse("2-3");
    t.numa_nodes.push_back(n2);
    t.pci_devices.push_back(gpu("0000:01:00.0", {0}, nb::IdSet::parse("0-1")));  // node 0
    t.pci_devices.push_back(gpu("0000:02:00.0", {1}, nb::IdSet::parse("2-3")));  // node 2
    t.pci_devices.push_back(gpu("0000:81:00.0", {2}, kS1));                       // node 1
    t.pci_devices.push_back(hca("0000:10:00.0", "mlx5_0", {3}, nb::IdSet::parse("0-1")));  // on node 0
    t.pci_devices.push_back(hca("0000:11:00.0", "mlx5_1", {4}, kS0));                      // package 0 only
    EXPECT_EQ(nearest(t), (std::vector<std::string>{"mlx5_0", "mlx5_0+mlx5_1", ""}));
}

TEST(Nics, NoNicsOrNoDevicesGiveNone) {
    nb::Topology t = two_sockets();
    t.pci_devices.push_back(gpu("0000:01:00.0", {0}, kS0));
    EXPECT_TRUE(nb::fabric_nics(t).empty());
    EXPECT_EQ(nearest(t), std::vector<std::string>{""});
    const auto accs = nb::find_accelerators(t, nb::DeviceMatcher::builtin());
    EXPECT_TRUE(nb::nics_for_devices(t, {}, accs, {0}).empty());
}

TEST(Nics, ATaskWithSeveralDevicesGetsTheUnionInPciOrder) {
    nb::Topology t = two_sockets();
    t.pci_devices.push_back(hca("0000:90:00.0", "mlx5_3", {2}, kS1));
    t.pci_devices.push_back(gpu("0000:91:00.0", {2}, kS1));
    t.pci_devices.push_back(gpu("0000:01:00.0", {0}, kS0));
    t.pci_devices.push_back(hca("0000:02:00.0", "mlx5_0", {0}, kS0));
    const auto accs = nb::find_accelerators(t, nb::DeviceMatcher::builtin());
    nb::PlanRequest req;
    req.mode = nb::Mode::Node;
    req.ntasks = 1;
    const nb::NodePlan plan = nb::plan_node(t, accs, req);  // one task owns both GPUs
    ASSERT_EQ(plan.tasks.size(), 1u);
    EXPECT_EQ(names(plan.tasks[0].nics), (std::vector<std::string>{"mlx5_0", "mlx5_3"}));
    req.ntasks = 2;
    const nb::NodePlan two = nb::plan_node(t, accs, req);
    EXPECT_EQ(names(two.tasks[0].nics), std::vector<std::string>{"mlx5_0"});
    EXPECT_EQ(names(two.tasks[1].nics), std::vector<std::string>{"mlx5_3"});
    req.mode = nb::Mode::None;  // no binding, still the nearest NICs
    EXPECT_EQ(names(nb::plan_node(t, accs, req).tasks[1].nics), std::vector<std::string>{"mlx5_3"});
}

TEST(Nics, BridgesAndNetworkDevicesSurviveTheModelText) {
    nb::Topology t = two_sockets();
    t.pci_devices.push_back(gpu("0000:01:00.0", {0, 7}, kS0));
    t.pci_devices.push_back(hca("0000:02:00.0", "mlx5_0", {0, 7}, kS0, {{1, 4}, {2, 1}}));
    nb::PciDevice cassini = pci("0000:04:00.0", 0x17db, 0x0501, 0x0200, {}, kS1);
    cassini.net_devices.push_back({"hsi0", false, "Slingshot", {}});
    t.pci_devices.push_back(cassini);
    const std::string text = nb::model_to_text(t);
    const nb::Topology back = nb::model_from_text(text);
    EXPECT_EQ(nb::model_to_text(back), text);
    ASSERT_EQ(back.pci_devices.size(), 3u);
    EXPECT_EQ(back.pci_devices[1].bridges, (std::vector<int>{0, 7}));
    ASSERT_EQ(back.pci_devices[1].net_devices.size(), 2u);
    EXPECT_EQ(back.pci_devices[1].net_devices[1].name, "mlx5_0");
    EXPECT_TRUE(back.pci_devices[1].net_devices[1].rdma);
    EXPECT_EQ(back.pci_devices[1].net_devices[1].ports, (std::vector<std::pair<int, int>>{{1, 4}, {2, 1}}));
    EXPECT_EQ(back.pci_devices[2].net_devices[0].subtype, "Slingshot");
    EXPECT_EQ(names(nb::fabric_nics(back)), (std::vector<std::string>{"mlx5_0", "hsi0"}));
    // A cache file of the previous format is refused (the engine then rebuilds it).
    std::string old = text;
    old.replace(0, std::string("numabind-model 2").size(), "numabind-model 1");
    EXPECT_THROW(nb::model_from_text(old), nb::Error);
}

// The environment rule (binding.hpp): NUMABIND_NICS always, UCX_NET_DEVICES only with ucx and
// only where the user has not set it; one numabind set itself (the marker says so: an outer
// binding, a bound batch shell) is replaced or removed.
TEST(Nics, ExportedEnvironmentKeepsTheUsersUcxAndReplacesNumabinds) {
    nb::TaskPlan task;
    task.nics = {{0, "mlx5_0", "0000:02:00.0", "mlx5_0:1"}, {1, "mlx5_1", "0000:03:00.0", "mlx5_1:2"}};
    using Env = std::map<std::string, std::string>;
    auto run = [&](const nb::TaskPlan& t, bool ucx, Env env) {
        auto get = [&](const char* k) { return env.count(k) ? std::optional<std::string>(env[k]) : std::nullopt; };
        nb::export_nic_env(t, ucx, get("UCX_NET_DEVICES"), get(nb::kUcxMarker),
                           [&](const char* k, const std::string& v) { env[k] = v; }, [&](const char* k) { env.erase(k); });
        return env;
    };
    EXPECT_EQ(run(task, false, {}), (Env{{"NUMABIND_NICS", "mlx5_0,mlx5_1"}}));
    const Env ours{{"NUMABIND_NICS", "mlx5_0,mlx5_1"}, {"UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:2"},
                   {nb::kUcxMarker, "mlx5_0:1,mlx5_1:2"}};
    EXPECT_EQ(run(task, true, {}), ours);
    EXPECT_EQ(run(task, true, {{"UCX_NET_DEVICES", "mine:1"}}),
              (Env{{"NUMABIND_NICS", "mlx5_0,mlx5_1"}, {"UCX_NET_DEVICES", "mine:1"}}));
    // the user changed the value numabind had set: theirs now
    EXPECT_EQ(run(task, true, {{"UCX_NET_DEVICES", "mine:1"}, {nb::kUcxMarker, "mlx5_9:1"}}),
              (Env{{"NUMABIND_NICS", "mlx5_0,mlx5_1"}, {"UCX_NET_DEVICES", "mine:1"}}));
    // inherited from an outer binding: replaced with this task's, or removed without ucx / NICs
    EXPECT_EQ(run(task, true, {{"UCX_NET_DEVICES", "mlx5_9:1"}, {nb::kUcxMarker, "mlx5_9:1"}}), ours);
    EXPECT_EQ(run(task, false, {{"UCX_NET_DEVICES", "mlx5_9:1"}, {nb::kUcxMarker, "mlx5_9:1"}}),
              (Env{{"NUMABIND_NICS", "mlx5_0,mlx5_1"}}));
    const nb::TaskPlan none;
    EXPECT_EQ(run(none, true, {{"NUMABIND_NICS", "stale"}, {"UCX_NET_DEVICES", "mlx5_9:1"}, {nb::kUcxMarker, "mlx5_9:1"}}),
              Env{});
    EXPECT_EQ(run(none, true, {{"UCX_NET_DEVICES", "mine:1"}}), (Env{{"UCX_NET_DEVICES", "mine:1"}}));
}
