// Syscall adapter: CPU affinity with sched_setaffinity, memory policy with
// libnuma's set_mempolicy; both read back with the matching get call.
#include "sys/binding.hpp"

#include "core/text.hpp"
#include "numabind/error.hpp"
#include "numabind/topology.hpp"

#include <numaif.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace numabind {

namespace {

#ifndef MPOL_F_STATIC_NODES
#define MPOL_F_STATIC_NODES (1 << 15)
#define MPOL_F_RELATIVE_NODES (1 << 14)
#endif
#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5  // Linux 5.15
#endif

constexpr int kMaxNodes = 4096;  // node mask width for set/get_mempolicy
using NodeMask = std::vector<unsigned long>;
constexpr int kBitsPerWord = 8 * sizeof(unsigned long);

NodeMask to_mask(const std::vector<int>& nodes) {
    NodeMask mask(kMaxNodes / kBitsPerWord, 0);
    for (int n : nodes)
        if (n >= 0 && n < kMaxNodes) mask[n / kBitsPerWord] |= 1UL << (n % kBitsPerWord);
    return mask;
}

IdSet from_mask(const NodeMask& mask) {
    IdSet s;
    for (int n = 0; n < kMaxNodes; ++n)
        if (mask[n / kBitsPerWord] >> (n % kBitsPerWord) & 1UL) s.insert(n);
    return s;
}

std::string policy_name(int mode) {
    switch (mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES)) {
        case MPOL_DEFAULT: return "default";
        case MPOL_PREFERRED: return "preferred";
        case MPOL_BIND: return "bind";
        case MPOL_INTERLEAVE: return "interleave";
        case MPOL_LOCAL: return "local";
        case MPOL_PREFERRED_MANY: return "preferred_many";
        default: return "unknown(" + std::to_string(mode) + ")";
    }
}

// A CPU mask from CPU_ALLOC (malloc), freed with CPU_FREE.
struct CpuSetFree {
    void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};
using CpuSetPtr = std::unique_ptr<cpu_set_t, CpuSetFree>;

// A zeroed mask for `ncpus` CPUs, or null with errno = ENOMEM.
CpuSetPtr alloc_cpu_set(int ncpus, size_t& size) {
    CpuSetPtr set(CPU_ALLOC(ncpus));
    size = CPU_ALLOC_SIZE(ncpus);
    if (!set) {
        errno = ENOMEM;
        return set;
    }
    CPU_ZERO_S(size, set.get());
    return set;
}

// The calling thread's affinity as the kernel's mask, sized for machines with many CPUs;
// null (errno set) when it cannot be read.
CpuSetPtr read_affinity_mask(int& ncpus, size_t& size) {
    for (ncpus = 1024; ncpus <= (1 << 18); ncpus *= 4) {
        CpuSetPtr set = alloc_cpu_set(ncpus, size);
        if (!set) return set;
        if (sched_getaffinity(0, size, set.get()) == 0) return set;
        if (errno != EINVAL) return nullptr;
    }
    return nullptr;
}

bool read_affinity(IdSet& out) {
    int ncpus = 0;
    size_t size = 0;
    CpuSetPtr set = read_affinity_mask(ncpus, size);
    if (!set) return false;
    IdSet cpus;
    for (int c = 0; c < ncpus; ++c)
        if (CPU_ISSET_S(c, size, set.get())) cpus.insert(c);
    out = std::move(cpus);
    return true;
}

bool read_mempolicy(std::string& name, IdSet& nodes) {
    int mode = 0;
    NodeMask mask(kMaxNodes / kBitsPerWord, 0);
    if (get_mempolicy(&mode, mask.data(), kMaxNodes, nullptr, 0) != 0) return false;
    name = policy_name(mode);
    nodes = from_mask(mask);
    return true;
}

bool set_cpu_affinity(const IdSet& cpus) {
    if (cpus.empty()) {
        errno = EINVAL;
        return false;
    }
    size_t size = 0;
    CpuSetPtr set = alloc_cpu_set(cpus.ids().back() + 1, size);
    if (!set) return false;
    for (int c : cpus.ids()) CPU_SET_S(c, size, set.get());
    return sched_setaffinity(0, size, set.get()) == 0;
}

