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

std::string first_word(const std::string& s) { return s.substr(0, s.find(' ')); }

}  // namespace

std::vector<std::string> pmix_launcher_disagreements(const LocalRank& pmix, const LocalRank& launcher) {
    std::vector<std::string> out;
    if (pmix.rank != launcher.rank)
        out.push_back("the PMIx server says local rank " + std::to_string(pmix.rank) + " but " +
                      first_word(launcher.source) + "=" + std::to_string(launcher.rank) +
                      "; using PMIx's (--rank-source pmix)");
    if (pmix.size > 0 && launcher.size > 0 && pmix.size != launcher.size)
        out.push_back("the PMIx server says " + std::to_string(pmix.size) + " local tasks but " +
                      launcher.size_source + " says " + std::to_string(launcher.size) +
                      "; using PMIx's (--rank-source pmix)");
    return out;
}

LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env,
                             std::vector<std::string>* warnings, const PmixQuery& pmix) {
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
            found = pmix(error);
            if (!found) throw Error("--rank-source pmix: " + error);
            // Two sources for one fact: they must agree, or the user hears of it.
            if (std::optional<LocalRank> launcher = innermost_launcher_rank(env)) {
                std::vector<std::string> differ = pmix_launcher_disagreements(*found, *launcher);
                if (differ.empty()) {
                    found->source += ", agrees with " + first_word(launcher->source);
                } else if (warnings) {
                    warnings->insert(warnings->end(), differ.begin(), differ.end());
                }
                // A server that does not say how many tasks share the node: the launcher does.
                if (found->size == 0 && launcher->size > 0) {
                    found->size = launcher->size;
                    found->size_source = launcher->size_source + " (the PMIx server gave none)";
                }
            }
        } else {
            // auto/env never connect to PMIx: the launchers export free variables, and a
            // PMIx client connection changes the environment of the program exec'd next.
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
            std::string(pmix_available() ? ", or --rank-source pmix under a PMIx launcher" : ""));
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
