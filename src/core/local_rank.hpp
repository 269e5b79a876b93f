// Where a process's local rank and the node's local task count come from.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/visible.hpp"

namespace numabind {

struct LocalRank {
    int rank = 0;
    int size = 0;          // 0: unknown
    std::string source;    // e.g. "SLURM_LOCALID", "--local-rank"
    std::string size_source;
    bool torchrun = false;  // the rank is torchrun's LOCAL_RANK (torch's device rule applies)
};

// A torchrun worker: LOCAL_RANK with the elastic agent's TORCHELASTIC_RUN_ID or GROUP_RANK
// (a bare LOCAL_RANK may be any launcher's).
bool torchrun_worker(const EnvLookup& env);

// The most local tasks a request may name: far above any node's task count, and a plan of
// that many tasks still fits in memory (a larger value was a std::bad_alloc).
constexpr int kMaxLocalTasks = 65536;

// A local task count (--ntasks, LOCAL_WORLD_SIZE, ...): parse_nonnegative, then at most
// kMaxLocalTasks; the UsageError names `what`, the value and the limit.
int parse_task_count(const std::string& text, const std::string& what);
// A local rank: parse_nonnegative, then below kMaxLocalTasks.
int parse_local_rank(const std::string& text, const std::string& what);

// From the launchers' variables, innermost launcher first: torchrun's LOCAL_RANK (with
// TORCHELASTIC_RUN_ID), OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK,
// PALS_LOCAL_RANKID, LOCAL_RANK, then SLURM_LOCALID (Slurm is always the outer launcher).
// Returns nullopt when none is set; throws UsageError on a malformed value.
std::optional<LocalRank> local_rank_from_env(const EnvLookup& env);

// Parses a non-negative integer option/variable strictly; names `what` in the error.
int parse_nonnegative(const std::string& text, const std::string& what);

// The PMIx rank source of the program (the CLI links pmix/ when libpmix is found); empty
// in the library's C API, where the program itself may be a PMIx client.
struct PmixRankSource {
    std::function<std::optional<LocalRank>(std::string& error)> local_rank;
    bool available = false;
};

// --local-rank/--ntasks beat everything; rank_source: "auto" (launcher variables, the
// innermost launcher first: torchrun, MPI launchers, then Slurm; never PMIx),
// "env" (the same, stated), "pmix" (the PMIx server; when a launcher variable is set too
// the two are compared: a disagreement is appended to `warnings`, PMIx wins, and the
// source says so). Throws UsageError/Error.
LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env, const PmixRankSource& pmix,
                             std::vector<std::string>* warnings = nullptr);

// The PMIx answer checked against the launcher's variables (both sources present): a
// warning for each of rank and size that differ, none when they agree. Pure.
std::vector<std::string> pmix_launcher_disagreements(const LocalRank& pmix, const LocalRank& launcher);

}  // namespace numabind
