// numabind SPANK plugin: the --numa-binding option in srun, sbatch, salloc and slurmstepd.
#include <cstdlib>

#include "front.hpp"
#include "numabind/error.hpp"
#include "shared/messages.hpp"
#include "shared/step_scope.hpp"

namespace numabind::spank {

namespace {

char opt_name[] = "numa-binding";
char opt_arginfo[] = "mode[,flags]";
char opt_usage[] =
    "Bind each task to the CPUs and memory local to its GPU. mode: none, node, socket, exclusive, "
    "core-complex; flags: verbose, verbose=2, mem=prefer|bind|interleave|none, ucx (UCX_NET_DEVICES from the nearest NICs), "
    "smt=1|all (one thread per core), omp (OMP_NUM_THREADS/OMP_PLACES/OMP_PROC_BIND) (e.g. --numa-binding=exclusive,verbose). "
    "Without this option a site default may apply (--numa-binding=none opts out); see man spank_numabind";

struct spank_option numa_binding_option = {opt_name, opt_arginfo, opt_usage, 1, 0, option_callback};

}  // namespace

// Called by Slurm directly (srun/sbatch/salloc once, slurmstepd twice): idempotent,
// and nothing may escape it.
int option_callback(int /*val*/, const char* optarg, int remote) noexcept {
    try {
        FrontState& st = front_state();
        const std::string value = optarg ? optarg : "";
        st.option_seen = true;
        try {
            st.choice = parse_option_value(value);
            st.option_given = true;
            st.option_error.clear();
            return 0;
        } catch (const UsageError& e) {
            st.option_given = false;
            if (remote) {
                // srun validated it already; a bad value here came around srun. Fail the tasks.
                st.option_error = e.what();
                return 0;
            }
            log_error(e.what());
            return -1;
        }
    } catch (...) {
        slurm_error("numabind: --numa-binding: internal error");
        return -1;
    }
}

int local_init(spank_t sp) {
    if (spank_context() == S_CTX_LOCAL) record_inherited_binding();  // srun: before it reads its options
    spank_err_t rc = spank_option_register(sp, &numa_binding_option);
    if (rc != ESPANK_SUCCESS) {
        log_error(std::string("cannot register --numa-binding: ") + spank_strerror(rc));
        return -1;
    }
    return 0;
}

int local_init_post_opt(spank_t /*sp*/) {
    // srun inside a batch script picks the sbatch value up from the environment; Slurm
    // runs the callback for it, but check again so a bad value can never slip through.
    FrontState& st = front_state();
    if (st.option_given) return 0;
    const char* env = std::getenv(kOptionEnv);
    if (!env) return 0;
    try {
        st.choice = parse_option_value(env);
        st.option_given = true;
        return 0;
    } catch (const UsageError& e) {
        log_error(std::string(e.what()) + " (from " + kOptionEnv + ")");
        return -1;
    }
}

}  // namespace numabind::spank
