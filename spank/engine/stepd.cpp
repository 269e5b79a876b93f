// numabind SPANK plugin: the task context of a step the front decided binds
// (step_policy.hpp). Each task finds the GPUs it holds; where they are what slurmstepd
// expected, it binds itself to its entry of the step's plan (step_planning.cpp) at once.
// Otherwise it publishes them, waits (bounded) for the other local tasks and plans the node
// from everybody's sets (the same plan in every such task, task_plan.hpp). The step's setup
// before the fork: step_setup.cpp.
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
#include "gpus_held.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"
#include "policy/log_text.hpp"
#include "shared/fall_back.hpp"
#include "shared/step_scope.hpp"
#include "sys/binding.hpp"
#include "task_plan.hpp"

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

// A failure: the task fails (fallback=fail) or runs unbound (fallback=warn). Said once per
// step, cause first, unless `per_task`.
int give_up(spank_t sp, State& st, const std::string& who, const std::string& why, bool per_task = false) {
    const std::string line = who + ": " + why;
    return fall_back(sp, st.site.fallback, per_task || st.said.first(line), line);
}

// No accelerator for this step: a site default does nothing (verbose says why, once); an
// explicit --numa-binding says so once and runs unbound (fallback=warn) or fails.
int no_gpu(spank_t sp, State& st, const std::string& why) {
    if (!st.decision.explicit_choice) {
        clear_variables(sp, false);
        const std::string line = node_label(st) + ": " + why + "; site default " + to_string(st.decision.mode) + " not applied";
        if (st.decision.verbose && st.said.first(line)) task_stderr(line);
        return 0;
    }
    return give_up(sp, st, node_label(st), "--numa-binding=" + to_string(st.decision.mode) + ": " + why);
}

// Step-level warnings: each distinct text once per step, verbose or not.
void say_once(State& st, const std::vector<std::string>& lines) {
    for (const std::string& w : lines)
        if (st.said.first(w)) task_stderr("warning: " + node_label(st) + ": " + w);
}

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

// The step's cpuset within Slurm's allocation, as this task sees it.
void read_own_allowed(const State& st, TaskFacts& f) {
    f.allowed_error = failure_of([&] { f.allowed = cpus_allowed(st, f.allowed_note); });
}

TaskFacts read_task_facts(spank_t sp, const State& st) {
    TaskFacts f;
    f.id = task_ids(sp);
    f.who = node_label(st) + " task " + std::to_string(f.id.global) + " (local " + std::to_string(f.id.rank) + ")";
    f.start = Clock::now();
    f.gpus_error = failure_of([&] { f.gpus = gpus_held(sp, st); });
    if (f.gpus_error.empty()) f.published = published_of(f.gpus);
    // The step's cpuset, read once in slurmstepd where it could be; else here, before
    // waiting, off the path that the last-arriving task sets for everyone.
    if (st.step_plan.allowed_known) {
        f.allowed = st.step_plan.allowed;
        f.allowed_note = st.step_plan.allowed_note;
    } else {
        read_own_allowed(st, f);
    }
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
    if (late.empty()) return;
    const std::string line = "warning: " + node_label(st) + ": local task(s) " + join_ints(late, ",", "-") +
                             " did not report their GPUs within " + std::to_string(kShareTimeoutMs / 1000) +
                             " s; the others were planned on their own GPUs";
    if (st.said.first(line)) task_stderr(line);
}

// The device pointer must outlive the plan it came from: point it into our own accelerator list.
void point_device(const State& st, TaskPlan& t) {
    t.device = t.devices.empty() ? nullptr : &st.accelerators.at(static_cast<size_t>(t.devices.front()));
}

struct Planned {
    TaskPlan task;
    std::vector<std::string> notes;  // about this task alone (it reported too late), said by it
    const char* from = "";           // which plan it is, for the detailed verbose line
    bool from_step = false;          // this task's entry of the step's plan
    Clock::time_point at;
};

