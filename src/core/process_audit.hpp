// Pure rules for auditing a running process (`numabind show --pid`): parsing the kernel's
// numa_maps text, and where a process's threads, memory and device disagree with the plan
// numabind left in its environment. No I/O; the /proc reading is src/sys/process_inspect.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numabind/idset.hpp"

namespace numabind {

// One line of /proc/PID/numa_maps: "7f00... prefer:0 anon=3 dirty=3 N0=3 kernelpagesize_kB=4".
struct NumaMapping {
    std::string address;
    std::string policy;          // as the kernel writes it: default, prefer:0, bind:0-1, "prefer (many):0-1"
    std::string file;            // file=PATH, or "" for anonymous memory
    bool heap = false;
    bool stack = false;
    std::map<int, long> pages;   // N<node>=<pages> (in units of kernelpagesize_kB)
    long page_kb = 4;
    bool anonymous() const { return file.empty(); }
};

// Parses numa_maps text; lines it cannot read are skipped (the kernel's format).
std::vector<NumaMapping> parse_numa_maps(std::string_view text);

// The policy of the task whose numa_maps this is. A mapping without its own (mbind) policy
// shows the reading task's policy; file mappings (program, libraries) almost never carry
// one, so the first file mapping's policy is the task's. nullopt: no file mapping.
std::optional<std::string> task_policy_from_numa_maps(const std::vector<NumaMapping>& maps);

// The node set and the kind of a numa_maps policy ("prefer:0-1" -> kind prefer, nodes 0-1;
// "prefer (many):2,3" -> prefer; "bind=static:1" -> bind; "default" -> default, no nodes).
struct NumaPolicy {
    std::string kind;  // default, local, prefer, bind, interleave, weighted interleave...
    IdSet nodes;
};
NumaPolicy parse_numa_policy(std::string_view policy);

// Resident pages per NUMA node, all mappings; and those of anonymous memory only (heap,
// stacks, anonymous mappings: what the process itself allocated, not shared page cache).
std::map<int, long> pages_by_node(const std::vector<NumaMapping>& maps, bool anonymous_only);

// One field of a /proc/PID/status (or task/TID/status) text: status_field(text,
// "Cpus_allowed_list") -> "0-7" (leading blanks dropped); "" when the field is absent.
std::string status_field(std::string_view status, std::string_view name);

struct AuditedThread {
    int tid = 0;
    std::string name;
    IdSet cpus;          // Cpus_allowed_list
    std::string policy;  // its task memory policy as numa_maps shows it; "" unknown
};

// The plan numabind left in the process's environment (NUMABIND_*).
struct EnvPlan {
    bool present = false;  // NUMABIND_CPUS set and NUMABIND_MODE not none
    IdSet cpus;
    std::vector<int> mems;
    std::string mem_policy;  // prefer, bind, interleave, none
};

struct AuditedDevice {
    int index = -1;
    std::string pci;
    std::vector<int> home_nodes;
};

// The plan from the environment variables (NUMABIND_MODE, _CPUS, _MEMS, _MEM_POLICY).
// Malformed values give present = false.
EnvPlan plan_from_environ(const std::map<std::string, std::string>& environ);
// The plan from the marker numabind.bind() leaves in /proc/PID/maps ("/memfd:numabind-plan:
// mode=..;cpus=..;mems=..;mem=..;devices=.."); nullopt when there is none. devices_out gets
// its device list.
std::optional<EnvPlan> plan_from_maps(std::string_view maps_text, std::vector<int>* devices_out = nullptr);

// The mismatches, one line each: threads allowed outside the plan's CPUs, threads whose
// memory policy is not the plan's (wrong kind or nodes off the home), anonymous pages
// resident off the home nodes, CPUs (cpu_nodes: the NUMA nodes of the CPUs the threads may
// use) on a node that is not the home of any of the task's devices.
std::vector<std::string> process_mismatches(const std::vector<AuditedThread>& threads, const EnvPlan& plan,
                                            const std::map<int, long>& anonymous_pages,
                                            const std::vector<AuditedDevice>& devices,
                                            const std::vector<int>& cpu_nodes);

}  // namespace numabind
