// Local rank resolution for `numabind run`: option, launcher variables, PMIx.
#pragma once

#include <optional>
#include <string>

#include "numabind/local_rank.hpp"

namespace numabind {

// The PMIx adapter (pmix/), linked in when libpmix is available. Connects as a
// PMIx client: this spends the process's PMIx identity, so it is only used when
// asked for (--rank-source pmix) and the exec'd program is not itself a PMIx client.
std::optional<LocalRank> pmix_local_rank(std::string& error);
bool pmix_available();

// --local-rank/--ntasks beat everything; rank_source: "auto" (launcher variables, the
// innermost launcher first: torchrun, MPI launchers, then Slurm; never PMIx),
// "env" (the same, stated), "pmix" (the PMIx server). Throws UsageError/Error.
LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env);

}  // namespace numabind
