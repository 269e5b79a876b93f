#include "numabind/plan.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>

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

namespace {

// A unit the exclusive split hands out: a physical core (its allowed PUs).
struct Unit {
    IdSet pus;
    int l3 = -1;
};

// Splits `count` items into `parts` contiguous chunk sizes; remainder to the first chunks.
std::vector<int> even_sizes(int count, int parts) {
    std::vector<int> sizes(parts, count / parts);
    for (int i = 0; i < count % parts; ++i) ++sizes[i];
    return sizes;
}

std::vector<IdSet> split_flat(const std::vector<IdSet>& items, int parts) {
    std::vector<IdSet> out(parts);
    std::vector<int> sizes = even_sizes(static_cast<int>(items.size()), parts);
    size_t next = 0;
    for (int p = 0; p < parts; ++p)
        for (int k = 0; k < sizes[p]; ++k) out[p] |= items[next++];
    return out;
}

// Exclusive split of cores among `parts` tasks: whole cores (with every allowed SMT
// sibling), contiguous in logical order, chunk edges on L3 edges where counts allow.
// Works on index ranges into `cores` so that no per-core set is copied.
std::vector<IdSet> split_exclusive(const std::vector<Unit>& cores, int parts, const std::string& what) {
    const int ncores = static_cast<int>(cores.size());
    // The union of cores[begin, end) into `out`.
    auto unite = [&](IdSet& out, int begin, int end) {
        for (int k = begin; k < end; ++k) out |= cores[k].pus;
    };
    if (ncores >= parts) {
        // Runs of consecutive cores sharing an L3, as [first, end) ranges.
        std::vector<std::pair<int, int>> runs;
        int last_l3 = INT_MIN;
        for (int i = 0; i < ncores; ++i) {
            const Unit& u = cores[i];
            if (runs.empty() || u.l3 != last_l3 || u.l3 < 0) runs.emplace_back(i, i);
            runs.back().second = i + 1;
            last_l3 = u.l3;
        }
        const int groups = static_cast<int>(runs.size());
        bool has_l3 = std::any_of(cores.begin(), cores.end(), [](const Unit& u) { return u.l3 >= 0; });
        std::vector<IdSet> out(parts);
        if (has_l3 && groups >= parts && groups % parts == 0) {
            std::vector<int> sizes = even_sizes(groups, parts);
            int next = 0;
            for (int p = 0; p < parts; ++p)
                for (int k = 0; k < sizes[p]; ++k, ++next) unite(out[p], runs[next].first, runs[next].second);
            return out;
        }
        if (has_l3 && parts > groups && parts % groups == 0) {
            const int per = parts / groups;
            bool fits = std::all_of(runs.begin(), runs.end(),
                                    [&](const auto& run) { return run.second - run.first >= per; });
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
    // Fewer cores than tasks: hand out hardware threads instead.
    std::vector<IdSet> pus;
    for (const Unit& u : cores)
        for (int pu : u.pus.ids()) pus.push_back(IdSet{pu});
    if (static_cast<int>(pus.size()) < parts) {
        throw Error(std::to_string(parts) + " tasks share " + what + " but only " +
                    std::to_string(pus.size()) + " allowed PU(s) are there; exclusive binding impossible");
    }
    return split_flat(pus, parts);
}

// The physical cores with PUs in `within` (only those PUs), in logical order.
std::vector<Unit> cores_in(const Topology& topo, const IdSet& within) {
    std::vector<Unit> cores;
    for (const Core& c : topo.cores) {
        if (!c.pus.intersects(within)) continue;  // cheap test first: no temporary set
        cores.push_back({c.pus & within, c.l3});
    }
    return cores;
}

struct TaskDevice {
    int device;  // physical index
    int l3;      // L3 group the device hangs below, -1 when none
};

// core-complex for the tasks of one home, in task order: one whole L3 part of the home per
// task, distinct; a device's own L3 first, then the free part nearest (in topology order)
// to it or to the part its previous task got. More tasks than parts: each part is split
// exclusively among its share of the tasks, never silently shared.
std::vector<IdSet> split_core_complex(const Topology& topo, const IdSet& home_cpus,
                                      const std::vector<TaskDevice>& tasks, const std::string& what,
                                      std::vector<std::string>& warnings) {
    struct Group {
        int index;
        IdSet pus;
    };
    std::vector<Group> groups;
    for (size_t g = 0; g < topo.l3_groups.size(); ++g)
        if (topo.l3_groups[g].pus.intersects(home_cpus))
            groups.push_back({static_cast<int>(g), topo.l3_groups[g].pus & home_cpus});
    if (groups.empty()) {
        // No cache groups known: every core is its own complex.
        for (const Unit& u : cores_in(topo, home_cpus)) groups.push_back({-1, u.pus});
        warnings.push_back("no " + topo.cache_level_name + " cache groups in the topology; core-complex uses single cores");
    }
    const int n = static_cast<int>(tasks.size());
    const int G = static_cast<int>(groups.size());
    std::vector<IdSet> out(n);
    if (n > G) {
        std::vector<int> share = even_sizes(n, G);
        int next = 0;
        for (int g = 0; g < G; ++g) {
            auto parts = split_exclusive(cores_in(topo, groups[g].pus), share[g], "one " + topo.cache_level_name + " group");
            for (int k = 0; k < share[g]; ++k) out[next++] = parts[k];
        }
        warnings.push_back(std::to_string(n) + " tasks on " + what + " but only " + std::to_string(G) + " " +
                           topo.cache_level_name + " group(s); groups are split exclusively among tasks");
        return out;
    }
    auto group_of_l3 = [&](int l3) {
        for (int g = 0; g < G && l3 >= 0; ++g)
            if (groups[g].index == l3) return g;
        return -1;
    };
    std::vector<bool> used(G, false);
    std::vector<int> chosen(n, -1);
    for (int i = 0; i < n; ++i) {  // a device's own L3, for the first of its tasks that can take it
        const int g = group_of_l3(tasks[i].l3);
        if (g >= 0 && !used[g]) {
            used[g] = true;
            chosen[i] = g;
        }
    }
    int prev_dev = -1, anchor = -1;
    for (int i = 0; i < n; ++i) {
        if (tasks[i].device != prev_dev) {
            anchor = group_of_l3(tasks[i].l3);
            prev_dev = tasks[i].device;
        }
        if (chosen[i] < 0) {
            int best = -1;
            for (int g = 0; g < G; ++g) {
                if (used[g]) continue;
                if (best < 0 || (anchor >= 0 && std::abs(g - anchor) < std::abs(best - anchor))) best = g;
            }
            used[best] = true;
            chosen[i] = best;
        }
        if (anchor < 0) anchor = chosen[i];
        out[i] = groups[chosen[i]].pus;
    }
    return out;
}

std::string join_ints(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

struct TaskState {
    int device;                  // physical index
    std::vector<int> cpu_nodes;  // nodes whose CPUs the task may get
    IdSet home_cpus;             // allowed PUs of those nodes
};

}  // namespace

std::vector<std::vector<int>> assign_devices(int ntasks, const std::vector<int>& shared,
                                             const std::vector<std::vector<int>>& per_task) {
    std::vector<std::vector<int>> owned(ntasks > 0 ? ntasks : 0);
    const int n = static_cast<int>(shared.size());
    // Blocks when devices outnumber tasks: contiguous, larger blocks first.
    std::vector<int> sizes = n > ntasks && ntasks > 0 ? even_sizes(n, ntasks) : std::vector<int>{};
    int next = 0;
    for (int r = 0; r < ntasks; ++r) {
        if (r < static_cast<int>(per_task.size()) && !per_task[r].empty()) {
            owned[r] = per_task[r];
        } else if (n > ntasks) {
            owned[r].assign(shared.begin() + next, shared.begin() + next + sizes[r]);
        } else if (n > 0) {
            owned[r] = {shared[r % n]};
        }
        if (n > ntasks) next += sizes[r];
    }
    return owned;
}

NodePlan plan_node(const Topology& topo, const std::vector<Accelerator>& accelerators,
                   const PlanRequest& req) {
    NodePlan plan;
    plan.mode = req.mode;
    plan.accelerators = accelerators;
    const int ntasks = req.ntasks;
    if (ntasks < 1) throw UsageError("invalid task count " + std::to_string(ntasks) + " (must be at least 1)");

    const IdSet all = topo.all_pus();
    IdSet allowed = req.allowed_cpus.empty() ? all : (req.allowed_cpus & all);
    if (allowed.empty()) {
        throw Error("none of the allowed CPUs (" + req.allowed_cpus.to_string() +
                    ") exists in the topology (" + all.to_string() + ")");
    }

    const int ndev = static_cast<int>(accelerators.size());
    auto check_index = [&](int idx) {
        if (idx < 0 || idx >= ndev) {
            throw Error("device index " + std::to_string(idx) + " out of range (" +
                        (ndev ? "0-" + std::to_string(ndev - 1) : std::string("no accelerator found")) + ")");
        }
    };
    std::vector<int> visible = req.visible_devices;
    if (visible.empty())
        for (int i = 0; i < ndev; ++i) visible.push_back(i);
    for (int idx : req.visible_devices) check_index(idx);

    for (const auto& own : req.per_task_devices)
        for (int idx : own) check_index(idx);
    const std::vector<std::vector<int>> owned = assign_devices(ntasks, visible, req.per_task_devices);
    plan.tasks.resize(ntasks);
    std::vector<TaskState> states(ntasks);
    for (int r = 0; r < ntasks; ++r) {
        TaskPlan& t = plan.tasks[r];
        t.local_rank = r;
        t.devices = owned[r];
        states[r].device = t.devices.empty() ? -1 : t.devices.front();
        if (states[r].device >= 0) t.device = &plan.accelerators[states[r].device];
    }

    if (req.mode == Mode::None) {
        for (TaskPlan& t : plan.tasks) {
            t.cpus = allowed;
            t.mem = MemPolicy::None;
        }
        return plan;
    }
    if (ndev == 0) {
        throw Error("no accelerator found on this node (use --device-match to name the devices, e.g. "
                    "10de or class=0x0302)");
    }
    if (std::any_of(states.begin(), states.end(), [](const TaskState& s) { return s.device < 0; }))
        throw Error("no visible accelerator for the tasks (the visible device list is empty)");

    // Where each task's CPUs come from: its device's home nodes, or the nearest
    // nodes that still have allowed CPUs.
    for (int r = 0; r < ntasks; ++r) {
        TaskState& s = states[r];
        TaskPlan& t = plan.tasks[r];
        const Accelerator& dev = plan.accelerators[s.device];
        std::vector<int> home_nodes;
        for (int d : t.devices) {
            const Accelerator& a = plan.accelerators[d];
            if (!a.home_warning.empty()) t.warnings.push_back(a.home_warning);
            home_nodes.insert(home_nodes.end(), a.home_nodes.begin(), a.home_nodes.end());
        }
        std::sort(home_nodes.begin(), home_nodes.end());
        home_nodes.erase(std::unique(home_nodes.begin(), home_nodes.end()), home_nodes.end());
        s.cpu_nodes = home_nodes;
        s.home_cpus = topo.pus_of_nodes(s.cpu_nodes) & allowed;
        if (s.home_cpus.empty()) {
            int best = INT_MAX;
            std::vector<int> nearest;
            for (const NumaNode& n : topo.numa_nodes) {
                if (!n.pus.intersects(allowed)) continue;
                int d = INT_MAX;
                for (int h : home_nodes) d = std::min(d, topo.distance(h, n.os_index));
                if (d < best) {
                    best = d;
                    nearest.clear();
                }
                if (d == best) nearest.push_back(n.os_index);
            }
            if (!nearest.empty()) {
                s.cpu_nodes = nearest;
                s.home_cpus = topo.pus_of_nodes(nearest) & allowed;
            }
            if (s.home_cpus.empty()) {
                s.cpu_nodes.clear();
                s.home_cpus = allowed;  // allowed PUs lie outside every NUMA node
            }
            t.warnings.push_back("no allowed CPU on NUMA node(s) " + join_ints(home_nodes) + " of device(s) " +
                                 join_ints(t.devices) + "; using the nearest allowed CPUs " +
                                 s.home_cpus.to_string() +
                                 (s.cpu_nodes.empty() ? "" : " (node(s) " + join_ints(s.cpu_nodes) + ")"));
        }
        (void)dev;
        t.mems = home_nodes;
        if (!req.allowed_mems.empty()) {
            std::vector<int> usable;
            for (int n : t.mems)
                if (req.allowed_mems.contains(n)) usable.push_back(n);
            if (usable.empty()) {
                // The device's memory is off limits: the nodes that give the task its CPUs are next best.
                for (int n : s.cpu_nodes)
                    if (req.allowed_mems.contains(n)) usable.push_back(n);
                if (req.mem != MemPolicy::None)
                    t.warnings.push_back("memory of NUMA node(s) " + join_ints(t.mems) + " is not allowed; using node(s) " +
                                         (usable.empty() ? std::string("none (memory policy skipped)") : join_ints(usable)));
            }
            t.mems = usable;
        }
        t.mem = t.mems.empty() ? MemPolicy::None : req.mem;
    }

    // Tasks sharing a home, ordered by device then rank, so one device's tasks are neighbours.
    std::map<std::vector<int>, std::vector<int>> by_home;
    for (int r = 0; r < ntasks; ++r) by_home[states[r].cpu_nodes].push_back(r);
    // Exclusive modes hand out each CPU once, also across homes that overlap (a device
    // without NUMA affinity is local to every node): the most specific home chooses first,
    // keeping back one core for each task of the wider homes that has none left elsewhere.
    std::vector<std::pair<std::vector<int>, std::vector<int>>> homes(by_home.begin(), by_home.end());
    std::stable_sort(homes.begin(), homes.end(), [&](const auto& a, const auto& b) {
        return states[a.second.front()].home_cpus.size() < states[b.second.front()].home_cpus.size();
    });
    const bool exclusive_modes = req.mode == Mode::Exclusive || req.mode == Mode::CoreComplex;
    IdSet taken;
    for (size_t h = 0; h < homes.size(); ++h) {
        auto& [nodes, members] = homes[h];
        std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
            return std::tie(states[a].device, a) < std::tie(states[b].device, b);
        });
        IdSet home_cpus = states[members.front()].home_cpus;
        const std::string what = nodes.empty() ? "the allowed CPUs" : "NUMA node(s) " + join_ints(nodes);
        const int n = static_cast<int>(members.size());
        if (exclusive_modes && homes.size() > 1) {
            home_cpus = home_cpus - taken;
            int later_tasks = 0;
            IdSet later_cpus;
            for (size_t k = h + 1; k < homes.size(); ++k) {
                later_tasks += static_cast<int>(homes[k].second.size());
                later_cpus |= states[homes[k].second.front()].home_cpus;
            }
            if (later_tasks > 0 && later_cpus.intersects(home_cpus)) {
                const IdSet elsewhere = later_cpus - taken - home_cpus;
                int need = later_tasks;
                for (const Core& c : topo.cores)
                    if (c.pus.intersects(elsewhere)) --need;
                for (auto c = topo.cores.rbegin(); c != topo.cores.rend() && need > 0; ++c) {
                    if (c->pus.intersects(home_cpus) && c->pus.intersects(later_cpus)) {
                        home_cpus = home_cpus - c->pus;
                        --need;
                    }
                }
            }
            if (home_cpus.empty()) {
                throw Error(std::to_string(n) + " task(s) on " + what +
                            " find no CPU left by the tasks of other devices; exclusive binding impossible");
            }
        }

        switch (req.mode) {
            case Mode::Node:
                for (int r : members) plan.tasks[r].cpus = home_cpus;
                break;
            case Mode::Socket: {
                IdSet cpus;
                for (const Package& p : topo.packages)
                    if (p.pus.intersects(home_cpus)) cpus |= p.pus;
                cpus &= allowed;
                for (int r : members) plan.tasks[r].cpus = cpus;
                break;
            }
            case Mode::Exclusive: {
                auto parts = split_exclusive(cores_in(topo, home_cpus), n, what);
                for (int i = 0; i < n; ++i) plan.tasks[members[i]].cpus = parts[i];
                break;
            }
            case Mode::CoreComplex: {
                std::vector<TaskDevice> devices;
                for (int r : members)
                    devices.push_back({states[r].device, plan.accelerators[states[r].device].l3});
                auto parts = split_core_complex(topo, home_cpus, devices, what, plan.warnings);
                for (int i = 0; i < n; ++i) plan.tasks[members[i]].cpus = parts[i];
                break;
            }
            case Mode::None:
                break;
        }
        if (exclusive_modes)
            for (int r : members) taken |= plan.tasks[r].cpus;
    }
    return plan;
}

}  // namespace numabind
