// Runtime visibility variables: CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES, ZE_AFFINITY_MASK (visible_from_env) over the accelerators of
// generated GPU-node topologies, then the planner with the result as the visible device list.
// Input: one selector byte (topology, resolver behaviour, task count), then
// "NAME=value" lines.
#include <memory>
#include <string>

#include "core/visible.hpp"
#include "fuzz_support.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

using namespace numabind;

namespace {

struct Loaded {
    std::unique_ptr<HwlocTopology> topo;
    std::vector<Accelerator> accs;
};

std::vector<Loaded>& topologies() {
    static std::vector<Loaded> all = [] {
        // Generated shapes (gen_topology.py --preset): NVIDIA x8 (8 NUMA), AMD MI300A x12 (TPX
        // partitions), NVIDIA + AMD on sparse NUMA ids, NVIDIA x16.
        const char* files[] = {"dgx-a100.xml", "mi300a-tpx.xml", "mixed-vendors.xml", "16gpu.xml"};
        std::vector<Loaded> out;
        for (const char* f : files) {
            Loaded l;
            l.topo = std::make_unique<HwlocTopology>(
                LoadOptions(std::string(NUMABIND_FUZZ_TOPOLOGIES) + "/" + f, false));
            l.accs = find_accelerators(l.topo->model(), DeviceMatcher::builtin());
            if (l.accs.empty()) nbfuzz::violated("generated topology without accelerators", f);
            out.push_back(std::move(l));
        }
        return out;
    }();
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml", 0);
    (void)topologies();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const unsigned sel = data[0];
    const Loaded& t = topologies()[sel % topologies().size()];
    const auto env = nbfuzz::env_lines(nbfuzz::as_string(data + 1, size - 1));

    // A stand-in for NVML: "unavailable", or a hash of the UUID onto an accelerator's PCI
    // address (or onto a device that is not an accelerator).
    UuidResolver resolver;
    if (!(sel & 0x10)) {
        resolver = [&t](const std::string& uuid) -> std::optional<std::string> {
            size_t h = std::hash<std::string>{}(uuid) % (t.accs.size() + 2);
            if (h == t.accs.size()) return std::nullopt;
            if (h == t.accs.size() + 1) return std::string("0000:ff:1f.7");
            return t.accs[h].pci;
        };
    }

    VisibleDevices v;
    try {
        v = visible_from_env(t.accs, nbfuzz::lookup(env), resolver);
    } catch (const UsageError&) {
        return 0;
    }
    std::vector<int> seen;
    for (int d : v.indexes) {
        NB_FUZZ_CHECK(d >= 0 && d < static_cast<int>(t.accs.size()), std::to_string(d));
        NB_FUZZ_CHECK(std::find(seen.begin(), seen.end(), d) == seen.end(), "duplicate " + std::to_string(d));
        seen.push_back(d);
    }
    if (!v.restricted) NB_FUZZ_CHECK(v.indexes.empty() || !v.warnings.empty(), v.source);

    // What the CLI and the plugin do next: plan the node with that list.
    if (v.restricted && !v.indexes.empty()) {
        PlanRequest req;
        req.mode = static_cast<Mode>(1 + (sel >> 5) % 4);
        req.ntasks = 1 + static_cast<int>((sel >> 2) % 3);
        req.visible_devices = v.indexes;
        req.per_task_devices.resize(req.ntasks);
        req.per_task_devices[0] = v.indexes;
        try {
            NodePlan plan = plan_node(t.topo->model(), t.accs, req);
            for (const TaskPlan& task : plan.tasks) {
                NB_FUZZ_CHECK(task.device != nullptr, "no device");
                NB_FUZZ_CHECK(std::find(v.indexes.begin(), v.indexes.end(), task.device->index) != v.indexes.end(),
                              std::to_string(task.device->index));
                NB_FUZZ_CHECK(!task.cpus.empty(), "empty cpus");
            }
        } catch (const Error&) {
        }
    }
    return 0;
}
