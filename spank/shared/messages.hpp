// numabind SPANK plugin: how the plugin speaks (the front and the step engine alike).
#pragma once

#include <string>

namespace numabind::spank {

// "numabind: " + msg through slurm_error (srun's stderr and the slurmd log). Control
// characters are escaped and the line capped (log_text.hpp): no forged log lines.
void log_error(const std::string& msg);
// "numabind: " + msg through slurm_info (the slurmd log only).
void log_info(const std::string& msg);
// One write(2) of "numabind: " + msg + "\n" to the task's stderr (relayed by srun), escaped alike.
void task_stderr(const std::string& msg);

}  // namespace numabind::spank
