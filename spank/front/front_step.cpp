// numabind SPANK plugin front, slurmstepd: the step decision (step_policy.hpp) is made here,
// once per step before the tasks fork; a step that does not bind never loads the step engine
// (its tasks only lose any NUMABIND_* of the user's); a step that binds hands every task to it.
#include <string>

#include "engine_loader.hpp"
#include "front.hpp"
#include "shared/fall_back.hpp"
#include "shared/messages.hpp"
#include "shared/step_scope.hpp"

namespace numabind::spank {

namespace {

using Action = StepDecision::Action;

// A step-level problem, said once, cause first: the step fails (fallback=fail) or runs
// unbound (fallback=warn).
int step_problem(spank_t sp, FrontState& st, const std::string& why) {
    const std::string line = "node " + node_name() + ": " + why;
    return fall_back(sp, st.site.fallback, st.said.first(line), line);
}

// Whether a task of this step may say something in the front (an option error, an engine
// that cannot be loaded, verbose's reason for not binding): only then is the page mapped.
bool step_may_speak(const FrontState& st) {
    const StepDecision& d = st.step.decision;
    switch (d.action) {
        case Action::OptionError: return true;
        case Action::Bind: return !st.engine;
        case Action::Unbound:
        case Action::ExplicitNone: return d.verbose && !d.message.empty();
        case Action::NotOurs: return false;
    }
    return false;
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
    st.said.destroy();
    if (st.step.decision.action == Action::Bind) {
        st.engine = load_stepd_engine(st.engine_error);
        if (!st.engine) log_error("node " + node_name() + ": " + st.engine_error);  // slurmd's log, once per step
    }
    if (step_may_speak(st)) st.said.create();  // before the tasks fork: they share it
    return st.engine ? st.engine->prepare(sp, &st.step) : 0;
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
            if (d.verbose && !d.message.empty()) {
                const std::string line = "node " + node_name() + ": " + d.message;
                if (st.said.first(line)) task_stderr(line);
            }
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
    st.said.destroy();
}

}  // namespace numabind::spank
