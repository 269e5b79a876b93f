#include "rank_source.hpp"

namespace numabind {

LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env) {
    return resolve_local_rank(local_rank_opt, ntasks_opt, rank_source, env,
                              PmixRankSource{pmix_local_rank, pmix_available()});
}

}  // namespace numabind
