// Adapter: all-threads affinity (sched_setaffinity per tid), per-thread memory policy by
// signal broadcast, page migration (migrate_pages), and the plan marker. See the header.
#include "sys/process_binding.hpp"

#include <fcntl.h>
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
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/process_audit.hpp"
#include "core/text.hpp"
#include "sys/process_inspect.hpp"

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
//
// One Request per broadcast, published through an atomic pointer and never changed after:
// a handler (in any thread, at any time, also late for an earlier call) reads the latest one,
// sets its policy, and records its answer in that request's table under its own thread id.
// A call counts only the answers in its own request from the threads it signalled, so a late
// answer to an earlier call never counts for this one, and a handler never reads a policy
// while a later call writes it. Old requests are freed only when no handler is running.
constexpr int kAckSlots = 4096;  // threads one broadcast can hear from (more: reported)

struct Ack {
    std::atomic<pid_t> tid{0};
    std::atomic<int> result{0};  // 0: no answer yet, 1: set and read back, 2: failed
};

struct Request {
    int mode = MPOL_DEFAULT;
    unsigned long mask[kMaskWords] = {};
    Ack acks[kAckSlots];
};

std::atomic<Request*> g_request{nullptr};
std::atomic<int> g_handlers_running{0};
std::vector<Request*> g_retired;  // under the bind lock
std::set<int> g_our_signals;      // signals with our handler installed (kept for good: a late
                                  // delivery must not kill the process)

Ack* ack_slot(Request& r, pid_t tid, bool insert) {
    const size_t start = static_cast<size_t>(tid) % kAckSlots;
    for (size_t k = 0; k < kAckSlots; ++k) {
        Ack& a = r.acks[(start + k) % kAckSlots];
        pid_t seen = a.tid.load(std::memory_order_acquire);
        if (seen == tid) return &a;
        if (seen == 0) {
            if (!insert) return nullptr;
            if (a.tid.compare_exchange_strong(seen, tid, std::memory_order_acq_rel) || seen == tid) return &a;
        }
    }
    return nullptr;
}

void policy_handler(int) {
    const int saved = errno;
    g_handlers_running.fetch_add(1);
    if (Request* r = g_request.load()) {
        bool ok = syscall(SYS_set_mempolicy, r->mode, r->mask, kMaxNodes) == 0;
        if (ok) {
            int mode = -1;
            ok = syscall(SYS_get_mempolicy, &mode, nullptr, 0, nullptr, 0) == 0 &&
                 (mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES)) ==
                     (r->mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES));
        }
        if (Ack* a = ack_slot(*r, my_tid(), true)) a->result.store(ok ? 1 : 2, std::memory_order_release);
    }
    g_handlers_running.fetch_sub(1);
    errno = saved;
}

// Publishes a new request; frees the retired ones when no handler can still be reading them
// (a handler that starts after the store reads the new one).
Request* publish_request(int mode, const unsigned long* mask) {
    auto* r = new Request;
    r->mode = mode;
    std::memcpy(r->mask, mask, sizeof r->mask);
    if (Request* old = g_request.exchange(r)) g_retired.push_back(old);
    if (g_handlers_running.load() == 0) {
        for (Request* old : g_retired) delete old;
        g_retired.clear();
    }
    return r;
}

// The signals a thread blocks (SigBlk of /proc/self/task/TID/status: bit n-1 is signal n).
bool blocked_signals(pid_t tid, uint64_t& mask) {
    std::string status;
    if (!read_proc_file("/proc/self/task/" + std::to_string(tid) + "/status", status)) return false;
    const std::string blocked = status_field(status, "SigBlk");
    if (blocked.empty()) return false;
    mask = std::strtoull(blocked.c_str(), nullptr, 16);
    return true;
}
bool blocks(uint64_t mask, int sig) { return sig >= 1 && sig <= 64 && ((mask >> (sig - 1)) & 1); }

