#include "api/process_report.hpp"

#include <algorithm>
#include <sstream>

#include "core/binding_env.hpp"
#include "core/local_rank.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"
#include "numabind/report.hpp"
#include "sys/process_inspect.hpp"

namespace numabind {

namespace {

nlohmann::ordered_json pages_json(const std::map<int, long>& pages) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [node, n] : pages) j[std::to_string(node)] = n;
    return j;
}

std::string pages_text(const std::map<int, long>& pages) {
    std::string s;
    for (const auto& [node, n] : pages) s += (s.empty() ? "" : " ") + ("N" + std::to_string(node) + "=" + std::to_string(n));
    return s.empty() ? "none" : s;
}

std::vector<int> parse_devices(const std::string& text) {
    std::vector<int> out;
    for (std::string_view item : split(text, ',')) {
        if (item.empty()) continue;
        try {
            out.push_back(parse_nonnegative(std::string(item), kEnvDevices));
        } catch (const std::exception&) {
            return {};
        }
    }
    return out;
}

}  // namespace

ProcessReport inspect_report(int pid, const std::string& topology, const std::string& device_match, const Notify& note) {
    ProcessReport r;
    const DeviceMatcher matcher = make_matcher(device_match);  // usage errors first
    r.process = inspect_process(pid, true);
    const ProcessSnapshot& p = r.process;

    // The plan: bind()'s marker is newer than the environment fixed at exec.
    std::vector<int> device_ids;
    std::string maps;
    bool maps_cut = false;
    if (read_proc_file("/proc/" + std::to_string(pid) + "/maps", maps, kMaxNumaMapsBytes, &maps_cut)) {
        if (maps_cut) r.notes.push_back("plan marker looked for in the first " + std::to_string(kMaxNumaMapsBytes >> 20) +
                                        " MiB of its maps only");
        if (auto m = plan_from_maps(maps, &device_ids); m && m->present) {
            r.plan = *m;
            r.plan_source = "numabind.bind() marker";
        }
    }
    if (!r.plan.present) {
        r.plan = plan_from_environ(p.environ);
        device_ids.clear();
        if (r.plan.present) {
            r.plan_source = "environment";
            auto it = p.environ.find(kEnvDevices);
            if (it != p.environ.end()) device_ids = parse_devices(it->second);
            if (device_ids.empty()) {
                auto d = p.environ.find(kEnvDevice);
                if (d != p.environ.end()) device_ids = parse_devices(d->second);
            }
        }
    }
    check_same_process(p);  // the maps above were of the same process as the snapshot
    for (const std::string& limit : p.limits) r.notes.push_back("limit: " + limit);
    if (!r.plan.present) r.notes.push_back("no numabind plan in its environment (NUMABIND_CPUS unset or NUMABIND_MODE none)");

    for (const AuditedThread& t : p.threads) r.cpus |= t.cpus;
    r.pages = pages_by_node(p.maps, false);
    r.anonymous_pages = pages_by_node(p.maps, true);

    auto topo = load_topology(topology, true, note);
    const Topology& m = topo->model();
    r.cpu_numa_nodes = m.cpu_nodes_intersecting(r.cpus);
    auto accs = find_accelerators(m, matcher);
    std::vector<AuditedDevice> audited;
    for (int id : device_ids) {
        if (id < 0 || id >= static_cast<int>(accs.size())) {
            r.notes.push_back("device " + std::to_string(id) + " of its plan is not an accelerator of this topology");
            continue;
        }
        r.devices.push_back(accs[id]);
        audited.push_back(AuditedDevice{accs[id].index, accs[id].pci, accs[id].home_nodes});
    }
    r.mismatches = process_mismatches(p.threads, r.plan, r.anonymous_pages, audited, r.cpu_numa_nodes);
    return r;
}

nlohmann::ordered_json process_report_to_json(const ProcessReport& r) {
    const ProcessSnapshot& p = r.process;
    nlohmann::ordered_json threads = nlohmann::ordered_json::array();
    for (const AuditedThread& t : p.threads)
        threads.push_back({{"tid", t.tid}, {"name", t.name}, {"cpus", t.cpus.ids()}, {"mem_policy", t.policy}});
    nlohmann::ordered_json plan = nullptr;
    if (r.plan.present)
        plan = {{"source", r.plan_source}, {"cpus", r.plan.cpus.ids()}, {"mems", r.plan.mems},
                {"mem_policy", r.plan.mem_policy}};
    nlohmann::ordered_json devices = nlohmann::ordered_json::array();
    for (const Accelerator& a : r.devices) devices.push_back({{"index", a.index}, {"pci", a.pci}, {"numa_nodes", a.home_nodes}});
    nlohmann::ordered_json env = nlohmann::ordered_json::object();
    for (const auto& [k, v] : p.environ) env[k] = v;
    return nlohmann::ordered_json{{"pid", p.pid},
                                  {"name", p.name},
                                  {"cpus", r.cpus.ids()},
                                  {"cpu_numa_nodes", r.cpu_numa_nodes},
                                  {"mem_policy", p.policy},
                                  {"threads", threads},
                                  {"pages_by_node", pages_json(r.pages)},
                                  {"anonymous_pages_by_node", pages_json(r.anonymous_pages)},
                                  {"plan", plan},
                                  {"devices", devices},
                                  {"environment", env},
                                  {"mismatches", r.mismatches},
                                  {"notes", r.notes}};
}

std::string process_report_to_text(const ProcessReport& r, bool threads) {
    const ProcessSnapshot& p = r.process;
    std::ostringstream out;
    // Names and values come from the target: escaped, so that none reaches the terminal raw.
    out << "process:    " << p.pid << " (" << printable(p.name) << "), " << p.threads.size() << " thread(s)\n";
    out << "cpus:       " << r.cpus.to_string() << " (NUMA node(s) " << join_ints(r.cpu_numa_nodes) << ")\n";
    out << "memory:     " << (p.policy.empty() ? "unknown" : p.policy) << "; resident pages " << pages_text(r.pages)
        << " (anonymous " << pages_text(r.anonymous_pages) << ")\n";
    if (r.plan.present)
        out << "plan:       cpus " << r.plan.cpus.to_string() << ", mems " << join_ints(r.plan.mems) << " (" << r.plan.mem_policy
            << ") [" << r.plan_source << "]\n";
    else
        out << "plan:       none\n";
    if (r.devices.empty()) out << "device:     none\n";
    for (const Accelerator& a : r.devices)
        out << "device:     " << a.index << " (" << a.pci << ") on NUMA node(s) " << join_ints(a.home_nodes) << "\n";
    if (threads)
        for (const AuditedThread& t : p.threads)
            out << "thread " << t.tid << " (" << printable(t.name) << "): cpus " << t.cpus.to_string() << ", memory "
                << (t.policy.empty() ? "unknown" : t.policy) << "\n";
    for (const std::string& n : r.notes) out << "note: " << printable(n) << "\n";
    for (const std::string& m : r.mismatches) out << "mismatch: " << printable(m) << "\n";
    if (r.mismatches.empty() && r.plan.present) out << "matches its plan\n";
    return out.str();
}

}  // namespace numabind
