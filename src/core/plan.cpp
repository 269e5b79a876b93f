#include "numabind/plan.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <functional>
#include <numeric>
#include <tuple>

#include "core/plan_stages.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind {

const char* const kModeChoices = "none, node, socket, exclusive, core-complex";
const char* const kMemPolicyChoices = "prefer, bind, interleave, none";

Mode parse_mode(std::string_view text) {
    if (text == "none") return Mode::None;
    if (text == "node") return Mode::Node;
    if (text == "socket") return Mode::Socket;
    if (text == "exclusive") return Mode::Exclusive;
    if (text == "core-complex") return Mode::CoreComplex;
    throw UsageError("invalid mode '" + std::string(text) + "' (valid: " + kModeChoices + ")");
}

MemPolicy parse_mem_policy(std::string_view text) {
    if (text == "prefer") return MemPolicy::Prefer;
    if (text == "bind") return MemPolicy::Bind;
    if (text == "interleave") return MemPolicy::Interleave;
    if (text == "none") return MemPolicy::None;
    throw UsageError("invalid memory policy '" + std::string(text) + "' (valid: " +
                     kMemPolicyChoices + ")");
}

std::string to_string(Mode mode) {
    switch (mode) {
        case Mode::None: return "none";
        case Mode::Node: return "node";
        case Mode::Socket: return "socket";
        case Mode::Exclusive: return "exclusive";
        case Mode::CoreComplex: return "core-complex";
    }
    return "none";
}

std::string to_string(MemPolicy policy) {
    switch (policy) {
        case MemPolicy::None: return "none";
        case MemPolicy::Prefer: return "prefer";
        case MemPolicy::Bind: return "bind";
        case MemPolicy::Interleave: return "interleave";
    }
    return "none";
}

NodePlan::NodePlan(const NodePlan& other) { *this = other; }

NodePlan& NodePlan::operator=(const NodePlan& other) {
    if (this == &other) return *this;
    mode = other.mode;
    accelerators = other.accelerators;
    tasks = other.tasks;
    warnings = other.warnings;
    // Task device pointers must point into our own accelerator copy.
    for (size_t i = 0; i < tasks.size(); ++i) {
        if (other.tasks[i].device)
            tasks[i].device = &accelerators[other.tasks[i].device - other.accelerators.data()];
    }
    return *this;
}

