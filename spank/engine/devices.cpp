// numabind SPANK plugin: the GPUs a task holds (see devices.hpp for the rule).
#include "devices.hpp"

#include <algorithm>

#include "numabind/error.hpp"

namespace numabind::spank {

namespace {

// Said once per step, verbose or not: the one place the plugin binds by a guess.
std::string guessed_identity_warning(size_t unknown, const std::optional<bool>& constrained) {
    return "which GPU each task holds cannot be told on this node (no device file known for " + std::to_string(unknown) +
           " accelerator(s)" +
           (constrained ? std::string(", and Slurm constrains devices") : std::string(", and Slurm's configuration is unreadable")) +
           "): the tasks share the step's GPUs by the ownership rule, which may not be the GPU each one uses; give "
           "the device files in plugstack device_files= (numabind topo lists them)";
}

bool any_runtime_variable(const EnvLookup& env) {
    for (const char* v : kRuntimeVariables)
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

namespace {

std::vector<int> sorted_union(std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    return a;
}

// The open() rule over `candidates`: the runtime variable, if any, indexes them.
void held_rule(TaskGpus& t, const std::vector<Accelerator>& accs, const std::vector<int>& candidates,
               const EnvLookup& env, const UuidResolver& resolver, const std::string& source) {
    VisibleDevices v = visible_over(accs, candidates, env, resolver);
    t.warnings = v.warnings;
    t.devices = v.restricted ? v.indexes : candidates;
    t.source = source + (v.restricted ? " + " + v.source : std::string());
}

// How many GPUs the runtime variable names (nullopt: none set).
std::optional<size_t> variable_length(const std::vector<Accelerator>& accs, const EnvLookup& env,
                                      const UuidResolver& resolver) {
    std::vector<int> all(accs.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    try {
        VisibleDevices v = visible_over(accs, all, env, resolver);
        if (!v.restricted) return std::nullopt;
        return v.indexes.size();
    } catch (const UsageError&) {
        return std::nullopt;  // indexes beyond the node's count: not a local list we can use
    }
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
    std::vector<int> unknown = f.unknown;
    if (!f.held) {
        unknown.clear();
        for (int i = 0; i < count; ++i) unknown.push_back(i);
    }
    const std::vector<int> known_held = f.held.value_or(std::vector<int>{});
    const bool cgroup_chooses = unknown.empty() && !known_held.empty() && static_cast<int>(known_held.size()) < count;
    t.gpu_step = step_named || variable || cgroup_chooses;
    if (!t.gpu_step) return t;

    auto mark_shared_view = [&] {
        // A task that sees all the step's GPUs holds nothing of its own: it shares them.
        if (step_named && t.devices.size() >= step.size()) t.per_task = false;
    };
    if (unknown.empty()) {
        held_rule(t, accs, known_held, env, resolver, "device files");
        mark_shared_view();
        return t;
    }
    if (variable && f.devices_constrained == false) {
        // Slurm says it does not constrain devices: its variable is the gres index.
        std::vector<int> all(accs.size());
        for (int i = 0; i < count; ++i) all[static_cast<size_t>(i)] = i;
        held_rule(t, accs, all, env, resolver, "Slurm's gres index (devices not constrained by Slurm)");
        mark_shared_view();
        return t;
    }
    if (step_named && variable && known_held.size() > step.size()) {
        // Opening more than the step's GPUs proves the devices are not constrained: the
        // variable is Slurm's gres index over all accelerators (PCI order when gres.conf is).
        std::vector<int> all(accs.size());
        for (int i = 0; i < count; ++i) all[static_cast<size_t>(i)] = i;
        held_rule(t, accs, all, env, resolver, "devices not constrained (the task opens more than the step's GPUs)");
        t.source += " over all accelerators";
        mark_shared_view();
        return t;
    }
    if (unknown.size() == 1) {
        const std::optional<size_t> k = variable_length(accs, env, resolver);
        const std::vector<int> with_unknown = sorted_union(known_held, unknown);
        // A variable that does not index the list (gres indexes of an unconstrained node)
        // tells nothing here: the step's list is shared below.
        try {
            if (known_held.empty() || (k && *k == with_unknown.size())) {
                held_rule(t, accs, with_unknown, env, resolver, "device files (one unknown, counted as held)");
                mark_shared_view();
                return t;
            }
            if (k && *k == known_held.size()) {
                held_rule(t, accs, known_held, env, resolver, "device files (one unknown, not among the task's)");
                mark_shared_view();
                return t;
            }
        } catch (const UsageError&) {
            t = TaskGpus{};
            t.gpu_step = true;
        }
    }
    t.per_task = false;
    t.devices = step;
    if (step_named) {
        const std::optional<size_t> k = variable_length(accs, env, resolver);
        if (k && *k < step.size())
            t.warnings.push_back(guessed_identity_warning(unknown.size(), f.devices_constrained));
    }
    t.source = step_named ? "the step's SLURM_STEP_GPUS, shared (" + std::to_string(unknown.size()) +
                                " accelerator device file(s) unknown)"
                          : "no device files and no step GPU list";
    return t;
}

NodeDevices combine_node_devices(int accelerator_count, const std::vector<Published>& tasks) {
    NodeDevices out;
    const int n = static_cast<int>(tasks.size());
    auto has_list = [](const Published& p) { return p.state == Published::State::Devices && !p.devices.empty(); };
    const Published* first = nullptr;
    bool all_step_lists = true, all_in_time = true, same = true;
    for (const Published& p : tasks) {
        if (p.state != Published::State::Devices) all_in_time = false;
        if (!has_list(p)) continue;
        if (p.per_task) all_step_lists = false;
        if (!first) first = &p;
        else if (p.devices != first->devices) same = false;
    }
    if (!first) return out;  // no task holds a GPU
    // One task's own list is the step's only when every task has been heard from.
    if (all_step_lists || (same && all_in_time)) {
        out.shared = first->devices;
        return out;
    }
    std::vector<bool> held(static_cast<size_t>(accelerator_count), false);
    std::vector<bool> in_step(static_cast<size_t>(accelerator_count), false);  // a step list published
    bool step_known = false;
    out.per_task.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        const Published& p = tasks[static_cast<size_t>(r)];
        const bool own = has_list(p) && p.per_task;
        if (has_list(p))
            for (int d : p.devices)
                if (d >= 0 && d < accelerator_count) (own ? held : in_step)[static_cast<size_t>(d)] = true;
        step_known = step_known || (has_list(p) && !p.per_task);
        if (!own) {
            out.stand_ins.push_back(r);
            continue;
        }
        out.per_task[static_cast<size_t>(r)] = p.devices;
    }
    // Stand-ins stay within the step's GPUs where a task published them: never a GPU of
    // another job.
    auto candidate = [&](int d) { return !step_known || in_step[static_cast<size_t>(d)]; };
    for (int d = 0; d < accelerator_count; ++d)
        if (candidate(d) && !held[static_cast<size_t>(d)]) out.shared.push_back(d);
    if (out.shared.empty())
        for (int d = 0; d < accelerator_count; ++d)
            if (candidate(d)) out.shared.push_back(d);
    return out;
}

}  // namespace numabind::spank
