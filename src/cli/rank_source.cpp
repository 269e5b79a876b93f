#include "rank_source.hpp"

#include "numabind/error.hpp"

namespace numabind {

namespace {

// The launchers' variables (innermost launcher first: local_rank_from_env), saying so when
// an enclosing Slurm step's SLURM_LOCALID was passed over.
std::optional<LocalRank> innermost_launcher_rank(const EnvLookup& env) {
    std::optional<LocalRank> found = local_rank_from_env(env);
    if (found && found->source != "SLURM_LOCALID" && env("SLURM_LOCALID"))
        found->source += " (inner launcher; the enclosing Slurm step's SLURM_LOCALID is ignored)";
    return found;
}

}  // namespace

LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env) {
    if (rank_source != "auto" && rank_source != "env" && rank_source != "pmix")
        throw UsageError("invalid --rank-source '" + rank_source + "' (valid: auto, env, pmix)");
    LocalRank lr;
    bool have_rank = false;
    if (!local_rank_opt.empty()) {
        lr.rank = parse_nonnegative(local_rank_opt, "--local-rank");
        lr.source = "--local-rank";
        have_rank = true;
    }
    if (!have_rank || ntasks_opt.empty()) {
        std::optional<LocalRank> found;
        if (rank_source == "pmix") {
            std::string error;
            found = pmix_local_rank(error);
            if (!found) throw Error("--rank-source pmix: " + error);
        } else {
            // auto/env never touch PMIx: connecting would spend the PMIx identity of
            // the program exec'd next (its MPI_Init would fail).
            found = innermost_launcher_rank(env);
        }
        if (found) {
            if (!have_rank) {
                lr.rank = found->rank;
                lr.source = found->source;
                have_rank = true;
            }
            lr.size = found->size;
            lr.size_source = found->size_source;
        }
    }
    if (!have_rank) {
        throw Error(
            "cannot determine the local rank: no launcher variable is set (SLURM_LOCALID, "
            "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK, PALS_LOCAL_RANKID, "
            "LOCAL_RANK); pass --local-rank N --ntasks M" +
            std::string(pmix_available() ? ", or --rank-source pmix for a program that is not an MPI/PMIx client"
                                         : ""));
    }
    if (!ntasks_opt.empty()) {
        lr.size = parse_nonnegative(ntasks_opt, "--ntasks");
        if (lr.size < 1) throw UsageError("invalid --ntasks '0' (must be at least 1)");
        lr.size_source = "--ntasks";
    }
    if (lr.size > 0 && lr.rank >= lr.size) {
        throw UsageError("local rank " + std::to_string(lr.rank) + " (" + lr.source + ") is not below the local task count " +
                         std::to_string(lr.size) + " (" + lr.size_source + ")");
    }
    return lr;
}

}  // namespace numabind