// The exchange's tasks beside those that took the step's plan (exclusive modes): on the CPUs
// those do not use; where that is infeasible, this task's own entry of the step's plan.
TaskPlan plan_beside_step(State& st, const TaskFacts& f, const Exchange& ex, Planned& out) {
    std::vector<std::string> warnings;
    const TaskPlan* mine = nullptr;
    std::vector<TaskPlan> tasks;
    try {
        tasks = plan_beside_committed(st, ex.all, st.step_plan.tasks, f.allowed, warnings);
        mine = entry_of(tasks, f.id.rank);
    } catch (const Error&) {
    }
    say_once(st, warnings);
    out.from = "beside the step's plan";
    const std::string found =
        "this task found other GPUs than slurmstepd expected (" + join_ints(f.published.devices, ",", "none") + ")";
    if (mine) {
        out.notes.push_back(found + "; planned beside the tasks that took the step's plan, on the CPUs they do not use");
        return *mine;
    }
    const TaskPlan* step_entry = entry_of(st.step_plan.tasks, f.id.rank);
    if (!step_entry) throw Error("internal error: no plan for local task " + std::to_string(f.id.rank));
    out.notes.push_back(found + " and no CPU is left beside the tasks that took the step's plan; bound as the step planned it");
    return *step_entry;
}

bool any_committed(const Exchange& ex) {
    return std::any_of(ex.all.begin(), ex.all.end(), [](const Published& q) { return q.committed; });
}

// The node (or this task alone) planned; the plan's warnings said once per step.
Planned plan_this_task(State& st, const TaskFacts& f, const Exchange& ex) {
    Planned out;
    const int ntasks = static_cast<int>(f.id.ntasks);
    std::vector<std::string> warnings;
    if (!ex.done) {
        out.task = plan_alone(st, f.published, f.allowed, ntasks, f.id.rank, warnings);
        out.from = "alone";
    } else if (disjoint(st.decision.mode) && st.step_plan.ready && any_committed(ex)) {
        out.task = plan_beside_step(st, f, ex, out);
    } else {
        const std::vector<TaskPlan> tasks = plan_with_late(st, ex.all, f.allowed, warnings);
        const TaskPlan* mine = entry_of(tasks, f.id.rank);
        if (ex.in_time && !mine) throw Error("internal error: no plan for local task " + std::to_string(f.id.rank));
        out.task = ex.in_time ? *mine : late_task_plan(st, ex.all, f.published, f.allowed, f.id.rank, out.notes);
        out.from = "the exchange";
    }
    say_once(st, warnings);
    return out;
}

// An unreadable cpuset or a failed plan is the same in every task: said once.
Stop plan_task(spank_t sp, State& st, const TaskFacts& f, const Exchange& ex, Planned& out) {
    std::string failure = f.allowed_error;
    if (failure.empty()) failure = failure_of([&] { out = plan_this_task(st, f, ex); });
    if (!failure.empty()) return give_up(sp, st, node_label(st), failure);
    point_device(st, out.task);
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
        line += "; GPUs from " + f.gpus.source + " (held " + (opens.empty() ? std::string("none") : opens) + "); planned " +
                planned.from + "; took " +
                us_between(f.start, end) + " us (gpus and cpuset " + us_between(f.start, f.read) + ", wait " +
                us_between(f.read, ex.at) + ", plan " + us_between(ex.at, planned.at) + ", bind " +
                us_between(planned.at, end) + "; step plan " +
                std::to_string(static_cast<long>(st.step_plan.planning_us)) + " us; step setup " +
                std::to_string(static_cast<long>(st.prepare_us)) + " us)";
    }
    return line;
}

