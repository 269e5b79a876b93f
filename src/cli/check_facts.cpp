// `numabind check`: pure helpers (see check_facts.hpp).
#include "check_facts.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/text.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "policy/log_text.hpp"

namespace numabind::check {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r\n");
    return s.substr(a, b - a + 1);
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

const char* to_string(Status s) {
    switch (s) {
        case Status::Ok: return "OK";
        case Status::Warn: return "WARN";
        case Status::Fail: return "FAIL";
    }
    return "?";
}

int exit_status(const std::vector<Row>& rows) {
    return std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.status == Status::Fail; }) ? 1 : 0;
}

std::string rows_to_table(const std::vector<Row>& rows_in) {
    // Names come from files others write (gres.conf File=, plugstack lines): no control byte
    // reaches the terminal (the plugin's log-line escaping, spank/policy/log_text.cpp).
    std::vector<Row> rows = rows_in;
    for (Row& r : rows)
        for (std::string* f : {&r.area, &r.item, &r.detail, &r.fix}) *f = spank::log_safe(*f, std::string::npos - 8);
    size_t area_w = 4, item_w = 4;
    for (const Row& r : rows) {
        area_w = std::max(area_w, r.area.size());
        item_w = std::max(item_w, r.item.size());
    }
    auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
    std::ostringstream out;
    out << pad("STATUS", 6) << "  " << pad("AREA", area_w) << "  " << pad("ITEM", item_w) << "  DETAIL\n";
    int counts[3] = {0, 0, 0};
    for (const Row& r : rows) {
        ++counts[static_cast<int>(r.status)];
        out << pad(to_string(r.status), 6) << "  " << pad(r.area, area_w) << "  " << pad(r.item, item_w) << "  "
            << r.detail << "\n";
        if (!r.fix.empty()) out << std::string(10, ' ') << "fix: " << r.fix << "\n";
    }
    out << counts[0] << " OK, " << counts[1] << " WARN, " << counts[2] << " FAIL\n";
    return out.str();
}

nlohmann::ordered_json rows_to_json(const std::vector<Row>& rows) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    int counts[3] = {0, 0, 0};
    for (const Row& r : rows) {
        ++counts[static_cast<int>(r.status)];
        list.push_back({{"status", to_string(r.status)}, {"area", r.area}, {"item", r.item}, {"detail", r.detail},
                        {"fix", r.fix}});
    }
    return {{"rows", list},
            {"summary", {{"ok", counts[0]}, {"warn", counts[1]}, {"fail", counts[2]}}},
            {"exit_status", exit_status(rows)}};
}

PlugstackLine parse_plugstack_line(const std::string& line) {
    std::vector<std::string> w = words_of(line);
    if (w.empty()) throw UsageError("empty plugstack line (expected: required|optional PLUGIN [ARG...])");
    if (w[0] != "required" && w[0] != "optional")
        throw UsageError("plugstack line starts with '" + w[0] + "' (valid: required, optional)");
    if (w.size() < 2) throw UsageError("plugstack line has no plugin path after '" + w[0] + "'");
    PlugstackLine p;
    p.control = w[0];
    p.plugin = w[1];
    p.args.assign(w.begin() + 2, w.end());
    return p;
}

Row task_plugin_row(const std::optional<std::string>& task_plugin) {
    Row r{"slurm", "TaskPlugin", Status::Ok, "", ""};
    const std::string v = task_plugin ? lower(*task_plugin) : "";
    const bool cgroup = v.find("task/cgroup") != std::string::npos;
    const bool affinity = v.find("task/affinity") != std::string::npos;
    r.detail = "TaskPlugin=" + (task_plugin ? *task_plugin : std::string("(not set: task/none)"));
    if (cgroup) {
        r.detail += ": each step has its cpuset, numabind plans inside it" +
                    std::string(affinity ? "; task/affinity's pinning is replaced by numabind's" : "");
        return r;
    }
    r.status = Status::Warn;
    r.detail += affinity ? ": no cpuset per step; numabind replaces task/affinity's pinning, but jobs sharing a "
                           "node may be given the same CPUs"
                         : ": no cpuset per step; numabind plans on every CPU of the node";
    r.fix = "TaskPlugin=task/cgroup,task/affinity in slurm.conf, ConstrainCores=yes in cgroup.conf";
    return r;
}

OrderCheck pci_order(const std::vector<std::string>& pci) {
    OrderCheck c;
    for (size_t i = 0; i + 1 < pci.size(); ++i) {
        if (pci_address_less(pci[i + 1], pci[i])) {
            c.in_order = false;
            c.first_bad = static_cast<int>(i);
            return c;
        }
    }
    return c;
}

