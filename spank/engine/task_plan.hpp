// The task's plan inside a step: the step's plan made once in slurmstepd when the task finds
// what it expected; otherwise from every local task's published GPUs (the exchange), or from
// its own alone where its CPUs do not depend on the others'.
#pragma once

#include <string>
#include <vector>

#include "context.hpp"
#include "devices.hpp"
#include "numabind/plan.hpp"
#include "numabind/topology.hpp"
#include "step_plan.hpp"

namespace numabind::spank {

// The local ranks in `all` whose state is `state`.
std::vector<int> ranks_in(const std::vector<Published>& all, Published::State state);

// The node planned with every task, late ones on stand-ins; where that is infeasible, the
// on-time tasks alone (a late task then has no entry).
std::vector<TaskPlan> plan_with_late(const State& st, const std::vector<Published>& all, const AllowedSets& allowed,
                                     std::vector<std::string>& warnings);

// The plan entry of local rank `rank`; nullptr when it has none.
const TaskPlan* entry_of(const std::vector<TaskPlan>& tasks, int rank);

// A task that missed the exchange: the others planned it on GPUs nobody holds and bound
// themselves. It binds to the GPUs it can open, on CPUs none of them uses where the mode
// is exclusive; with other late tasks, only within its own share of their plan.
TaskPlan late_task_plan(const State& st, std::vector<Published> all, const Published& mine, const AllowedSets& allowed,
                        int rank, std::vector<std::string>& notes);

// Whether this task's CPUs depend on the other local tasks' GPUs. Exclusive modes keep
// sets disjoint, so they do; in node and socket modes a task that holds GPUs of its own, or
// sees the step's whole list (shared by the ownership rule, the same in every task), plans
// alone: no task waits for the last one to fork (with 8 tasks on 2 CPUs that wait made every
// program start after the last fork instead of in turn).
bool needs_exchange(const State& st, const Published& mine);

// node / socket without the exchange: this task's share of the step's list, or its own GPUs.
TaskPlan plan_alone(const State& st, const Published& mine, const AllowedSets& allowed, int ntasks, int rank,
                    std::vector<std::string>& warnings);

// Every local task's entry as each would plan it, task r having found `expected[r]`: the
// step's plan, made once. Throws Error where that plan is infeasible.
std::vector<TaskPlan> plan_step(const State& st, const std::vector<Published>& expected, const AllowedSets& allowed,
                                std::vector<std::string>& warnings);

// Whether local task `rank`, having found `found`, takes its entry of the step's plan: only
// when it found exactly what slurmstepd expected of it (the same GPUs, shared or its own
// alike), so that its entry is what the exchange would have given it.
bool takes_step_plan(const StepPlan& plan, const Published& found, int rank);

// Under an exclusive mode, the tasks that did not take the step's plan, planned on the CPUs
// the tasks that took it do not use (the same plan in each of them). Throws Error where
// that is infeasible.
std::vector<TaskPlan> plan_beside_committed(const State& st, const std::vector<Published>& all,
                                            const std::vector<TaskPlan>& step_tasks, const AllowedSets& allowed,
                                            std::vector<std::string>& warnings);

}  // namespace numabind::spank
