// numabind SPANK plugin: slurmstepd and task context. The topology is loaded once per
// step before the tasks fork; each task plans the node and binds itself in task_init.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "context.hpp"
#include "numabind/binding.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/report.hpp"
#include "numabind/topology_cache.hpp"
#include "numabind/visible.hpp"

namespace numabind::spank {

namespace {

// The job's environment as the task (or the step) will see it.
std::optional<std::string> job_getenv(spank_t sp, const std::string& name) {
    std::vector<char> buf(512);
    for (int tries = 0; tries < 6; ++tries) {
        spank_err_t rc = spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size()));
        if (rc == ESPANK_SUCCESS) return std::string(buf.data());
        if (rc != ESPANK_NOSPACE) return std::nullopt;
        buf.resize(buf.size() * 4);
    }
    return std::nullopt;
}

std::string short_hostname() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "localhost";
    std::string h(host);
    return h.substr(0, h.find('.'));
}

std::string task_label(const State& st, uint32_t global, int rank) {
    return "node " + st.node_name + " task " + std::to_string(global) + " (local rank " + std::to_string(rank) + ")";
}

// Everything that may fail; returns the bound task's plan.
TaskPlan plan_and_bind(spank_t sp, State& st, int rank, int ntasks, bool batch) {
    if (!st.prepare_error.empty()) throw Error(st.prepare_error);
    const HwlocTopology& topo = *st.topo;
    const std::vector<Accelerator>& accs = st.accelerators;
    const int count = static_cast<int>(accs.size());

    PlanRequest req;
    req.mode = st.mode;
    req.mem = st.mem;
    req.ntasks = ntasks;
    if (rank < 0 || rank >= ntasks)
        throw Error("local rank " + std::to_string(rank) + " outside the " + std::to_string(ntasks) + " local task(s)");

    // The step's GPUs on this node (Slurm's gres index = physical accelerator index),
    // and this task's own list from its runtime variable.
    const char* step_var = batch ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
    std::optional<std::string> step_value = st.step_gpus;
    if (!step_value) step_value = job_getenv(sp, step_var);
    std::vector<int> step_gpus;
    if (step_value && !step_value->empty()) step_gpus = parse_device_list(*step_value, count, step_var);

    EnvLookup env = [sp](const std::string& name) { return job_getenv(sp, name); };
    UuidResolver nvml;  // dlopen NVML only when a UUID needs resolving
    UuidResolver lazy = [&nvml](const std::string& uuid) {
        if (!nvml) nvml = nvml_uuid_resolver();
        return nvml(uuid);
    };
    VisibleDevices own = visible_from_env(accs, env, lazy);
    if (own.restricted && !step_gpus.empty()) {
        // With ConstrainDevices Slurm numbers the step's GPUs from 0: map such indexes.
        const bool global = std::all_of(own.indexes.begin(), own.indexes.end(), [&](int d) {
            return std::find(step_gpus.begin(), step_gpus.end(), d) != step_gpus.end();
        });
        const bool local = std::all_of(own.indexes.begin(), own.indexes.end(),
                                       [&](int d) { return d < static_cast<int>(step_gpus.size()); });
        if (!global && local)
            for (int& d : own.indexes) d = step_gpus[d];
    }
    if (own.restricted && own.indexes.empty()) throw Error(own.source + " makes no GPU visible to this task");
    if (!step_gpus.empty()) {
        req.visible_devices = step_gpus;
    } else if (own.restricted) {
        req.visible_devices = own.indexes;
    }
    if (own.restricted) {
        req.per_task_devices.resize(ntasks);
        req.per_task_devices[rank] = own.indexes;
    }
    // The step's cpuset and nodeset (one read), not Slurm's per-task affinity.
    HwlocTopology::Allowed allowed = topo.allowed();
    req.allowed_cpus = std::move(allowed.cpus);
    req.allowed_mems = std::move(allowed.mems);

    NodePlan plan = plan_node(topo.model(), accs, req);
    TaskPlan task = plan.tasks.at(rank);
    ApplyResult applied = apply_binding(task);
    if (!applied.ok) throw Error(applied.error);
    for (std::string& w : applied.warnings) task.warnings.push_back(std::move(w));
    for (const std::string& w : plan.warnings) task.warnings.push_back(w);
    // The device pointer must outlive `plan`: point it into our own accelerator list.
    if (task.device) task.device = &accs.at(static_cast<size_t>(task.device->index));
    return task;
}

}  // namespace

