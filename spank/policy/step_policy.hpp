// numabind SPANK plugin: which steps bind, and how — one pure decision, made by the front in
// slurmstepd before the tasks fork and handed whole to the step engine (stepd_api.h), so
// that nothing is decided, spelled or parsed twice.
#pragma once

#include <optional>
#include <string>

#include "config.hpp"

namespace numabind::spank {

enum class StepKind {
    Normal,       // an srun step (also one started inside another step's task)
    Batch,        // the batch script (step id batch)
    Interactive,  // salloc's shell under use_interactive_step
    PtyShell,     // an `srun --pty` step running a shell: interactive like the one above
    Extern,       // the extern step (pam_slurm_adopt, X11): never numabind's
};

// What slurmstepd knows of a step before its tasks fork.
struct StepFacts {
    StepKind kind = StepKind::Normal;
    bool option_seen = false;    // --numa-binding reached slurmstepd ...
    bool option_given = false;   // ... and parsed (`choice`); seen but not given: `option_error`
    UserChoice choice;
    std::string option_error;
    bool has_gpus = false;       // Slurm named GPUs for the step, or a runtime variable is set
    bool user_cpu_bind = false;  // --cpu-bind typed for this step (not inherited from a parent task)
    bool user_mem_bind = false;  // --mem-bind likewise
    bool hint_nomultithread = false;  // --hint=nomultithread (Slurm: SLURM_THREADS_PER_CORE=1)
};

struct StepDecision {
    enum class Action {
        NotOurs,       // leave the step and its environment alone
        Unbound,       // run as Slurm placed it; remove every NUMABIND_* of the user's
        ExplicitNone,  // --numa-binding=none: likewise, with NUMABIND_MODE=none
        OptionError,   // a bad --numa-binding value came around srun's checks: fail or warn
        Bind,          // hand the step to the engine
    };
    Action action = Action::NotOurs;
    StepKind kind = StepKind::Normal;
    bool explicit_choice = false;  // the user's --numa-binding, not the site default
    Mode mode = Mode::None;
    MemPolicy mem = MemPolicy::Prefer;
    bool verbose = false;
    bool detail = false;               // second verbosity level: timings, sources
    bool one_thread_per_core = false;  // smt=1 (the user's, else the site's), or --hint=nomultithread
    bool omp = false;                  // omp (the user's, else the site's): OMP_* where unset
    bool min_cpus_in_cores = false;    // --hint=nomultithread: Slurm counted --cpus-per-task in cores
    bool ucx = false;                  // set UCX_NET_DEVICES (the user's ucx[=yes|no], else the site's ucx=)
    // Said once per step: why the step is not bound (verbose only), or the option error.
    std::string message;
};

StepDecision decide_step(const SiteConfig& site, const StepFacts& facts);

// A step that fails as a whole: the task that says why speaks first; the others wait this
// long before failing, so that srun shows the cause before Slurm's per-task lines.
inline constexpr unsigned kCauseFirstUs = 50000;

// What the front hands the step engine for a step that binds (stepd_api.h): the plugstack
// arguments as the front parsed them and the decision. Both modules come from one build
// (the front checks), so the engine reads this struct as it is.
struct EngineStep {
    SiteConfig site;
    StepDecision decision;
};

// Whether an `srun --pty` program is an interactive shell (`srun --pty bash`, not
// `srun --pty python train.py`): a common shell's name, or the user's $SHELL.
bool is_shell_program(const std::string& argv0, const std::optional<std::string>& shell);

// What an srun started inside a task inherited from it: Slurm puts its own SLURM_CPU_BIND
// (e.g. "quiet,mask_cpu:0x1") into every task, srun reads it as input and slurmstepd then sees
// "quiet,mask_cpu:1". Equal after normalising (case, 0x prefixes) means "not typed".
std::string normalise_bind_value(const std::string& value);

// Whether a --cpu-bind/--mem-bind value (or SLURM_CPU_BIND/SLURM_MEM_BIND) asks for a binding:
// one whose items are only verbose/quiet (v, q) selects none, so it leaves a site default on.
bool selects_binding(const std::string& value);
bool typed_not_inherited(const std::optional<std::string>& step_value, const std::optional<std::string>& inherited);

}  // namespace numabind::spank
