// Device-match specs (--device-match, plugstack.conf devices=) and the accelerator
// search they drive. Input: SPEC, optionally followed by '\n' and bytes that describe
// synthetic PCI functions (vendor, device, class, address, OS devices) of a small
// hand-built topology, so that find_accelerators sees odd addresses and partitions.
#include <algorithm>
#include <cstdio>
#include <string>

#include "fuzz_support.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"

using namespace numabind;

namespace {

// A 2-node, 4-core machine; PCI functions are added from the input.
Topology base_topology() {
    Topology t;
    for (int c = 0; c < 4; ++c) t.cores.push_back({IdSet{2 * c, 2 * c + 1}, c / 2, c / 2});
    t.l3_groups = {{IdSet::range(0, 3)}, {IdSet::range(4, 7)}};
    t.packages = {{0, IdSet::range(0, 3)}, {1, IdSet::range(4, 7)}};
    t.numa_nodes = {{0, IdSet::range(0, 3), IdSet::range(0, 3), ""},
                    {1, IdSet::range(4, 7), IdSet::range(4, 7), ""},
                    {2, IdSet{}, IdSet::range(4, 7), "GPUMemory"}};
    return t;
}

struct Reader {
    const std::string& s;
    size_t pos = 0;
    bool more() const { return pos < s.size(); }
    unsigned byte() { return more() ? static_cast<unsigned char>(s[pos++]) : 0u; }
    unsigned u16() { return byte() << 8 | byte(); }
    std::string text(size_t max) {
        size_t n = std::min<size_t>(byte() % (max + 1), s.size() - pos);
        std::string out = s.substr(pos, n);
        pos += n;
        return out;
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string s = nbfuzz::as_string(data, size);
    const size_t nl = s.find('\n');
    const std::string spec = s.substr(0, nl);
    const std::string rest = nl == std::string::npos ? std::string() : s.substr(nl + 1);

    std::optional<DeviceMatcher> matcher;
    try {
        matcher = DeviceMatcher::parse(spec);
    } catch (const UsageError&) {
    }
    if (!matcher) matcher = DeviceMatcher::builtin();

    Topology topo = base_topology();
    static const uint16_t kVendors[] = {0x10de, 0x1002, 0x8086, 0x1da3, 0x15b3, 0x1234};
    static const uint16_t kClasses[] = {0x0300, 0x0302, 0x0380, 0x1200, 0x0200, 0x0604};
    static const char* const kBackends[] = {"cuda", "nvml", "rsmi", "opencl", "ze", "card", "renderD", "x"};
    Reader in{rest};
    for (int n = 0; n < 16 && in.more(); ++n) {
        PciDevice d;
        unsigned pick = in.byte();
        d.vendor = (pick & 0x80) ? static_cast<uint16_t>(in.u16()) : kVendors[pick % 6];
        d.device = static_cast<uint16_t>(in.u16());
        d.class_id = (pick & 0x40) ? static_cast<uint16_t>(in.u16()) : kClasses[(pick >> 3) % 6];
        if (pick & 0x20) {
            d.address = in.text(16);  // arbitrary text: pci_address_less must cope
        } else {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", in.byte() % 3, in.byte(), in.byte() % 32, in.byte() % 8);
            d.address = buf;
        }
        unsigned where = in.byte() % 4;
        d.machine_level = where == 3;
        d.locality = where == 0 ? IdSet::range(0, 3) : where == 1 ? IdSet::range(4, 7) : where == 2 ? IdSet{} : topo.all_pus();
        d.l3 = where < 2 ? static_cast<int>(where) : -1;
        for (unsigned k = in.byte() % 5; k > 0; --k)
            d.os_devices.push_back(std::string(kBackends[in.byte() % 8]) + std::to_string(in.byte()));
        topo.pci_devices.push_back(d);
    }

    std::vector<Accelerator> accs = find_accelerators(topo, *matcher);
    for (size_t i = 0; i < accs.size(); ++i) {
        const Accelerator& a = accs[i];
        NB_FUZZ_CHECK(a.index == static_cast<int>(i), spec);
        NB_FUZZ_CHECK(a.pci_device >= 0 && a.pci_device < static_cast<int>(topo.pci_devices.size()), spec);
        NB_FUZZ_CHECK(matcher->matches(topo.pci_devices[a.pci_device]), spec);
        NB_FUZZ_CHECK(!a.home_nodes.empty(), spec);  // always some home, guessed or not
        for (int h : a.home_nodes) NB_FUZZ_CHECK(topo.numa_by_os(h) && topo.numa_by_os(h)->has_cpus(), spec);
        NB_FUZZ_CHECK(a.sub_index >= 0 && a.sub_index < a.sub_count, spec);
        if (i > 0 && accs[i - 1].pci_device != a.pci_device)
            NB_FUZZ_CHECK(!pci_address_less(a.pci, accs[i - 1].pci), a.pci + " < " + accs[i - 1].pci);
    }
    return 0;
}
