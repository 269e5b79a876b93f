// Adapter: all-threads affinity (sched_setaffinity per tid), per-thread memory policy by
// signal broadcast, page migration (migrate_pages), and the plan marker. See the header.
#include "numabind/process_binding.hpp"

#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "numabind/process_audit.hpp"
#include "numabind/process_inspect.hpp"

namespace numabind {

const char* const kPlanMarkerName = "numabind-plan:";

namespace {

constexpr int kMaxNodes = 4096;
constexpr int kBitsPerWord = 8 * sizeof(unsigned long);
constexpr int kMaskWords = kMaxNodes / kBitsPerWord;
#ifndef MPOL_F_STATIC_NODES
#define MPOL_F_STATIC_NODES (1 << 15)
#define MPOL_F_RELATIVE_NODES (1 << 14)
#endif

pid_t my_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

bool get_thread_affinity(pid_t tid, IdSet& out) {
    for (int ncpus = 1024; ncpus <= (1 << 18); ncpus *= 4) {
        cpu_set_t* set = CPU_ALLOC(ncpus);
        size_t size = CPU_ALLOC_SIZE(ncpus);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(tid, size, set) == 0) {
            out = IdSet();
            for (int c = 0; c < ncpus; ++c)
                if (CPU_ISSET_S(c, size, set)) out.insert(c);
            CPU_FREE(set);
            return true;
        }
        int err = errno;
        CPU_FREE(set);
        errno = err;
        if (err != EINVAL) return false;
    }
    return false;
}

bool set_thread_affinity(pid_t tid, const IdSet& cpus) {
    if (cpus.empty()) {
        errno = EINVAL;
        return false;
    }
    const int ncpus = cpus.ids().back() + 1;
    cpu_set_t* set = CPU_ALLOC(ncpus);
    size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    for (int c : cpus.ids()) CPU_SET_S(c, size, set);
    int rc = sched_setaffinity(tid, size, set);
    int err = errno;
    CPU_FREE(set);
    errno = err;
    return rc == 0;
}

// ---- memory policy broadcast: each other thread sets the caller's policy on itself ----
std::mutex g_broadcast_mutex;  // one broadcast at a time; the handler reads these
int g_policy_mode = MPOL_DEFAULT;
unsigned long g_policy_mask[kMaskWords];
std::atomic<int> g_policy_ok{0};
std::atomic<int> g_policy_failed{0};
int g_signal = 0;  // 0: not installed

void policy_handler(int) {
    const int saved = errno;
    bool ok = syscall(SYS_set_mempolicy, g_policy_mode, g_policy_mask, kMaxNodes) == 0;
    if (ok) {
        int mode = -1;
        ok = syscall(SYS_get_mempolicy, &mode, nullptr, 0, nullptr, 0) == 0 &&
             (mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES)) ==
                 (g_policy_mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES));
    }
    (ok ? g_policy_ok : g_policy_failed).fetch_add(1);
    errno = saved;
}

// A real-time signal nobody else handles, with our handler installed (kept installed for
// good: a late delivery to a thread that had it blocked must not kill the process).
int policy_signal(std::string& error) {
    if (g_signal) return g_signal;
    for (int sig = SIGRTMAX - 2; sig > SIGRTMIN + 2; --sig) {
        struct sigaction old {};
        if (sigaction(sig, nullptr, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa {};
        sa.sa_handler = policy_handler;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, nullptr) == 0) {
            g_signal = sig;
            return sig;
        }
    }
    error = "no free real-time signal to reach the other threads";
    return 0;
}

