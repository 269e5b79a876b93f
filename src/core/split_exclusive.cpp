// Mode exclusive: disjoint whole cores per task within each pool (plan_stages.hpp, 3c-3d).
#include <algorithm>
#include <climits>
#include <numeric>

#include "core/plan_stages.hpp"
#include "core/split_units.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind::planning {

std::vector<Unit> cores_in(const Topology& topo, const IdSet& within) {
    std::vector<Unit> cores;
    for (const Core& c : topo.cores) {
        if (!c.pus.intersects(within)) continue;  // cheap test first: no temporary set
        cores.push_back({c.pus & within, c.l3});
    }
    return cores;
}

int core_count(const Topology& topo, const IdSet& pus) {
    int n = 0;
    for (const Core& c : topo.cores) n += c.pus.intersects(pus) ? 1 : 0;
    return n;
}

std::string describe(const Home& home) {
    return home.nodes.empty() ? "the allowed CPUs" : "NUMA node(s) " + join_ints(home.nodes);
}

namespace {

// Whole cores to `parts` tasks; see split_exclusive().
std::vector<IdSet> split_cores(const std::vector<Unit>& cores, int parts) {
    const int ncores = static_cast<int>(cores.size());
    auto unite = [&](IdSet& out, int begin, int end) {
        for (int k = begin; k < end; ++k) out |= cores[k].pus;
    };
    // Runs of consecutive cores sharing an L3, as [first, end) ranges.
    std::vector<std::pair<int, int>> runs;
    int last_l3 = INT_MIN;
    for (int i = 0; i < ncores; ++i) {
        if (runs.empty() || cores[i].l3 != last_l3 || cores[i].l3 < 0) runs.emplace_back(i, i);
        runs.back().second = i + 1;
        last_l3 = cores[i].l3;
    }
    const int groups = static_cast<int>(runs.size());
    const bool has_l3 = std::any_of(cores.begin(), cores.end(), [](const Unit& u) { return u.l3 >= 0; });
    // L3 edges only while the shares stay even (runs thinned by the allowed set may differ).
    auto run_size = [&](int g) { return runs[g].second - runs[g].first; };
    std::vector<IdSet> out(parts);
    if (has_l3 && groups >= parts && groups % parts == 0) {  // whole L3 runs per task
        const int per = groups / parts;
        int lo = INT_MAX, hi = 0;
        for (int p = 0; p < parts; ++p) {
            int size = 0;
            for (int k = 0; k < per; ++k) size += run_size(p * per + k);
            lo = std::min(lo, size), hi = std::max(hi, size);
        }
        if (hi - lo <= 1) {
            for (int p = 0; p < parts; ++p)
                for (int k = 0; k < per; ++k) unite(out[p], runs[p * per + k].first, runs[p * per + k].second);
            return out;
        }
    }
    if (has_l3 && parts > groups && parts % groups == 0) {  // each L3 run split among the same count
        const int per = parts / groups;
        int lo = INT_MAX, hi = 0;
        for (int g = 0; g < groups; ++g) {
            lo = std::min(lo, run_size(g) / per);
            hi = std::max(hi, (run_size(g) + per - 1) / per);
        }
        const bool fits = lo >= 1 && hi - lo <= 1;
        if (fits) {
            int p = 0;
            for (const auto& [first, end] : runs) {
                std::vector<int> sizes = even_sizes(end - first, per);
                int next = first;
                for (int piece = 0; piece < per; ++piece, ++p) {
                    unite(out[p], next, next + sizes[piece]);
                    next += sizes[piece];
                }
            }
            return out;
        }
    }
    std::vector<int> sizes = even_sizes(ncores, parts);
    int next = 0;
    for (int p = 0; p < parts; ++p) {
        unite(out[p], next, next + sizes[p]);
        next += sizes[p];
    }
    return out;
}

}  // namespace

