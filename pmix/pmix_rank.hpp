// The PMIx adapter: the local rank as the PMIx server tells it (`numabind run --rank-source
// pmix`). The rule that weighs it against the launcher variables is the engine's
// (resolve_local_rank, src/core/local_rank.hpp); this folder only asks the server.
// pmix_rank.cpp when libpmix is found, pmix_none.cpp (the same functions, saying why not)
// when it is not: callers never test for PMIx themselves.
#pragma once

#include <optional>
#include <string>

#include "core/local_rank.hpp"

namespace numabind {

// Connects as a PMIx client in a forked child. Unless PMIX_MCA_gds is already set, it first
// sets PMIX_MCA_gds=hash in this process's environment (so also the exec'd program's): with
// the shared-memory store a client connection spends the identity the program's MPI_Init
// needs (docs/MPI.md). The returned source names the store used.
std::optional<LocalRank> pmix_local_rank(std::string& error);
bool pmix_available();

// This program's PMIx source, as resolve_local_rank takes it.
inline PmixRankSource pmix_rank_source() { return PmixRankSource{pmix_local_rank, pmix_available()}; }

}  // namespace numabind