Row gpu_rule_row(int known, int total, size_t gres_files, const std::optional<bool>& devices_constrained,
                 const std::optional<bool>& gres_in_pci_order) {
    Row r{"device files", "GPU rule the plugin uses", Status::Ok, "", ""};
    const int unknown = total - known;
    // Where Slurm's gres index stands for the accelerator's PCI position, gres.conf's order matters.
    auto needs_pci_order = [&](Row& row) {
        if (gres_in_pci_order && *gres_in_pci_order) {
            row.detail += ", right here since gres.conf lists the GPUs in PCI order";
            return;
        }
        row.status = Status::Warn;
        row.detail += gres_in_pci_order ? "; gres.conf does not list the GPUs in PCI order, so tasks are bound next to "
                                          "the wrong GPUs"
                                        : "; whether gres.conf lists the GPUs in PCI order cannot be told here";
        row.fix = "give device_files= in the plugstack line (or load the driver that provides /proc/driver/nvidia or "
                  "DRM render nodes), or list gres.conf File= in PCI order (AutoDetect=nvml does)";
    };
    if (total == 0) {
        r.detail = "no accelerator: steps on this node are left alone";
        return r;
    }
    switch (spank::gpu_identity(static_cast<size_t>(total), static_cast<size_t>(known), gres_files, devices_constrained)) {
        case spank::GpuIdentity::DeviceFiles:
            r.detail = "every accelerator's device file is known: each task open()s them and binds to the GPUs it "
                       "can open, its GPU variable counted over those (with ConstrainDevices, a task opens its step's "
                       "GPUs, only its own under --gpus-per-task or --gpu-bind)";
            return r;
        case spank::GpuIdentity::SlurmDeviceFiles:
            r.detail = std::to_string(unknown) + " of " + std::to_string(total) +
                       " device files unknown to numabind: gres.conf's File= paths (one per accelerator) stand in, gres "
                       "index i for accelerator i; each task binds to the GPUs it can open among them";
            needs_pci_order(r);
            return r;
        case spank::GpuIdentity::GresIndex:
            r.detail = std::to_string(unknown) + " of " + std::to_string(total) +
                       " device files unknown and Slurm does not constrain devices: each task's GPU variable is read "
                       "as Slurm's gres index";
            needs_pci_order(r);
            return r;
        case spank::GpuIdentity::OneUnknown:
            r.detail = std::to_string(known) + " of " + std::to_string(total) +
                       " device files known: tasks are still bound per device (the one unknown GPU is the one no "
                       "opened file accounts for)";
            return r;
        case spank::GpuIdentity::Guess:
            break;
    }
    r.status = Status::Warn;
    r.detail = std::to_string(unknown) + " of " + std::to_string(total) +
               " device files unknown, no gres.conf File= per accelerator, and Slurm " +
               (devices_constrained ? "constrains devices" : "'s configuration cannot be read") +
               ": the tasks share the step's SLURM_STEP_GPUS by the ownership rule; a task given GPUs of its own is "
               "bound by a guess, said once per step";
    r.fix = "give device_files= in the plugstack line (or load the driver that provides /proc/driver/nvidia or DRM "
            "render nodes)";
    return r;
}

std::map<int, int> parse_nvidia_smi_topo(const std::string& text) {
    std::map<int, int> out;
    int device_columns = -1;
    for (const std::string& line : lines_of(text)) {
        std::vector<std::string> w = words_of(line);
        if (w.empty()) continue;
        if (device_columns < 0) {
            const auto cpu = std::find(w.begin(), w.end(), "CPU");
            if (cpu != w.end() && line.find("NUMA Affinity") != std::string::npos)
                device_columns = static_cast<int>(cpu - w.begin());
            continue;
        }
        if (w[0].size() < 4 || w[0].size() > 9 || w[0].compare(0, 3, "GPU") != 0 || !all_digits(w[0].substr(3))) continue;
        const size_t numa_at = static_cast<size_t>(device_columns) + 2;  // name, matrix, CPU affinity
        if (w.size() <= numa_at) continue;
        const std::string& numa = w[numa_at];
        out[std::stoi(w[0].substr(3))] = all_digits(numa) && numa.size() < 7 ? std::stoi(numa) : -1;
    }
    return out;
}

std::map<int, int> parse_rocm_smi_numa(const std::string& text) {
    std::map<int, int> out;
    for (const std::string& line : lines_of(text)) {
        const std::string key = "Numa Node:";
        const size_t k = line.find(key);
        if (line.compare(0, 4, "GPU[") != 0 || k == std::string::npos) continue;
        const size_t close = line.find(']');
        const std::string index = line.substr(4, close == std::string::npos ? 0 : close - 4);
        const std::string value = trim(line.substr(k + key.size()));
        if (!all_digits(index) || index.size() > 6) continue;
        out[std::stoi(index)] = all_digits(value) && value.size() < 7 ? std::stoi(value) : -1;
    }
    return out;
}

std::optional<std::pair<int, int>> kernel_version(const std::string& release) {
    const size_t dot = release.find('.');
    if (dot == std::string::npos) return std::nullopt;
    size_t end = dot + 1;
    while (end < release.size() && std::isdigit(static_cast<unsigned char>(release[end]))) ++end;
    const std::string major = release.substr(0, dot), minor = release.substr(dot + 1, end - dot - 1);
    if (!all_digits(major) || !all_digits(minor) || major.size() > 4 || minor.size() > 4) return std::nullopt;
    return std::make_pair(std::stoi(major), std::stoi(minor));
}

}  // namespace numabind::check
