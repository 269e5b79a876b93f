// The environment a bound task is given (NUMABIND_*, and UCX_NET_DEVICES when asked): pure,
// through the caller's setter, so the CLI (setenv), the C API (a map) and the plugin
// (spank_setenv) export the same names from one place.
#pragma once

#include <optional>
#include <string>

#include "core/text.hpp"
#include "numabind/plan.hpp"

namespace numabind {

// The variables numabind exports into a bound task, each named once: the setters below, the
// readers (reapply, show, show --pid, cuda_index) and the plugin use these constants.
inline constexpr const char* kEnvMode = "NUMABIND_MODE";             // node, exclusive...; none: left unbound
inline constexpr const char* kEnvCpus = "NUMABIND_CPUS";             // "0-7,16-23"
inline constexpr const char* kEnvMems = "NUMABIND_MEMS";             // "0,1"
inline constexpr const char* kEnvMemPolicy = "NUMABIND_MEM_POLICY";  // prefer, bind, interleave, none
inline constexpr const char* kEnvDevice = "NUMABIND_DEVICE";         // the first owned device
inline constexpr const char* kEnvDevices = "NUMABIND_DEVICES";       // all of them
inline constexpr const char* kEnvDevicePci = "NUMABIND_DEVICE_PCI";  // the first one's PCI address
inline constexpr const char* kEnvNics = "NUMABIND_NICS";             // nearest fabric NICs; unset: none
// Where numabind keeps the UCX_NET_DEVICES value it set itself: a value equal to it was
// inherited from an outer binding (a bound batch shell, a nested `numabind run`), not the user's.
inline constexpr const char* kUcxMarker = "NUMABIND_UCX_NET_DEVICES";

// Every variable above: what export_binding_env and export_nic_env may set, and what the
// plugin removes from each task before binding it (spank/shared/step_scope.cpp), so that none
// of a user's, an earlier step's or a bound batch shell's survives. A variable added to the
// setters goes here too (tests/unit/shared_definitions_test.cpp fails otherwise). Not here: what
// numabind sets only where the user has not (UCX_NET_DEVICES, OMP_*: the user's own stay), and
// srun's NUMABIND_SRUN_* markers (the plugin's own, spank/shared/step_scope.hpp).
// python/numabind/__init__.py spells the same list (_ENV_VARIABLES; tests/python/names_test.py).
inline constexpr const char* kExportedVariables[] = {kEnvMode, kEnvCpus, kEnvMems, kEnvMemPolicy, kEnvDevice,
                                                     kEnvDevices, kEnvDevicePci, kEnvNics, kUcxMarker};

// Sets NUMABIND_MODE, NUMABIND_CPUS, NUMABIND_MEMS, NUMABIND_MEM_POLICY, NUMABIND_DEVICE
// (the first owned device), NUMABIND_DEVICES (all of them), NUMABIND_DEVICE_PCI through the given setter (setenv for the CLI, spank_setenv for the plugin).
template <typename Setter>
void export_binding_env(Mode mode, const TaskPlan& task, Setter&& set) {
    set(kEnvMode, to_string(mode));
    set(kEnvCpus, task.cpus.to_string());
    set(kEnvMems, join_ints(task.mems));
    set(kEnvMemPolicy, to_string(task.mem));
    set(kEnvDevice, task.device ? std::to_string(task.device->index) : std::string());
    set(kEnvDevices, join_ints(task.devices));
    set(kEnvDevicePci, task.device ? task.device->pci : std::string());
}

// Whether UCX_NET_DEVICES is the value numabind set itself (equal to its marker): an unbound
// step removes it with the marker, so that it never reads as the user's own later.
inline bool ucx_is_numabinds(const std::optional<std::string>& current, const std::optional<std::string>& marker) {
    return current && marker && *current == *marker;
}

// NUMABIND_NICS: the task's nearest fabric NICs ("mlx5_0,mlx5_1"), removed when it has none.
// With `ucx` (opt-in) also UCX_NET_DEVICES ("mlx5_0:1,mlx5_1:1") and its marker, unless the
// user has set it or there is no NIC to name; one numabind set before is replaced or removed.
// `current`/`marker`: UCX_NET_DEVICES and kUcxMarker as the task's environment has them now.
// NCCL is left alone: it picks the NIC nearest each GPU by PCI distance itself.
template <typename Setter, typename Unsetter>
void export_nic_env(const TaskPlan& task, bool ucx, const std::optional<std::string>& current,
                    const std::optional<std::string>& marker, Setter&& set, Unsetter&& unset) {
    const bool users = current && (!marker || *current != *marker);
    if (task.nics.empty()) unset(kEnvNics);
    else set(kEnvNics, nic_names(task.nics));
    if (users) {
        if (marker) unset(kUcxMarker);
    } else if (ucx && !task.nics.empty()) {
        const std::string value = ucx_net_devices(task.nics);
        set("UCX_NET_DEVICES", value);
        set(kUcxMarker, value);
    } else if (marker) {
        if (current) unset("UCX_NET_DEVICES");
        unset(kUcxMarker);
    }
}

}  // namespace numabind
