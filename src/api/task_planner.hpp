// Adapter: what `numabind run` decides before touching the process — this machine's (or
// --topology's) accelerators, the local rank, the visible devices, the allowed CPUs —
// shared by the CLI and the C API (numabind.h), so both plan a task the same way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/local_rank.hpp"
#include "core/omp.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"

namespace numabind {

// The inputs of `numabind run` as the user wrote them (empty: not given).
struct TaskRequest {
    std::string mode = "node";
    std::string mem = "prefer";
    std::string local_rank;
    std::string ntasks;
    std::string devices;
    std::string device_match;
    std::string topology;
    std::string allowed_cpus;
    std::string rank_source = "auto";
    // No task gets fewer CPUs (--cpus-per-task; `numabind run` under srun: $SLURM_CPUS_PER_TASK).
    std::string cpus_per_task;
    // "1": one hardware thread per core, "all": every sibling (--smt); empty: "1" under Slurm's
    // --hint=nomultithread (SLURM_THREADS_PER_CORE=1) for a task (run, bind), else "all".
    std::string smt;
    bool omp = false;         // --omp: OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND where unset
    // --threads: OMP_NUM_THREADS for the program, replacing any (torchrun's 1 included); empty: none.
    std::string omp_threads;
};

// --cpus-per-task as given, else (`from_slurm`) Slurm's SLURM_CPUS_PER_TASK, else 0 (no
// minimum). Throws UsageError naming a bad value.
int cpus_per_task(const TaskRequest& request, bool from_slurm);

using Notify = std::function<void(const std::string& line)>;

// getenv as an EnvLookup.
std::optional<std::string> getenv_lookup(const std::string& name);

// The builtin accelerator matcher, or the --device-match spec. Throws UsageError.
DeviceMatcher make_matcher(const std::string& spec);

// The per-boot topology cache directory: NUMABIND_TOPOLOGY_CACHE (a directory, or "off").
std::optional<TopologyCacheOptions> cache_options();

// `topology` XML, else this machine: from the per-boot cache when valid (read only;
// `topo --export-cache` or the SPANK plugin writes it), else discovered live.
std::unique_ptr<HwlocTopology> load_topology(const std::string& topology, bool xml_is_this_system,
                                             const Notify& note);

// The device rule follows where the local rank came from: torchrun's LOCAL_RANK gets
// torch's (worker r on device r: its programs call cuda.set_device(LOCAL_RANK)), every
// other source the blocks (a task may drive several devices).
DeviceRule device_rule_for(const LocalRank& lr);

// Under a launcher's variables other than torchrun's, when some task owns a block of
// several devices: one line (said by local rank 0 only, so once per step and node) naming
// each task's devices and how a program picking cuda:LOCAL_RANK agrees with them. Pure.
std::optional<std::string> device_block_notice(const NodePlan& plan, const LocalRank& lr);

// Plans this node as `numabind run` does and returns this task's share (pointing into
// plan_out). `note` gets the verbose lines, `warn` the warnings a user must see.
// Throws UsageError (bad input) or Error.
// With request.omp and `omp_out`, also the task's OpenMP variables (omp.hpp), `kept` where
// this process's environment has them.
TaskPlan plan_this_task(const TaskRequest& request, NodePlan& plan_out, const PmixRankSource& pmix,
                        const Notify& note, const Notify& warn, std::vector<OmpVariable>* omp_out = nullptr);

// What `numabind plan` plans for the whole node from `request` (nothing applied, nothing
// read from the process: the topology's own allowed CPUs unless allowed_cpus is given, the
// visible devices from request.devices only). The task count: request.ntasks, else the
// launcher's variables; unknown is a UsageError naming `ntasks_name`.
NodePlan plan_preview(const TaskRequest& request, const Notify& note, const std::string& ntasks_name = "--ntasks");

}  // namespace numabind