// Whether `sig` is free for us now: its disposition is ours, or the default and nobody else's.
bool disposition_ours_or_default(int sig) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) return false;
    if (old.sa_flags & SA_SIGINFO) return false;
    if (old.sa_handler == policy_handler) return true;
    if (old.sa_handler != SIG_DFL) return false;
    return !g_our_signals.count(sig);  // ours once, reset to default by the program: its now
}

// A real-time signal the program does not use — no handler but ours, and blocked (so perhaps
// waited for with sigwaitinfo or a signalfd) by none of `targets` — with our handler
// installed. Checked again before every broadcast: the program may have taken the last one
// since. A thread that blocks every candidate (all signals, say) cannot be reached at all;
// the signal then is the one the fewest targets block, never sent to those that block it.
int policy_signal(const std::map<pid_t, uint64_t>& blocked_by, std::string& error) {
    int best = 0;
    size_t best_blockers = SIZE_MAX;
    for (int sig = SIGRTMAX - 2; sig > SIGRTMIN + 2; --sig) {
        if (!disposition_ours_or_default(sig)) continue;
        size_t blockers = 0;
        for (const auto& [tid, mask] : blocked_by) blockers += blocks(mask, sig);
        // prefer a signal already ours at equal cost: no new handler to install
        if (blockers < best_blockers || (blockers == best_blockers && g_our_signals.count(sig) && !g_our_signals.count(best))) {
            best = sig;
            best_blockers = blockers;
        }
        if (blockers == 0 && g_our_signals.count(sig)) break;
    }
    if (best == 0) {
        error = "every real-time signal is handled by the program; none is left to reach the other threads";
        return 0;
    }
    if (!g_our_signals.count(best)) {
        struct sigaction sa {};
        sa.sa_handler = policy_handler;
        sa.sa_flags = SA_RESTART;
        sigfillset(&sa.sa_mask);  // one answer at a time per thread, nothing nested
        if (sigaction(best, &sa, nullptr) != 0) {
            error = std::string("cannot install the memory-policy signal handler: ") + std::strerror(errno);
            return 0;
        }
        g_our_signals.insert(best);
    }
    return best;
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
    return std::string(kPlanMarkerName) + "mode=" + mode + ";cpus=" + task.cpus.to_string() + ";mems=" + join_ints(task.mems) +
           ";mem=" + to_string(task.mem) + ";devices=" + join_ints(task.devices);
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

namespace {

bool has_cpus(pid_t tid, const IdSet& cpus) {
    IdSet now;
    return get_thread_affinity(tid, now) && now == cpus;
}

// The first line of a thread's numa_maps: its first mapping's address and the policy that
// applies there — the thread's own policy unless that mapping has one of its own (then
// every thread shows the same, and the caller's line matches only threads that have, like
// it, the new task policy or the same mapping policy; mappings with their own policy are
// rare at the lowest address, the program's own text). "" when unreadable.
std::string first_numa_maps_line(pid_t tid) {
    const int fd = open(("/proc/self/task/" + std::to_string(tid) + "/numa_maps").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buf[512];
    const ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return {};
    const std::string text(buf, static_cast<size_t>(n));
    const size_t eol = text.find('\n');
    if (eol == std::string::npos) return {};
    // address and policy only (the page counts after them change as pages are touched)
    const size_t a = text.find(' '), b = a == std::string::npos ? a : text.find(' ', a + 1);
    return text.substr(0, std::min(b, eol));
}

bool thread_alive(pid_t tid) { return access(("/proc/self/task/" + std::to_string(tid)).c_str(), F_OK) == 0; }

void not_as_planned(ProcessBindResult& r, pid_t tid, const std::string& why) {
    r.threads_not_as_planned.push_back({static_cast<int>(tid), why});
}

void broadcast_policy(ProcessBindResult& r, pid_t self) {
    int mode = 0;
    unsigned long mask[kMaskWords] = {};
    if (get_mempolicy(&mode, mask, kMaxNodes, nullptr, 0) != 0) {
        const std::string why = std::string("get_mempolicy: ") + std::strerror(errno);
        for (int tid : thread_ids(static_cast<int>(getpid())))
            if (tid != self) not_as_planned(r, tid, "memory policy not set (" + why + ")");
        r.threads_policy_missing = static_cast<int>(r.threads_not_as_planned.size());
        return;
    }
    Request* req = publish_request(mode, mask);
    std::set<pid_t> asked{self}, inherited;
    const std::string own_first_line = first_numa_maps_line(self);
    std::map<pid_t, std::string> unreached;  // tid -> why
    std::vector<pid_t> waiting;
    std::map<pid_t, int> blocked_now;  // tid -> the signal it blocked when asked
    constexpr long kBlockedGraceMs = 50;
    constexpr int kMaxPasses = 200;
    const auto deadline_ms = 1000;  // threads answer within microseconds unless they cannot
    long waited_ms = 0;
    for (int pass = 0;; ++pass) {
        std::map<pid_t, uint64_t> fresh;
        for (int tid : thread_ids(static_cast<int>(getpid()))) {
            if (asked.count(tid)) continue;
            // Started (after the first pass) by a thread that had already answered: it
            // inherited the policy, as its first mapping's line in numa_maps shows.
            if (pass > 0 && !own_first_line.empty() && first_numa_maps_line(tid) == own_first_line) {
                asked.insert(tid);
                inherited.insert(tid);
                continue;
            }
            uint64_t blocked = 0;
            if (!blocked_signals(tid, blocked)) continue;  // exited
            fresh[tid] = blocked;
        }
        if (fresh.empty()) break;  // every thread there now was asked (or inherited the policy)
        if (pass == kMaxPasses) {  // the program starts threads faster than they answer
            for (const auto& entry : fresh)
                unreached[entry.first] = "memory policy not asked: started while binding (the program kept starting threads)";
            break;
        }
        std::string why;
        const int sig = policy_signal(fresh, why);
        for (const auto& [tid, blocked] : fresh) {
            asked.insert(tid);
            if (sig == 0) {
                unreached[tid] = "memory policy unchanged: " + why;
            } else if (blocks(blocked, sig)) {
                blocked_now[tid] = sig;  // perhaps only for a moment (a thread being created)
            } else if (syscall(SYS_tgkill, getpid(), tid, sig) == 0) {
                waiting.push_back(tid);
            }  // else: exited meanwhile
        }
        // A thread glibc is still starting blocks every signal for a few microseconds: one
        // that unblocks the signal within kBlockedGraceMs is asked then; never one that
        // still blocks it (the program may be waiting for it: sigwaitinfo, a signalfd).
        auto recheck_blocked = [&] {
            for (auto it = blocked_now.begin(); it != blocked_now.end();) {
                uint64_t now_blocked = 0;
                if (!blocked_signals(it->first, now_blocked)) {
                    it = blocked_now.erase(it);  // exited
                } else if (!blocks(now_blocked, it->second) && disposition_ours_or_default(it->second) &&
                           syscall(SYS_tgkill, getpid(), it->first, it->second) == 0) {
                    waiting.push_back(it->first);
                    it = blocked_now.erase(it);
                } else {
                    ++it;
                }
            }
        };
        // Wait for this pass's answers (1 s in all), then look for threads started meanwhile.
        auto unanswered = [&] {
            for (pid_t tid : waiting) {
                const Ack* a = ack_slot(*req, tid, false);
                if (!a || a->result.load(std::memory_order_acquire) == 0) {
                    if (thread_alive(tid)) return true;
                }
            }
            return false;
        };
        long blocked_waited_ms = 0;
        while (waited_ms < deadline_ms) {
            if (!blocked_now.empty() && blocked_waited_ms < kBlockedGraceMs) recheck_blocked();
            const bool more_blocked = !blocked_now.empty() && blocked_waited_ms < kBlockedGraceMs;
            if (!unanswered() && !more_blocked) break;
            sleep_ms(1);
            ++waited_ms;
            ++blocked_waited_ms;
        }
        for (const auto& entry : blocked_now)
            unreached[entry.first] = "memory policy unchanged: the thread blocks every signal numabind could use";
        blocked_now.clear();
    }
    r.threads_policy += static_cast<int>(inherited.size());
    for (pid_t tid : waiting) {
        const Ack* a = ack_slot(*req, tid, false);
        const int result = a ? a->result.load(std::memory_order_acquire) : 0;
        if (result == 1) {
            ++r.threads_policy;
        } else if (result == 2) {
            unreached[tid] = "memory policy could not be set";
        } else if (thread_alive(tid)) {
            unreached[tid] = "memory policy unchanged: no answer to the memory-policy signal within 1 s";
        }
    }
    for (const auto& [tid, why] : unreached) not_as_planned(r, tid, why);
    r.threads_policy_missing = static_cast<int>(unreached.size());
    if (!unreached.empty()) {
        std::string tids;
        for (const auto& [tid, why] : unreached) tids += (tids.empty() ? "" : ",") + std::to_string(tid);
        r.warnings.push_back(std::to_string(unreached.size()) + " thread(s) not as planned (memory policy unchanged): " +
                             tids + " (" + unreached.begin()->second + ")");
    }
}

}  // namespace

ProcessBindResult bind_process(const TaskPlan& task, bool migrate) {
    // One call at a time (the broadcast's bookkeeping; the C API also holds its own lock
    // over planning and binding, so that no call sees another's half-applied binding).
    static std::mutex one_at_a_time;
    std::lock_guard<std::mutex> lock(one_at_a_time);
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
    if (!task.cpus.empty()) {
        for (int pass = 0; pass < 100; ++pass) {
            bool found_new = false;
            for (int tid : thread_ids(static_cast<int>(getpid()))) {
                if (!done.insert(tid).second) continue;
                found_new = found_new || pass == 0 || !has_cpus(tid, task.cpus);
                IdSet old;
                if (!get_thread_affinity(tid, old)) {
                    if (errno == ESRCH) continue;  // exited meanwhile
                }
                // Started by a thread already bound: it inherited the CPUs, nothing to do (so
                // a program that keeps starting threads does not keep this loop going).
                if (pass > 0 && old == task.cpus) {
                    previous[tid] = old;
                    continue;
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
            }
            if (!found_new) break;
            if (pass == 99) {  // still new threads: list those started since the last pass
                for (int tid : thread_ids(static_cast<int>(getpid())))
                    if (!done.count(tid))
                        r.threads_not_as_planned.push_back(
                            {tid, "CPUs not set: started while binding (the program kept starting threads)"});
                if (!r.threads_not_as_planned.empty())
                    r.warnings.push_back(std::to_string(r.threads_not_as_planned.size()) +
                                         " thread(s) started while binding keep their CPUs (the program kept starting "
                                         "threads faster than 100 passes could bind them)");
            }
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
    }
    ++r.threads;  // the caller

    // Memory policy: the caller's (already set by apply_binding) on every other thread,
    // re-scanning until a pass finds no thread that was not asked (one started meanwhile by
    // a thread not yet answered would keep the old policy).
    r.threads_policy = 1;
    if (task.mem != MemPolicy::None && !task.mems.empty()) broadcast_policy(r, self);
    if (migrate && !task.mems.empty()) {
        r.migrated = true;
        // From every other node the process may use to the home node(s).
        unsigned long from[kMaskWords] = {}, to[kMaskWords] = {};
        IdSet allowed_mems;
        if (std::string status; read_proc_file("/proc/self/status", status)) {
            try {
                allowed_mems = IdSet::parse(status_field(status, "Mems_allowed_list"));
            } catch (const std::exception&) {
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