namespace planning {

namespace {

// A unit the exclusive split hands out: a physical core (its PUs inside the home).
struct Unit {
    IdSet pus;
    int l3 = -1;
};

// The physical cores with PUs in `within` (only those PUs), in logical order.
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

std::vector<int> even_sizes(int count, int parts) {
    std::vector<int> sizes(parts, count / parts);
    for (int i = 0; i < count % parts; ++i) ++sizes[i];
    return sizes;
}

// ---- 1. devices per task ----

std::vector<std::vector<int>> devices_per_task(const PlanRequest& req, int ndev) {
    auto check_index = [&](int idx) {
        if (idx < 0 || idx >= ndev) {
            throw Error("device index " + std::to_string(idx) + " out of range (" +
                        (ndev ? "0-" + std::to_string(ndev - 1) : std::string("no accelerator found")) + ")");
        }
    };
    std::vector<int> visible = req.visible_devices;
    for (int idx : visible) check_index(idx);
    if (visible.empty())
        for (int i = 0; i < ndev; ++i) visible.push_back(i);
    for (const auto& own : req.per_task_devices)
        for (int idx : own) check_index(idx);
    return assign_devices(req.ntasks, visible, req.per_task_devices, req.device_rule);
}

// ---- 2. homes ----

Home home_of(const Topology& topo, const std::vector<Accelerator>& accs, const std::vector<int>& devices,
             const IdSet& allowed) {
    Home home;
    for (int d : devices) {
        const Accelerator& a = accs[d];
        if (!a.home_warning.empty() &&
            std::find(home.warnings.begin(), home.warnings.end(), a.home_warning) == home.warnings.end())
            home.warnings.push_back(a.home_warning);
        home.device_nodes.insert(home.device_nodes.end(), a.home_nodes.begin(), a.home_nodes.end());
    }
    std::sort(home.device_nodes.begin(), home.device_nodes.end());
    home.device_nodes.erase(std::unique(home.device_nodes.begin(), home.device_nodes.end()), home.device_nodes.end());
    home.nodes = home.device_nodes;
    home.cpus = topo.pus_of_nodes(home.nodes) & allowed;
    if (!home.cpus.empty()) return home;

    // No allowed CPU at home: the nearest nodes that have some.
    int best = INT_MAX;
    std::vector<int> nearest;
    for (const NumaNode& n : topo.numa_nodes) {
        if (!n.pus.intersects(allowed)) continue;
        int d = INT_MAX;
        for (int h : home.device_nodes) d = std::min(d, topo.distance(h, n.os_index));
        if (d < best) {
            best = d;
            nearest.clear();
        }
        if (d == best) nearest.push_back(n.os_index);
    }
    home.nodes = nearest;
    home.cpus = topo.pus_of_nodes(nearest) & allowed;
    if (home.cpus.empty()) {
        home.nodes.clear();
        home.cpus = allowed;  // the allowed PUs lie outside every NUMA node
    }
    home.warnings.push_back("no allowed CPU on NUMA node(s) " + join_ints(home.device_nodes) + " of device(s) " +
                            join_ints(devices) + "; using the nearest allowed CPUs " + home.cpus.to_string() +
                            (home.nodes.empty() ? "" : " (node(s) " + join_ints(home.nodes) + ")"));
    return home;
}

namespace {

// NUMA nodes with CPUs by distance from `from` (the nearest first, ties by OS index).
std::vector<const NumaNode*> nodes_by_distance(const Topology& topo, const std::vector<int>& from) {
    std::vector<std::pair<int, const NumaNode*>> order;
    for (const NumaNode& n : topo.numa_nodes) {
        if (!n.has_cpus()) continue;
        int d = from.empty() ? 0 : INT_MAX;
        for (int h : from) d = std::min(d, topo.distance(h, n.os_index));
        order.emplace_back(d, &n);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.first, a.second->os_index) < std::make_pair(b.first, b.second->os_index);
    });
    std::vector<const NumaNode*> out;
    for (const auto& [d, n] : order) out.push_back(n);
    return out;
}

}  // namespace

bool widen_home(const Topology& topo, Home& home, const IdSet& allowed, int need) {
    if (need <= 0 || home.cpus.size() >= need) return false;
    bool grew = false;
    for (const NumaNode* n : nodes_by_distance(topo, home.device_nodes)) {
        if (home.cpus.size() >= need) break;
        if (std::find(home.nodes.begin(), home.nodes.end(), n->os_index) != home.nodes.end()) continue;
        const IdSet extra = n->pus & allowed;
        if (extra.empty()) continue;
        home.cpus |= extra;
        home.nodes.push_back(n->os_index);
        grew = true;
    }
    return grew;
}

IdSet one_thread_per_core(const Topology& topo, const IdSet& allowed) {
    IdSet out;
    for (const Core& c : topo.cores) {
        if (!c.pus.intersects(allowed)) continue;
        const IdSet mine = c.pus & allowed;
        out.insert(mine.ids().front());
    }
    // PUs outside every core (a topology without cores): kept as they are.
    IdSet in_cores;
    for (const Core& c : topo.cores) in_cores |= c.pus;
    return out | (allowed - in_cores);
}

int top_up_cpus(const Topology& topo, const std::vector<int>& device_nodes, const IdSet& allowed, const IdSet& taken,
                int need, IdSet& cpus) {
    int shared = 0;
    for (int pass = 0; pass < 2 && cpus.size() < need; ++pass) {
        for (const NumaNode* n : nodes_by_distance(topo, device_nodes)) {
            for (const Core& c : topo.cores) {
                if (!c.pus.intersects(n->pus)) continue;
                for (int pu : (c.pus & n->pus & allowed).ids()) {
                    if (cpus.size() >= need) return shared;
                    if (cpus.contains(pu) || (pass == 0 && taken.contains(pu))) continue;
                    cpus.insert(pu);
                    shared += pass;
                }
            }
        }
        // PUs outside every NUMA node, last
        for (int pu : (allowed - topo.pus_of_nodes(topo.cpu_nodes())).ids()) {
            if (cpus.size() >= need) return shared;
            if (cpus.contains(pu) || (pass == 0 && taken.contains(pu))) continue;
            cpus.insert(pu);
            shared += pass;
        }
    }
    return shared;
}

