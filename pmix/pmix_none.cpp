// Built without libpmix: the PMIx rank source reports why it is unavailable.
#include "pmix_rank.hpp"

namespace numabind {

std::optional<LocalRank> pmix_local_rank(std::string& error) {
    error = "this numabind was built without PMIx support (libpmix-dev was not found)";
    return std::nullopt;
}

bool pmix_available() { return false; }

}  // namespace numabind
