// Where a process's local rank and the node's local task count come from.
#pragma once

#include <optional>
#include <string>

#include "numabind/visible.hpp"

namespace numabind {

struct LocalRank {
    int rank = 0;
    int size = 0;          // 0: unknown
    std::string source;    // e.g. "SLURM_LOCALID", "--local-rank"
    std::string size_source;
};

// From the launchers' variables, innermost launcher first: torchrun's LOCAL_RANK (with
// TORCHELASTIC_RUN_ID), OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK,
// PALS_LOCAL_RANKID, LOCAL_RANK, then SLURM_LOCALID (Slurm is always the outer launcher).
// Returns nullopt when none is set; throws UsageError on a malformed value.
std::optional<LocalRank> local_rank_from_env(const EnvLookup& env);

// Parses a non-negative integer option/variable strictly; names `what` in the error.
int parse_nonnegative(const std::string& text, const std::string& what);

}  // namespace numabind