// ---- 3. CPUs per mode ----

std::vector<std::vector<int>> pools_of(const std::vector<Home>& homes, const std::vector<std::vector<int>>& devices) {
    const int n = static_cast<int>(homes.size());
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<int(int)> root = [&](int i) { return parent[i] == i ? i : parent[i] = root(parent[i]); };
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b)
            if (homes[a].cpus.intersects(homes[b].cpus)) parent[root(b)] = root(a);

    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    auto first_device = [&](int r) { return devices[r].empty() ? INT_MAX : devices[r].front(); };
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return std::make_pair(first_device(a), a) < std::make_pair(first_device(b), b); });
    std::vector<std::vector<int>> pools;
    std::vector<int> pool_of_root(n, -1);
    for (int r : order) {
        int& p = pool_of_root[root(r)];
        if (p < 0) {
            p = static_cast<int>(pools.size());
            pools.emplace_back();
        }
        pools[p].push_back(r);
    }
    return pools;
}

IdSet socket_cpus(const Topology& topo, const IdSet& home_cpus, const IdSet& allowed) {
    IdSet cpus;
    for (const Package& p : topo.packages)
        if (p.pus.intersects(home_cpus)) cpus |= p.pus;
    cpus &= allowed;
    return cpus.empty() ? home_cpus : cpus;  // PUs outside every package: the home itself
}

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

