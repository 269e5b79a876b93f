#include "core/local_rank.hpp"

#include <charconv>

#include "numabind/error.hpp"

namespace numabind {

int parse_nonnegative(const std::string& text, const std::string& what) {
    int value = -1;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < 0) {
        throw UsageError("invalid " + what + " '" + text + "' (expected a non-negative integer)");
    }
    return value;
}

int parse_task_count(const std::string& text, const std::string& what) {
    const int value = parse_nonnegative(text, what);
    if (value > kMaxLocalTasks)
        throw UsageError("invalid " + what + " '" + text + "' (at most " + std::to_string(kMaxLocalTasks) +
                         " local tasks)");
    return value;
}

int parse_local_rank(const std::string& text, const std::string& what) {
    const int value = parse_nonnegative(text, what);
    if (value >= kMaxLocalTasks)
        throw UsageError("invalid " + what + " '" + text + "' (at most " + std::to_string(kMaxLocalTasks - 1) + ")");
    return value;
}

bool torchrun_worker(const EnvLookup& env) {
    return env("LOCAL_RANK") && (env("TORCHELASTIC_RUN_ID") || env("GROUP_RANK"));
}

namespace {

// Slurm's "2(x3),1" task-per-node notation, for node `node_index`.
int slurm_tasks_on_node(const std::string& spec, int node_index) {
    long long node = 0;  // sum of repeat counts: may exceed int ("1(x2147483647),1(x2147483647)")
    size_t pos = 0;
    while (pos < spec.size()) {
        size_t comma = spec.find(',', pos);
        std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        int count = 0, repeat = 1;
        size_t paren = item.find("(x");
        if (paren != std::string::npos && item.back() == ')') {
            count = parse_task_count(item.substr(0, paren), "SLURM_STEP_TASKS_PER_NODE");
            repeat = parse_nonnegative(item.substr(paren + 2, item.size() - paren - 3), "SLURM_STEP_TASKS_PER_NODE");
        } else {
            count = parse_task_count(item, "SLURM_STEP_TASKS_PER_NODE");
        }
        if (node_index < node + repeat) return count;
        node += repeat;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return 0;
}

}  // namespace

std::optional<LocalRank> local_rank_from_env(const EnvLookup& env) {
    struct Source {
        const char* rank;
        const char* size;
        bool torchrun;  // only counts when torchrun's elastic agent is there too
    };
    // Innermost launcher first: Slurm is always the outer one (mpirun inside salloc runs
    // one orted per node, so its ranks inherit SLURM_LOCALID=0), and torchrun inside
    // anything sets LOCAL_RANK with its agent's TORCHELASTIC_RUN_ID / GROUP_RANK.
    static const Source sources[] = {
        {"LOCAL_RANK", "LOCAL_WORLD_SIZE", true},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", false},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS", false},
        {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", false},
        {"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", false},
        {"LOCAL_RANK", "LOCAL_WORLD_SIZE", false},
        // Flux: inside `srun flux start` its tasks are the inner ones.
        {"FLUX_TASK_LOCAL_ID", nullptr, false},
        {"SLURM_LOCALID", nullptr, false},
    };
    for (const Source& s : sources) {
        auto rank = env(s.rank);
        if (!rank || (s.torchrun && !torchrun_worker(env))) continue;
        LocalRank lr;
        lr.rank = parse_local_rank(*rank, s.rank);
        lr.source = s.rank;
        lr.torchrun = s.torchrun;
        if (s.size) {
            if (auto size = env(s.size)) {
                lr.size = parse_task_count(*size, s.size);
                lr.size_source = s.size;
            }
        } else if (std::string(s.rank) == "FLUX_TASK_LOCAL_ID") {
            // Flux exports no per-node task count, only the job's (FLUX_JOB_SIZE) and its
            // node count (FLUX_JOB_NNODES): exact on one node; across nodes its task map
            // may be uneven (-N2 -n5), so the count stays unknown there (--ntasks gives it).
            auto size = env("FLUX_JOB_SIZE");
            auto nnodes = env("FLUX_JOB_NNODES");
            if (size && nnodes && parse_nonnegative(*nnodes, "FLUX_JOB_NNODES") == 1) {
                lr.size = parse_task_count(*size, "FLUX_JOB_SIZE");
                lr.size_source = "FLUX_JOB_SIZE (FLUX_JOB_NNODES=1)";
            }
        } else if (auto per_node = env("SLURM_STEP_TASKS_PER_NODE")) {
            int node = 0;
            if (auto nodeid = env("SLURM_NODEID")) node = parse_nonnegative(*nodeid, "SLURM_NODEID");
            lr.size = slurm_tasks_on_node(*per_node, node);
            lr.size_source = "SLURM_STEP_TASKS_PER_NODE";
        }
        if (lr.size > 0 && lr.rank >= lr.size) {
            throw UsageError(std::string(s.rank) + "=" + *rank + " is not below the local task count " +
                             std::to_string(lr.size) + " (" + lr.size_source + ")");
        }
        return lr;
    }
    return std::nullopt;
}

// ---- resolve_local_rank (shared by `numabind run` and the C API) ----
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
                             const std::string& rank_source, const EnvLookup& env, const PmixRankSource& pmix,
                             std::vector<std::string>* warnings) {
    if (rank_source != "auto" && rank_source != "env" && rank_source != "pmix")
        throw UsageError("invalid --rank-source '" + rank_source + "' (valid: auto, env, pmix)");
    LocalRank lr;
    bool have_rank = false;
    if (!local_rank_opt.empty()) {
        lr.rank = parse_local_rank(local_rank_opt, "--local-rank");
        lr.source = "--local-rank";
        have_rank = true;
    }
    if (!have_rank || ntasks_opt.empty()) {
        std::optional<LocalRank> found;
        if (rank_source == "pmix") {
            std::string error;
            found = pmix.local_rank ? pmix.local_rank(error) : std::nullopt;
            if (!found && error.empty()) error = "no PMIx rank source in this program";
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
            // auto/env never touch PMIx: connecting would spend the PMIx identity of
            // the program exec'd next (its MPI_Init would fail).
            found = innermost_launcher_rank(env);
        }
        if (found) {
            if (!have_rank) {
                lr.rank = found->rank;
                lr.source = found->source;
                lr.torchrun = found->torchrun;
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
            "LOCAL_RANK, FLUX_TASK_LOCAL_ID); pass --local-rank N --ntasks M" +
            std::string(pmix.available ? ", or --rank-source pmix under a PMIx launcher" : ""));
    }
    if (!ntasks_opt.empty()) {
        lr.size = parse_task_count(ntasks_opt, "--ntasks");
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
