// numabind SPANK plugin: slurmstepd and task context of a step the front decided binds
// (step_policy.hpp). The topology is loaded and the node share mapped once per step before
// the tasks fork; each task finds the GPUs it holds, publishes them, waits (bounded) for the
// other local tasks, plans the node from everybody's sets (the same plan in every task) and
// binds itself in task_init.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include "context.hpp"
#include "core/binding_env.hpp"
#include "core/omp.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "devices.hpp"
#include "slurm_facts.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"
#include "policy/log_text.hpp"
#include "shared/step_scope.hpp"
#include "sys/binding.hpp"
#include "sys/device_files.hpp"
#include "sys/nvml.hpp"

namespace numabind::spank {

namespace {

using Clock = std::chrono::steady_clock;

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
// NUMABIND_MODE=none and no other NUMABIND_* (fallback=warn). Said once per step, cause
// first, unless `per_task`.
int give_up(spank_t sp, State& st, const std::string& who, const std::string& why, bool per_task = false) {
    const bool say = per_task || st.share.claim(NodeShare::Once::Failure);
    if (st.site.fallback == Fallback::Fail) {
        if (say) log_error(who + ": " + why + " (fallback=fail)");
        else if (!per_task) usleep(kCauseFirstUs);  // Slurm's own failure lines after the cause
        return -1;
    }
    clear_variables(sp, true);
    if (say) task_stderr("warning: " + who + ": " + why + "; running unbound (fallback=warn)");
    return 0;
}

// This task's GPUs, by the rule in devices.hpp: each known device file probed with open().
TaskGpus own_gpus(spank_t sp, const State& st) {
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

std::vector<int> ranks_in(const std::vector<Published>& all, Published::State state) {
    std::vector<int> out;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].state == state) out.push_back(static_cast<int>(r));
    return out;
}

// No accelerator for this step: a site default does nothing (verbose says why, once); an
// explicit --numa-binding says so once and runs unbound (fallback=warn) or fails.
int no_gpu(spank_t sp, State& st, const std::string& why) {
    if (!st.decision.explicit_choice) {
        clear_variables(sp, false);
        if (st.decision.verbose && st.share.claim(NodeShare::Once::NoGpu))
            task_stderr(node_label(st) + ": " + why + "; site default " + to_string(st.decision.mode) + " not applied");
        return 0;
    }
    return give_up(sp, st, node_label(st), "--numa-binding=" + to_string(st.decision.mode) + ": " + why);
}

NodePlan plan_from(const State& st, const std::vector<Published>& all, const AllowedSets& allowed, int ntasks) {
    const NodeDevices nd = combine_node_devices(static_cast<int>(st.accelerators.size()), all);
    PlanRequest req;
    req.mode = st.decision.mode;
    req.mem = st.decision.mem;
    req.ntasks = ntasks;
    req.visible_devices = nd.shared;
    req.per_task_devices = nd.per_task;
    req.allowed_cpus = allowed.cpus;
    req.allowed_mems = allowed.mems;
    req.min_cpus = st.min_cpus > 1 ? st.min_cpus : 0;
    req.one_thread_per_core = st.decision.one_thread_per_core;
    // smt=1 without the hint: Slurm's -c counted threads; the minimum is that many cores.
    if (req.one_thread_per_core && !st.decision.min_cpus_in_cores)
        req.min_cpus = min_cpus_one_thread(st.model, allowed.cpus, req.min_cpus);
    return plan_node(st.model, st.accelerators, req);
}

std::vector<std::string> plan_warnings(const NodePlan& plan) {
    std::vector<std::string> out = plan.warnings;
    for (const TaskPlan& t : plan.tasks) out.insert(out.end(), t.warnings.begin(), t.warnings.end());
    return out;
}

// The tasks that published in time, planned without the late ones, in local rank order
// (TaskPlan::local_rank is each one's rank in `all`): a guess about a late task's GPUs (a
// stand-in on another NUMA node) must never make the on-time tasks' plan infeasible.
std::vector<TaskPlan> plan_on_time(const State& st, const std::vector<Published>& all, const AllowedSets& allowed) {
    std::vector<Published> on_time;
    std::vector<int> ranks;
    for (size_t q = 0; q < all.size(); ++q) {
        if (all[q].state == Published::State::Late) continue;
        on_time.push_back(all[q]);
        ranks.push_back(static_cast<int>(q));
    }
    if (on_time.empty()) return {};
    std::vector<TaskPlan> out = plan_from(st, on_time, allowed, static_cast<int>(on_time.size())).tasks;
    for (size_t i = 0; i < out.size(); ++i) out[i].local_rank = ranks[i];
    return out;
}

// The node planned with every task, late ones on stand-ins; where that is infeasible, the
// on-time tasks alone (a late task then has no entry).
std::vector<TaskPlan> plan_with_late(const State& st, const std::vector<Published>& all, const AllowedSets& allowed,
                                     std::vector<std::string>& warnings) {
    try {
        NodePlan plan = plan_from(st, all, allowed, static_cast<int>(all.size()));
        warnings = plan_warnings(plan);
        return plan.tasks;
    } catch (const Error&) {
        if (ranks_in(all, Published::State::Late).empty()) throw;
        return plan_on_time(st, all, allowed);
    }
}

const TaskPlan* entry_of(const std::vector<TaskPlan>& tasks, int rank) {
    for (const TaskPlan& t : tasks)
        if (t.local_rank == rank) return &t;
    return nullptr;
}

// A task that missed the exchange: the others planned it on GPUs nobody holds and bound
// themselves. It binds to the GPUs it can open, on CPUs none of them uses where the mode
// is exclusive; with other late tasks, only within its own share of their plan.
TaskPlan late_task_plan(const State& st, std::vector<Published> all, const Published& mine, const AllowedSets& allowed,
                        int rank, std::vector<std::string>& notes) {
    std::vector<std::string> unused;
    const std::vector<TaskPlan> others_plan = plan_with_late(st, all, allowed, unused);
    const TaskPlan* stand_in_entry = entry_of(others_plan, rank);
    if (mine.state != Published::State::Devices || mine.devices.empty()) {
        if (!stand_in_entry) throw Error("this task reported no GPU in time and the others' plan has no room for it");
        return *stand_in_entry;
    }
    all[static_cast<size_t>(rank)] = mine;
    TaskPlan own;
    try {
        own = plan_from(st, all, allowed, static_cast<int>(all.size())).tasks.at(static_cast<size_t>(rank));
    } catch (const Error&) {
        own = plan_from(st, {mine}, allowed, 1).tasks.at(0);  // its own GPUs, alone
        own.local_rank = rank;
    }
    const TaskPlan stand_in = stand_in_entry ? *stand_in_entry : own;
    const bool exclusive = st.decision.mode == Mode::Exclusive || st.decision.mode == Mode::CoreComplex;
    if (exclusive) {
        IdSet used;
        for (const TaskPlan& q : others_plan)
            if (q.local_rank != rank) used |= q.cpus;
        own.cpus = own.cpus - used;
        if (!ranks_in(all, Published::State::Late).empty()) own.cpus &= stand_in.cpus | (allowed.cpus - used);
        if (own.cpus.empty()) {
            notes.push_back("this task reported its GPUs too late and every CPU near them is another task's; bound as "
                            "the others planned it");
            return stand_in;
        }
    }
    notes.push_back("this task reported its GPUs too late; bound to its own GPU(s) " + join_ints(own.devices, ",", "-") +
                    (exclusive ? " on CPUs no other task uses" : ""));
    own.device = nullptr;  // points into own_plan; set again by the caller
    return own;
}

// Step-level warnings: each distinct text once per step, verbose or not.
void say_once(State& st, const std::vector<std::string>& lines) {
    for (const std::string& w : lines)
        if (st.said.first(w)) task_stderr("warning: " + node_label(st) + ": " + w);
}


// Whether this task's CPUs depend on the other local tasks' GPUs. Exclusive modes keep
// sets disjoint, so they do; in node and socket modes a task that holds GPUs of its own, or
// sees the step's whole list (shared by the ownership rule, the same in every task), plans
// alone: no task waits for the last one to fork (with 8 tasks on 2 CPUs that wait made every
// program start after the last fork instead of in turn).
bool needs_exchange(const State& st, const Published& mine) {
    if (st.decision.mode == Mode::Exclusive || st.decision.mode == Mode::CoreComplex) return true;
    if (mine.state != Published::State::Devices || mine.devices.empty()) return true;  // planned on GPUs nobody holds
    return !st.step_gpus || st.step_gpus->empty();  // identical own lists are shared only when all are heard from
}

// node / socket without the exchange: this task's share of the step's list, or its own GPUs.
TaskPlan plan_alone(const State& st, const Published& mine, const AllowedSets& allowed, int ntasks, int rank,
                    std::vector<std::string>& warnings) {
    if (!mine.per_task) {
        NodePlan plan = plan_from(st, std::vector<Published>(static_cast<size_t>(ntasks), mine), allowed, ntasks);
        warnings = plan_warnings(plan);
        return plan.tasks.at(static_cast<size_t>(rank));
    }
    NodePlan plan = plan_from(st, {mine}, allowed, 1);
    warnings = plan_warnings(plan);
    TaskPlan t = plan.tasks.at(0);
    t.local_rank = rank;
    return t;
}

// device_files= entry `i`, checked against accelerator `i`; "" when the file does not exist
// (that GPU is then found without it, as a step note says).
std::string listed_device_file(State& st, size_t i, const Accelerator& acc, int& unverified,
                               std::vector<std::string>& missing) {
    std::string f = expand_path(st.site.device_files[i], st.node_name, short_hostname());
    const DeviceFileCheck check = check_device_file(f, acc.pci);
    const std::string entry = "device_files= entry " + std::to_string(i + 1) + " (" + f + ", for accelerator " +
                              std::to_string(i) + " at " + acc.pci + ")";
    switch (check.verdict) {
        case DeviceFileVerdict::Mismatch:
            // Binding by a wrongly ordered list puts every task on another GPU's node.
            throw Error(entry + " is not that accelerator's device file: " + check.detail +
                        "; list the files in accelerator (PCI) order (numabind topo lists them)");
        case DeviceFileVerdict::Missing:
            missing.push_back(entry);
            f.clear();
            break;
        case DeviceFileVerdict::Unverifiable: ++unverified; break;
        case DeviceFileVerdict::Matches: break;
    }
    return f;
}

// Each accelerator's device file (own_gpus probes them in the tasks): the site's list, else
// the driver's. As root, before the fork: /proc/driver/nvidia and sysfs once per step.
std::vector<std::string> device_files_for(State& st, const std::vector<Accelerator>& accs) {
    std::vector<std::string> files;
    if (st.site.device_files.empty() || accs.empty()) {  // a node without accelerators ignores device_files=
        for (const Accelerator& a : accs) files.push_back(device_file_for_pci(a.pci));
        return files;
    }
    if (st.site.device_files.size() != accs.size())
        throw Error("plugstack device_files= names " + std::to_string(st.site.device_files.size()) +
                    " device file(s) but the node has " + std::to_string(accs.size()) + " accelerator(s)");
    int unverified = 0;
    std::vector<std::string> missing;  // in entry order: one line, the same in every step
    for (size_t i = 0; i < accs.size(); ++i) files.push_back(listed_device_file(st, i, accs[i], unverified, missing));
    if (!missing.empty()) {
        std::string line;
        for (const std::string& m : missing) line += (line.empty() ? "" : "; ") + m;
        st.notes.push_back(line + (missing.size() == 1 ? " does not exist; that GPU is" : ": none exists; those GPUs are") +
                           " found without it");
    }
    // A list that cannot be checked binds by its order alone: said in every step, not only with verbose.
    if (unverified)
        st.notes.push_back(std::to_string(unverified) + " device_files= entr" + (unverified == 1 ? "y" : "ies") +
                           " cannot be checked against the accelerators (no driver information or sysfs "
                           "entry for their device numbers); trusted as listed");
    return files;
}

// The node model from the per-boot model cache (/run/numabind, written here as root by the
// first step that misses it), else from hwloc, which is then not kept: a step that hits the
// cache never initialises hwloc, and none keeps hwloc's plugins mapped while slurmstepd
// forks the tasks (each fork copies every mapping). A throw leaves `st` as it was, but for
// its notes.
void load_step_model(State& st) {
    const std::string xml =
        st.site.topology.empty() ? std::string() : expand_path(st.site.topology, st.node_name, short_hostname());
    ModelOutcome cache;
    LoadedModel loaded = load_node_model(xml, {}, &cache);
    // A model or topology cache problem (each said once per boot).
    for (const std::string& line : cache_report_lines(cache)) log_info(line);
    std::vector<Accelerator> accs = find_accelerators(loaded.model, st.site.matcher);
    std::vector<std::string> files = device_files_for(st, accs);
    st.accelerators = std::move(accs);
    st.device_files = std::move(files);
    st.model = std::move(loaded.model);
    st.model_source = std::move(loaded.source);
    use_slurm_device_files(st);
    st.active = true;  // only now: task_init never meets an active step without a topology
}

}  // namespace

