// numabind SPANK plugin: the GPUs a task holds (see devices.hpp for the rule).
#include "devices.hpp"

#include <algorithm>

#include "numabind/error.hpp"

namespace numabind::spank {

namespace {

bool any_runtime_variable(const EnvLookup& env) {
    for (const char* v : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"})
        if (env(v)) return true;
    return false;
}

// The runtime variables applied to `list` (physical indexes): the runtime numbers only
// what it can open, so indexes count over `list`.
VisibleDevices visible_over(const std::vector<Accelerator>& accs, const std::vector<int>& list, const EnvLookup& env,
                            const UuidResolver& resolver) {
    std::vector<Accelerator> sub;
    for (int idx : list) {
        sub.push_back(accs.at(static_cast<size_t>(idx)));
        sub.back().index = static_cast<int>(sub.size()) - 1;
    }
    VisibleDevices v = visible_from_env(sub, env, resolver);
    for (int& i : v.indexes) i = list.at(static_cast<size_t>(i));
    return v;
}

}  // namespace

TaskGpus resolve_task_gpus(const std::vector<Accelerator>& accs, const GpuFacts& f, const EnvLookup& env,
                           const UuidResolver& resolver) {
    TaskGpus t;
    const int count = static_cast<int>(accs.size());
    const bool step_named = f.step_gpus && !f.step_gpus->empty();
    const bool variable = any_runtime_variable(env);
    std::vector<int> step;
    if (step_named) step = parse_device_list(*f.step_gpus, count, "SLURM_STEP_GPUS");

    if (f.held) {
        const bool cgroup_chooses = !f.held->empty() && static_cast<int>(f.held->size()) < count;
        t.gpu_step = step_named || variable || cgroup_chooses;
        if (!t.gpu_step) return t;
        VisibleDevices v = visible_over(accs, *f.held, env, resolver);
        t.warnings = v.warnings;
        t.devices = v.restricted ? v.indexes : *f.held;
        t.source = "device files" + (v.restricted ? " + " + v.source : std::string());
        return t;
    }
    t.gpu_step = step_named || variable;
    if (!t.gpu_step) return t;
    if (f.constrained && !*f.constrained && variable) {
        VisibleDevices v = visible_from_env(accs, env, resolver);
        t.warnings = v.warnings;
        if (v.restricted) {
            t.devices = v.indexes;
            t.source = v.source + " (no device files; devices not constrained)";
            return t;
        }
    }
    t.per_task = false;
    t.devices = step;
    t.source = step_named ? "the step's SLURM_STEP_GPUS, shared (no device files)"
                          : "no device files and no step GPU list";
    return t;
}

NodeDevices combine_node_devices(int accelerator_count, const std::vector<Published>& tasks) {
    NodeDevices out;
    const int n = static_cast<int>(tasks.size());
    const Published* first = nullptr;
    bool same = true;
    for (const Published& p : tasks) {
        if (p.state != Published::State::Devices || p.devices.empty()) continue;
        if (!first) first = &p;
        else if (p.devices != first->devices) same = false;
    }
    if (!first) return out;  // no task holds a GPU
    if (same) {
        out.shared = first->devices;
        return out;
    }
    std::vector<bool> held(static_cast<size_t>(accelerator_count), false);
    out.per_task.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        const Published& p = tasks[r];
        if (p.state != Published::State::Devices || p.devices.empty()) {
            out.stand_ins.push_back(r);
            continue;
        }
        out.per_task[r] = p.devices;
        for (int d : p.devices)
            if (d >= 0 && d < accelerator_count) held[d] = true;
    }
    for (int d = 0; d < accelerator_count; ++d)
        if (!held[d]) out.shared.push_back(d);
    if (out.shared.empty())
        for (int d = 0; d < accelerator_count; ++d) out.shared.push_back(d);
    return out;
}

}  // namespace numabind::spank