int stepd_prepare(spank_t sp) {
    State& st = state();
    st.active = false;
    st.explicit_none = false;
    st.step_gpus.reset();
    st.skipped_reason.clear();
    st.prepare_error.clear();

    uint32_t stepid = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS) return 0;
    if (stepid == kExternStep) return 0;
    if (stepid == kBatchStep && !st.site.batch_step) return 0;
    if (!st.option_error.empty()) return 0;  // reported by every task

    const bool explicit_choice = st.option_given;
    st.mode = explicit_choice ? st.choice.mode : st.site.default_mode;
    st.mem = explicit_choice && st.choice.mem ? *st.choice.mem : st.site.mem;
    st.verbose = st.site.verbose || (explicit_choice && st.choice.verbose);
    const char* node = std::getenv("SLURMD_NODENAME");  // slurmd's own environment, not the user's
    st.node_name = node && *node ? node : short_hostname();

    if (st.mode == Mode::None) {
        st.explicit_none = explicit_choice;
        return 0;
    }
    if (!explicit_choice && st.site.respect_cpu_bind) {
        // srun sends SLURM_CPU_BIND* only when the user asked for a binding (task/affinity
        // rewrites them in every task later, so look before the tasks fork).
        if (job_getenv(sp, "SLURM_CPU_BIND_TYPE") || job_getenv(sp, "SLURM_CPU_BIND")) {
            st.skipped_reason = "--cpu-bind given; site default " + to_string(st.mode) +
                                " not applied (respect_cpu_bind=yes)";
            return 0;
        }
    }
    st.active = true;
    st.step_gpus = job_getenv(sp, stepid == kBatchStep ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
    const auto t0 = std::chrono::steady_clock::now();
    try {
        if (!st.site.topology.empty()) {
            st.topo = std::make_unique<HwlocTopology>(
                LoadOptions{expand_path(st.site.topology, st.node_name, short_hostname()), true});
        } else {
            // This machine: the per-boot cache (/run/numabind, written here as root on the
            // first step after boot) instead of a live discovery on every step.
            st.topo = load_this_machine();
        }
        st.accelerators = find_accelerators(st.topo->model(), st.site.matcher);
    } catch (const std::exception& e) {
        st.topo.reset();
        st.prepare_error = e.what();
    }
    st.prepare_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return 0;
}

int stepd_task_init(spank_t sp) {
    State& st = state();
    if (!st.option_error.empty()) {
        log_error("error: " + st.option_error);
        return -1;
    }
    if (!st.active) {
        if (st.explicit_none) spank_setenv(sp, "NUMABIND_MODE", "none", 1);
        if (st.verbose && !st.skipped_reason.empty()) task_stderr("node " + st.node_name + ": " + st.skipped_reason);
        return 0;
    }
    int rank = 0;
    uint32_t ntasks = 1, global = 0, stepid = 0;
    spank_get_item(sp, S_TASK_ID, &rank);
    spank_get_item(sp, S_TASK_GLOBAL_ID, &global);
    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks);
    spank_get_item(sp, S_JOB_STEPID, &stepid);
    const std::string who = task_label(st, global, rank);

    const auto t0 = std::chrono::steady_clock::now();
    std::string failure;
    try {
        TaskPlan task = plan_and_bind(sp, st, rank, static_cast<int>(ntasks), stepid == kBatchStep);
        export_binding_env(st.mode, task, [sp](const char* k, const std::string& v) {
            spank_setenv(sp, k, v.c_str(), 1);
        });
        if (st.verbose) {
            std::string line = who + ": mode " + to_string(st.mode) + ", device ";
            if (task.device) {
                line += std::to_string(task.device->index) + " (" + task.device->pci + ") on NUMA " +
                        join(task.device->home_nodes);
            } else {
                line += "-";
            }
            line += ", cpus " + task.cpus.to_string() + ", mems " + (task.mems.empty() ? "-" : join(task.mems)) +
                    " (" + to_string(task.mem) + ")";
            for (const std::string& w : task.warnings) line += "; warning: " + w;
            const double task_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            line += "; took " + std::to_string(static_cast<long>(task_us)) + " us (step setup " +
                    std::to_string(static_cast<long>(st.prepare_us)) + " us)";
            task_stderr(line);
        }
        return 0;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (st.site.fallback == Fallback::Fail) {
        log_error("error: " + who + ": " + failure + " (fallback=fail)");
        return -1;
    }
    // Nothing to undo: apply_binding puts the affinity and memory policy back when it fails.
    spank_setenv(sp, "NUMABIND_MODE", "none", 1);
    task_stderr("warning: " + who + ": " + failure + "; running unbound (fallback=warn)");
    return 0;
}

void stepd_exit() {
    State& st = state();
    st.accelerators.clear();
    st.topo.reset();
}

}  // namespace numabind::spank