int stepd_prepare(spank_t sp) {
    State& st = state();
    st.active = false;
    st.step_gpus.reset();
    st.prepare_error.clear();
    st.notes.clear();
    st.min_cpus = 0;
    st.model = Topology{};
    st.accelerators.clear();
    st.device_files.clear();
    st.gres_device_files = false;
    st.devices_constrained.reset();
    st.allocated = IdSet{};
    st.share.destroy();

    uint32_t ntasks = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) ntasks = 1;
    uint32_t cpus_per_task = 0;
    if (spank_get_item(sp, S_STEP_CPUS_PER_TASK, &cpus_per_task) == ESPANK_SUCCESS && cpus_per_task < (1u << 20))
        st.min_cpus = static_cast<int>(cpus_per_task);
    st.node_name = node_name();
    st.step_gpus = job_getenv(sp, job_level(st.decision.kind) ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
    const auto t0 = Clock::now();
    try {
        load_step_model(st);
        st.allocated = allocated_cpus(sp, st);
    } catch (const std::exception& e) {
        st.model = Topology{};
        st.accelerators.clear();
        st.device_files.clear();
        st.prepare_error = e.what();
    }
    st.prepare_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!st.share.create(static_cast<int>(ntasks), static_cast<int>(st.accelerators.size())) && st.active)
        st.prepare_error = "cannot map the node share for " + std::to_string(ntasks) + " local task(s)";
    st.said.create();  // without it every task says its warnings itself
    if (!st.prepare_error.empty()) st.active = false;
    return 0;
}

