// The step planned once, in slurmstepd as the job's user after Slurm put it in the step's
// cgroups and before the tasks fork (SPANK user_init): the step's cpuset read once, the GPUs
// each task will find and every task's entry. A task that finds what was expected of it
// takes its entry without waiting for the others (stepd.cpp).
#include <chrono>

#include "context.hpp"
#include "gpus_held.hpp"
#include "numabind/error.hpp"
#include "task_plan.hpp"

namespace numabind::spank {

namespace {

// What each local task will find: what this process finds, as Slurm gives the step's GPUs
// to the step. Slurm's per-task GPU binding (--gpus-per-task, --gpu-bind) reaches only the
// tasks (SLURMD_TRES_BIND is set after the fork), so under it the tasks find otherwise and
// plan by the exchange.
std::vector<Published> expected_of_tasks(spank_t sp, const State& st) {
    return std::vector<Published>(static_cast<size_t>(st.local_tasks), published_of(gpus_held(sp, st)));
}

bool any_gpu(const std::vector<Published>& all) {
    for (const Published& p : all)
        if (!p.devices.empty()) return true;
    return false;
}

}  // namespace

// Anything that fails leaves the plan unmade (or only its CPUs known): each task then finds
// its own and says what went wrong, as without it.
int stepd_plan_step(spank_t sp) {
    State& st = state();
    st.step_plan = StepPlan{};
    if (!st.active || st.accelerators.empty()) return 0;
    const auto start = std::chrono::steady_clock::now();
    StepPlan plan;
    try {
        plan.allowed = cpus_allowed(st, plan.allowed_note);  // this process's cpuset, as the tasks' will be
        plan.allowed_known = true;
    } catch (const std::exception&) {
        return 0;
    }
    st.step_plan = plan;  // the CPUs at least
    try {
        plan.expected = expected_of_tasks(sp, st);
        if (any_gpu(plan.expected)) plan.tasks = plan_step(st, plan.expected, plan.allowed, plan.warnings);
    } catch (const std::exception&) {
        return 0;
    }
    plan.ready = true;
    plan.planning_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    st.step_plan = std::move(plan);
    return 0;
}

}  // namespace numabind::spank