std::vector<IdSet> split_core_complex_pool(const Topology& topo, const std::vector<Accelerator>& accs,
                                           const std::vector<Home>& homes,
                                           const std::vector<std::vector<int>>& devices,
                                           const std::vector<int>& pool, std::vector<std::string>& warnings) {
    // torch.numa.binding's core-complex: each task gets one whole L3 group of its home, the
    // groups with more allowed hardware threads first (then logical order); more tasks than
    // groups share whole groups, as evenly as possible. Added here: homes that overlap (a
    // device on a socket next to one on a NUMA node) choose narrow-first, nearest first, and
    // a device below an L3 gets that L3.
    const std::string& level = topo.cache_level_name;
    IdSet pool_cpus;
    for (int t : pool) pool_cpus |= homes[t].cpus;
    struct Part {
        int l3;                  // index into Topology::l3_groups, -1: a single core
        IdSet pus;               // inside the pool
        std::vector<int> nodes;  // NUMA nodes with CPUs it touches
        int tasks = 0;           // tasks given this part so far
    };
    std::vector<Part> parts;
    for (size_t g = 0; g < topo.l3_groups.size(); ++g)
        if (topo.l3_groups[g].pus.intersects(pool_cpus))
            parts.push_back({static_cast<int>(g), topo.l3_groups[g].pus & pool_cpus, {}});
    if (parts.empty()) {
        for (const Unit& u : cores_in(topo, pool_cpus)) parts.push_back({-1, u.pus, {}});
        warnings.push_back("no " + level + " cache groups in the topology; core-complex uses single cores");
    }
    for (Part& part : parts) part.nodes = topo.cpu_nodes_intersecting(part.pus);
    const int n = static_cast<int>(pool.size());
    const int P = static_cast<int>(parts.size());
    const Home& first_home = homes[pool.front()];
    const bool one_home = std::all_of(pool.begin(), pool.end(), [&](int t) { return homes[t].cpus == first_home.cpus; });

    // Narrow homes choose first, so that wider ones cannot take their only parts.
    std::vector<int> order(n), home_cores(n);
    std::iota(order.begin(), order.end(), 0);
    for (int i = 0; i < n; ++i) home_cores[i] = one_home ? 0 : core_count(topo, homes[pool[i]].cpus);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return home_cores[a] < home_cores[b]; });
    std::vector<IdSet> out(pool.size());
    std::vector<bool> served(n, false);
    auto take = [&](int i, int p) {
        out[i] = parts[p].pus & homes[pool[i]].cpus;
        ++parts[p].tasks;
        served[i] = true;
    };
    // An owned device's own L3 belongs to the first of its tasks.
    for (int i : order)
        for (int d : devices[pool[i]]) {
            if (served[i]) break;
            for (int p = 0; p < P; ++p)
                if (accs[d].l3 >= 0 && parts[p].l3 == accs[d].l3 && parts[p].tasks == 0 &&
                    parts[p].pus.intersects(homes[pool[i]].cpus)) {
                    take(i, p);
                    break;
                }
        }
    for (int i : order) {
        if (served[i]) continue;
        const Home& home = homes[pool[i]];
        const IdSet first_device_cpus = topo.pus_of_nodes(accs[devices[pool[i]].front()].home_nodes);
        // (tasks already there, tier, NUMA distance, -allowed PUs, logical order): smallest
        // wins, so every group of a home is used before any is shared.
        std::tuple<int, int, int, int, int> best{INT_MAX, 0, 0, 0, 0};
        int best_part = -1;
        for (int p = 0; p < P; ++p) {
            if (!parts[p].pus.intersects(home.cpus)) continue;
            const IdSet in_home = one_home ? parts[p].pus : parts[p].pus & home.cpus;  // one home: parts lie in it
            const int tier = in_home.intersects(first_device_cpus) ? 0 : 1;
            int distance = INT_MAX;
            for (int node : parts[p].nodes)
                for (int h : home.device_nodes) distance = std::min(distance, topo.distance(h, node));
            std::tuple<int, int, int, int, int> key{parts[p].tasks, tier, distance, -static_cast<int>(in_home.size()), p};
            if (key < best) best = key, best_part = p;
        }
        if (best_part < 0) {  // the home's CPUs lie outside every group: cores instead
            warnings.push_back("no " + level + " part on " + describe(home) +
                               "; core-complex splits cores exclusively instead");
            return split_exclusive_pool(topo, homes, pool, warnings);
        }
        take(i, best_part);
    }
    // Shared groups are said: each sharing task runs on all of the group's CPUs.
    int shared = 0, most = 0;
    for (const Part& part : parts) {
        shared += part.tasks > 1 ? 1 : 0;
        most = std::max(most, part.tasks);
    }
    if (shared > 0) {
        warnings.push_back(std::to_string(n) + " tasks on " + (one_home ? describe(first_home) : "overlapping homes") +
                           " but only " + std::to_string(P) + " " + level + " group(s): " + std::to_string(shared) +
                           " group(s) shared by up to " + std::to_string(most) +
                           " tasks each (whole groups, as torch.numa.binding does; mode exclusive gives disjoint CPUs)");
    }
    int smallest = INT_MAX, largest = 0;
    for (const IdSet& cpus : out) {
        smallest = std::min(smallest, core_count(topo, cpus));
        largest = std::max(largest, core_count(topo, cpus));
    }
    if (smallest != largest) {
        warnings.push_back(level + " parts of unequal size handed out (" + std::to_string(smallest) + " to " +
                           std::to_string(largest) + " cores per task)");
    }
    return out;
}

// ---- 4. memory nodes ----

std::vector<int> memory_nodes(const Home& home, const IdSet& allowed_mems, MemPolicy policy,
                              std::vector<std::string>& warnings) {
    if (allowed_mems.empty()) return home.device_nodes;
    std::vector<int> usable;
    for (int n : home.device_nodes)
        if (allowed_mems.contains(n)) usable.push_back(n);
    const bool cpus_elsewhere = !home.nodes.empty() && std::none_of(home.nodes.begin(), home.nodes.end(), [&](int n) {
        return std::find(home.device_nodes.begin(), home.device_nodes.end(), n) != home.device_nodes.end();
    });
    if (!usable.empty() && cpus_elsewhere && policy != MemPolicy::None)
        warnings.push_back("memory policy " + to_string(policy) + " keeps memory on the devices' NUMA node(s) " +
                           join_ints(usable) + " while the CPUs come from node(s) " + join_ints(home.nodes));
    if (!usable.empty()) return usable;
    // The devices' memory is off limits: the nodes that give the task its CPUs are next best.
    for (int n : home.nodes)
        if (allowed_mems.contains(n)) usable.push_back(n);
    if (policy != MemPolicy::None)
        warnings.push_back("memory of NUMA node(s) " + join_ints(home.device_nodes) + " is not allowed; using node(s) " +
                           (usable.empty() ? std::string("none (memory policy skipped)") : join_ints(usable)));
    return usable;
}

}  // namespace planning

