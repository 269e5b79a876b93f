// Adapter: /proc/PID/{status,task/*/status,task/*/numa_maps,numa_maps,environ}.
#include "numabind/process_inspect.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "numabind/error.hpp"

namespace numabind {

namespace {

std::string status_field(const std::string& status, const std::string& name) {
    size_t pos = 0;
    while (pos < status.size()) {
        size_t nl = status.find('\n', pos);
        std::string line = status.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? status.size() : nl + 1;
        if (line.compare(0, name.size() + 1, name + ":") == 0) {
            size_t v = line.find_first_not_of(" \t", name.size() + 1);
            return v == std::string::npos ? std::string() : line.substr(v);
        }
    }
    return {};
}

std::string user_name(uid_t uid) {
    struct passwd pw, *res = nullptr;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return res->pw_name;
    return std::to_string(uid);
}

bool wanted_variable(const std::string& name) {
    static const char* const exact[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                        "ZE_AFFINITY_MASK", "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY"};
    if (name.compare(0, 9, "NUMABIND_") == 0) return true;
    for (const char* e : exact)
        if (name == e) return true;
    return false;
}

}  // namespace

bool read_proc_file(const std::string& path, std::string& out) {
    out.clear();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[65536];
    while (true) {
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

std::string thread_policy(int pid, int tid) {
    // Each numa_maps line walks one mapping's pages: stop at the first file mapping.
    std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/numa_maps";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string text;
    char buf[4096];
    std::string policy;
    while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
        size_t last_nl = text.rfind('\n');
        if (last_nl == std::string::npos) continue;
        auto maps = parse_numa_maps(std::string_view(text).substr(0, last_nl + 1));
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
    struct stat st {};
    if (pid <= 0 || ::stat(base.c_str(), &st) != 0) throw Error("no process " + std::to_string(pid));
    s.uid = st.st_uid;
    const uid_t me = geteuid();
    if (me != 0 && st.st_uid != me)
        throw Error("permission denied: process " + std::to_string(pid) + " belongs to user " + user_name(st.st_uid) +
                    "; only its owner or root may inspect it");
    std::string text;
    if (read_proc_file(base + "/comm", text)) s.name = text.substr(0, text.find('\n'));

    for (int tid : thread_ids(pid)) {
        std::string tbase = base + "/task/" + std::to_string(tid);
        std::string status;
        if (!read_proc_file(tbase + "/status", status)) continue;  // exited meanwhile
        AuditedThread t;
        t.tid = tid;
        t.name = status_field(status, "Name");
        try {
            t.cpus = IdSet::parse(status_field(status, "Cpus_allowed_list"));
        } catch (const std::exception&) {
            continue;
        }
        if (thread_policies) t.policy = thread_policy(pid, tid);
        s.threads.push_back(std::move(t));
    }
    if (s.threads.empty()) throw Error("no process " + std::to_string(pid));

    if (!read_proc_file(base + "/numa_maps", text)) {
        const int err = errno;
        if (err == EACCES || err == EPERM)
            throw Error("permission denied reading " + base + "/numa_maps (" + std::strerror(err) +
                        "); only the process's owner or root may inspect it");
        throw Error("cannot read " + base + "/numa_maps: " + std::strerror(err));
    }
    s.maps = parse_numa_maps(text);
    s.policy = task_policy_from_numa_maps(s.maps).value_or("");

    if (!read_proc_file(base + "/environ", text)) {
        const int err = errno;
        throw Error("cannot read " + base + "/environ: " + std::strerror(err) +
                    (err == EACCES || err == EPERM ? "; only the process's owner or root may inspect it" : ""));
    }
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\0', pos);
        std::string entry = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        pos = end == std::string::npos ? text.size() : end + 1;
        size_t eq = entry.find('=');
        if (eq == std::string::npos) continue;
        std::string name = entry.substr(0, eq);
        if (wanted_variable(name)) s.environ[name] = entry.substr(eq + 1);
    }
    return s;
}

}  // namespace numabind
