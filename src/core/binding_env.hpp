// The environment a bound task is given (NUMABIND_*, and UCX_NET_DEVICES when asked): pure,
// through the caller's setter, so the CLI (setenv), the C API (a map) and the plugin
// (spank_setenv) export the same names from one place.
#pragma once

#include <optional>
#include <string>

#include "core/text.hpp"
#include "numabind/plan.hpp"

namespace numabind {

// Sets NUMABIND_MODE, NUMABIND_CPUS, NUMABIND_MEMS, NUMABIND_MEM_POLICY, NUMABIND_DEVICE
// (the first owned device), NUMABIND_DEVICES (all of them), NUMABIND_DEVICE_PCI through the given setter (setenv for the CLI, spank_setenv for the plugin).
template <typename Setter>
void export_binding_env(Mode mode, const TaskPlan& task, Setter&& set) {
    set("NUMABIND_MODE", to_string(mode));
    set("NUMABIND_CPUS", task.cpus.to_string());
    set("NUMABIND_MEMS", join_ints(task.mems));
    set("NUMABIND_MEM_POLICY", to_string(task.mem));
    set("NUMABIND_DEVICE", task.device ? std::to_string(task.device->index) : std::string());
    set("NUMABIND_DEVICES", join_ints(task.devices));
    set("NUMABIND_DEVICE_PCI", task.device ? task.device->pci : std::string());
}

// Where numabind keeps the UCX_NET_DEVICES value it set itself: a value equal to it was
// inherited from an outer binding (a bound batch shell, a nested `numabind run`), not the user's.
inline constexpr const char* kUcxMarker = "NUMABIND_UCX_NET_DEVICES";

// NUMABIND_NICS: the task's nearest fabric NICs ("mlx5_0,mlx5_1"), removed when it has none.
// With `ucx` (opt-in) also UCX_NET_DEVICES ("mlx5_0:1,mlx5_1:1") and its marker, unless the
// user has set it or there is no NIC to name; one numabind set before is replaced or removed.
// `current`/`marker`: UCX_NET_DEVICES and kUcxMarker as the task's environment has them now.
// NCCL is left alone: it picks the NIC nearest each GPU by PCI distance itself.
template <typename Setter, typename Unsetter>
void export_nic_env(const TaskPlan& task, bool ucx, const std::optional<std::string>& current,
                    const std::optional<std::string>& marker, Setter&& set, Unsetter&& unset) {
    const bool users = current && (!marker || *current != *marker);
    if (task.nics.empty()) unset("NUMABIND_NICS");
    else set("NUMABIND_NICS", nic_names(task.nics));
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
