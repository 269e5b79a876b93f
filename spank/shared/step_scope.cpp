// numabind SPANK plugin: see step_scope.hpp.
#include "step_scope.hpp"

#include <cstdlib>
#include <vector>

#include "core/binding_env.hpp"
#include "core/visible.hpp"

namespace numabind::spank {

namespace {

bool set_and_nonempty(const std::optional<std::string>& v) { return v && !v->empty(); }

}  // namespace

void record_inherited_binding() {
    for (auto [slurm, ours] : {std::pair{"SLURM_CPU_BIND", kInheritedCpuBind}, std::pair{"SLURM_MEM_BIND", kInheritedMemBind}}) {
        const char* v = std::getenv(slurm);
        if (v) setenv(ours, v, 1);
        else unsetenv(ours);
    }
}

std::optional<std::string> job_getenv(spank_t sp, const std::string& name) {
    std::vector<char> buf(512);
    for (int tries = 0; tries < 6; ++tries) {
        spank_err_t rc = spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size()));
        if (rc == ESPANK_SUCCESS) return std::string(buf.data());
        if (rc != ESPANK_NOSPACE) return std::nullopt;
        buf.resize(buf.size() * 4);
    }
    return std::nullopt;
}

bool job_level(StepKind kind) { return kind == StepKind::Batch || kind == StepKind::Interactive; }

StepKind step_kind(spank_t sp) {
    uint32_t stepid = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS || stepid == kExternStep) return StepKind::Extern;
    if (stepid == kBatchStep) return StepKind::Batch;
    if (stepid == kInteractiveStep || job_getenv(sp, "SLURM_INTERACTIVE_STEP").value_or("") == "1")
        return StepKind::Interactive;
    if (job_getenv(sp, "SLURM_PTY_PORT")) {
        int argc = 0;
        char** argv = nullptr;
        if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 && argv && argv[0] &&
            is_shell_program(argv[0], job_getenv(sp, "SHELL")))
            return StepKind::PtyShell;
    }
    return StepKind::Normal;
}

StepFacts read_step_facts(spank_t sp) {
    StepFacts f;
    f.kind = step_kind(sp);
    if (f.kind == StepKind::Extern) return f;
    // srun sends SLURM_CPU_BIND / SLURM_MEM_BIND when the user asked for a binding, or when
    // it inherited them from the task it runs in (recorded by the front in srun).
    const auto cpu_bind = job_getenv(sp, "SLURM_CPU_BIND");
    // --hint=nomultithread arrives as a "threads" binding with SLURM_THREADS_PER_CORE=1.
    f.hint_nomultithread = job_getenv(sp, "SLURM_THREADS_PER_CORE").value_or("") == "1";
    const bool from_hint = f.hint_nomultithread && job_getenv(sp, "SLURM_CPU_BIND_TYPE").value_or("") == "threads";
    f.user_cpu_bind = !from_hint && typed_not_inherited(cpu_bind, job_getenv(sp, kInheritedCpuBind)) &&
                      selects_binding(*cpu_bind);
    const auto mem_bind = job_getenv(sp, "SLURM_MEM_BIND");
    f.user_mem_bind = typed_not_inherited(mem_bind, job_getenv(sp, kInheritedMemBind)) && selects_binding(*mem_bind);
    f.has_gpus = set_and_nonempty(job_getenv(sp, job_level(f.kind) ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS"));
    for (const char* v : kRuntimeVariables)
        f.has_gpus = f.has_gpus || job_getenv(sp, v).has_value();
    return f;
}

void clear_markers(spank_t sp) {
    spank_unsetenv(sp, kInheritedCpuBind);
    spank_unsetenv(sp, kInheritedMemBind);
}

void clear_variables(spank_t sp, bool mode_none) {
    // numabind's own UCX_NET_DEVICES (equal to its marker) goes with the marker; a user's stays.
    if (ucx_is_numabinds(job_getenv(sp, "UCX_NET_DEVICES"), job_getenv(sp, kUcxMarker)))
        spank_unsetenv(sp, "UCX_NET_DEVICES");
    for (const char* v : kExportedVariables) spank_unsetenv(sp, v);
    clear_markers(sp);
    if (mode_none) spank_setenv(sp, kEnvMode, "none", 1);
}

}  // namespace numabind::spank
