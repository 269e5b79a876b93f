// numabind step engine (numabind_stepd.so): the one symbol the front looks up
// (stepd_api.h). Each entry catches everything: no C++ exception crosses into the front or
// slurmstepd.
#include <exception>
#include <string>
#include <vector>

#include "context.hpp"
#include "numabind/error.hpp"
#include "stepd_api.h"

namespace numabind::spank {

State& state() {
    static State s;
    return s;
}

namespace {

int prepare(spank_t sp, int ac, char** av, const char* option_value) noexcept {
    try {
        State& st = state();
        st.option_given = false;
        st.option_error.clear();
        // The front has parsed both already (same code, strict): here for the engine's own copy.
        st.site = parse_site_config(std::vector<std::string>(av, av + ac));
        if (option_value) {
            try {
                st.choice = parse_option_value(option_value);
                st.option_given = true;
            } catch (const UsageError& e) {
                st.option_error = e.what();  // came around srun's checks: the tasks report it
            }
        }
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

int task_init(spank_t sp) noexcept { return stepd_task_init(sp); }  // catches everything itself

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
                                              numabind::spank::task_init, numabind::spank::exit_step};
}