void sleep_ms(long ms) {
    struct timespec ts {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

long off_home(const std::map<int, long>& by_node, const std::vector<int>& home) {
    long n = 0;
    for (const auto& [node, pages] : by_node)
        if (std::find(home.begin(), home.end(), node) == home.end()) n += pages;
    return n;
}

std::string marker_text(const std::string& mode, const TaskPlan& task) {
    auto list = [](const std::vector<int>& v) {
        std::string s;
        for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
        return s;
    };
    return std::string(kPlanMarkerName) + "mode=" + mode + ";cpus=" + task.cpus.to_string() + ";mems=" + list(task.mems) +
           ";mem=" + to_string(task.mem) + ";devices=" + list(task.devices);
}

void* g_marker = nullptr;

}  // namespace

long anonymous_pages_off(const std::vector<int>& home_nodes) {
    std::string text;
    if (!read_proc_file("/proc/self/numa_maps", text)) return -1;
    return off_home(pages_by_node(parse_numa_maps(text), true), home_nodes);
}

void publish_plan_marker(const std::string& mode, const TaskPlan& task) {
    const long page = sysconf(_SC_PAGESIZE);
    if (g_marker) {
        munmap(g_marker, static_cast<size_t>(page));
        g_marker = nullptr;
    }
    std::string name = marker_text(mode, task);
    if (name.size() > 240) name.resize(240);  // memfd names: 249 bytes at most
    int fd = static_cast<int>(syscall(SYS_memfd_create, name.c_str(), 1U /* MFD_CLOEXEC */));
    if (fd < 0) return;
    if (ftruncate(fd, page) == 0) {
        void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) g_marker = p;
    }
    close(fd);
}

