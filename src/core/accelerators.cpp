#include "numabind/accelerators.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>

#include "numabind/error.hpp"

namespace numabind {

namespace {

constexpr const char* kSpecHelp =
    "expected comma-separated VVVV[:DDDD] (hex PCI vendor[:device]) or class=0xCCSS";

// Display controllers (GPUs), processing accelerators (12xx: MI300A, Gaudi, FPGAs) and
// co-processors (0b40: NEC SX-Aurora Vector Engine): what a bare vendor match means.
bool is_display_or_accelerator(uint16_t class_id) {
    const int base = class_id >> 8;
    return base == 0x03 || base == 0x12 || class_id == 0x0b40;
}

int parse_hex(std::string_view text, size_t max_digits, std::string_view item) {
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
    int value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (text.empty() || text.size() > max_digits || ec != std::errc() ||
        ptr != text.data() + text.size()) {
        throw UsageError("invalid device match '" + std::string(item) + "' (" + kSpecHelp + ")");
    }
    return value;
}

// Server-management display chips of AMD (ES1000 and relatives on BMCs) are not GPUs.
bool is_amd_bmc_chip(uint16_t device) {
    return device == 0x515e || device == 0x5159 || device == 0x515f;
}

struct PciKey {
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
};

PciKey pci_key(const std::string& addr) {
    PciKey k;
    if (std::sscanf(addr.c_str(), "%x:%x:%x.%x", &k.domain, &k.bus, &k.dev, &k.fn) != 4) {
        k = PciKey{};
        std::sscanf(addr.c_str(), "%x:%x.%x", &k.bus, &k.dev, &k.fn);
    }
    return k;
}

// Logical GPUs carried by one PCI function: the largest number of OS devices of
// one backend (rsmi0 rsmi1 rsmi2 under one MI300A in TPX mode -> 3).
int logical_gpu_count(const PciDevice& dev) {
    std::map<std::string, int> per_backend;
    for (const std::string& name : dev.os_devices) {
        size_t i = 0;
        while (i < name.size() && !std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
        const std::string backend = name.substr(0, i);
        // DRM nodes (card, renderD, controlD) are one per function, never per partition.
        if (backend == "rsmi" || backend == "cuda" || backend == "nvml" || backend == "opencl" ||
            backend == "ze" || backend == "levelzero")
            ++per_backend[backend];
    }
    int n = 1;
    for (const auto& [backend, count] : per_backend) n = std::max(n, count);
    return n;
}

}  // namespace

bool pci_address_less(const std::string& a, const std::string& b) {
    PciKey x = pci_key(a), y = pci_key(b);
    return std::tie(x.domain, x.bus, x.dev, x.fn) < std::tie(y.domain, y.bus, y.dev, y.fn);
}

Vendor vendor_of(uint16_t pci_vendor) {
    switch (pci_vendor) {
        case 0x10de: return Vendor::Nvidia;
        case 0x1002: return Vendor::Amd;
        case 0x8086: return Vendor::Intel;
        case 0x1da3: return Vendor::Habana;
        default: return Vendor::Other;
    }
}

DeviceMatcher DeviceMatcher::builtin() {
    DeviceMatcher m;
    m.builtin_ = true;
    return m;
}

DeviceMatcher DeviceMatcher::parse(std::string_view spec) {
    DeviceMatcher m;
    size_t pos = 0;
    if (spec.empty()) throw UsageError(std::string("empty device match (") + kSpecHelp + ")");
    while (pos <= spec.size()) {
        size_t comma = spec.find(',', pos);
        if (comma == std::string_view::npos) comma = spec.size();
        std::string_view item = spec.substr(pos, comma - pos);
        MatchRule rule;
        if (item.rfind("class=", 0) == 0) {
            std::string_view hex = item.substr(6);
            std::string_view digits = hex;
            if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
                digits.remove_prefix(2);
            if (digits.size() != 2 && digits.size() != 4)
                throw UsageError("invalid device match '" + std::string(item) + "' (" + kSpecHelp + ")");
            rule.class_id = parse_hex(hex, 4, item);
            rule.class_bits = digits.size() == 2 ? 8 : 16;
        } else {
            size_t colon = item.find(':');
            std::string_view v = item.substr(0, colon);
            if (v.size() != 4 && !(v.size() == 6 && (v.rfind("0x", 0) == 0 || v.rfind("0X", 0) == 0)))
                throw UsageError("invalid device match '" + std::string(item) + "' (" + kSpecHelp + ")");
            rule.vendor = parse_hex(v, 4, item);
            if (colon != std::string_view::npos) {
                std::string_view d = item.substr(colon + 1);
                if (d.size() != 4 && !(d.size() == 6 && (d.rfind("0x", 0) == 0 || d.rfind("0X", 0) == 0)))
                    throw UsageError("invalid device match '" + std::string(item) + "' (" + kSpecHelp + ")");
                rule.device = parse_hex(d, 4, item);
            }
        }
        m.rules_.push_back(rule);
        pos = comma + 1;
    }
    return m;
}

bool DeviceMatcher::matches(const PciDevice& dev) const {
    if (builtin_) {
        if (!is_display_or_accelerator(dev.class_id)) return false;
        switch (dev.vendor) {
            case 0x10de:  // NVIDIA: VGA or 3D controller (not NVSwitch bridges, not audio)
                return dev.class_id == 0x0300 || dev.class_id == 0x0302;
            case 0x1002:  // AMD: display, other display, processing accelerator (MI300A)
                return (dev.class_id == 0x0300 || dev.class_id == 0x0380 || dev.class_id == 0x1200) &&
                       !is_amd_bmc_chip(dev.device);
            case 0x8086:  // Intel data-center GPUs (Max/Flex) are "display controller" 0x0380;
                          // integrated graphics (0x0300) and FPGA cards (0x1200) are not GPUs
                return dev.class_id == 0x0380;
            case 0x1da3:  // Habana Gaudi
                return dev.class_id == 0x1200;
            default:
                return false;
        }
    }
    for (const MatchRule& r : rules_) {
        if (r.class_id >= 0) {
            const int have = r.class_bits == 8 ? dev.class_id >> 8 : dev.class_id;
            if (have == r.class_id) return true;
            continue;
        }
        if (r.vendor != dev.vendor) continue;
        if (r.device >= 0) {
            if (r.device == dev.device) return true;
            continue;
        }
        // A bare vendor means that vendor's GPUs/accelerators, not its NICs or switches.
        if (is_display_or_accelerator(dev.class_id)) return true;
    }
    return false;
}

std::vector<Accelerator> find_accelerators(const Topology& topo, const DeviceMatcher& matcher) {
    std::vector<int> matched;
    for (size_t i = 0; i < topo.pci_devices.size(); ++i)
        if (matcher.matches(topo.pci_devices[i])) matched.push_back(static_cast<int>(i));
    std::stable_sort(matched.begin(), matched.end(), [&](int a, int b) {
        return pci_address_less(topo.pci_devices[a].address, topo.pci_devices[b].address);
    });

    std::vector<Accelerator> out;
    for (int pi : matched) {
        const PciDevice& dev = topo.pci_devices[pi];
        Accelerator base;
        base.pci_device = pi;
        base.pci = dev.address;
        base.vendor = vendor_of(dev.vendor);
        base.name = dev.name;
        base.locality = dev.locality;
        base.l3 = dev.l3;
        const std::vector<int> all_cpu_nodes = topo.cpu_nodes();
        // With one NUMA node that has CPUs every device is local to it: nothing to warn about.
        const bool single_node = all_cpu_nodes.size() <= 1;
        if (dev.machine_level) {
            base.home_nodes = all_cpu_nodes;
            if (!single_node)
                base.home_warning = "device " + dev.address +
                                    " has no NUMA affinity (attached at machine level); "
                                    "treating it as local to all NUMA nodes";
        } else {
            base.home_nodes = topo.cpu_nodes_intersecting(dev.locality);
            if (base.home_nodes.empty()) {
                base.home_nodes = all_cpu_nodes;
                if (!single_node)
                    base.home_warning = "device " + dev.address +
                                        " has no local CPUs; treating it as local to all NUMA nodes";
            }
        }
        base.sub_count = logical_gpu_count(dev);
        for (int s = 0; s < base.sub_count; ++s) {
            Accelerator a = base;
            a.sub_index = s;
            a.index = static_cast<int>(out.size());
            out.push_back(a);
        }
    }
    return out;
}

}  // namespace numabind
