// numabind step engine (numabind_stepd.so): the one symbol the front looks up
// (stepd_api.h). Each entry catches everything: no C++ exception crosses into the front or
// slurmstepd.
#include <exception>
#include <string>

#include "code_pages.hpp"
#include "context.hpp"
#include "numabind/error.hpp"
#include "shared/stepd_api.h"

namespace numabind::spank {

State& state() {
    static State s;
    return s;
}

namespace {

int prepare(spank_t sp, const void* step) noexcept {
    try {
        State& st = state();
        st.code = own_code();
        map_code(st.code);
        const auto* handed = static_cast<const EngineStep*>(step);  // the front's, same build
        st.site = handed->site;
        st.decision = handed->decision;
        return stepd_prepare(sp);
    } catch (const std::exception& e) {
        try {
            log_error(std::string("init_post_opt: ") + e.what());
        } catch (...) {
        }
    } catch (...) {
    }
    return -1;  // as any hook that fails: Slurm reports it
}

int plan_step(spank_t sp) noexcept {
    try {
        return stepd_plan_step(sp);
    } catch (...) {
        state().step_plan = StepPlan{};  // the tasks plan as they would without it
    }
    return 0;
}

int task_init(spank_t sp) noexcept {
    map_code(state().code);  // not inherited from slurmstepd (code_pages.cpp)
    return stepd_task_init(sp);  // catches everything itself
}

void exit_step() noexcept {
    try {
        stepd_exit();
    } catch (...) {
    }
}

}  // namespace

}  // namespace numabind::spank

extern "C" {
__attribute__((visibility("default"))) extern const numabind_stepd_api numabind_stepd_v1;
const numabind_stepd_api numabind_stepd_v1 = {NUMABIND_STEPD_BUILD, numabind::spank::prepare,
                                              numabind::spank::plan_step,
                                              numabind::spank::task_init, numabind::spank::exit_step};
}
