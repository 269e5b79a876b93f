// numabind SPANK plugin: option and plugstack.conf parsing (pure, no Slurm calls).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numabind/accelerators.hpp"
#include "numabind/plan.hpp"

namespace numabind::spank {

// Name of the option, as the user types it (--numa-binding).
inline constexpr const char* kOptionName = "numa-binding";
// What sbatch/salloc leave in the environment of the job for srun to pick up.
inline constexpr const char* kOptionEnv = "SLURM_SPANK__SLURM_SPANK_OPTION_numabind_numa_binding";
// One line that lists every accepted form of the option value.
std::string option_help();

// --numa-binding=<mode>[,verbose[=2]][,mem=<policy>][,ucx[=yes|no]][,smt=1|all][,omp[=yes|no]]
struct UserChoice {
    Mode mode = Mode::None;
    std::optional<MemPolicy> mem;  // unset: site default
    int verbose_level = 0;         // verbose: 1 (one line per task), verbose=2: with timings and sources
    std::optional<bool> ucx;       // ucx / ucx=yes|no: UCX_NET_DEVICES from the nearest NICs; unset: site default
    std::optional<bool> one_thread_per_core;  // smt=1 (true) | smt=all (false); unset: site default
    std::optional<bool> omp;                  // omp / omp=yes|no; unset: site default
};
// Throws UsageError with one line naming the bad item and the valid choices.
UserChoice parse_option_value(std::string_view value);

enum class Fallback { Warn, Fail };

// plugstack.conf arguments.
struct SiteConfig {
    Mode default_mode = Mode::None;
    MemPolicy mem = MemPolicy::Prefer;
    Fallback fallback = Fallback::Warn;
    int verbose_level = 0;       // verbose / verbose=yes: 1, verbose=2: with timings and sources
    std::string devices;         // DeviceMatcher spec as given; empty: built-in table
    DeviceMatcher matcher = DeviceMatcher::builtin();  // `devices`, parsed once here
    std::string topology;        // hwloc XML path template (%n node name, %h host name, %% percent)
    // Admin-only: each accelerator's device file, in numabind's accelerator order (PCI
    // order), with %n/%h like topology=. Empty: found from the PCI address.
    std::vector<std::string> device_files;
    // An explicit --cpu-bind or --mem-bind wins over the site default
    // (respect_user_bind=, also accepted under its old name respect_cpu_bind=).
    bool respect_user_bind = true;
    bool batch_step = false;  // also the interactive step (use_interactive_step)
    bool ucx = false;         // ucx=yes: every bound step sets UCX_NET_DEVICES (unless the user did)
    bool one_thread_per_core = false;  // smt=1|all (default all)
    bool omp = false;                  // omp=yes|no: OMP_* inside the binding where unset
};
// Strict: an unknown key, a repeated key or a bad value throws UsageError naming it.
SiteConfig parse_site_config(const std::vector<std::string>& args);

// Expands %n (Slurm node name), %h (short host name) and %% in a topology path.
// Throws UsageError on any other % sequence.
std::string expand_path(std::string_view pattern, std::string_view node, std::string_view host);

// What %n and %h stand for, in slurmstepd and in `numabind check` alike: slurmd's node name
// (SLURMD_NODENAME, slurmd's own environment, not the user's), else the short host name; and
// the host name up to its first dot ("localhost" when it cannot be read).
std::string node_name();
std::string short_hostname();

}  // namespace numabind::spank
