// One hardware thread per core (smt=1|all) and OpenMP inside the binding (omp): the
// spelling of the setting and the OMP_* values for a task's CPUs. Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/visible.hpp"
#include "numabind/idset.hpp"
#include "numabind/topology.hpp"

namespace numabind {

extern const char* const kSmtChoices;  // "1, all"

// "1": one hardware thread per core (true), "all": every sibling (false). Throws UsageError
// "invalid <what> '<text>' (valid: 1, all)".
bool parse_smt(std::string_view text, std::string_view what);

// --threads / threads=: the program's OpenMP (and torch intra-op) thread count, a whole
// number from 1 to kMaxOmpThreads. Throws UsageError naming the value and the range.
constexpr int kMaxOmpThreads = 65536;
int parse_threads(const std::string& text, std::string_view what);

// OMP_NUM_THREADS=1 in a torchrun worker is torchrun's own default (it sets 1 only when the
// user set none, and says so on its console), not a choice the binding should keep silently.
bool omp_is_torchrun_default(const EnvLookup& env);

// The one line saying that torchrun's OMP_NUM_THREADS=1 was kept for a task of `ncpus` CPUs;
// `override_hint` names the front's override ("--threads N", "threads=N").
std::string torchrun_omp_notice(int ncpus, const std::string& override_hint);

// A --cpus-per-task minimum counted in hardware threads, as cores under smt=1: Slurm's -c 8
// on 2-thread cores is 4 cores, which smt=1 turns into 4 CPUs, not 8 (that would pull other
// NUMA nodes' cores in). ceil(min_cpus / the most allowed threads of one core); 0 stays 0.
int min_cpus_one_thread(const Topology& topo, const IdSet& allowed, int min_cpus);

struct OmpVariable {
    std::string name;   // OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND
    std::string value;  // what numabind would set
    bool kept = false;  // the environment has a non-empty value of its own: left alone
};

// One OpenMP place per core that `cpus` touches, in hwloc's core order, each listing that
// core's PUs within `cpus` ("{0,32},{1,33}"; "{0},{1}" with one thread per core); a PU
// outside every core is a place of its own, after them. Empty for empty `cpus`.
std::string omp_places(const Topology& topo, const IdSet& cpus);

// OMP_NUM_THREADS (one thread per place, i.e. per core), OMP_PLACES (omp_places) and
// OMP_PROC_BIND=close, each marked `kept` where `env` already has a non-empty value.
std::vector<OmpVariable> omp_environment(const Topology& topo, const IdSet& cpus, const EnvLookup& env);

// "OMP_NUM_THREADS=8 OMP_PLACES=... set; OMP_PROC_BIND kept (already set)": one line for verbose output.
std::string omp_summary(const std::vector<OmpVariable>& vars);

}  // namespace numabind