std::vector<IdSet> split_exclusive(const Topology& topo, const IdSet& home_cpus, int parts, const std::string& what,
                                   std::vector<std::string>& warnings) {
    const std::vector<Unit> cores = cores_in(topo, home_cpus);
    if (static_cast<int>(cores.size()) >= parts) return split_cores(cores, parts);

    // Fewer cores than tasks: hand out hardware threads, and say how many tasks share a core.
    std::vector<int> pus;
    for (const Unit& u : cores)
        for (int pu : u.pus.ids()) pus.push_back(pu);
    if (static_cast<int>(pus.size()) < parts) {
        throw Error(std::to_string(parts) + " tasks share " + what + " but only " + std::to_string(pus.size()) +
                    " allowed PU(s) are there; exclusive binding impossible");
    }
    std::vector<IdSet> out(parts);
    std::vector<int> sizes = even_sizes(static_cast<int>(pus.size()), parts);
    size_t next = 0;
    for (int p = 0; p < parts; ++p)
        for (int k = 0; k < sizes[p]; ++k) out[p].insert(pus[next++]);
    int sharing = 0;
    for (int p = 0; p < parts; ++p) {
        bool shares = false;
        for (const Unit& u : cores)
            if (u.pus.intersects(out[p]) && !u.pus.is_subset_of(out[p])) shares = true;
        sharing += shares ? 1 : 0;
    }
    if (sharing > 0) {
        warnings.push_back(std::to_string(parts) + " tasks on " + what + " but only " + std::to_string(cores.size()) +
                           " core(s): " + std::to_string(sharing) +
                           " task(s) share a core's hardware threads with another task");
    }
    return out;
}

std::vector<IdSet> split_exclusive_pool(const Topology& topo, const std::vector<Home>& homes,
                                        const std::vector<int>& pool, std::vector<std::string>& warnings) {
    struct Group {
        const Home* home;
        std::vector<int> positions;  // into `pool`
    };
    std::vector<Group> groups;
    for (size_t i = 0; i < pool.size(); ++i) {
        const Home& h = homes[pool[i]];
        auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
            return g.home->cpus == h.cpus;  // the same CPUs are one home, whatever nodes named them
        });
        if (same == groups.end()) groups.push_back({&h, {}}), same = groups.end() - 1;
        same->positions.push_back(static_cast<int>(i));
    }
    std::stable_sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) {
        return core_count(topo, a.home->cpus) < core_count(topo, b.home->cpus);
    });

    IdSet free;
    for (const Group& g : groups) free |= g.home->cpus;
    // What is handed out: whole cores, or hardware threads when the pool has fewer cores
    // than tasks (split_exclusive then says how many tasks share a core).
    const bool by_threads = core_count(topo, free) < static_cast<int>(pool.size());
    auto units_in = [&](const IdSet& cpus) {
        if (!by_threads) return cores_in(topo, cpus);
        std::vector<Unit> threads;
        for (const Unit& core : cores_in(topo, cpus))
            for (int pu : core.pus.ids()) threads.push_back({IdSet{pu}, core.l3});
        return threads;
    };
    auto unit_count = [&](const IdSet& cpus) { return by_threads ? cpus.size() : core_count(topo, cpus); };

    int unserved = static_cast<int>(pool.size());
    std::vector<IdSet> out(pool.size());
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const Group& g = groups[gi];
        const int ntasks = static_cast<int>(g.positions.size());
        const std::vector<Unit> available = units_in(g.home->cpus & free);
        if (available.empty()) {
            throw Error(std::to_string(ntasks) + " task(s) on " + describe(*g.home) +
                        " find no CPU left by the tasks of other devices; exclusive binding impossible");
        }
        const std::vector<int> fair = even_sizes(unit_count(free), unserved);
        const int share = std::max(1, std::accumulate(fair.begin(), fair.begin() + ntasks, 0));
        const int count = static_cast<int>(available.size());
        std::vector<bool> selected(count, false);
        int chosen = std::min(share, count);
        for (int k = 0; k < chosen; ++k) selected[k] = true;
        // Give back, from the end of our share, a unit per task of each later group that
        // would otherwise find too few left in its own home (a wider home next to ours).
        for (size_t later = gi + 1; later < groups.size(); ++later) {
            const Group& l = groups[later];
            IdSet left = l.home->cpus & free;
            for (int k = 0; k < count; ++k)
                if (selected[k]) left = left - available[k].pus;
            int missing = static_cast<int>(l.positions.size()) - unit_count(left);
            for (int k = count - 1; k >= 0 && missing > 0 && chosen > ntasks; --k) {
                if (!selected[k] || !available[k].pus.intersects(l.home->cpus)) continue;
                selected[k] = false;
                --chosen, --missing;
            }
        }
        IdSet mine;
        for (int k = 0; k < count; ++k)
            if (selected[k]) mine |= available[k].pus;
        std::vector<IdSet> parts = split_exclusive(topo, mine, ntasks, describe(*g.home), warnings);
        for (int k = 0; k < ntasks; ++k) out[g.positions[k]] = parts[k];
        free = free - mine;
        unserved -= ntasks;
    }
    return out;
}

}  // namespace numabind::planning