std::string to_string(DeviceRule rule) { return rule == DeviceRule::LocalRank ? "local-rank" : "blocks"; }

std::vector<std::vector<int>> assign_devices(int ntasks, const std::vector<int>& shared,
                                             const std::vector<std::vector<int>>& per_task, DeviceRule rule) {
    std::vector<std::vector<int>> owned(std::max(ntasks, 0));
    const int n = static_cast<int>(shared.size());
    if (rule == DeviceRule::LocalRank) {
        for (int r = 0; r < ntasks; ++r) {
            if (r < static_cast<int>(per_task.size()) && !per_task[r].empty()) owned[r] = per_task[r];
            else if (n > 0) owned[r] = {shared[r % n]};
        }
        return owned;
    }
    // Devices outnumber tasks: contiguous blocks in list order, larger blocks first.
    const std::vector<int> blocks = n > ntasks && ntasks > 0 ? planning::even_sizes(n, ntasks) : std::vector<int>{};
    int next = 0;
    for (int r = 0; r < ntasks; ++r) {
        if (r < static_cast<int>(per_task.size()) && !per_task[r].empty()) {
            owned[r] = per_task[r];
        } else if (n > ntasks) {
            owned[r].assign(shared.begin() + next, shared.begin() + next + blocks[r]);
        } else if (n > 0) {
            owned[r] = {shared[r % n]};
        }
        if (n > ntasks) next += blocks[r];
    }
    return owned;
}

namespace {

// The last guarantee of min_cpus, after the modes split the homes: a task still short (an
// uneven split, threads thinned by the allowed set) is topped up, other tasks' CPUs last.
void top_up_tasks(const Topology& topo, const std::vector<planning::Home>& homes, const IdSet& allowed, int min_cpus,
                  bool exclusive, NodePlan& plan) {
    std::vector<int> shared_tasks;
    for (size_t r = 0; r < plan.tasks.size(); ++r) {
        TaskPlan& t = plan.tasks[r];
        if (t.cpus.size() >= min_cpus) continue;
        IdSet taken;
        if (exclusive)
            for (size_t q = 0; q < plan.tasks.size(); ++q)
                if (q != r) taken |= plan.tasks[q].cpus;
        if (planning::top_up_cpus(topo, homes[r].device_nodes, allowed, taken, min_cpus, t.cpus) > 0 && exclusive)
            shared_tasks.push_back(static_cast<int>(r));
    }
    if (!shared_tasks.empty())
        plan.warnings.push_back("task(s) " + join_ints(shared_tasks) + ": not enough free CPUs for " +
                                std::to_string(min_cpus) + " CPUs per task; they share some with other tasks");
}

}  // namespace

