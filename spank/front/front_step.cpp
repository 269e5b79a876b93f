// numabind SPANK plugin front, slurmstepd: the step decision (step_policy.hpp) is made here,
// once per step before the tasks fork; a step that does not bind never loads the step engine
// (its tasks only lose any NUMABIND_* of the user's); a step that binds hands every task to it.
#include <unistd.h>

#include <string>

#include "engine_loader.hpp"
#include "front.hpp"
#include "shared/messages.hpp"
#include "shared/step_scope.hpp"

namespace numabind::spank {

namespace {

using Action = StepDecision::Action;

// Local task 0 speaks for the step on this node (the front has no node share).
bool speaks_for_step(spank_t sp) {
    int rank = -1;
    return spank_get_item(sp, S_TASK_ID, &rank) == ESPANK_SUCCESS && rank == 0;
}

// A step-level problem, said once, cause first: the step fails (fallback=fail) or runs
// unbound (fallback=warn).
int step_problem(spank_t sp, const FrontState& st, const std::string& why) {
    const bool say = speaks_for_step(sp);
    const std::string who = "node " + node_name() + ": ";
    if (st.site.fallback == Fallback::Fail) {
        if (say) log_error(who + why + " (fallback=fail)");
        else usleep(kCauseFirstUs);  // Slurm's own failure lines after the cause
        return -1;
    }
    clear_variables(sp, true);
    if (say) task_stderr("warning: " + who + why + "; running unbound (fallback=warn)");
    return 0;
}

}  // namespace

int front_prepare(spank_t sp) {
    FrontState& st = front_state();
    st.engine = nullptr;
    st.engine_error.clear();
    StepFacts facts = read_step_facts(sp);
    facts.option_seen = st.option_seen;
    facts.option_given = st.option_given;
    facts.choice = st.choice;
    facts.option_error = st.option_error;
    st.step.site = st.site;
    st.step.decision = decide_step(st.site, facts);
    if (st.step.decision.action != Action::Bind) return 0;
    st.engine = load_stepd_engine(st.engine_error);
    if (!st.engine) {
        log_error("node " + node_name() + ": " + st.engine_error);  // slurmd's log, once per step
        return 0;
    }
    return st.engine->prepare(sp, &st.step);
}

int front_user_init(spank_t sp) {
    const FrontState& st = front_state();
    if (st.step.decision.action != Action::Bind || !st.engine) return 0;
    return st.engine->plan_step(sp);
}

int front_task_init(spank_t sp) {
    FrontState& st = front_state();
    const StepDecision& d = st.step.decision;
    switch (d.action) {
        case Action::NotOurs:
            clear_markers(sp);
            return 0;
        case Action::Unbound:
        case Action::ExplicitNone:
            clear_variables(sp, d.action == Action::ExplicitNone);
            if (d.verbose && !d.message.empty() && speaks_for_step(sp)) task_stderr("node " + node_name() + ": " + d.message);
            return 0;
        case Action::OptionError:
            return step_problem(sp, st, d.message);  // came around srun's checks; escaped (log_text.hpp)
        case Action::Bind:
            if (st.engine) return st.engine->task_init(sp);
            return step_problem(sp, st, st.engine_error);
    }
    return 0;
}

void front_exit() {
    FrontState& st = front_state();
    if (st.step.decision.action == Action::Bind && st.engine) st.engine->exit();
    st.step.decision = StepDecision{};
}

}  // namespace numabind::spank
