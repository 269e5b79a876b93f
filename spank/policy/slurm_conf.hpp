// What Slurm's own configuration says about how a task's GPUs and CPUs are constrained:
// slurm.conf's TaskPlugin, cgroup.conf's ConstrainDevices, gres.conf's File= paths for one
// node. Pure text rules, used by the step engine (spank/engine/step_setup.cpp) and by
// `numabind check`, so the two read Slurm's files the same way.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace numabind::spank {

// The words of a line without its comment ("#" to the end), blank-separated.
std::vector<std::string> words_of(const std::string& line);

// "Key=Value" settings of a slurm.conf or cgroup.conf text, keys in lower case, the last
// one winning (Slurm's own rule); comments and NodeName/PartitionName lines are skipped.
std::map<std::string, std::string> parse_key_values(const std::string& text);
bool is_yes(const std::string& value);  // yes/true/1, any case

// Slurm's bracket ranges in one name: "/dev/nvidia[0-3,5]" -> /dev/nvidia0..3, /dev/nvidia5;
// "nvidia[00-01]" keeps the width. Throws UsageError on a malformed range, a name longer
// than kMaxBracketPattern, or more than kMaxExpandedNames names in all (the product of its
// groups).
inline constexpr size_t kMaxBracketPattern = 4096;
inline constexpr size_t kMaxExpandedNames = 65536;
std::vector<std::string> expand_brackets(const std::string& pattern);

// What gres.conf says about GPUs on one node.
struct GresGpus {
    bool autodetect = false;           // AutoDetect=nvml|rsmi|oneapi|nrt: Slurm finds them (PCI order)
    std::string autodetect_value;
    std::vector<std::string> files;    // File= of Name=gpu lines for this node, in gres index order
};
// Lines with NodeName= apply when `node` is one of its names (brackets expanded); a line
// without NodeName= applies everywhere. Throws UsageError (expand_brackets's, or past
// kMaxGresNames names in the whole text).
inline constexpr size_t kMaxGresNames = 1 << 20;
GresGpus parse_gres_conf(const std::string& text, const std::string& node);

// Whether Slurm keeps a task from opening GPUs that are not its own: task/cgroup in
// TaskPlugin and ConstrainDevices=yes in cgroup.conf. nullopt when slurm.conf cannot be read.
std::optional<bool> devices_constrained(const std::optional<std::string>& slurm_conf_text,
                                        const std::optional<std::string>& cgroup_conf_text);

// How the plugin tells which GPU a task holds on a node (docs/SITE.md, "Which GPUs a task
// holds"), from what slurmstepd knows once per step: the accelerators, how many of their
// device files numabind knows (driver information or device_files=), gres.conf's File= count
// for the node, and whether Slurm constrains devices. One rule for the engine and `check`.
enum class GpuIdentity {
    DeviceFiles,       // every device file known: what the task can open, the variable on top
    SlurmDeviceFiles,  // the unknown ones taken from gres.conf (one File= per accelerator)
    GresIndex,         // no constraint by Slurm: the runtime variable is the gres index
    OneUnknown,        // one file unknown: the task's variable tells whether that GPU is its own
    Guess,             // the tasks share the step's list; said once per step
};
GpuIdentity gpu_identity(size_t accelerators, size_t known_files, size_t gres_files,
                         const std::optional<bool>& devices_constrained);
// Whether gres.conf's File= list can stand in for numabind's device files (gres index i is
// accelerator i): one file per accelerator.
bool slurm_files_usable(size_t gres_files, size_t accelerators);

// The directory of slurm.conf (and so of cgroup.conf and gres.conf): SLURM_CONF's, else
// /etc/slurm (Debian's and Slurm's default).
std::string slurm_conf_dir(const std::optional<std::string>& slurm_conf_variable);

}  // namespace numabind::spank