// A task of the step's plan whose bind failed: its own cpuset differs from the step's as
// slurmstepd read it. It keeps to the part of its entry (its alone) that its cpuset allows;
// false when that is nothing or all of it.
bool narrow_to_own_cpuset(const State& st, Planned& planned) {
    TaskFacts own;
    read_own_allowed(st, own);
    if (!own.allowed_error.empty()) return false;
    TaskPlan& t = planned.task;
    const IdSet cpus = t.cpus & own.allowed.cpus;
    std::vector<int> mems;
    for (int m : t.mems)
        if (own.allowed.mems.contains(m)) mems.push_back(m);
    if (cpus.empty() || (cpus == t.cpus && mems == t.mems)) return false;
    t.cpus = cpus;
    t.mems = mems;
    if (mems.empty()) t.mem = MemPolicy::None;
    planned.notes.push_back("this task's cpuset differs from the step's; bound to the part of its plan that it allows");
    return true;
}

// Binds the task as planned, says what concerns it and sets its variables. Restores the
// previous placement on every way out until keep(), so that a task is either bound as
// NUMABIND_* says or exactly as it was.
int bind_task(spank_t sp, State& st, const TaskFacts& f, const Exchange& ex, Planned& planned) {
    ScopedBinding binding;
    ApplyResult applied = binding.apply(planned.task);
    if (!applied.ok && applied.restored && planned.from_step && narrow_to_own_cpuset(st, planned))
        applied = binding.apply(planned.task);
    if (Stop s = check_bound(sp, st, f.who, applied)) return *s;
    say_task_warnings(st, f, planned, applied);
    export_binding(sp, st, planned.task);
    const std::string omp_line = export_omp(sp, st, planned.task);
    if (st.decision.verbose) task_stderr(verbose_line(st, f, ex, planned, omp_line));
    binding.keep();
    return 0;
}

// The task found other GPUs than expected (or the step could not be planned): its GPUs
// published, the others' awaited where its plan depends on them, the node planned.
int plan_by_exchange(spank_t sp, State& st, const TaskFacts& facts) {
    const Exchange ex = exchange_gpus(st, facts);
    if (Stop s = check_own_gpus(sp, st, facts)) return *s;
    if (Stop s = check_node_gpus(sp, st, facts, ex)) return *s;
    warn_late_tasks(st, ex);
    Planned planned;
    if (Stop s = plan_task(sp, st, facts, ex, planned)) return *s;
    return bind_task(sp, st, facts, ex, planned);
}

// The task found the GPUs slurmstepd expected: it takes its entry of the step's plan and
// says so to the others at once (a task that found other GPUs plans beside it), no waiting.
int take_step_plan(spank_t sp, State& st, TaskFacts& f) {
    f.published.committed = true;
    Exchange ex;
    ex.in_time = st.share.publish(f.id.rank, f.published);
    ex.at = Clock::now();
    if (!ex.in_time) {  // a task that found other GPUs already planned without this one: as it did
        f.published.committed = false;
        return plan_by_exchange(sp, st, f);
    }
    if (st.step_plan.tasks.empty()) return no_gpu(sp, st, "no GPU allocated to this step on this node");
    Planned planned;
    planned.task = *entry_of(st.step_plan.tasks, f.id.rank);
    planned.from = "the step's plan";
    planned.from_step = true;
    say_once(st, st.step_plan.warnings);
    point_device(st, planned.task);
    planned.at = Clock::now();
    return bind_task(sp, st, f, ex, planned);
}

// Each task, bound and its variables set. Every failure ends in give_up or no_gpu, here or
// (an exception) in stepd_task_init.
int task_init(spank_t sp, State& st) {
    if (Stop s = check_prepared(sp, st)) return *s;
    say_once(st, st.notes);
    if (Stop s = check_accelerators(sp, st)) return *s;
    TaskFacts facts = read_task_facts(sp, st);
    if (facts.gpus_error.empty() && takes_step_plan(st.step_plan, facts.published, facts.id.rank))
        return take_step_plan(sp, st, facts);
    return plan_by_exchange(sp, st, facts);
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

// slurmstepd ends with its step: the model and lists are left to the process's end (freeing
// them would write to every page they span, each a copy-on-write fault after the fork);
// the next prepare resets them where a process runs more than one step (tests).
void stepd_exit() {
    State& st = state();
    st.active = false;
    st.share.destroy();
    st.said.destroy();
}

}  // namespace numabind::spank
