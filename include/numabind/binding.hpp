// Adapter: applies a task plan to the calling process with the kernel's calls
// (sched_setaffinity, set_mempolicy from libnuma), then reads it back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "numabind/idset.hpp"
#include "numabind/plan.hpp"

namespace numabind {

struct ApplyResult {
    bool ok = false;
    std::string error;             // one line when !ok
    // When !ok: true when the task is exactly as before (previous CPU affinity and memory
    // policy put back, or never changed); false when the kernel refused to put them back,
    // and then cpus/mem_policy/mem_nodes say what the task has now.
    bool restored = false;
    IdSet cpus;                    // affinity read back
    std::string mem_policy;        // kernel policy read back ("bind", "preferred"...)
    IdSet mem_nodes;               // nodes of that policy
    std::vector<std::string> warnings;
};

// The calling thread's CPU affinity and memory policy, saved on construction and put back
// on destruction unless keep() was called: a caller that binds, then fails (or throws)
// before it has reported the binding, leaves the task exactly as it was. Putting back
// allocates nothing. Use: ScopedBinding b; r = b.apply(task); ...export...; b.keep();
class ScopedBinding {
public:
    ScopedBinding();  // may throw std::bad_alloc (nothing changed then)
    ~ScopedBinding();
    ScopedBinding(const ScopedBinding&) = delete;
    ScopedBinding& operator=(const ScopedBinding&) = delete;

    // Binds as apply_binding does; when it fails (!ok) or throws, the previous placement
    // is put back first (see ApplyResult::restored).
    ApplyResult apply(const TaskPlan& task);
    void keep() noexcept { kept_ = true; }
    // Puts the saved placement back now; false when the kernel refused part of it.
    bool restore() noexcept;

private:
    struct Saved;
    std::unique_ptr<Saved> saved_;
    bool kept_ = false;
    bool restored_ = false;
};

// Binds the calling thread (and everything it later creates or execs). When it fails
// (!ok) or throws (std::bad_alloc), the thread's previous CPU affinity and memory policy
// are put back first (ScopedBinding).
ApplyResult apply_binding(const TaskPlan& task);

// Sets NUMABIND_MODE, NUMABIND_CPUS, NUMABIND_MEMS, NUMABIND_MEM_POLICY, NUMABIND_DEVICE
// (the first owned device), NUMABIND_DEVICES (all of them), NUMABIND_DEVICE_PCI through the given setter (setenv for the CLI, spank_setenv for the plugin).
template <typename Setter>
void export_binding_env(Mode mode, const TaskPlan& task, Setter&& set) {
    set("NUMABIND_MODE", to_string(mode));
    set("NUMABIND_CPUS", task.cpus.to_string());
    std::string mems;
    for (int n : task.mems) mems += (mems.empty() ? "" : ",") + std::to_string(n);
    set("NUMABIND_MEMS", mems);
    set("NUMABIND_MEM_POLICY", to_string(task.mem));
    set("NUMABIND_DEVICE", task.device ? std::to_string(task.device->index) : std::string());
    std::string devices;
    for (int d : task.devices) devices += (devices.empty() ? "" : ",") + std::to_string(d);
    set("NUMABIND_DEVICES", devices);
    set("NUMABIND_DEVICE_PCI", task.device ? task.device->pci : std::string());
}

// NUMABIND_NICS: the task's nearest fabric NICs ("mlx5_0,mlx5_1"), removed when it has none.
// With `ucx` (opt-in) also UCX_NET_DEVICES ("mlx5_0:1,mlx5_1:1"), unless the user has set it
// (`ucx_already_set`) or there is no NIC to name. NCCL is left alone: it picks the NIC
// nearest each GPU by PCI distance itself.
template <typename Setter, typename Unsetter>
void export_nic_env(const TaskPlan& task, bool ucx, bool ucx_already_set, Setter&& set, Unsetter&& unset) {
    if (task.nics.empty()) {
        unset("NUMABIND_NICS");
        return;
    }
    set("NUMABIND_NICS", nic_names(task.nics));
    if (ucx && !ucx_already_set) set("UCX_NET_DEVICES", ucx_net_devices(task.nics));
}

// What the process currently has (for `numabind show`).
struct Placement {
    IdSet cpus;
    std::string mem_policy;
    IdSet mem_nodes;
};
Placement current_placement();

}  // namespace numabind
