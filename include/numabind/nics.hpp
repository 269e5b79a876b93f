// Which network devices are a node's fabric NICs, and which of them are nearest a GPU.
// Pure: topology model in, indexes and names out.
#pragma once

#include <string>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/topology.hpp"

namespace numabind {

struct Nic {
    int pci_device = -1;  // index into Topology::pci_devices
    std::string name;     // the RDMA device ("mlx5_0"), else the network interface ("hsi0")
    std::string pci;      // "dddd:bb:dd.f"
    std::string ucx;      // UCX_NET_DEVICES item: "mlx5_0:1" (RDMA, first active port), else the name
};

// The fabric NICs of the node, in PCI order: network (02xx) or InfiniBand (0c06) functions
// that carry an RDMA (OpenFabrics) device, or HPE Slingshot interfaces. Where the node has
// EFA devices, only those (AWS p5/p6 also carry ConnectX ports that are not the fabric).
std::vector<Nic> fabric_nics(const Topology& topo);

// The NICs (indexes into `nics`) nearest one accelerator: those sharing its deepest PCI
// bridge (switch or host bridge), else those local to its home NUMA node(s), else those in
// its package(s), else none. In `nics` order.
std::vector<int> nearest_nics(const Topology& topo, const std::vector<Nic>& nics, const Accelerator& accelerator);

// The union of nearest_nics over several accelerators (a task's devices), in PCI order.
std::vector<Nic> nics_for_devices(const Topology& topo, const std::vector<Nic>& nics,
                                  const std::vector<Accelerator>& accelerators, const std::vector<int>& devices);

// "mlx5_0,mlx5_1" (NUMABIND_NICS) and "mlx5_0:1,mlx5_1:1" (UCX_NET_DEVICES); empty for none.
std::string nic_names(const std::vector<Nic>& nics);
std::string ucx_net_devices(const std::vector<Nic>& nics);

}  // namespace numabind
