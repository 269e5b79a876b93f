// `numabind check`: the pure parts — the result rows and how they print, and the parsers and
// rules for what a site's files say (plugstack lines, slurm.conf, cgroup.conf, gres.conf,
// nvidia-smi / rocm-smi output). No I/O here: check.cpp reads the files and asks these.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/slurm_conf.hpp"

namespace numabind::check {

enum class Status { Ok, Warn, Fail };
const char* to_string(Status s);  // "OK", "WARN", "FAIL"

// One line of the report: what was compared, what was found, and what to do about it.
struct Row {
    std::string area;  // "accelerators", "device files", "plugstack", "slurm", "kernel"
    std::string item;  // what this row is about, e.g. "GPU 0 (0000:07:00.0) NUMA node"
    Status status = Status::Ok;
    std::string detail;  // what was found
    std::string fix;     // what to do; empty for OK rows
};

// 0: every row OK or WARN; 1: at least one FAIL (2, usage, is the caller's).
int exit_status(const std::vector<Row>& rows);
// One table: STATUS  AREA  ITEM  DETAIL, the fix on the next line ("  fix: ..."), then a
// summary line with the counts.
std::string rows_to_table(const std::vector<Row>& rows);
nlohmann::ordered_json rows_to_json(const std::vector<Row>& rows);

// ---- plugstack.conf ----
// One plugstack.conf line: "required|optional PLUGIN [ARG...]" (Slurm splits on blanks).
struct PlugstackLine {
    std::string control;  // "required" or "optional"
    std::string plugin;   // the plugin's path as written
    std::vector<std::string> args;
};
// Throws UsageError for an empty line, a first word other than required/optional, or a
// missing plugin path.
PlugstackLine parse_plugstack_line(const std::string& line);

// ---- slurm.conf-style files: read by the plugin's own rules (spank/policy/slurm_conf.hpp) ----
using spank::devices_constrained;
using spank::expand_brackets;
using spank::GresGpus;
using spank::is_yes;
using spank::kMaxBracketPattern;
using spank::kMaxExpandedNames;
using spank::kMaxGresNames;
using spank::parse_gres_conf;
using spank::parse_key_values;
using spank::words_of;

// TaskPlugin=task/cgroup,task/affinity: what it means for numabind.
Row task_plugin_row(const std::optional<std::string>& task_plugin);

// Whether PCI addresses (gres index order) are ascending; the first pair out of order.
struct OrderCheck {
    bool in_order = true;
    int first_bad = -1;  // index i with pci[i] after pci[i+1]
};
OrderCheck pci_order(const std::vector<std::string>& pci_in_gres_order);

// ---- which GPU rule the plugin uses (docs/SITE.md §6) ----
// known: accelerators whose device file is known (device_files= or found); total: all;
// gres_files: gres.conf's Name=gpu File= count for this node; devices_constrained: Slurm's
// (spank::devices_constrained). The way is the plugin's own rule (spank::gpu_identity).
// gres_in_pci_order: nullopt when it cannot be told.
Row gpu_rule_row(int known, int total, size_t gres_files, const std::optional<bool>& devices_constrained,
                 const std::optional<bool>& gres_in_pci_order);

// ---- tool outputs ----
// `nvidia-smi topo -m`: GPU index -> NUMA affinity (the node number, -1 for "N/A").
std::map<int, int> parse_nvidia_smi_topo(const std::string& text);
// `rocm-smi --showtoponuma`: GPU index -> "(Topology) Numa Node" (-1 when unknown).
std::map<int, int> parse_rocm_smi_numa(const std::string& text);

// What `check` knows of a file from stat(2).
struct FileFacts {
    bool exists = false;
    bool regular = false;
    unsigned mode = 0;  // st_mode
    unsigned uid = 0;
};

// "6.1.0-18-amd64" -> {6, 1}; nullopt when it does not start with two numbers.
std::optional<std::pair<int, int>> kernel_version(const std::string& release);

}  // namespace numabind::check
