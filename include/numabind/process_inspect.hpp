// Adapter: reads a running process from /proc (its threads' CPUs, their memory policies,
// its numa_maps, the NUMABIND_* and device variables of its environment).
// Readable by the process's owner and by root; /proc itself enforces the same for
// numa_maps and environ (ptrace read access), this check gives the one-line reason first.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "numabind/process_audit.hpp"

namespace numabind {

struct ProcessSnapshot {
    int pid = 0;
    uid_t uid = 0;
    std::string name;                           // comm
    std::vector<AuditedThread> threads;         // every thread, tid order
    std::vector<NumaMapping> maps;              // /proc/PID/numa_maps (the leader's view)
    std::string policy;                         // the leader's task policy (numa_maps), "" unknown
    std::map<std::string, std::string> environ;  // NUMABIND_*, *_VISIBLE_DEVICES, ZE_AFFINITY_MASK, ranks
};

// Throws Error: "no process PID", a one-line permission error, or an unreadable /proc file.
// thread_policies: also read each thread's memory policy (one numa_maps prefix per thread).
ProcessSnapshot inspect_process(int pid, bool thread_policies = true);

// The thread ids of a process (/proc/PID/task), ascending; empty when it is gone.
std::vector<int> thread_ids(int pid);

// A thread's task memory policy as /proc/PID/task/TID/numa_maps shows it (reads only up to
// the first file mapping); "" when unreadable.
std::string thread_policy(int pid, int tid);

// Whole text of a /proc file ("" and false when unreadable; errno kept).
bool read_proc_file(const std::string& path, std::string& out);

}  // namespace numabind
