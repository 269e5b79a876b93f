// A task's plan: the node planned from the published device sets (core/plan), late tasks
// kept from making the on-time tasks' plan infeasible.
#include "task_plan.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "core/omp.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"

namespace numabind::spank {

namespace {

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

}  // namespace

std::vector<int> ranks_in(const std::vector<Published>& all, Published::State state) {
    std::vector<int> out;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].state == state) out.push_back(static_cast<int>(r));
    return out;
}

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
    const bool exclusive = disjoint(st.decision.mode);
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

bool needs_exchange(const State& st, const Published& mine) {
    if (disjoint(st.decision.mode)) return true;
    if (mine.state != Published::State::Devices || mine.devices.empty()) return true;  // planned on GPUs nobody holds
    return !st.step_gpus || st.step_gpus->empty();  // identical own lists are shared only when all are heard from
}

namespace {

// node / socket without the exchange: the step's list shared by ntasks tasks, or a task's
// own GPUs alone; `alone_entry` is task `rank`'s entry of it.
NodePlan alone_plan(const State& st, const Published& mine, const AllowedSets& allowed, int ntasks) {
    if (!mine.per_task) return plan_from(st, std::vector<Published>(static_cast<size_t>(ntasks), mine), allowed, ntasks);
    return plan_from(st, {mine}, allowed, 1);
}
TaskPlan alone_entry(const std::vector<TaskPlan>& tasks, const Published& mine, int rank) {
    TaskPlan t = tasks.at(mine.per_task ? 0 : static_cast<size_t>(rank));
    t.local_rank = rank;
    return t;
}

}  // namespace

TaskPlan plan_alone(const State& st, const Published& mine, const AllowedSets& allowed, int ntasks, int rank,
                    std::vector<std::string>& warnings) {
    const NodePlan plan = alone_plan(st, mine, allowed, ntasks);
    warnings = plan_warnings(plan);
    return alone_entry(plan.tasks, mine, rank);
}

std::vector<TaskPlan> plan_step(const State& st, const std::vector<Published>& expected, const AllowedSets& allowed,
                                std::vector<std::string>& warnings) {
    const int ntasks = static_cast<int>(expected.size());
    std::vector<TaskPlan> node;  // the exchange's plan, made once where a task needs it
    std::map<std::pair<bool, std::vector<int>>, std::vector<TaskPlan>> alone;  // each distinct finding once
    std::vector<TaskPlan> out;
    auto add_warnings = [&warnings](std::vector<std::string> w) {
        for (std::string& x : w)
            if (std::find(warnings.begin(), warnings.end(), x) == warnings.end()) warnings.push_back(std::move(x));
    };
    for (int r = 0; r < ntasks; ++r) {
        const Published& mine = expected[static_cast<size_t>(r)];
        if (needs_exchange(st, mine)) {
            if (node.empty()) {
                std::vector<std::string> w;
                node = plan_with_late(st, expected, allowed, w);
                add_warnings(std::move(w));
            }
            const TaskPlan* e = entry_of(node, r);
            if (!e) throw Error("internal error: no plan for local task " + std::to_string(r));
            out.push_back(*e);
            continue;
        }
        auto key = std::make_pair(mine.per_task, mine.devices);
        auto it = alone.find(key);
        if (it == alone.end()) {
            const NodePlan plan = alone_plan(st, mine, allowed, ntasks);
            add_warnings(plan_warnings(plan));
            it = alone.emplace(std::move(key), plan.tasks).first;
        }
        out.push_back(alone_entry(it->second, mine, r));
    }
    return out;
}

bool takes_step_plan(const StepPlan& plan, const Published& found, int rank) {
    if (!plan.ready || rank < 0 || static_cast<size_t>(rank) >= plan.expected.size()) return false;
    const Published& want = plan.expected[static_cast<size_t>(rank)];
    if (found.state != Published::State::Devices || want.state != Published::State::Devices) return false;
    if (found.per_task != want.per_task || found.devices != want.devices) return false;
    return plan.tasks.empty() || entry_of(plan.tasks, rank) != nullptr;
}

std::vector<TaskPlan> plan_beside_committed(const State& st, const std::vector<Published>& all,
                                            const std::vector<TaskPlan>& step_tasks, const AllowedSets& allowed,
                                            std::vector<std::string>& warnings) {
    IdSet taken;
    std::vector<Published> rest;
    std::vector<int> ranks;
    for (size_t q = 0; q < all.size(); ++q) {
        if (all[q].committed) {
            const TaskPlan* e = entry_of(step_tasks, static_cast<int>(q));
            if (!e) throw Error("internal error: no step plan entry for local task " + std::to_string(q));
            taken |= e->cpus;
            continue;
        }
        rest.push_back(all[q]);
        ranks.push_back(static_cast<int>(q));
    }
    if (rest.empty()) return {};
    AllowedSets free = allowed;
    free.cpus = allowed.cpus - taken;
    if (free.cpus.empty())  // an empty set would mean every CPU to the planner
        throw Error("every CPU of the step is taken by the tasks that took the step's plan");
    std::vector<TaskPlan> out = plan_with_late(st, rest, free, warnings);
    for (TaskPlan& t : out) t.local_rank = ranks.at(static_cast<size_t>(t.local_rank));
    return out;
}

}  // namespace numabind::spank
