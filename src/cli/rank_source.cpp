#include "rank_source.hpp"

namespace numabind {

LocalRank resolve_local_rank(const std::string& local_rank_opt, const std::string& ntasks_opt,
                             const std::string& rank_source, const EnvLookup& env,
                             std::vector<std::string>* warnings, const PmixQuery& pmix) {
    return resolve_local_rank(local_rank_opt, ntasks_opt, rank_source, env, PmixRankSource{pmix, pmix_available()},
                              warnings);
}

}  // namespace numabind
