// Which PCI devices count as accelerators, their physical order, and the
// NUMA node(s) each one is local to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "numabind/topology.hpp"

namespace numabind {

// One item of a match spec: "10de", "10de:20b0" or "class=0x0302" / "class=0x03".
struct MatchRule {
    int vendor = -1;      // -1: any
    int device = -1;      // -1: any
    int class_id = -1;    // -1: any; 0xCCSS or 0xCC with class_bits == 8
    int class_bits = 16;  // 16: full class+subclass, 8: base class only
};

class DeviceMatcher {
public:
    // The built-in table of GPU/accelerator vendors and classes.
    static DeviceMatcher builtin();
    // Comma-separated rules; throws UsageError naming the bad item.
    static DeviceMatcher parse(std::string_view spec);

    bool matches(const PciDevice& dev) const;
    bool is_builtin() const { return builtin_; }

private:
    std::vector<MatchRule> rules_;
    bool builtin_ = false;
};

enum class Vendor { Nvidia, Amd, Intel, Habana, Other };
Vendor vendor_of(uint16_t pci_vendor);

struct Accelerator {
    int index = -1;          // physical index: PCI address order, logical GPUs expanded
    int pci_device = -1;     // index into Topology::pci_devices
    std::string pci;         // PCI address of the carrying function
    int sub_index = 0;       // logical GPU inside the function (MI300A TPX/CPX)
    int sub_count = 1;
    Vendor vendor = Vendor::Other;
    std::string name;
    std::vector<int> home_nodes;  // OS indexes of NUMA nodes with CPUs local to it
    IdSet locality;
    int l3 = -1;
    std::string home_warning;  // set when the home is a guess (whole machine, no local CPUs)
};

std::vector<Accelerator> find_accelerators(const Topology& topo, const DeviceMatcher& matcher);

// "0000:03:00.0" style ordering key; also accepts "03:00.0" (domain 0).
bool pci_address_less(const std::string& a, const std::string& b);

}  // namespace numabind
