// Adapter: what `numabind show` reports about the calling process (its CPUs, memory
// policy and device, and where they disagree); shared by the CLI and the C API.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/task_planner.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/nics.hpp"
#include "sys/binding.hpp"

namespace numabind {

// What NUMABIND_* says was planned, for a binding whose devices this topology does not show.
struct PlannedBinding {
    std::string mode, cpus, mems, mem_policy, device_pci;
    std::vector<int> devices;
    std::string note;  // why the plan is shown instead of the device
};

struct PlacementReport {
    int pid = 0;
    Placement placement;             // the calling thread's affinity and memory policy
    std::vector<int> cpu_numa_nodes;  // NUMA nodes of those CPUs
    std::optional<Accelerator> device;  // the first owned device
    std::vector<int> devices;           // every owned device (physical indexes)
    std::vector<int> device_nodes;      // union of their home nodes
    std::vector<Nic> nics;              // the fabric NICs nearest those devices (nics.hpp)
    std::string device_source;
    std::vector<std::string> warnings;
    std::optional<PlannedBinding> plan;  // set: the device is not seen, the report shows the plan
};

// Throws Error/UsageError (topology, --device-match, malformed variables).
PlacementReport current_placement_report(const std::string& topology, const std::string& device_match,
                                         const Notify& note);
nlohmann::ordered_json placement_to_json(const PlacementReport& report);  // `show --json`
std::string placement_to_text(const PlacementReport& report);             // `show`

}  // namespace numabind
