// Local rank resolution for `numabind run`: option, launcher variables, PMIx.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "numabind/local_rank.hpp"

namespace numabind {

// The PMIx adapter (pmix/), linked in when libpmix is available. Connects as a PMIx client
// in a forked child. Unless PMIX_MCA_gds is already set, it first sets PMIX_MCA_gds=hash in
// this process's environment (so also the exec'd program's): with the shared-memory store a
// client connection spends the identity the program's MPI_Init needs (docs/MPI.md). The
// returned source names the store used.
std::optional<LocalRank> pmix_local_rank(std::string& error);
bool pmix_available();

using PmixQuery = std::function<std::optional<LocalRank>(std::string& error)>;

// --local-rank/--ntasks beat everything; rank_source: "auto" (launcher variables, the
// innermost launcher first: torchrun, MPI launchers, then Slurm; never PMIx),
// "env" (the same, stated), "pmix" (the PMIx server; when a launcher variable is set too
// the two are compared: a disagreement is appended to `warnings`, PMIx wins, and the
// source says so). Throws UsageError/Error.
LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env,
                             std::vector<std::string>* warnings = nullptr,
                             const PmixQuery& pmix = pmix_local_rank);

// The PMIx answer checked against the launcher's variables (both sources present): a
// warning for each of rank and size that differ, "" when they agree. Pure.
std::vector<std::string> pmix_launcher_disagreements(const LocalRank& pmix, const LocalRank& launcher);

}  // namespace numabind
