// Adapter: reads a running process from /proc (its threads' CPUs, their memory policies,
// its numa_maps, the NUMABIND_* and device variables of its environment).
// Readable by the process's owner and by root; /proc itself enforces the same for
// numa_maps and environ (ptrace read access), this check gives the one-line reason first.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/process_audit.hpp"

namespace numabind {

struct ProcessSnapshot {
    int pid = 0;
    uid_t uid = 0;
    std::string name;                           // comm
    std::vector<AuditedThread> threads;         // every thread, tid order
    std::vector<NumaMapping> maps;              // /proc/PID/numa_maps (the leader's view)
    std::string policy;                         // the leader's task policy (numa_maps), "" unknown
    std::map<std::string, std::string> environ;  // NUMABIND_*, *_VISIBLE_DEVICES, ZE_AFFINITY_MASK, ranks
    std::vector<std::string> limits;             // what a bound below cut short (said as notes)
    std::string started;                         // start time (/proc/PID/stat): its identity
};

// Bounds on what a target process can make a read cost (it chooses its threads, mappings
// and variables): past one, the read stops there and `limits` says so.
inline constexpr size_t kMaxThreads = 4096;
inline constexpr size_t kThreadPolicyBytes = 64 << 10;  // of each thread's numa_maps
inline constexpr size_t kMaxNumaMapsBytes = 64 << 20;   // of the process's numa_maps
inline constexpr size_t kMaxEnvironBytes = 4 << 20;
inline constexpr size_t kMaxVariableBytes = 4096;       // of each variable kept

// Throws Error: "no process PID", a one-line permission error (also for the caller's own
// process when it is not dumpable), an unreadable /proc file, or that the process exited or
// its pid was reused while being read (pinned by a pidfd, its start time checked again).
// thread_policies: also read each thread's memory policy (one numa_maps prefix per thread).
ProcessSnapshot inspect_process(int pid, bool thread_policies = true);

// The thread ids of a process (/proc/PID/task), ascending; empty when it is gone.
std::vector<int> thread_ids(int pid);

// A thread's task memory policy as /proc/PID/task/TID/numa_maps shows it (reads only up to
// the first file mapping, and kThreadPolicyBytes at most: then *cut); "" when unreadable.
std::string thread_policy(int pid, int tid, bool* cut = nullptr);

// Text of a /proc or /sys file, up to max_bytes (then *cut) ("" and false when unreadable;
// errno kept): the one reader of small kernel files (plain read(2), no iostream: the SPANK
// task hook's hot path). Site configuration files: config_file.hpp.
bool read_proc_file(const std::string& path, std::string& out, size_t max_bytes = SIZE_MAX, bool* cut = nullptr);

// Throws Error when the process of `s` exited or its pid now names another process.
void check_same_process(const ProcessSnapshot& s);

// A target's own text (process and thread names) for a terminal: control characters (and
// DEL) escaped as \xNN.
std::string printable(const std::string& text);

}  // namespace numabind
