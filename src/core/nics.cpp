// Fabric NICs and the nearest ones per GPU: see nics.hpp.
#include "numabind/nics.hpp"

#include <algorithm>

namespace numabind {

namespace {

constexpr uint16_t kAmazon = 0x1d0f;
constexpr uint16_t kCray = 0x17db;  // HPE Slingshot (Cassini)

bool network_class(uint16_t class_id) { return (class_id >> 8) == 0x02 || class_id == 0x0c06; }

// EFA generations are 1d0f:efa0..efaf; ENA (1d0f:ec20...) is plain Ethernet.
bool is_efa(const PciDevice& d) { return d.vendor == kAmazon && (d.device & 0xfff0) == 0xefa0; }

const NetDevice* rdma_device(const PciDevice& d) {
    for (const NetDevice& n : d.net_devices)
        if (n.rdma) return &n;
    return nullptr;
}

bool is_slingshot(const PciDevice& d) {
    if (d.vendor == kCray) return true;
    for (const NetDevice& n : d.net_devices)
        if (n.subtype == "Slingshot" || n.name.compare(0, 3, "cxi") == 0) return true;
    return false;
}

// The port UCX should use: the first ACTIVE (state 4) one, else the first listed, else 1.
int ucx_port(const NetDevice& n) {
    for (const auto& [port, state] : n.ports)
        if (state == 4) return port;
    return n.ports.empty() ? 1 : n.ports.front().first;
}

size_t common_bridges(const std::vector<int>& a, const std::vector<int>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

std::string join(const std::vector<Nic>& nics, std::string Nic::*field) {
    std::string out;
    for (const Nic& n : nics) out += (out.empty() ? "" : ",") + n.*field;
    return out;
}

}  // namespace

std::vector<Nic> fabric_nics(const Topology& topo) {
    std::vector<Nic> out;
    bool any_efa = false;
    for (size_t i = 0; i < topo.pci_devices.size(); ++i) {
        const PciDevice& d = topo.pci_devices[i];
        if (!network_class(d.class_id)) continue;
        const NetDevice* rdma = rdma_device(d);
        const bool slingshot = !rdma && is_slingshot(d);
        // Plain Ethernet (management ports, ENA, virtio) has neither, whatever its speed.
        if (!rdma && !slingshot) continue;
        const NetDevice* named = rdma;
        if (!named)
            for (const NetDevice& n : d.net_devices)
                if (!named || n.subtype == "Slingshot") named = &n;
        if (!named) continue;  // nothing to name it by on this node
        Nic nic;
        nic.pci_device = static_cast<int>(i);
        nic.name = named->name;
        nic.pci = d.address;
        nic.ucx = rdma ? rdma->name + ":" + std::to_string(ucx_port(*rdma)) : named->name;
        any_efa = any_efa || is_efa(d);
        out.push_back(std::move(nic));
    }
    if (any_efa)
        out.erase(std::remove_if(out.begin(), out.end(),
                                 [&](const Nic& n) { return !is_efa(topo.pci_devices[n.pci_device]); }),
                  out.end());
    std::stable_sort(out.begin(), out.end(), [](const Nic& a, const Nic& b) { return pci_address_less(a.pci, b.pci); });
    return out;
}

std::vector<int> nearest_nics(const Topology& topo, const std::vector<Nic>& nics, const Accelerator& acc) {
    std::vector<int> out;
    if (nics.empty() || acc.pci_device < 0 || acc.pci_device >= static_cast<int>(topo.pci_devices.size())) return out;
    // 1. The deepest PCI bridge the GPU shares with any NIC.
    const std::vector<int>& gpu_bridges = topo.pci_devices[acc.pci_device].bridges;
    size_t deepest = 0;
    for (const Nic& n : nics) deepest = std::max(deepest, common_bridges(gpu_bridges, topo.pci_devices[n.pci_device].bridges));
    if (deepest > 0) {
        for (size_t i = 0; i < nics.size(); ++i)
            if (common_bridges(gpu_bridges, topo.pci_devices[nics[i].pci_device].bridges) == deepest)
                out.push_back(static_cast<int>(i));
        return out;
    }
    // 2. and 3. NICs whose locality lies within the GPU's home node(s), else its package(s).
    auto within = [&](const IdSet& where) {
        for (size_t i = 0; i < nics.size(); ++i) {
            const IdSet& loc = topo.pci_devices[nics[i].pci_device].locality;
            if (!loc.empty() && !where.empty() && loc.is_subset_of(where)) out.push_back(static_cast<int>(i));
        }
        return !out.empty();
    };
    const IdSet home = topo.pus_of_nodes(acc.home_nodes);
    if (within(home)) return out;
    IdSet packages;
    for (const Package& p : topo.packages)
        if (p.pus.intersects(home)) packages = packages | p.pus;
    within(packages);
    return out;
}

std::vector<Nic> nics_for_devices(const Topology& topo, const std::vector<Nic>& nics,
                                  const std::vector<Accelerator>& accelerators, const std::vector<int>& devices) {
    std::vector<bool> chosen(nics.size(), false);
    for (int d : devices) {
        if (d < 0 || d >= static_cast<int>(accelerators.size())) continue;
        for (int i : nearest_nics(topo, nics, accelerators[d])) chosen[i] = true;
    }
    std::vector<Nic> out;
    for (size_t i = 0; i < nics.size(); ++i)  // nics is in PCI order
        if (chosen[i]) out.push_back(nics[i]);
    return out;
}

std::string nic_names(const std::vector<Nic>& nics) { return join(nics, &Nic::name); }

std::string ucx_net_devices(const std::vector<Nic>& nics) { return join(nics, &Nic::ucx); }

}  // namespace numabind
