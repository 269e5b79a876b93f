#include "core/omp.hpp"

#include <algorithm>

#include "core/local_rank.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind {

const char* const kSmtChoices = "1, all";

bool parse_smt(std::string_view text, std::string_view what) {
    if (text == "1") return true;
    if (text == "all") return false;
    throw UsageError("invalid " + std::string(what) + " '" + std::string(text) + "' (valid: " + kSmtChoices + ")");
}

int parse_threads(const std::string& text, std::string_view what) {
    int n = 0;
    try {
        n = parse_nonnegative(text, std::string(what));
    } catch (const UsageError&) {
        n = -1;
    }
    if (n < 1 || n > kMaxOmpThreads)
        throw UsageError("invalid " + std::string(what) + " '" + text + "' (a whole number from 1 to " +
                         std::to_string(kMaxOmpThreads) + ")");
    return n;
}

bool omp_is_torchrun_default(const EnvLookup& env) {
    return torchrun_worker(env) && env("OMP_NUM_THREADS").value_or("") == "1";
}

std::string torchrun_omp_notice(int ncpus, const std::string& override_hint) {
    return "OMP_NUM_THREADS=1 is torchrun's default for its workers (set because none was given) and was kept: "
           "OpenMP and torch's intra-op pool run 1 thread on this task's " +
           std::to_string(ncpus) + " CPUs; pass " + override_hint + " or set OMP_NUM_THREADS before torchrun";
}

int min_cpus_one_thread(const Topology& topo, const IdSet& allowed, int min_cpus) {
    int threads = 1;
    for (const Core& c : topo.cores) threads = std::max(threads, static_cast<int>((c.pus & allowed).size()));
    return (min_cpus + threads - 1) / threads;
}

namespace {

// The places of omp_places, one CPU list each.
std::vector<IdSet> place_sets(const Topology& topo, const IdSet& cpus) {
    std::vector<IdSet> places;
    IdSet in_cores;
    for (const Core& c : topo.cores) {
        in_cores |= c.pus;
        if (IdSet mine = c.pus & cpus; !mine.empty()) places.push_back(std::move(mine));
    }
    for (int pu : (cpus - in_cores).ids()) places.push_back(IdSet{pu});
    return places;
}

std::string places_text(const std::vector<IdSet>& places) {
    std::string out;
    for (const IdSet& p : places) out += (out.empty() ? "{" : ",{") + join_ints(p.ids()) + "}";
    return out;
}

}  // namespace

std::string omp_places(const Topology& topo, const IdSet& cpus) { return places_text(place_sets(topo, cpus)); }

std::vector<OmpVariable> omp_environment(const Topology& topo, const IdSet& cpus, const EnvLookup& env) {
    const std::vector<IdSet> places = place_sets(topo, cpus);
    std::vector<OmpVariable> vars = {{"OMP_NUM_THREADS", std::to_string(places.size())},
                                     {"OMP_PLACES", places_text(places)},
                                     {"OMP_PROC_BIND", "close"}};
    for (OmpVariable& v : vars) {
        const auto have = env ? env(v.name) : std::nullopt;
        v.kept = have && !have->empty();
    }
    return vars;
}

std::string omp_summary(const std::vector<OmpVariable>& vars) {
    std::string set, kept;
    for (const OmpVariable& v : vars) {
        if (v.kept) kept += (kept.empty() ? "" : ", ") + v.name;
        else set += (set.empty() ? "" : " ") + v.name + "=" + v.value;
    }
    std::string out = set.empty() ? std::string() : set + " set";
    if (!kept.empty()) out += (out.empty() ? "" : "; ") + kept + " kept (already set)";
    return out;
}

}  // namespace numabind
