#include "fall_back.hpp"

#include <unistd.h>

#include "messages.hpp"
#include "policy/step_policy.hpp"
#include "step_scope.hpp"

namespace numabind::spank {

int fall_back(spank_t sp, Fallback fallback, bool say, const std::string& line) {
    if (fallback == Fallback::Fail) {
        if (say) log_error(line + " (fallback=fail)");
        else usleep(kCauseFirstUs);  // Slurm's own failure lines after the cause
        return -1;
    }
    clear_variables(sp, true);
    if (say) task_stderr("warning: " + line + "; running unbound (fallback=warn)");
    return 0;
}

}  // namespace numabind::spank
