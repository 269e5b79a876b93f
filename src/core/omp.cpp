#include "numabind/omp.hpp"

#include <algorithm>

#include "numabind/error.hpp"

namespace numabind {

const char* const kSmtChoices = "1, all";

bool parse_smt(std::string_view text, std::string_view what) {
    if (text == "1") return true;
    if (text == "all") return false;
    throw UsageError("invalid " + std::string(what) + " '" + std::string(text) + "' (valid: " + kSmtChoices + ")");
}

int min_cpus_one_thread(const Topology& topo, const IdSet& allowed, int min_cpus) {
    int threads = 1;
    for (const Core& c : topo.cores) threads = std::max(threads, static_cast<int>((c.pus & allowed).size()));
    return (min_cpus + threads - 1) / threads;
}

std::string omp_places(const Topology& topo, const IdSet& cpus) {
    std::string out;
    auto place = [&out](const IdSet& pus) {
        std::string p;
        for (int pu : pus.ids()) p += (p.empty() ? "" : ",") + std::to_string(pu);
        out += (out.empty() ? "{" : ",{") + p + "}";
    };
    IdSet in_cores;
    for (const Core& c : topo.cores) {
        in_cores |= c.pus;
        const IdSet mine = c.pus & cpus;
        if (!mine.empty()) place(mine);
    }
    for (int pu : (cpus - in_cores).ids()) place(IdSet{pu});
    return out;
}

std::vector<OmpVariable> omp_environment(const Topology& topo, const IdSet& cpus, const EnvLookup& env) {
    const std::string places = omp_places(topo, cpus);
    int nplaces = 0;
    for (char ch : places) nplaces += ch == '{';
    std::vector<OmpVariable> vars = {{"OMP_NUM_THREADS", std::to_string(nplaces)},
                                     {"OMP_PLACES", places},
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
