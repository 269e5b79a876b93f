// `numabind show`: the calling process's placement against its device.
#include "api/placement_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include "core/binding_env.hpp"
#include "core/local_rank.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "numabind/report.hpp"
#include "sys/nvml.hpp"

namespace numabind {

namespace {

std::string env_or_empty(const char* name) { return getenv_lookup(name).value_or(""); }

// The binding NUMABIND_* records, when its devices are not those this topology shows (an
// index past the accelerators found, or another PCI address): a bind from topology= (an
// XML of another machine, or fake devices) that live discovery cannot check.
std::optional<PlannedBinding> plan_not_seen(const std::vector<int>& owned, const std::vector<Accelerator>& accs,
                                            const std::string& source) {
    const std::string pci = env_or_empty(kEnvDevicePci);
    const bool past_end = std::any_of(owned.begin(), owned.end(), [&](int d) { return d >= static_cast<int>(accs.size()); });
    if (owned.empty() || (!past_end && (pci.empty() || accs[owned.front()].pci == pci))) return std::nullopt;
    PlannedBinding p;
    p.mode = env_or_empty(kEnvMode);
    p.cpus = env_or_empty(kEnvCpus);
    p.mems = env_or_empty(kEnvMems);
    p.mem_policy = env_or_empty(kEnvMemPolicy);
    p.devices = owned;
    p.device_pci = pci;
    p.note = "device(s) " + join_ints(owned) + (pci.empty() ? "" : " (first " + pci + ")") + " of the binding in " + source +
             " are not among the " + std::to_string(accs.size()) +
             " accelerator(s) this topology shows (planned from another topology XML? pass it as topology=/--topology); "
             "showing the plan";
    return p;
}

}  // namespace

PlacementReport current_placement_report(const std::string& topology, const std::string& device_match,
                                         const Notify& note) {
    PlacementReport r;
    r.pid = static_cast<int>(getpid());
    r.placement = current_placement();
    const Placement& p = r.placement;
    auto topo_ptr = load_topology(topology, true, note);
    const Topology& m = topo_ptr->model();
    auto accs = find_accelerators(m, make_matcher(device_match));
    r.cpu_numa_nodes = m.cpu_nodes_intersecting(p.cpus);

    // The process's devices: NUMABIND_DEVICES if numabind bound it, else what the
    // ownership rule (assign_devices) gives its local rank among the visible devices.
    std::vector<int>& owned = r.devices;
    for (const char* name : {kEnvDevices, kEnvDevice}) {
        auto d = getenv_lookup(name);
        if (!d || d->empty()) continue;
        owned = parse_device_list(*d, INT_MAX, name);  // syntax errors are usage errors
        r.device_source = name;
        if (auto plan = plan_not_seen(owned, accs, name)) {  // bound from another topology's plan
            r.plan = std::move(plan);
            r.devices = r.plan->devices;
            return r;
        }
        break;
    }
    if (owned.empty() && !accs.empty()) {
        VisibleDevices vis = visible_from_env(accs, getenv_lookup, nvml_uuid_resolver());
        std::vector<int> visible = vis.restricted ? vis.indexes : std::vector<int>{};
        if (!vis.restricted)
            for (const auto& a : accs) visible.push_back(a.index);
        LocalRank lr{0, 0, "default", ""};
        if (auto found = local_rank_from_env(getenv_lookup)) lr = *found;
        if (!visible.empty()) {
            // Without the local task count, rank r uses device r mod n.
            if (lr.size > lr.rank) owned = assign_devices(lr.size, visible, {}, device_rule_for(lr))[lr.rank];
            else owned = {visible[lr.rank % visible.size()]};
            r.device_source = (vis.restricted ? vis.source : std::string("all accelerators")) + ", local rank " +
                              std::to_string(lr.rank) + " (" + lr.source + ")" +
                              (lr.size > 0 ? " of " + std::to_string(lr.size) + " (" + lr.size_source + ")" : "");
        }
    }
    for (int d : owned) r.device_nodes.insert(r.device_nodes.end(), accs[d].home_nodes.begin(), accs[d].home_nodes.end());
    r.nics = nics_for_devices(m, fabric_nics(m), accs, owned);
    std::sort(r.device_nodes.begin(), r.device_nodes.end());
    r.device_nodes.erase(std::unique(r.device_nodes.begin(), r.device_nodes.end()), r.device_nodes.end());
    auto off_home = [&](int n) { return std::find(r.device_nodes.begin(), r.device_nodes.end(), n) == r.device_nodes.end(); };
    const std::string devices_text = join_ints(owned);
    if (!owned.empty()) {
        for (int n : r.cpu_numa_nodes) {
            if (off_home(n)) {
                r.warnings.push_back("CPUs " + p.cpus.to_string() + " include NUMA node " + std::to_string(n) +
                                     " but device(s) " + devices_text + " are on node(s) " + join_ints(r.device_nodes));
                break;
            }
        }
        if (p.mem_policy != "default" && p.mem_policy != "local") {
            for (int n : p.mem_nodes.ids()) {
                if (off_home(n)) {
                    r.warnings.push_back("memory policy " + p.mem_policy + " uses node " + std::to_string(n) +
                                         " but device(s) " + devices_text + " are on node(s) " + join_ints(r.device_nodes));
                    break;
                }
            }
        }
        r.device = accs[owned.front()];
    } else {
        r.warnings.push_back(accs.empty() ? "no accelerator found on this node" : "no device for this process");
    }
    return r;
}

nlohmann::ordered_json placement_to_json(const PlacementReport& r) {
    nlohmann::ordered_json dev = nullptr;
    if (r.device)
        dev = nlohmann::ordered_json{{"index", r.device->index}, {"pci", r.device->pci},
                                     {"numa_nodes", r.device->home_nodes}, {"source", r.device_source}};
    nlohmann::ordered_json out{{"pid", r.pid},
                                  {"cpus", r.placement.cpus.ids()},
                                  {"cpu_numa_nodes", r.cpu_numa_nodes},
                                  {"mem_policy", r.placement.mem_policy},
                                  {"mem_nodes", r.placement.mem_nodes.ids()},
                                  {"device", dev},
                                  {"devices", r.devices},
                                  {"nics", nlohmann::ordered_json::array()},
                                  {"warnings", r.warnings}};
    for (const Nic& n : r.nics) out["nics"].push_back({{"name", n.name}, {"pci", n.pci}});
    if (r.plan) {
        out["plan"] = {{"mode", r.plan->mode}, {"cpus", r.plan->cpus}, {"mems", r.plan->mems},
                       {"mem_policy", r.plan->mem_policy}, {"devices", r.plan->devices},
                       {"device_pci", r.plan->device_pci}};
        out["note"] = r.plan->note;
    }
    return out;
}

std::string placement_to_text(const PlacementReport& r) {
    const Placement& p = r.placement;
    std::ostringstream out;
    out << "cpus:       " << p.cpus.to_string() << " (NUMA node(s) " << join_ints(r.cpu_numa_nodes) << ")\n";
    out << "memory:     " << p.mem_policy
        << (p.mem_nodes.empty() ? std::string() : " on node(s) " + p.mem_nodes.to_string()) << "\n";
    if (r.plan) {
        out << "plan:       mode " << r.plan->mode << ", cpus " << r.plan->cpus << ", mems "
            << (r.plan->mems.empty() ? "-" : r.plan->mems) << " (" << r.plan->mem_policy << "), device(s) "
            << join_ints(r.plan->devices) << (r.plan->device_pci.empty() ? "" : " (" + r.plan->device_pci + ")") << "\n";
        out << "note:       " << r.plan->note << "\n";
    } else if (r.device)
        out << (r.devices.size() > 1 ? "devices:    " + join_ints(r.devices) + ", first " : std::string("device:     "))
            << r.device->index << " (" << r.device->pci << ") on NUMA node(s) " << join_ints(r.device_nodes) << " ["
            << r.device_source << "]\n";
    else
        out << "device:     none\n";
    if (!r.nics.empty()) {
        out << "nics:       ";
        for (size_t i = 0; i < r.nics.size(); ++i) out << (i ? ", " : "") << r.nics[i].name << " (" << r.nics[i].pci << ")";
        out << "\n";
    }
    for (const std::string& w : r.warnings) out << "warning: " << w << "\n";
    return out.str();
}

}  // namespace numabind
