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

// ---- 3. CPUs per mode (the splits: split_exclusive.cpp, split_core_complex.cpp) ----

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

    const bool exclusive = disjoint(req.mode);
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
