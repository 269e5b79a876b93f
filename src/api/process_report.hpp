// Adapter glue for `numabind show --pid PID`: a running process read from /proc
// (process_inspect), its plan (environment or bind()'s marker) and the mismatch rules
// (process_audit), rendered as text or JSON. Shared by the CLI and the C API.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/task_planner.hpp"
#include "numabind/accelerators.hpp"
#include "sys/process_inspect.hpp"

namespace numabind {

struct ProcessReport {
    ProcessSnapshot process;
    EnvPlan plan;
    std::string plan_source;          // "environment", "numabind.bind() marker", "" none
    IdSet cpus;                       // union of the threads' CPUs
    std::vector<int> cpu_numa_nodes;
    std::map<int, long> pages;        // resident pages per node, all mappings
    std::map<int, long> anonymous_pages;
    std::vector<Accelerator> devices;  // NUMABIND_DEVICES (or the marker's, or NUMABIND_DEVICE)
    std::vector<std::string> mismatches;
    std::vector<std::string> notes;
};

// Throws Error (no such process, permission, topology) or UsageError (--device-match).
ProcessReport inspect_report(int pid, const std::string& topology, const std::string& device_match, const Notify& note);
nlohmann::ordered_json process_report_to_json(const ProcessReport& report);
std::string process_report_to_text(const ProcessReport& report, bool threads);

}  // namespace numabind