ApplyResult apply_binding_once(const TaskPlan& task) {
    ApplyResult r;
    if (!task.cpus.empty() && !set_cpu_affinity(task.cpus)) {
        r.error = "sched_setaffinity to CPUs " + task.cpus.to_string() + " failed: " + std::strerror(errno);
        return r;
    }
    if (!read_affinity(r.cpus)) {
        r.error = std::string("cannot read back the CPU affinity: ") + std::strerror(errno);
        return r;
    }
    if (!task.cpus.empty() && r.cpus != task.cpus) {
        // The kernel narrows a mask to the cgroup cpuset without failing.
        r.error = "CPU affinity is " + r.cpus.to_string() + " after binding to " + task.cpus.to_string() +
                  " (narrowed by a cpuset?)";
        return r;
    }

    if (task.mem != MemPolicy::None && !task.mems.empty()) {
        NodeMask mask = to_mask(task.mems);
        int mode = MPOL_DEFAULT;
        std::string want;
        switch (task.mem) {
            case MemPolicy::Bind: mode = MPOL_BIND; want = "bind"; break;
            case MemPolicy::Interleave: mode = MPOL_INTERLEAVE; want = "interleave"; break;
            case MemPolicy::Prefer:
                mode = task.mems.size() > 1 ? MPOL_PREFERRED_MANY : MPOL_PREFERRED;
                want = task.mems.size() > 1 ? "preferred_many" : "preferred";
                break;
            case MemPolicy::None: break;
        }
        long rc = set_mempolicy(mode, mask.data(), kMaxNodes);
        if (rc != 0 && mode == MPOL_PREFERRED_MANY && errno == EINVAL) {
            // Kernels before 5.15 have no preferred-many: prefer the first home node.
            r.warnings.push_back("kernel has no MPOL_PREFERRED_MANY; preferring node " +
                                 std::to_string(task.mems.front()) + " only");
            mask = to_mask({task.mems.front()});
            mode = MPOL_PREFERRED;
            want = "preferred";
            rc = set_mempolicy(mode, mask.data(), kMaxNodes);
        }
        if (rc != 0) {
            r.error = "set_mempolicy(" + want + ", nodes " + join_ints(task.mems) + ") failed: " + std::strerror(errno);
            return r;
        }
        if (!read_mempolicy(r.mem_policy, r.mem_nodes)) {
            r.error = std::string("cannot read back the memory policy: ") + std::strerror(errno);
            return r;
        }
        if (r.mem_policy != want) {
            r.error = "memory policy is " + r.mem_policy + " after setting " + want;
            return r;
        }
    } else {
        read_mempolicy(r.mem_policy, r.mem_nodes);
    }
    r.ok = true;
    return r;
}

}  // namespace

// Saved (and allocated) up front, so that putting it back allocates nothing: a failed
// allocation half-way through binding can still be undone.
struct ScopedBinding::Saved {
    CpuSetPtr cpus;
    size_t cpus_size = 0;
    int mode = MPOL_DEFAULT;
    NodeMask nodes = NodeMask(kMaxNodes / kBitsPerWord, 0);
    bool have_mempolicy = false;
};

ScopedBinding::ScopedBinding() : saved_(std::make_unique<Saved>()) {
    int ncpus = 0;
    saved_->cpus = read_affinity_mask(ncpus, saved_->cpus_size);
    saved_->have_mempolicy = get_mempolicy(&saved_->mode, saved_->nodes.data(), kMaxNodes, nullptr, 0) == 0;
}

ScopedBinding::~ScopedBinding() {
    if (!kept_ && !restored_) (void)restore();
}