NodePlan plan_node(const Topology& topo, const std::vector<Accelerator>& accelerators, const PlanRequest& req) {
    using namespace planning;
    NodePlan plan;
    plan.mode = req.mode;
    plan.accelerators = accelerators;
    const int ntasks = req.ntasks;
    if (ntasks < 1) throw UsageError("invalid task count " + std::to_string(ntasks) + " (must be at least 1)");
    const IdSet all = topo.all_pus();
    const IdSet given = req.allowed_cpus.empty() ? all : (req.allowed_cpus & all);
    if (given.empty()) {
        throw Error("none of the allowed CPUs (" + req.allowed_cpus.to_string() + ") exists in the topology (" +
                    all.to_string() + ")");
    }
    const IdSet allowed = req.one_thread_per_core ? one_thread_per_core(topo, given) : given;

    const int ndev = static_cast<int>(accelerators.size());
    const std::vector<std::vector<int>> devices = devices_per_task(req, ndev);
    plan.tasks.resize(ntasks);
    for (int r = 0; r < ntasks; ++r) {
        plan.tasks[r].local_rank = r;
        plan.tasks[r].devices = devices[r];
        if (!devices[r].empty()) plan.tasks[r].device = &plan.accelerators[devices[r].front()];
    }
    // NICs follow the devices alone (in every mode, none included); a bad device index is
    // skipped here and refused below.
    const std::vector<Nic> nics = fabric_nics(topo);
    if (!nics.empty())
        for (TaskPlan& t : plan.tasks) t.nics = nics_for_devices(topo, nics, accelerators, t.devices);
    if (req.mode == Mode::None) {
        for (TaskPlan& t : plan.tasks) t.cpus = allowed;
        return plan;
    }
    if (ndev == 0) {
        throw Error("no accelerator found on this node (use --device-match to name the devices, e.g. "
                    "10de or class=0x0302)");
    }
    if (std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.empty(); }))
        throw Error("no visible accelerator for the tasks (the visible device list is empty)");

    const bool exclusive = req.mode == Mode::Exclusive || req.mode == Mode::CoreComplex;
    std::vector<Home> homes;
    for (int r = 0; r < ntasks; ++r) homes.push_back(home_of(topo, accelerators, devices[r], allowed));
    // No task gets fewer CPUs than its launcher gave it: a home that cannot hold its tasks'
    // CPUs (all of them where exclusive modes split it) grows to the nearest nodes.
    std::vector<Home> narrow = homes;
    std::vector<int> widened;
    for (int r = 0; r < ntasks; ++r) {
        int sharing = 1;
        if (exclusive)
            for (int q = 0; q < ntasks; ++q) sharing += q != r && narrow[q].cpus == narrow[r].cpus ? 1 : 0;
        if (widen_home(topo, homes[r], allowed, req.min_cpus * sharing)) widened.push_back(r);
    }
    for (int r = 0; r < ntasks; ++r) {
        TaskPlan& t = plan.tasks[r];
        t.warnings = homes[r].warnings;
        t.mems = memory_nodes(homes[r], req.allowed_mems, req.mem, t.warnings);
        t.mem = t.mems.empty() ? MemPolicy::None : req.mem;
    }

    switch (req.mode) {
        case Mode::Node:
            for (int r = 0; r < ntasks; ++r) plan.tasks[r].cpus = homes[r].cpus;
            break;
        case Mode::Socket:
            for (int r = 0; r < ntasks; ++r) plan.tasks[r].cpus = socket_cpus(topo, homes[r].cpus, allowed);
            break;
        case Mode::Exclusive:
        case Mode::CoreComplex:
            for (const std::vector<int>& pool : pools_of(homes, devices)) {
                std::vector<IdSet> parts =
                    req.mode == Mode::Exclusive
                        ? split_exclusive_pool(topo, homes, pool, plan.warnings)
                        : split_core_complex_pool(topo, accelerators, homes, devices, pool, plan.warnings);
                for (size_t i = 0; i < pool.size(); ++i) plan.tasks[pool[i]].cpus = parts[i];
            }
            break;
        case Mode::None:
            break;
    }
    if (req.min_cpus > 0) top_up_tasks(topo, homes, allowed, req.min_cpus, exclusive, plan);
    // One line per distinct widening (the tasks of one home share it).
    std::vector<bool> said(static_cast<size_t>(ntasks), false);
    for (int r : widened) {
        if (said[r]) continue;
        std::vector<int> same;
        for (int q : widened)
            if (narrow[q].nodes == narrow[r].nodes && homes[q].nodes == homes[r].nodes) same.push_back(q), said[q] = true;
        plan.warnings.push_back("task(s) " + join_ints(same) + ": " + std::to_string(req.min_cpus) +
                                " CPUs per task do not fit on the GPU's NUMA node(s) " + join_ints(narrow[r].nodes) + " (" +
                                std::to_string(narrow[r].cpus.size()) + " allowed CPUs); extended to the nearest node(s) " +
                                join_ints(homes[r].nodes));
    }
    return plan;
}

}  // namespace numabind
