// Adapter: binds a whole running process, not only the calling thread — for the C API
// (numabind.h) and the Python module, which run inside programs that started threads
// (OpenMP, PyTorch, CUDA) before they bind.
//
// What Linux allows: sched_setaffinity takes any thread id of the process, so every
// thread's affinity is set directly (the thread list is re-read until a pass finds no new
// thread). The memory policy (set_mempolicy) is per thread and only settable by the thread
// itself: the calling thread sets its own, every other thread is asked to set the same one
// from a signal handler (one real-time signal per thread, as glibc does for setuid across
// threads), re-scanning until a pass finds no thread not yet asked. The signal is one the
// program neither handles nor blocks in any thread (a blocked one may be waited for with
// sigwaitinfo or a signalfd), checked again before each broadcast; each answer is recorded
// per call and per thread id. A thread that cannot be reached (it blocks every usable
// signal, or does not answer within 1 s) is reported by id, not waited for. The caller
// serialises calls (the C API holds one lock over planning and binding).
// Pages already resident stay where they are unless migrate is set: then migrate_pages(2)
// moves the process's pages from the other allowed nodes to the home node(s).
#pragma once

#include <string>
#include <vector>

#include "numabind/plan.hpp"
#include "sys/binding.hpp"

namespace numabind {

struct ProcessBindResult {
    bool ok = false;
    std::string error;               // one line when !ok
    ApplyResult caller;              // the calling thread, read back
    int threads = 0;                 // threads whose affinity was set and read back
    int threads_policy = 0;          // threads whose memory policy was set and read back (caller included)
    int threads_policy_missing = 0;  // threads whose memory policy is not the plan's
    struct ThreadIssue {
        int tid;
        std::string why;
    };
    std::vector<ThreadIssue> threads_not_as_planned;  // exactly which threads, and why
    bool migrated = false;
    long pages_off_home_before = 0;  // anonymous pages off the home nodes (numa_maps); -1: not counted
                                     // (no other node allowed, so nothing could move)
    long pages_off_home_after = 0;
    long pages_moved = 0;
    std::vector<std::string> warnings;
};

// Applies `task` to every thread of this process; with migrate, moves resident pages to
// task.mems. When the calling thread's binding fails its previous placement is restored;
// when another thread's affinity fails, every thread changed so far gets its old one back.
ProcessBindResult bind_process(const TaskPlan& task, bool migrate);

// Anonymous pages of this process per NUMA node (/proc/self/numa_maps).
long anonymous_pages_off(const std::vector<int>& home_nodes);

// Leaves the plan where `numabind show --pid` finds it in a process whose environment
// (/proc/PID/environ, fixed at exec) cannot show a later binding: a one-page memfd mapping
// named "numabind-plan:mode=...;cpus=...;mems=...;mem=...;devices=..." in /proc/PID/maps,
// inherited by forked children. Replaces the previous one. Best effort.
void publish_plan_marker(const std::string& mode, const TaskPlan& task);
// The marker's prefix in /proc/PID/maps ("/memfd:" + this).
extern const char* const kPlanMarkerName;

}  // namespace numabind
