// Topology XML: HwlocTopology loads the bytes as an hwloc XML buffer, then find_accelerators and plan_node for every mode
// with a task count and an allowed-CPU subset derived from the input. Invariants: every
// task's CPUs are non-empty (GPU modes) and inside the allowed CPUs; its memory nodes are
// inside the allowed memory nodes; devices are accelerators of the topology.
#include <string>

#include "fuzz_support.hpp"
#include "hwloc_known_crashes.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

using namespace numabind;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // No dlopen() of GL/OpenCL/PCI discovery plugins on every load. The XML goes through
    // hwloc's libxml2 importer: its built-in importer (HWLOC_LIBXML_IMPORT=0) segfaults on
    // many malformed inputs in hwloc 2.9.0 itself (fuzz/known-hwloc-crashes/), which would
    // stop the fuzzer before it reaches numabind's code. FUZZ_HWLOC_NOLIBXML=1 selects it.
    setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_pci", 0);
    if (const char* v = getenv("FUZZ_HWLOC_NOLIBXML"); v && *v == '1') setenv("HWLOC_LIBXML_IMPORT", "0", 1);
    // One topology kept open keeps hwloc's components (and the libxml2 plugin) loaded:
    // no dlopen()/dlclose() per input, and leak reports inside them stay symbolized.
    static HwlocTopology keep(LoadOptions(std::string(NUMABIND_FUZZ_TOPOLOGIES) + "/power9.xml", false));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string xml = nbfuzz::as_string(data, size);
    if (nbfuzz::hits_known_hwloc_crash(xml)) return -1;  // -1: not added to the corpus
    std::unique_ptr<HwlocTopology> topo;
    try {
        topo = std::make_unique<HwlocTopology>(LoadOptions::from_buffer(xml, false));
    } catch (const Error&) {
        return 0;
    }
    const Topology& m = topo->model();
    const IdSet all = m.all_pus();
    NB_FUZZ_CHECK(!all.empty(), "no PU");
    std::vector<Accelerator> accs = find_accelerators(m, DeviceMatcher::builtin());
    for (const Accelerator& a : accs) {
        NB_FUZZ_CHECK(a.pci_device >= 0 && a.pci_device < static_cast<int>(m.pci_devices.size()), a.pci);
        for (int h : a.home_nodes) NB_FUZZ_CHECK(m.numa_by_os(h) != nullptr, std::to_string(h));
    }

    // Choices from a hash of the input, so each XML gets a stable but varied request.
    const size_t h = std::hash<std::string>{}(xml);
    const std::vector<int> pus = all.ids();
    IdSet allowed;  // empty: everything
    if (h & 1) {
        for (size_t i = 0; i < pus.size(); ++i)
            if ((h >> (i % 61)) & 2) allowed.insert(pus[i]);
    }
    IdSet allowed_mems;
    if (h & 4) {
        for (const NumaNode& n : m.numa_nodes)
            if ((h >> (n.os_index & 31)) & 8) allowed_mems.insert(n.os_index);
    }
    const IdSet effective = allowed.empty() ? all : allowed;
    for (Mode mode : {Mode::None, Mode::Node, Mode::Socket, Mode::Exclusive, Mode::CoreComplex}) {
        for (int ntasks : {1, 2 + static_cast<int>((h >> 8) % 7)}) {
            PlanRequest req;
            req.mode = mode;
            req.mem = static_cast<MemPolicy>((h >> 12) % 4);
            req.ntasks = ntasks;
            req.allowed_cpus = allowed;
            req.allowed_mems = allowed_mems;
            NodePlan plan;
            try {
                plan = plan_node(m, accs, req);
            } catch (const Error&) {
                continue;
            }
            NB_FUZZ_CHECK(static_cast<int>(plan.tasks.size()) == ntasks, to_string(mode));
            for (const TaskPlan& t : plan.tasks) {
                NB_FUZZ_CHECK(t.cpus.is_subset_of(effective), to_string(mode) + " cpus " + t.cpus.to_string());
                if (mode != Mode::None) NB_FUZZ_CHECK(!t.cpus.empty(), to_string(mode));
                for (int n : t.mems) {
                    NB_FUZZ_CHECK(m.numa_by_os(n) != nullptr, std::to_string(n));
                    // Under mem=none the nodes are informative only (no policy is set).
                    if (!allowed_mems.empty() && t.mem != MemPolicy::None)
                        NB_FUZZ_CHECK(allowed_mems.contains(n), to_string(mode) + " node " + std::to_string(n) +
                                                                    " allowed " + allowed_mems.to_string());
                }
                if (t.device) {
                    NB_FUZZ_CHECK(t.device >= plan.accelerators.data() &&
                                      t.device < plan.accelerators.data() + plan.accelerators.size(),
                                  "device pointer");
                }
            }
        }
    }
    return 0;
}
