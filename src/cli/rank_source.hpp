// Local rank resolution for `numabind run`: option, launcher variables, PMIx. The rule is
// the engine's (resolve_local_rank in src/core/local_rank.cpp); this adds the PMIx adapter.
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

// The engine's resolve_local_rank with this program's PMIx adapter (or a test's query).
LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env,
                             std::vector<std::string>* warnings = nullptr,
                             const PmixQuery& pmix = pmix_local_rank);

}  // namespace numabind
