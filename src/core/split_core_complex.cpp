// Mode core-complex: one whole L3 part per task within each pool (plan_stages.hpp, 3e).
#include <algorithm>
#include <climits>
#include <numeric>
#include <tuple>

#include "core/plan_stages.hpp"
#include "core/split_units.hpp"

namespace numabind::planning {

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

}  // namespace numabind::planning