ProcessBindResult bind_process(const TaskPlan& task, bool migrate) {
    ProcessBindResult r;
    r.caller = apply_binding(task);
    r.warnings = r.caller.warnings;
    if (!r.caller.ok) {
        r.error = r.caller.error;
        return r;
    }
    const pid_t self = my_tid();

    // Affinity of every other thread; the list is re-read until no new thread shows up
    // (a thread may start another while we work).
    std::map<pid_t, IdSet> previous;
    std::set<pid_t> done{self};
    std::vector<pid_t> policy_targets;
    if (!task.cpus.empty()) {
        for (int pass = 0; pass < 100; ++pass) {
            bool found_new = false;
            for (int tid : thread_ids(static_cast<int>(getpid()))) {
                if (!done.insert(tid).second) continue;
                found_new = true;
                IdSet old;
                if (!get_thread_affinity(tid, old)) {
                    if (errno == ESRCH) continue;  // exited meanwhile
                }
                if (!set_thread_affinity(tid, task.cpus)) {
                    if (errno == ESRCH) continue;
                    const int err = errno;
                    for (const auto& [t, cpus] : previous) (void)set_thread_affinity(t, cpus);
                    r.error = "sched_setaffinity of thread " + std::to_string(tid) + " to CPUs " + task.cpus.to_string() +
                              " failed: " + std::strerror(err);
                    return r;
                }
                previous[tid] = old;
                policy_targets.push_back(tid);
            }
            if (!found_new) break;
        }
        // Read back: the kernel narrows a mask to the cpuset without failing.
        for (const auto& [tid, old] : previous) {
            IdSet now;
            if (!get_thread_affinity(tid, now)) continue;  // exited
            if (now != task.cpus) {
                for (const auto& [t, cpus] : previous) (void)set_thread_affinity(t, cpus);
                r.error = "thread " + std::to_string(tid) + " has CPUs " + now.to_string() + " after binding to " +
                          task.cpus.to_string() + " (narrowed by a cpuset?)";
                return r;
            }
            ++r.threads;
        }
    } else {
        for (int tid : thread_ids(static_cast<int>(getpid())))
            if (tid != self) policy_targets.push_back(tid);
    }
    ++r.threads;  // the caller

    // Memory policy: the caller's (already set by apply_binding) on every other thread.
    r.threads_policy = 1;
    if (task.mem != MemPolicy::None && !task.mems.empty() && !policy_targets.empty()) {
        std::lock_guard<std::mutex> lock(g_broadcast_mutex);
        std::string why;
        const int sig = policy_signal(why);
        int mode = 0;
        unsigned long mask[kMaskWords] = {};
        if (sig == 0) {
            r.warnings.push_back("memory policy set on the calling thread only: " + why);
        } else if (get_mempolicy(&mode, mask, kMaxNodes, nullptr, 0) != 0) {
            r.warnings.push_back(std::string("memory policy set on the calling thread only: get_mempolicy: ") +
                                 std::strerror(errno));
        } else {
            g_policy_mode = mode;
            std::memcpy(g_policy_mask, mask, sizeof mask);
            g_policy_ok = 0;
            g_policy_failed = 0;
            int sent = 0;
            for (pid_t tid : policy_targets)
                if (syscall(SYS_tgkill, getpid(), tid, sig) == 0) ++sent;
            // Threads answer within microseconds unless they block the signal; wait ~1 s at most.
            for (int waited = 0; waited < 1000 && g_policy_ok + g_policy_failed < sent; ++waited) sleep_ms(1);
            r.threads_policy += g_policy_ok;
            r.threads_policy_missing = sent - g_policy_ok - g_policy_failed;
            if (g_policy_failed > 0)
                r.warnings.push_back(std::to_string(g_policy_failed.load()) + " thread(s) could not set the memory policy");
            if (r.threads_policy_missing > 0)
                r.warnings.push_back(std::to_string(r.threads_policy_missing) +
                                     " thread(s) did not answer the memory-policy signal within 1 s (signal blocked?); "
                                     "their memory policy is unchanged");
        }
    }

    if (migrate && !task.mems.empty()) {
        r.migrated = true;
        // From every other node the process may use to the home node(s).
        unsigned long from[kMaskWords] = {}, to[kMaskWords] = {};
        IdSet allowed_mems;
        {
            std::string status;
            if (read_proc_file("/proc/self/status", status)) {
                size_t p = status.find("Mems_allowed_list:");
                if (p != std::string::npos) {
                    size_t e = status.find('\n', p);
                    std::string v = status.substr(p + 18, e == std::string::npos ? std::string::npos : e - p - 18);
                    v.erase(0, v.find_first_not_of(" \t"));
                    try {
                        allowed_mems = IdSet::parse(v);
                    } catch (const std::exception&) {
                    }
                }
            }
        }
        bool any_from = false;
        for (int n : allowed_mems.ids())
            if (n < kMaxNodes && std::find(task.mems.begin(), task.mems.end(), n) == task.mems.end()) {
                from[n / kBitsPerWord] |= 1UL << (n % kBitsPerWord);
                any_from = true;
            }
        for (int n : task.mems)
            if (n >= 0 && n < kMaxNodes) to[n / kBitsPerWord] |= 1UL << (n % kBitsPerWord);
        // Each numa_maps walk costs about what moving the pages does: none when no other node
        // is allowed (nothing can move; the counts stay -1, not counted), one when nothing is
        // off home, the second only to count what stayed off after migrate_pages.
        r.pages_off_home_before = any_from ? anonymous_pages_off(task.mems) : -1;
        const bool anything_off = any_from && r.pages_off_home_before != 0;
        if (anything_off) {
            long rc = syscall(SYS_migrate_pages, 0, kMaxNodes, from, to);
            if (rc < 0) r.warnings.push_back(std::string("migrate_pages failed: ") + std::strerror(errno));
        }
        r.pages_off_home_after = anything_off ? anonymous_pages_off(task.mems) : r.pages_off_home_before;
        if (r.pages_off_home_before >= 0 && r.pages_off_home_after >= 0)
            r.pages_moved = std::max(0L, r.pages_off_home_before - r.pages_off_home_after);
        if (r.pages_off_home_after > 0)
            r.warnings.push_back(std::to_string(r.pages_off_home_after) +
                                 " anonymous page(s) stay off the home node(s) (shared with other processes, "
                                 "locked, or the home nodes are full)");
    }
    r.ok = true;
    return r;
}

}  // namespace numabind
