// numabind SPANK plugin: slurmstepd and task context. The topology is loaded and the
// node share mapped once per step before the tasks fork; each task finds the GPUs it
// holds, publishes them, waits (bounded) for the other local tasks, plans the node from
// everybody's sets (the same plan in every task) and binds itself in task_init.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include "context.hpp"
#include "step_scope.hpp"
#include "devices.hpp"
#include "log_text.hpp"
#include "numabind/binding.hpp"
#include "numabind/device_files.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/process_allowed.hpp"
#include "numabind/report.hpp"
#include "numabind/topology_cache.hpp"
#include "numabind/visible.hpp"

namespace numabind::spank {

namespace {

std::string join_list(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s.empty() ? "-" : s;
}

std::string node_label(const State& st) { return "node " + st.node_name; }

struct TaskIds {
    int rank = 0;  // local
    uint32_t ntasks = 1;
    uint32_t global = 0;
};

TaskIds task_ids(spank_t sp) {
    TaskIds id;
    if (spank_get_item(sp, S_TASK_ID, &id.rank) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &id.ntasks) != ESPANK_SUCCESS)
        throw Error("cannot read the task's local id or the local task count from Slurm");
    spank_get_item(sp, S_TASK_GLOBAL_ID, &id.global);
    if (id.rank < 0 || static_cast<uint32_t>(id.rank) >= id.ntasks)
        throw Error("local rank " + std::to_string(id.rank) + " outside the " + std::to_string(id.ntasks) +
                    " local task(s)");
    return id;
}

// Fallback for a failure: fail the task (fallback=fail) or run it unbound with
// NUMABIND_MODE=none and no other NUMABIND_* (fallback=warn). Said once per step unless
// `per_task`.
int give_up(spank_t sp, State& st, const std::string& who, const std::string& why, bool per_task = false) {
    const bool say = per_task || st.share.claim(NodeShare::Once::Failure);
    if (st.site.fallback == Fallback::Fail) {
        if (say) log_error("error: " + who + ": " + why + " (fallback=fail)");
        return -1;
    }
    clear_variables(sp, true);
    if (say) task_stderr("warning: " + who + ": " + why + "; running unbound (fallback=warn)");
    return 0;
}

// This task's GPUs, by the rule in devices.hpp.
TaskGpus own_gpus(spank_t sp, const State& st) {
    GpuFacts facts;
    facts.step_gpus = st.step_gpus;
    if (!st.device_files.empty()) {
        std::vector<int> held;
        for (size_t i = 0; i < st.device_files.size(); ++i)
            if (probe_device_file(st.device_files[i]).access == DeviceAccess::Held) held.push_back(static_cast<int>(i));
        facts.held = std::move(held);
    } else {
        facts.constrained = devices_constrained();
    }
    EnvLookup env = [sp](const std::string& name) { return job_getenv(sp, name); };
    UuidResolver nvml;  // dlopen NVML only when a UUID needs resolving
    UuidResolver lazy = [&nvml](const std::string& uuid) {
        if (!nvml) nvml = nvml_uuid_resolver();
        return nvml(uuid);
    };
    return resolve_task_gpus(st.accelerators, facts, env, lazy);
}

std::vector<int> ranks_in(const std::vector<Published>& all, Published::State state) {
    std::vector<int> out;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].state == state) out.push_back(static_cast<int>(r));
    return out;
}

// No accelerator for this step: a site default does nothing (verbose says why, once); an
// explicit --numa-binding says so once and runs unbound (fallback=warn) or fails.
int no_gpu(spank_t sp, State& st, const std::string& why) {
    if (!st.explicit_choice) {
        clear_variables(sp, false);
        if (st.verbose && st.share.claim(NodeShare::Once::NoGpu))
            task_stderr(node_label(st) + ": " + why + "; site default " + to_string(st.mode) + " not applied");
        return 0;
    }
    return give_up(sp, st, node_label(st), "--numa-binding=" + to_string(st.mode) + ": " + why);
}

}  // namespace

