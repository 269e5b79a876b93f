// Syscall adapter: CPU affinity with sched_setaffinity, memory policy with
// libnuma's set_mempolicy; both read back with the matching get call.
#include "numabind/binding.hpp"

#include <numaif.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
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

bool read_affinity(IdSet& out) {
    // Size the mask for machines with many CPUs.
    for (int ncpus = 1024; ncpus <= (1 << 18); ncpus *= 4) {
        cpu_set_t* set = CPU_ALLOC(ncpus);
        size_t size = CPU_ALLOC_SIZE(ncpus);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            out = IdSet();
            for (int c = 0; c < ncpus; ++c)
                if (CPU_ISSET_S(c, size, set)) out.insert(c);
            CPU_FREE(set);
            return true;
        }
        CPU_FREE(set);
        if (errno != EINVAL) return false;
    }
    return false;
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
    const int ncpus = cpus.ids().back() + 1;
    cpu_set_t* set = CPU_ALLOC(ncpus);
    size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    for (int c : cpus.ids()) CPU_SET_S(c, size, set);
    int rc = sched_setaffinity(0, size, set);
    int err = errno;
    CPU_FREE(set);
    errno = err;
    return rc == 0;
}

// The calling thread's affinity and memory policy before binding, put back when binding
// fails half-way: a caller that then runs the task unbound (fallback=warn) must not leave
// it with the CPUs of a failed plan or a memory policy it no longer reports.
class SavedPlacement {
public:
    SavedPlacement() {
        have_cpus_ = read_affinity(cpus_);
        have_mempolicy_ = get_mempolicy(&mode_, mask_.data(), kMaxNodes, nullptr, 0) == 0;
    }
    void restore() {
        const int saved_errno = errno;
        if (have_cpus_) (void)set_cpu_affinity(cpus_);
        if (have_mempolicy_) {
            const int base = mode_ & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES);
            if (base == MPOL_DEFAULT || base == MPOL_LOCAL)
                (void)set_mempolicy(base, nullptr, 0);
            else
                (void)set_mempolicy(mode_, mask_.data(), kMaxNodes);
        }
        errno = saved_errno;
    }

private:
    IdSet cpus_;
    bool have_cpus_ = false;
    int mode_ = MPOL_DEFAULT;
    NodeMask mask_ = NodeMask(kMaxNodes / kBitsPerWord, 0);
    bool have_mempolicy_ = false;
};

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
            std::string nodes;
            for (int n : task.mems) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
            r.error = "set_mempolicy(" + want + ", nodes " + nodes + ") failed: " + std::strerror(errno);
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

ApplyResult apply_binding(const TaskPlan& task) {
    SavedPlacement saved;
    ApplyResult r = apply_binding_once(task);
    if (!r.ok) saved.restore();
    return r;
}

Placement current_placement() {
    Placement p;
    read_affinity(p.cpus);
    if (!read_mempolicy(p.mem_policy, p.mem_nodes)) p.mem_policy = "unknown";
    return p;
}

}  // namespace numabind
