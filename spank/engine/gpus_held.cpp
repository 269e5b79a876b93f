#include "gpus_held.hpp"

#include "shared/step_scope.hpp"
#include "sys/binding.hpp"
#include "sys/device_files.hpp"
#include "sys/nvml.hpp"

namespace numabind::spank {

TaskGpus gpus_held(spank_t sp, const State& st) {
    GpuFacts facts;
    facts.step_gpus = st.step_gpus;
    facts.devices_constrained = st.devices_constrained;
    std::vector<int> held, unknown;
    for (size_t i = 0; i < st.device_files.size(); ++i) {
        const int idx = static_cast<int>(i);
        if (st.device_files[i].empty()) {
            unknown.push_back(idx);
            continue;
        }
        switch (probe_device_file(st.device_files[i]).access) {
            case DeviceAccess::Held: held.push_back(idx); break;
            case DeviceAccess::Denied: break;
            case DeviceAccess::Missing:  // gone since slurmstepd looked: not a denial
            case DeviceAccess::Unknown: unknown.push_back(idx); break;
        }
    }
    if (static_cast<int>(unknown.size()) < static_cast<int>(st.accelerators.size())) {
        facts.held = std::move(held);
        facts.unknown = std::move(unknown);
    }
    EnvLookup env = [sp](const std::string& name) { return job_getenv(sp, name); };
    UuidResolver nvml;  // dlopen NVML only when a UUID needs resolving
    UuidResolver lazy = [&nvml](const std::string& uuid) {
        if (!nvml) nvml = nvml_uuid_resolver();
        return nvml(uuid);
    };
    TaskGpus t = resolve_task_gpus(st.accelerators, facts, env, lazy);
    t.opened = facts.held;
    return t;
}

AllowedSets cpus_allowed(const State& st, std::string& note) {
    AllowedSets kernel = kernel_allowed();
    if (!st.allocated.empty()) kernel = within_allocation(kernel, st.allocated, st.model.all_pus(), note);
    return allowed_in(st.model, kernel, st.model_source);
}

Published published_of(const TaskGpus& gpus) {
    Published p;
    p.state = Published::State::Devices;
    p.per_task = gpus.per_task;
    if (gpus.gpu_step) p.devices = gpus.devices;
    return p;
}

}  // namespace numabind::spank
