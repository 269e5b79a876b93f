#include "numabind/report.hpp"

#include <sstream>

#include "core/text.hpp"

namespace numabind {

std::string join(const std::vector<int>& values, const char* sep) { return join_ints(values, sep); }

std::vector<int> l3_groups_of(const Topology& topo, const IdSet& pus) {
    std::vector<int> out;
    for (size_t g = 0; g < topo.l3_groups.size(); ++g)
        if (topo.l3_groups[g].pus.intersects(pus)) out.push_back(static_cast<int>(g));
    return out;
}

namespace {

nlohmann::ordered_json nics_json(const std::vector<Nic>& nics) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Nic& n : nics) out.push_back(nlohmann::ordered_json{{"name", n.name}, {"pci", n.pci}});
    return out;
}

std::string nics_text(const std::vector<Nic>& nics) { return nics.empty() ? "-" : nic_names(nics); }

}  // namespace

nlohmann::ordered_json plan_to_json(const NodePlan& plan) {
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const TaskPlan& t : plan.tasks) {
        nlohmann::ordered_json device = nullptr;
        if (t.device) device = nlohmann::ordered_json{{"index", t.device->index}, {"pci", t.device->pci}};
        tasks.push_back(nlohmann::ordered_json{{"local_rank", t.local_rank},
                         {"device", device},
                         {"devices", t.devices},
                         {"cpus", t.cpus.ids()},
                         {"mems", t.mems},
                         {"mem_policy", to_string(t.mem)},
                         {"nics", nics_json(t.nics)},
                         {"warnings", t.warnings}});
    }
    return nlohmann::ordered_json{{"mode", to_string(plan.mode)}, {"tasks", tasks}, {"warnings", plan.warnings}};
}

std::string plan_to_table(const NodePlan& plan) {
    std::ostringstream out;
    out << "mode " << to_string(plan.mode) << ", " << plan.tasks.size() << " task(s)\n";
    out << "rank  device  pci           mems    policy      cpus  nics\n";
    for (const TaskPlan& t : plan.tasks) {
        char line[160];
        std::snprintf(line, sizeof line, "%-5d %-7s %-13s %-7s %-11s ", t.local_rank,
                      t.device ? std::to_string(t.device->index).c_str() : "-",
                      t.device ? t.device->pci.c_str() : "-", t.mems.empty() ? "-" : join_ints(t.mems).c_str(),
                      to_string(t.mem).c_str());
        out << line << t.cpus.to_string() << "  " << nics_text(t.nics) << "\n";
        for (const std::string& w : t.warnings) out << "      warning: " << w << "\n";
    }
    for (const std::string& w : plan.warnings) out << "warning: " << w << "\n";
    return out.str();
}

nlohmann::ordered_json accelerators_to_json(const Topology& topo, const std::vector<Accelerator>& accs) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    const std::vector<Nic> nics = fabric_nics(topo);
    for (const Accelerator& a : accs) {
        const PciDevice& dev = topo.pci_devices[a.pci_device];
        char id[16];
        std::snprintf(id, sizeof id, "%04x:%04x", dev.vendor, dev.device);
        char cls[8];
        std::snprintf(cls, sizeof cls, "0x%04x", dev.class_id);
        IdSet home_cpus = topo.pus_of_nodes(a.home_nodes);
        nlohmann::ordered_json j = {{"index", a.index},
                            {"pci", a.pci},
                            {"id", id},
                            {"class", cls},
                            {"name", a.name},
                            {"os_devices", dev.os_devices},
                            {"home_nodes", a.home_nodes},
                            {"local_cpus", a.locality.ids()},
                            {"home_cpus", home_cpus.ids()},
                            {"l3_groups", l3_groups_of(topo, home_cpus)},
                            {"l3", a.l3 >= 0 ? nlohmann::ordered_json(a.l3) : nlohmann::ordered_json(nullptr)},
                            {"nics", nics_json(nics_for_devices(topo, nics, accs, {a.index}))}};
        if (a.sub_count > 1) j["partition"] = {{"index", a.sub_index}, {"count", a.sub_count}};
        if (!a.home_warning.empty()) j["warning"] = a.home_warning;
        out.push_back(j);
    }
    return out;
}

std::string accelerators_to_table(const Topology& topo, const std::vector<Accelerator>& accs) {
    std::ostringstream out;
    out << "dev  pci           id         home-numa  cpu-affinity            " << topo.cache_level_name
        << "-groups  nics\n";
    const std::vector<Nic> nics = fabric_nics(topo);
    for (const Accelerator& a : accs) {
        const PciDevice& dev = topo.pci_devices[a.pci_device];
        IdSet home_cpus = topo.pus_of_nodes(a.home_nodes);
        char line[200];
        std::snprintf(line, sizeof line, "%-4d %-13s %04x:%04x  %-10s %-23s %s", a.index, a.pci.c_str(), dev.vendor,
                      dev.device, join_ints(a.home_nodes).c_str(), home_cpus.to_string().c_str(),
                      join_ints(l3_groups_of(topo, home_cpus)).c_str());
        out << line << "  " << nics_text(nics_for_devices(topo, nics, accs, {a.index}));
        if (a.sub_count > 1) out << "  (partition " << a.sub_index << "/" << a.sub_count << ")";
        out << "\n";
        if (!a.home_warning.empty()) out << "     warning: " << a.home_warning << "\n";
    }
    return out.str();
}

}  // namespace numabind
