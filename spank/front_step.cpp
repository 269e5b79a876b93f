// numabind SPANK plugin front, slurmstepd: a step that does not bind never loads the step
// engine (its tasks only lose any NUMABIND_* of the user's); a step that binds, or has a bad
// --numa-binding value to report, hands every hook to it.
#include <string>

#include "engine_loader.hpp"
#include "front.hpp"
#include "messages.hpp"
#include "step_scope.hpp"

namespace numabind::spank {

int front_prepare(spank_t sp, int ac, char** av) {
    FrontState& st = front_state();
    st.step = FrontState::Step::NotOurs;
    st.engine = nullptr;
    st.engine_error.clear();
    if (!step_scope(sp, st.site).ours) return 0;
    const Mode mode = st.option_given ? st.choice.mode : st.site.default_mode;
    if (st.option_error.empty() && mode == Mode::None) {
        st.step = st.option_given ? FrontState::Step::ExplicitNone : FrontState::Step::Unbound;
        return 0;
    }
    st.engine = load_stepd_engine(st.engine_error);
    if (!st.engine) {
        st.step = FrontState::Step::EngineMissing;
        log_error("node " + node_name() + ": " + st.engine_error);  // slurmd's log, once per step
        return 0;
    }
    st.step = FrontState::Step::Engine;
    return st.engine->prepare(sp, ac, av, st.option_seen ? st.option_value.c_str() : nullptr);
}

int front_task_init(spank_t sp) {
    FrontState& st = front_state();
    switch (st.step) {
        case FrontState::Step::NotOurs:
            return 0;
        case FrontState::Step::Unbound:
        case FrontState::Step::ExplicitNone:
            clear_variables(sp, st.step == FrontState::Step::ExplicitNone);
            return 0;
        case FrontState::Step::Engine:
            return st.engine->task_init(sp);
        case FrontState::Step::EngineMissing:
            break;
    }
    // An installation problem: said by local task 0 only (once per node and step).
    int rank = -1;
    const bool say = spank_get_item(sp, S_TASK_ID, &rank) == ESPANK_SUCCESS && rank == 0;
    const std::string who = "node " + node_name() + ": ";
    if (st.site.fallback == Fallback::Fail) {
        if (say) log_error("error: " + who + st.engine_error + " (fallback=fail)");
        return -1;
    }
    clear_variables(sp, true);
    if (say) task_stderr("warning: " + who + st.engine_error + "; running unbound (fallback=warn)");
    return 0;
}

void front_exit() {
    FrontState& st = front_state();
    if (st.step == FrontState::Step::Engine && st.engine) st.engine->exit();
    st.step = FrontState::Step::NotOurs;
}

}  // namespace numabind::spank