int stepd_prepare(spank_t sp) {
    State& st = state();
    st.ours = st.active = st.explicit_choice = st.explicit_none = false;
    st.step_gpus.reset();
    st.skipped_reason.clear();
    st.prepare_error.clear();
    st.model = Topology{};
    st.accelerators.clear();
    st.device_files.clear();
    st.share.destroy();

    const StepScope scope = step_scope(sp, st.site);
    if (!scope.ours) return 0;
    const bool job_level = scope.job_level;
    uint32_t ntasks = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) ntasks = 1;
    st.ours = true;
    st.node_name = node_name();
    if (!st.option_error.empty()) {
        st.share.create(static_cast<int>(ntasks), 0);  // for the once-per-step message
        return 0;
    }

    st.explicit_choice = st.option_given;
    st.mode = st.explicit_choice ? st.choice.mode : st.site.default_mode;
    st.mem = st.explicit_choice && st.choice.mem ? *st.choice.mem : st.site.mem;
    st.verbose = st.site.verbose || (st.explicit_choice && st.choice.verbose);

    if (st.mode == Mode::None) {
        st.explicit_none = st.explicit_choice;
        return 0;
    }
    if (!st.explicit_choice && st.site.respect_user_bind) {
        // srun sends SLURM_CPU_BIND* / SLURM_MEM_BIND* only when the user asked for a
        // binding (task/affinity rewrites them in every task later: look before the fork).
        for (const char* v : {"SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND", "SLURM_MEM_BIND_TYPE", "SLURM_MEM_BIND"}) {
            if (!job_getenv(sp, v)) continue;
            const bool cpu = std::string(v).find("CPU") != std::string::npos;
            st.skipped_reason = std::string(cpu ? "--cpu-bind" : "--mem-bind") + " given; site default " +
                                to_string(st.mode) + " not applied (respect_user_bind=yes)";
            st.share.create(static_cast<int>(ntasks), 0);
            return 0;
        }
    }
    st.step_gpus = job_getenv(sp, job_level ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
    const auto t0 = std::chrono::steady_clock::now();
    try {
        // The node model from the per-boot model cache (/run/numabind, written here as root
        // by the first step that misses it), else from hwloc, which is then not kept: a step
        // that hits the cache never initialises hwloc, and none keeps hwloc's plugins mapped
        // while slurmstepd forks the tasks (each fork copies every mapping).
        const std::string xml =
            st.site.topology.empty() ? std::string() : expand_path(st.site.topology, st.node_name, short_hostname());
        ModelOutcome cache;
        LoadedModel loaded = load_node_model(xml, {}, &cache);
        // A model or topology cache problem (each said once per boot).
        for (const std::string& line : cache_report_lines(cache)) log_info(line);
        std::vector<Accelerator> accs = find_accelerators(loaded.model, st.site.matcher);
        std::vector<std::string> files;
        if (!st.site.device_files.empty() && !accs.empty()) {  // a node without accelerators ignores it
            if (st.site.device_files.size() != accs.size())
                throw Error("plugstack device_files= names " + std::to_string(st.site.device_files.size()) +
                            " device file(s) but the node has " + std::to_string(accs.size()) + " accelerator(s)");
            for (const std::string& f : st.site.device_files)
                files.push_back(expand_path(f, st.node_name, short_hostname()));
        } else {
            // As root, before the fork: /proc/driver/nvidia and sysfs once per step.
            for (const Accelerator& a : accs) files.push_back(device_file_for_pci(a.pci));
            if (std::any_of(files.begin(), files.end(), [](const std::string& f) { return f.empty(); })) files.clear();
        }
        st.accelerators = std::move(accs);
        st.device_files = std::move(files);
        st.model = std::move(loaded.model);
        st.model_source = std::move(loaded.source);
        st.active = true;  // only now: task_init never meets an active step without a topology
    } catch (const std::exception& e) {
        st.model = Topology{};
        st.accelerators.clear();
        st.device_files.clear();
        st.prepare_error = e.what();
    }
    st.prepare_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!st.share.create(static_cast<int>(ntasks), static_cast<int>(st.accelerators.size())) && st.active)
        st.prepare_error = "cannot map the node share for " + std::to_string(ntasks) + " local task(s)";
    if (!st.prepare_error.empty()) st.active = false;
    return 0;
}