bool ScopedBinding::restore() noexcept {
    restored_ = true;
    const int saved_errno = errno;
    bool ok = saved_->cpus && saved_->have_mempolicy;
    if (saved_->cpus && sched_setaffinity(0, saved_->cpus_size, saved_->cpus.get()) != 0) ok = false;
    if (saved_->have_mempolicy) {
        const int base = saved_->mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES);
        const long rc = (base == MPOL_DEFAULT || base == MPOL_LOCAL)
                            ? set_mempolicy(base, nullptr, 0)
                            : set_mempolicy(saved_->mode, saved_->nodes.data(), kMaxNodes);
        if (rc != 0) ok = false;
    }
    errno = saved_errno;
    return ok;
}

ApplyResult ScopedBinding::apply(const TaskPlan& task) {
    ApplyResult r;
    if (!saved_->cpus || !saved_->have_mempolicy) {
        // A failure could not be undone without the current placement: change nothing.
        r.error = std::string("cannot read this task's current CPU affinity and memory policy: ") + std::strerror(errno);
        r.restored = true;
        restored_ = true;
        return r;
    }
    kept_ = false;
    restored_ = false;
    try {
        r = apply_binding_once(task);
    } catch (...) {
        (void)restore();  // before the exception leaves: the task is as it was
        throw;
    }
    if (r.ok) return r;
    r.restored = restore();
    if (!r.restored) {
        // Say what the task has now, not what it was meant to get.
        r.cpus = IdSet();
        r.mem_nodes = IdSet();
        read_affinity(r.cpus);
        if (!read_mempolicy(r.mem_policy, r.mem_nodes)) r.mem_policy = "unknown";
        r.error += "; its previous CPU affinity and memory policy could not be put back";
    }
    return r;
}

ApplyResult apply_binding(const TaskPlan& task) {
    ScopedBinding binding;
    ApplyResult r = binding.apply(task);
    if (r.ok) binding.keep();
    return r;
}

AllowedSets kernel_allowed() {
    AllowedSets out;
    int ncpus = 0;
    size_t size = 0;
    CpuSetPtr saved = read_affinity_mask(ncpus, size);
    if (!saved) throw Error(std::string("cannot read this task's CPU affinity: ") + std::strerror(errno));
    // The kernel intersects a requested affinity with the cpuset (sched_setaffinity(2)):
    // asking for every CPU leaves exactly those the cpuset allows and that are online.
    size_t all_size = 0;
    CpuSetPtr all = alloc_cpu_set(ncpus, all_size);
    if (!all) throw Error("cannot allocate a CPU mask");
    for (int c = 0; c < ncpus; ++c) CPU_SET_S(c, all_size, all.get());
    IdSet cpus;
    if (sched_setaffinity(0, all_size, all.get()) == 0) {
        const bool read_back = read_affinity(cpus);
        const int read_errno = errno;
        // Put the previous affinity back before anything else (it lies inside the cpuset).
        if (sched_setaffinity(0, size, saved.get()) != 0)
            throw Error(std::string("cannot restore this task's CPU affinity: ") + std::strerror(errno));
        if (!read_back) throw Error(std::string("cannot read this task's cpuset: ") + std::strerror(read_errno));
    } else {
        // Not allowed to change its affinity (seccomp, a container runtime): what it has now
        // lies inside the cpuset, so planning within it never leaves it; binding will say why
        // it cannot change the affinity.
        for (int c = 0; c < ncpus; ++c)
            if (CPU_ISSET_S(c, size, saved.get())) cpus.insert(c);
    }
    out.cpus = std::move(cpus);
    int mode = 0;
    NodeMask mask(kMaxNodes / kBitsPerWord, 0);
    if (get_mempolicy(&mode, mask.data(), kMaxNodes, nullptr, MPOL_F_MEMS_ALLOWED) != 0)
        throw Error(std::string("cannot read this task's allowed memory nodes (get_mempolicy): ") + std::strerror(errno));
    out.mems = from_mask(mask);
    return out;
}

Placement current_placement() {
    Placement p;
    read_affinity(p.cpus);
    if (!read_mempolicy(p.mem_policy, p.mem_nodes)) p.mem_policy = "unknown";
    return p;
}

}  // namespace numabind
