// The step engine's model cache text (model_text.hpp): model_from_text on arbitrary bytes,
// under this-machine-like limits (64 PUs, 4 nodes) and the defaults. Invariants: it throws
// only numabind::Error; an accepted model respects the limits (every id within them, the
// counts bounded, the indexes into its own vectors valid) and writes back to a text that
// reads back to the same text (a fixed point); the input with its last line dropped (a file
// cut short at a line boundary) is always refused.
#include <string>

#include "core/model_text.hpp"
#include "fuzz_support.hpp"
#include "numabind/error.hpp"

using namespace numabind;

namespace {

void check_model(const Topology& m, const ModelLimits& l, const std::string& text) {
    NB_FUZZ_CHECK(!m.cores.empty(), text);
    NB_FUZZ_CHECK(m.cores.size() <= static_cast<size_t>(l.max_pu) + 1, text);
    NB_FUZZ_CHECK(m.numa_nodes.size() <= static_cast<size_t>(l.max_node) + 1, text);
    NB_FUZZ_CHECK(m.pci_devices.size() <= l.max_pci, text);
    for (const Core& c : m.cores) {
        NB_FUZZ_CHECK(c.pus.last() <= l.max_pu, text);
        NB_FUZZ_CHECK(c.l3 < static_cast<int>(m.l3_groups.size()) && c.package < static_cast<int>(m.packages.size()), text);
    }
    for (const NumaNode& n : m.numa_nodes) {
        NB_FUZZ_CHECK(n.os_index >= 0 && n.os_index <= l.max_node, text);
        NB_FUZZ_CHECK(n.pus.last() <= l.max_pu && n.locality.last() <= l.max_pu, text);
    }
    for (const PciDevice& d : m.pci_devices) NB_FUZZ_CHECK(d.l3 < static_cast<int>(m.l3_groups.size()), text);
    for (const auto& [from_to, d] : m.distances)
        NB_FUZZ_CHECK(from_to.first <= l.max_node && from_to.second <= l.max_node, text);
}

void one(const std::string& text, const ModelLimits& limits) {
    Topology m;
    try {
        m = model_from_text(text, limits);
    } catch (const Error&) {
        return;
    }
    check_model(m, limits, text);
    const std::string back = model_to_text(m);
    Topology again;
    try {
        again = model_from_text(back, limits);
    } catch (const Error& e) {
        nbfuzz::violated("an accepted model's own text is refused", e.what());
    }
    NB_FUZZ_CHECK(model_to_text(again) == back, text);
    // Cut at its last line boundary: never read as a (smaller) model.
    const size_t cut = text.rfind('\n', text.size() - 2);
    if (cut != std::string::npos && cut + 1 < text.size()) {
        bool refused = false;
        try {
            (void)model_from_text(text.substr(0, cut + 1), limits);
        } catch (const Error&) {
            refused = true;
        }
        NB_FUZZ_CHECK(refused, text);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text = nbfuzz::as_string(data, size);
    ModelLimits machine;
    machine.max_pu = 63;
    machine.max_node = 3;
    machine.max_bytes = 1 << 20;
    one(text, machine);
    one(text, ModelLimits{});
    return 0;
}