namespace {

// Each stage of task_init either lets the task go on (nullopt) or ends task_init with this
// return code for Slurm: 0 ends it too (a task left unbound by fallback=warn, no GPU here).
using Stop = std::optional<int>;
constexpr Stop kGoOn = std::nullopt;

// The exception's text when `f` throws one, else "": a failure kept for later, not raised.
template <typename F>
std::string failure_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

std::string us_between(Clock::time_point a, Clock::time_point b) {
    return std::to_string(static_cast<long>(std::chrono::duration<double, std::micro>(b - a).count()));
}

// The step as slurmstepd prepared it: a failure there is the step's, said once.
Stop check_prepared(spank_t sp, State& st) {
    if (!st.prepare_error.empty()) return give_up(sp, st, node_label(st), st.prepare_error);
    if (!st.active || st.model.cores.empty())
        return give_up(sp, st, node_label(st), "internal error: no topology for a step that binds");
    return kGoOn;
}

Stop check_accelerators(spank_t sp, State& st) {
    if (!st.accelerators.empty()) return kGoOn;
    return no_gpu(sp, st, "no accelerator on this node (plugstack devices= names them, e.g. devices=10de or "
                          "devices=class=0x0302)");
}

// What this task knows before the exchange. Failures are kept, not raised: the task
// publishes (if only that it has nothing) before it gives up, so that no other task waits for it.
struct TaskFacts {
    TaskIds id;
    std::string who;  // "node N task G (local R)": the subject of this task's own messages
    TaskGpus gpus;
    std::string gpus_error;  // this task's alone
    AllowedSets allowed;
    std::string allowed_error;  // the step's cpuset: the same in every task
    std::string allowed_note;   // why Slurm's allocation was not used (the same in every task)
    Published published;        // what the other local tasks learn of this one
    Clock::time_point start, read;
};

TaskFacts read_task_facts(spank_t sp, const State& st) {
    TaskFacts f;
    f.id = task_ids(sp);
    f.who = node_label(st) + " task " + std::to_string(f.id.global) + " (local " + std::to_string(f.id.rank) + ")";
    f.start = Clock::now();
    f.gpus_error = failure_of([&] { f.gpus = own_gpus(sp, st); });
    if (f.gpus_error.empty()) {
        f.published.state = Published::State::Devices;
        f.published.per_task = f.gpus.per_task;
        if (f.gpus.gpu_step) f.published.devices = f.gpus.devices;
    }
    // The step's cpuset as this task sees it: the others' sets are not needed for it, so it is
    // read before waiting, off the path that the last-arriving task sets for everyone.
    f.allowed_error = failure_of([&] {  // the step's cpuset and Slurm's allocation, not Slurm's affinity
        AllowedSets kernel = kernel_allowed();
        if (!st.allocated.empty()) kernel = within_allocation(kernel, st.allocated, st.model.all_pus(), f.allowed_note);
        f.allowed = allowed_in(st.model, kernel, st.model_source);
    });
    f.read = Clock::now();
    return f;
}

struct Exchange {
    bool in_time = true;  // this task's set reached the others before their wait ran out
    bool done = false;    // whether this task waited for the others' sets (needs_exchange)
    std::vector<Published> all;  // every local task's set when done, the same in every task
    Clock::time_point at;
};

// Published at once so that the others wait as little as possible, even by a task that
// is about to give up.
Exchange exchange_gpus(State& st, const TaskFacts& f) {
    Exchange ex;
    ex.in_time = st.share.publish(f.id.rank, f.published);
    ex.done = f.gpus_error.empty() && needs_exchange(st, f.published);
    if (ex.done) ex.all = st.share.wait_all(kShareTimeoutMs);
    ex.at = Clock::now();
    return ex;
}

// Which GPUs this task holds is its own question (its variables, its device access): said by it.
Stop check_own_gpus(spank_t sp, State& st, const TaskFacts& f) {
    if (f.gpus_error.empty()) return kGoOn;
    return give_up(sp, st, f.who, f.gpus_error, true);
}

// The node's device sets, the same in every task that exchanged them: none at all means
// the step has no GPU here.
Stop check_node_gpus(spank_t sp, State& st, const TaskFacts& f, const Exchange& ex) {
    if (!ex.done) return kGoOn;
    const bool any_gpu =
        std::any_of(ex.all.begin(), ex.all.end(), [](const Published& q) { return !q.devices.empty(); });
    if (any_gpu || !f.published.devices.empty()) return kGoOn;
    return no_gpu(sp, st, "no GPU allocated to this step on this node");
}

void warn_late_tasks(State& st, const Exchange& ex) {
    if (!ex.done) return;
    const std::vector<int> late = ranks_in(ex.all, Published::State::Late);
    if (!late.empty() && st.share.claim(NodeShare::Once::Missing))
        task_stderr("warning: " + node_label(st) + ": local task(s) " + join_ints(late, ",", "-") +
                    " did not report their GPUs within " + std::to_string(kShareTimeoutMs / 1000) +
                    " s; the others were planned on their own GPUs");
}

struct Planned {
    TaskPlan task;
    std::vector<std::string> notes;  // about this task alone (it reported too late), said by it
    Clock::time_point at;
};

// The node (or this task alone) planned; the plan's warnings said once per step.
Planned plan_this_task(State& st, const TaskFacts& f, const Exchange& ex) {
    Planned out;
    const int ntasks = static_cast<int>(f.id.ntasks);
    std::vector<std::string> warnings;
    if (!ex.done) {
        out.task = plan_alone(st, f.published, f.allowed, ntasks, f.id.rank, warnings);
    } else {
        const std::vector<TaskPlan> tasks = plan_with_late(st, ex.all, f.allowed, warnings);
        const TaskPlan* mine = entry_of(tasks, f.id.rank);
        if (ex.in_time && !mine) throw Error("internal error: no plan for local task " + std::to_string(f.id.rank));
        out.task = ex.in_time ? *mine : late_task_plan(st, ex.all, f.published, f.allowed, f.id.rank, out.notes);
    }
    say_once(st, warnings);
    // The device pointer must outlive `plan`: point it into our own accelerator list.
    TaskPlan& t = out.task;
    t.device = t.devices.empty() ? nullptr : &st.accelerators.at(static_cast<size_t>(t.devices.front()));
    return out;
}

// An unreadable cpuset or a failed plan is the same in every task: said once.
Stop plan_task(spank_t sp, State& st, const TaskFacts& f, const Exchange& ex, Planned& out) {
    std::string failure = f.allowed_error;
    if (failure.empty()) failure = failure_of([&] { out = plan_this_task(st, f, ex); });
    if (!failure.empty()) return give_up(sp, st, node_label(st), failure);
    out.at = Clock::now();
    return kGoOn;
}

// A bind that failed is this task's own (its cgroup, its memory policy): said by it.
Stop check_bound(spank_t sp, State& st, const std::string& who, const ApplyResult& applied) {
    if (applied.ok) return kGoOn;
    if (applied.restored) return give_up(sp, st, who, applied.error, true);
    // Neither bound as planned nor as before: say what the task really has.
    const int rc = give_up(sp, st, who,
                           applied.error + "; the previous placement could not be restored (CPUs now " +
                               applied.cpus.to_string() + ", memory " + applied.mem_policy + ")",
                           true);
    spank_setenv(sp, kEnvCpus, applied.cpus.to_string().c_str(), 1);
    spank_setenv(sp, kEnvMems, applied.mem_nodes.to_string().c_str(), 1);
    return rc;
}

// What concerns this task alone is said by it, verbose or not; what every task would say
// (a variable's UUID no driver resolves, a policy the kernel lacks) once per step.
void say_task_warnings(State& st, const TaskFacts& f, const Planned& planned, const ApplyResult& applied) {
    for (const std::string& n : planned.notes) task_stderr("warning: " + f.who + ": " + n);
    if (!f.allowed_note.empty()) say_once(st, {f.allowed_note});
    say_once(st, f.gpus.warnings);
    say_once(st, applied.warnings);
}

// NUMABIND_* and the NICs' variables, in place of whatever NUMABIND_* the job brought.
void export_binding(spank_t sp, const State& st, const TaskPlan& task) {
    // Before clear_variables removes the marker (NUMABIND_*): whose UCX_NET_DEVICES is it?
    const std::optional<std::string> ucx_now = job_getenv(sp, "UCX_NET_DEVICES");
    const std::optional<std::string> ucx_marker = ucx_now ? job_getenv(sp, kUcxMarker) : std::nullopt;
    clear_variables(sp, false);
    export_binding_env(st.decision.mode, task,
                       [sp](const char* k, const std::string& v) { spank_setenv(sp, k, v.c_str(), 1); });
    export_nic_env(task, st.decision.ucx, ucx_now, ucx_marker,
                   [sp](const char* k, const std::string& v) { spank_setenv(sp, k, v.c_str(), 1); },
                   [sp](const char* k) { spank_unsetenv(sp, k); });
}

// OMP_* for the task's CPUs under omp, the job's own values kept. Returns the summary for
// the verbose line ("" without omp).
std::string export_omp(spank_t sp, const State& st, const TaskPlan& task) {
    if (!st.decision.omp) return {};
    const EnvLookup job_env = [sp](const std::string& name) { return job_getenv(sp, name); };
    const std::vector<OmpVariable> omp = omp_environment(st.model, task.cpus, job_env);
    for (const OmpVariable& v : omp)
        if (!v.kept) spank_setenv(sp, v.name.c_str(), v.value.c_str(), 1);
    return omp_summary(omp);
}

// One short line per task: GPU(s), their NUMA node(s), CPUs, memory; with detail, where the
// GPUs came from and where the time went.
std::string verbose_line(const State& st, const TaskFacts& f, const Exchange& ex, const Planned& planned,
                         const std::string& omp_line) {
    const TaskPlan& task = planned.task;
    std::string line = f.who + ": " + to_string(st.decision.mode) + ", GPU " + join_ints(task.devices, ",", "-");
    if (task.device) line += " (" + task.device->pci + ", NUMA " + join_ints(task.device->home_nodes) + ")";
    line += ", CPUs " + task.cpus.to_string() + ", memory ";
    line += task.mems.empty() || task.mem == MemPolicy::None ? std::string("not bound")
                                                             : to_string(task.mem) + " " + join_ints(task.mems);
    if (!task.nics.empty()) line += ", NICs " + nic_names(task.nics);
    if (!omp_line.empty()) line += "; " + omp_line;
    if (st.decision.detail) {
        const auto end = Clock::now();
        const std::string opens = f.gpus.opened ? join_ints(*f.gpus.opened, ",", "-") : std::string("unknown");
        line += "; GPUs from " + f.gpus.source + " (held " + (opens.empty() ? std::string("none") : opens) + "); took " +
                us_between(f.start, end) + " us (gpus and cpuset " + us_between(f.start, f.read) + ", wait " +
                us_between(f.read, ex.at) + ", plan " + us_between(ex.at, planned.at) + ", bind " +
                us_between(planned.at, end) + "; step setup " + std::to_string(static_cast<long>(st.prepare_us)) +
                " us)";
    }
    return line;
}

// Each task: its GPUs published, the others' awaited where its plan depends on them, the
// node planned, the task bound and its variables set. Every failure ends in give_up or
// no_gpu, here or (an exception) in stepd_task_init.
int task_init(spank_t sp, State& st) {
    if (Stop s = check_prepared(sp, st)) return *s;
    say_once(st, st.notes);
    if (Stop s = check_accelerators(sp, st)) return *s;
    const TaskFacts facts = read_task_facts(sp, st);
    const Exchange ex = exchange_gpus(st, facts);
    if (Stop s = check_own_gpus(sp, st, facts)) return *s;
    if (Stop s = check_node_gpus(sp, st, facts, ex)) return *s;
    warn_late_tasks(st, ex);
    Planned planned;
    if (Stop s = plan_task(sp, st, facts, ex, planned)) return *s;
    // Restores the previous placement on every way out until keep(), so that a task is
    // either bound as NUMABIND_* says or exactly as it was.
    ScopedBinding binding;
    const ApplyResult applied = binding.apply(planned.task);
    if (Stop s = check_bound(sp, st, facts.who, applied)) return *s;
    say_task_warnings(st, facts, planned, applied);
    export_binding(sp, st, planned.task);
    const std::string omp_line = export_omp(sp, st, planned.task);
    if (st.decision.verbose) task_stderr(verbose_line(st, facts, ex, planned, omp_line));
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
    st.active = false;
    st.share.destroy();
    st.said.destroy();
    st.accelerators.clear();
    st.device_files.clear();
    st.model = Topology{};
}

}  // namespace numabind::spank
