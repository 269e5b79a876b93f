// Adapter: /proc/PID/{status,task/*/status,task/*/numa_maps,numa_maps,environ}.
#include "sys/process_inspect.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/visible.hpp"
#include "numabind/error.hpp"

namespace numabind {

namespace {

std::string user_name(uid_t uid) {
    struct passwd pw, *res = nullptr;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return res->pw_name;
    return std::to_string(uid);
}

bool wanted_variable(const std::string& name) {
    static const char* const exact[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY"};
    if (name.compare(0, 9, "NUMABIND_") == 0) return true;
    for (const char* e : kRuntimeVariables)
        if (name == e) return true;
    for (const char* e : exact)
        if (name == e) return true;
    return false;
}

// When the process started (field 22 of /proc/PID/stat, after the parenthesised comm, which
// may itself hold spaces and parentheses): with the pid, the process's identity.
std::string start_time(const std::string& base) {
    std::string stat;
    if (!read_proc_file(base + "/stat", stat, 4096)) return {};
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) return {};
    size_t pos = close + 2;
    for (int field = 3; field < 22 && pos < stat.size(); ++field) {
        pos = stat.find(' ', pos);
        if (pos == std::string::npos) return {};
        ++pos;
    }
    return stat.substr(pos, stat.find(' ', pos) - pos);
}

// A pidfd pins the process for the read: it cannot be reaped and its pid reused unseen (the
// pidfd then says it exited). -1 where the kernel has none (before 5.3).
int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    return -1;
#endif
}
bool pidfd_alive(int pidfd) {
#ifdef SYS_pidfd_send_signal
    return syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0;
#else
    (void)pidfd;
    return true;
#endif
}

// Control characters of a target's own text (its names), escaped for a terminal (\xNN).
std::string escape_controls(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace

bool read_proc_file(const std::string& path, std::string& out, size_t max_bytes, bool* cut) {
    out.clear();
    if (cut) *cut = false;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO in its place never blocks
    if (fd < 0) return false;
    char buf[4096];  // not more: see read_regular_file (config_file.cpp)
    while (true) {
        if (out.size() >= max_bytes) {
            if (cut) *cut = true;
            break;
        }
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            errno = err;
            return false;
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return true;
}

std::vector<int> thread_ids(int pid) {
    std::vector<int> tids;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = opendir(dir.c_str());
    if (!d) return tids;
    while (struct dirent* e = readdir(d)) {
        char* end = nullptr;
        long tid = std::strtol(e->d_name, &end, 10);
        if (e->d_name[0] != '.' && end && *end == '\0' && tid > 0) tids.push_back(static_cast<int>(tid));
    }
    closedir(d);
    std::sort(tids.begin(), tids.end());
    return tids;
}

std::string thread_policy(int pid, int tid, bool* cut) {
    // Each numa_maps line walks one mapping's pages: stop at the first file mapping, and
    // after kThreadPolicyBytes (a process with thousands of anonymous mappings first would
    // cost every thread a walk of all of them); complete lines are parsed once each.
    if (cut) *cut = false;
    std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/numa_maps";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string pending;
    char buf[4096];
    std::string policy;
    size_t total = 0;
    while (true) {
        if (total >= kThreadPolicyBytes) {
            if (cut) *cut = true;
            break;
        }
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        total += static_cast<size_t>(n);
        pending.append(buf, static_cast<size_t>(n));
        size_t last_nl = pending.rfind('\n');
        if (last_nl == std::string::npos) continue;
        auto maps = parse_numa_maps(std::string_view(pending).substr(0, last_nl + 1));
        pending.erase(0, last_nl + 1);
        if (auto p = task_policy_from_numa_maps(maps)) {
            policy = *p;
            break;
        }
    }
    ::close(fd);
    return policy;
}

ProcessSnapshot inspect_process(int pid, bool thread_policies) {
    ProcessSnapshot s;
    s.pid = pid;
    const std::string base = "/proc/" + std::to_string(pid);
    const std::string gone = "process " + std::to_string(pid) + " exited or was replaced while being read; nothing reported";
    // Pinned first, its identity (start time) noted: every read below is then checked to
    // have been of this very process (a pid reused meanwhile would be another's).
    const int pidfd = pid > 0 ? open_pidfd(pid) : -1;
    struct PidfdCloser {
        int fd;
        ~PidfdCloser() {
            if (fd >= 0) ::close(fd);
        }
    } closer{pidfd};
    struct stat st {};
    if (pid <= 0 || ::stat(base.c_str(), &st) != 0) throw Error("no process " + std::to_string(pid));
    const std::string started = start_time(base);
    s.started = started;
    s.uid = st.st_uid;
    const uid_t me = geteuid();
    if (me != 0 && st.st_uid != me)
        throw Error("permission denied: process " + std::to_string(pid) + " belongs to user " + user_name(st.st_uid) +
                    "; only its owner or root may inspect it");
    // The caller's own process whose /proc files are root's: it is not dumpable (a setuid
    // program, or prctl(PR_SET_DUMPABLE, 0)).
    auto denied = [&](const std::string& file, int err) {
        if (me != 0 && st.st_uid == me)
            return Error("permission denied reading " + file + " (" + std::strerror(err) + "): process " +
                         std::to_string(pid) + " is yours but not dumpable (setuid, or prctl(PR_SET_DUMPABLE, 0)), so "
                         "its /proc files are root's; only root may inspect it");
        return Error("permission denied reading " + file + " (" + std::strerror(err) +
                     "); only the process's owner or root may inspect it");
    };
    std::string text;
    if (read_proc_file(base + "/comm", text, 4096)) s.name = text.substr(0, text.find('\n'));

    std::vector<int> tids = thread_ids(pid);
    int policies_cut = 0;
    for (size_t i = 0; i < tids.size(); ++i) {
        const int tid = tids[i];
        if (i == kMaxThreads) {
            s.limits.push_back("only the first " + std::to_string(kMaxThreads) + " of " + std::to_string(tids.size()) +
                               " threads read");
            break;
        }
        std::string tbase = base + "/task/" + std::to_string(tid);
        std::string status;
        if (!read_proc_file(tbase + "/status", status, 65536)) continue;  // exited meanwhile
        AuditedThread t;
        t.tid = tid;
        t.name = status_field(status, "Name");
        try {
            t.cpus = IdSet::parse(status_field(status, "Cpus_allowed_list"));
        } catch (const std::exception&) {
            continue;
        }
        if (thread_policies) {
            bool cut = false;
            t.policy = thread_policy(pid, tid, &cut);
            policies_cut += cut;
        }
        s.threads.push_back(std::move(t));
    }
    if (policies_cut)
        s.limits.push_back("memory policy of " + std::to_string(policies_cut) + " thread(s) unknown: no file mapping in the first " +
                           std::to_string(kThreadPolicyBytes / 1024) + " KiB of their numa_maps");
    if (s.threads.empty()) throw Error("no process " + std::to_string(pid));

    bool cut = false;
    if (!read_proc_file(base + "/numa_maps", text, kMaxNumaMapsBytes, &cut)) {
        const int err = errno;
        if (err == EACCES || err == EPERM) throw denied(base + "/numa_maps", err);
        throw Error("cannot read " + base + "/numa_maps: " + std::strerror(err));
    }
    if (cut) {
        text.erase(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);  // whole lines only
        s.limits.push_back("resident pages counted in the first " + std::to_string(kMaxNumaMapsBytes >> 20) +
                           " MiB of numa_maps only");
    }
    s.maps = parse_numa_maps(text);
    s.policy = task_policy_from_numa_maps(s.maps).value_or("");

    if (!read_proc_file(base + "/environ", text, kMaxEnvironBytes, &cut)) {
        const int err = errno;
        if (err == EACCES || err == EPERM) throw denied(base + "/environ", err);
        throw Error("cannot read " + base + "/environ: " + std::strerror(err));
    }
    if (cut) s.limits.push_back("environment read up to " + std::to_string(kMaxEnvironBytes >> 10) + " KiB only");
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\0', pos);
        std::string entry = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        pos = end == std::string::npos ? text.size() : end + 1;
        size_t eq = entry.find('=');
        if (eq == std::string::npos) continue;
        std::string name = entry.substr(0, eq);
        if (!wanted_variable(name)) continue;
        std::string value = entry.substr(eq + 1);
        if (value.size() > kMaxVariableBytes) {
            value.resize(kMaxVariableBytes);
            s.limits.push_back(name + " cut at " + std::to_string(kMaxVariableBytes) + " bytes");
        }
        s.environ[name] = std::move(value);
    }
    // Still the same process? (alive through its pidfd, same start time, same owner)
    struct stat after {};
    if ((pidfd >= 0 && !pidfd_alive(pidfd)) || ::stat(base.c_str(), &after) != 0 || after.st_uid != st.st_uid ||
        start_time(base) != started)
        throw Error(gone);
    return s;
}

std::string printable(const std::string& text) { return escape_controls(text); }

void check_same_process(const ProcessSnapshot& s) {
    const std::string base = "/proc/" + std::to_string(s.pid);
    struct stat st {};
    if (::stat(base.c_str(), &st) != 0 || st.st_uid != s.uid || start_time(base) != s.started)
        throw Error("process " + std::to_string(s.pid) + " exited or was replaced while being read; nothing reported");
}

}  // namespace numabind
