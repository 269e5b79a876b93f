// Local-rank variables (local_rank_from_env: SLURM_LOCALID + SLURM_STEP_TASKS_PER_NODE +
// SLURM_NODEID, OMPI_*, MPI_*, MV2_*, PALS_*, LOCAL_RANK/LOCAL_WORLD_SIZE) and the CLI's
// resolution with its options (resolve_local_rank). Input: "NAME=value" lines; the
// pseudo-variables @local_rank, @ntasks and @source stand for --local-rank, --ntasks and
// --rank-source (PMIx is the built-without-PMIx stub here).
#include <string>

#include "core/local_rank.hpp"
#include "fuzz_support.hpp"
#include "numabind/error.hpp"
#include "pmix_rank.hpp"

using namespace numabind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto env = nbfuzz::env_lines(nbfuzz::as_string(data, size));
    const EnvLookup look = nbfuzz::lookup(env);
    try {
        if (auto lr = local_rank_from_env(look)) {
            NB_FUZZ_CHECK(lr->rank >= 0 && lr->size >= 0, lr->source);
            NB_FUZZ_CHECK(lr->size == 0 || lr->rank < lr->size, lr->source);
            NB_FUZZ_CHECK(env.count(lr->source) == 1, lr->source);
        }
    } catch (const UsageError&) {
    }
    auto opt = [&env](const char* k) {
        auto it = env.find(k);
        return it == env.end() ? std::string() : it->second;
    };
    const std::string source = env.count("@source") ? opt("@source") : std::string("auto");
    try {
        LocalRank lr = resolve_local_rank(opt("@local_rank"), opt("@ntasks"), source, look, pmix_rank_source());
        NB_FUZZ_CHECK(lr.rank >= 0 && lr.size >= 0, lr.source);
        NB_FUZZ_CHECK(lr.size == 0 || lr.rank < lr.size, lr.source);
        NB_FUZZ_CHECK(!lr.source.empty(), "no source");
    } catch (const Error&) {
    }
    return 0;
}
