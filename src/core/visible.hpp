// Which physical accelerators a task may see, from the runtime's environment
// variables (CUDA_VISIBLE_DEVICES and friends). Pure parsing plus an optional
// UUID resolver (NVML through dlopen) supplied by the caller.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "numabind/accelerators.hpp"

namespace numabind {

// Resolves a GPU-/MIG- UUID to a PCI address; returns nullopt when it cannot.
using UuidResolver = std::function<std::optional<std::string>(const std::string& uuid)>;

struct VisibleDevices {
    bool restricted = false;      // false: no variable set, all accelerators visible
    std::vector<int> indexes;     // physical accelerator indexes, in the variable's order
    std::string source;           // which variable decided, e.g. "CUDA_VISIBLE_DEVICES"
    std::vector<std::string> warnings;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The GPU runtimes' device-selection variables, each named once, and all of them in
// visible_from_env's order of precedence: what the plugin's device rule and its step facts
// look for, and what `show --pid` reads of another process.
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
inline constexpr const char* kRocrVisibleDevices = "ROCR_VISIBLE_DEVICES";
inline constexpr const char* kHipVisibleDevices = "HIP_VISIBLE_DEVICES";  // on top of ROCr's
inline constexpr const char* kZeAffinityMask = "ZE_AFFINITY_MASK";
inline constexpr const char* kRuntimeVariables[] = {kCudaVisibleDevices, kRocrVisibleDevices, kHipVisibleDevices,
                                                    kZeAffinityMask};

// Reads CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES (+HIP_VISIBLE_DEVICES on top),
// HIP_VISIBLE_DEVICES, ZE_AFFINITY_MASK, in that order of precedence. Throws
// UsageError naming the variable and the bad entry.
VisibleDevices visible_from_env(const std::vector<Accelerator>& accelerators, const EnvLookup& env,
                                const UuidResolver& resolver);

// A list of physical indexes ("--devices 0,2,3", Slurm's SLURM_STEP_GPUS), validated
// against the count; `what` names the source in errors.
std::vector<int> parse_device_list(const std::string& text, int accelerator_count,
                                   const std::string& what = "--devices");

}  // namespace numabind