namespace {

int task_init(spank_t sp, State& st) {
    if (!st.ours) return 0;
    if (!st.option_error.empty()) {
        // A value that came around srun's checks: reported once, escaped (log_text.hpp).
        return give_up(sp, st, node_label(st), st.option_error);
    }
    if (!st.prepare_error.empty()) return give_up(sp, st, node_label(st), st.prepare_error);
    if (!st.active) {
        clear_variables(sp, st.explicit_none);
        if (st.verbose && !st.skipped_reason.empty() && st.share.claim(NodeShare::Once::Skipped))
            task_stderr(node_label(st) + ": " + st.skipped_reason);
        return 0;
    }
    if (st.model.cores.empty()) return give_up(sp, st, node_label(st), "internal error: no topology for an active step");
    if (st.accelerators.empty())
        return no_gpu(sp, st, "no accelerator on this node (plugstack devices= names them, e.g. devices=10de or "
                              "devices=class=0x0302)");

    const TaskIds id = task_ids(sp);
    const std::string who = node_label(st) + " task " + std::to_string(id.global) + " (local rank " +
                            std::to_string(id.rank) + ")";
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto us_since = [](Clock::time_point a, Clock::time_point b) {
        return std::to_string(static_cast<long>(std::chrono::duration<double, std::micro>(b - a).count()));
    };

    // 1. This task's GPUs, published at once so that the others wait as little as possible.
    TaskGpus mine;
    std::string own_error;
    try {
        mine = own_gpus(sp, st);
    } catch (const std::exception& e) {
        own_error = e.what();
    }
    Published p;
    if (own_error.empty()) {
        p.state = Published::State::Devices;
        p.per_task = mine.per_task;
        if (mine.gpu_step) p.devices = mine.devices;
    }
    // The step's cpuset as this task sees it: the others' sets are not needed for it, so it is
    // read before waiting, off the path that the last-arriving task sets for everyone.
    AllowedSets allowed;
    std::string allowed_error;
    try {
        allowed = allowed_in(st.model, kernel_allowed(), st.model_source);  // the step's cpuset, not Slurm's affinity
    } catch (const std::exception& e) {
        allowed_error = e.what();
    }
    const auto t_own = Clock::now();
    const bool in_time = st.share.publish(id.rank, p);
    std::vector<Published> all = st.share.wait_all(kShareTimeoutMs);
    const auto t_shared = Clock::now();
    if (!own_error.empty()) return give_up(sp, st, who, own_error, true);

    // 2. The node's device sets, the same in every task.
    if (std::none_of(all.begin(), all.end(), [](const Published& q) { return !q.devices.empty(); }))
        return no_gpu(sp, st, "no GPU allocated to this step on this node");
    const std::vector<int> late = ranks_in(all, Published::State::Late);
    if (!late.empty() && st.share.claim(NodeShare::Once::Missing))
        task_stderr("warning: " + node_label(st) + ": local task(s) " + join_list(late) + " did not report their GPUs within " +
                    std::to_string(kShareTimeoutMs / 1000) + " s; planned on GPUs no task holds");
    const NodeDevices nd = combine_node_devices(static_cast<int>(st.accelerators.size()), all);

    // 3. Plan the node, bind this task.
    std::string step_failure = allowed_error;
    TaskPlan task;
    if (step_failure.empty()) {
        try {
            PlanRequest req;
            req.mode = st.mode;
            req.mem = st.mem;
            req.ntasks = static_cast<int>(id.ntasks);
            req.visible_devices = nd.shared;
            req.per_task_devices = nd.per_task;
            req.allowed_cpus = std::move(allowed.cpus);
            req.allowed_mems = std::move(allowed.mems);
            NodePlan plan = plan_node(st.model, st.accelerators, req);
            task = plan.tasks.at(static_cast<size_t>(id.rank));
            for (const std::string& w : plan.warnings) task.warnings.push_back(w);
            // The device pointer must outlive `plan`: point it into our own accelerator list.
            if (task.device) task.device = &st.accelerators.at(static_cast<size_t>(task.device->index));
        } catch (const std::exception& e) {
            step_failure = e.what();  // the same in every task: said once
        }
    }
    if (!step_failure.empty()) return give_up(sp, st, node_label(st), step_failure);
    const auto t_planned = Clock::now();
    // Restores the previous placement on every way out until keep(), so that a task is
    // either bound as NUMABIND_* says or exactly as it was.
    ScopedBinding binding;
    ApplyResult applied = binding.apply(task);
    if (!applied.ok && !applied.restored) {
        // Neither bound as planned nor as before: say what the task really has.
        const int rc = give_up(sp, st, who,
                               applied.error + "; the previous placement could not be restored (CPUs now " +
                                   applied.cpus.to_string() + ", memory " + applied.mem_policy + ")",
                               true);
        spank_setenv(sp, "NUMABIND_CPUS", applied.cpus.to_string().c_str(), 1);
        spank_setenv(sp, "NUMABIND_MEMS", applied.mem_nodes.to_string().c_str(), 1);
        return rc;
    }
    if (!applied.ok) return give_up(sp, st, who, applied.error, true);
    for (std::string& w : applied.warnings) task.warnings.push_back(std::move(w));
    for (const std::string& w : mine.warnings) task.warnings.push_back(w);
    if (!in_time) task.warnings.push_back("this task reported its GPUs too late; bound as the others planned it");
    clear_variables(sp, false);
    export_binding_env(st.mode, task, [sp](const char* k, const std::string& v) { spank_setenv(sp, k, v.c_str(), 1); });

    if (st.verbose) {
        std::string line = who + ": mode " + to_string(st.mode) + ", device ";
        if (task.device) {
            line += std::to_string(task.device->index) + " (" + task.device->pci + ") on NUMA " + join(task.device->home_nodes);
        } else {
            line += "-";
        }
        line += ", cpus " + task.cpus.to_string() + ", mems " + (task.mems.empty() ? "-" : join(task.mems)) + " (" +
                to_string(task.mem) + "), devices " + join_list(task.devices) + " (holds " + join_list(mine.devices) +
                ": " + mine.source + ")";
        for (const std::string& w : task.warnings) line += "; warning: " + w;
        // Where a task's time goes (the wait is for the other local tasks' device sets).
        const auto t_end = Clock::now();
        line += "; took " + us_since(t0, t_end) + " us (gpus and cpuset " + us_since(t0, t_own) + ", wait " +
                us_since(t_own, t_shared) + ", plan " + us_since(t_shared, t_planned) + ", bind " +
                us_since(t_planned, t_end) + "; step setup " + std::to_string(static_cast<long>(st.prepare_us)) +
                " us)";
        task_stderr(line);
    }
    binding.keep();
    return 0;
}

}  // namespace

int stepd_task_init(spank_t sp) {
    State& st = state();
    try {
        return task_init(sp, st);
    } catch (const std::exception& e) {
        // Whatever failed (Slurm items, allocation, a parser): fallback= decides, never a bare -1.
        try {
            return give_up(sp, st, node_label(st), e.what(), true);
        } catch (...) {
        }
    } catch (...) {
    }
    return st.site.fallback == Fallback::Fail ? -1 : 0;
}

void stepd_exit() {
    State& st = state();
    st.active = st.ours = false;
    st.share.destroy();
    st.accelerators.clear();
    st.device_files.clear();
    st.model = Topology{};
}

}  // namespace numabind::spank
