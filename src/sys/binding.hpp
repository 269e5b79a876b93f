// Adapter: applies a task plan to the calling process with the kernel's calls
// (sched_setaffinity, set_mempolicy from libnuma), then reads it back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"

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

// What the process currently has (for `numabind show`).
struct Placement {
    IdSet cpus;
    std::string mem_policy;
    IdSet mem_nodes;
};
Placement current_placement();

// From the kernel in a few system calls: the CPUs by asking for all of them with
// sched_setaffinity and reading back what the cpuset leaves (the calling thread's affinity is
// put back at once; when the thread may not change its affinity, the affinity it has, which
// lies inside the cpuset), the memory nodes with get_mempolicy(MPOL_F_MEMS_ALLOWED). Throws
// Error when the kernel refuses to read either.
AllowedSets kernel_allowed();

}  // namespace numabind
