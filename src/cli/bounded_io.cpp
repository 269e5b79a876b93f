// Bounded reads and tool runs (bounded_io.hpp).
#include "bounded_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "policy/file_trust.hpp"

namespace numabind::cli {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

int status_of(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus); }

}  // namespace

std::string find_program(const std::string& program, std::vector<std::string>& skipped) {
    const char* path = std::getenv("PATH");
    const std::string dirs = path ? path : "";
    const bool root = geteuid() == 0;
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        const std::string dir = dirs.substr(start, end - start);
        start = end + 1;
        if (dir.empty() || dir[0] != '/') {
            const std::string here = (dir.empty() ? "." : dir) + "/" + program;
            if (access(here.c_str(), X_OK) == 0)
                skipped.push_back(here + " (PATH entry '" + dir + "' is not absolute: never run from the current directory)");
            continue;
        }
        const std::string p = dir + (dir.back() == '/' ? "" : "/") + program;
        if (access(p.c_str(), X_OK) != 0) continue;
        if (root) {
            const std::string why = spank::untrusted_file(p, program, 0);
            if (!why.empty()) {
                skipped.push_back(why + " (as root only root's programs in root's directories are run)");
                continue;
            }
        }
        return p;
    }
    return "";
}

ToolRun run_bounded(const std::vector<std::string>& argv, int seconds, int out_fd, bool keep_stderr, int pass_fd,
                    size_t cap) {
    ToolRun r;
    int pipefd[2] = {-1, -1};
    const bool capture = out_fd < 0;
    if (capture && pipe2(pipefd, O_CLOEXEC) != 0) return r;
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        if (capture) close(pipefd[0]), close(pipefd[1]);
        return r;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // not left running if numabind itself is killed
        const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd >= 0) dup2(null_fd, 0);
        dup2(capture ? pipefd[1] : out_fd, 1);
        if (!keep_stderr && null_fd >= 0) dup2(null_fd, 2);
        if (pass_fd >= 0) fcntl(pass_fd, F_SETFD, 0);
        execv(args[0], args.data());
        _exit(127);
    }
    setpgid(pid, pid);  // also here: no window where a kill of the group misses the child
    r.started = true;
    if (capture) close(pipefd[1]);
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    int wstatus = 0;
    bool exited = false;
    int reader = capture ? pipefd[0] : -1;
    while (!exited || reader >= 0) {
        if (!exited) {
            // Seen exited but not reaped yet (WNOWAIT): its pid, the group's id, cannot be
            // reused while the group is killed.
            siginfo_t info{};
            if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
                kill(-pid, SIGKILL);  // what it left behind in its group (one holding the pipe)
                while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
                }
                exited = true;
            }
        }
        const int left = ms_left(deadline);
        if (left == 0) {  // the bound holds for the reading too
            if (!exited) {
                r.timed_out = true;
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
                }
            }
            break;
        }
        if (reader < 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(std::min(left, 20)));
            continue;
        }
        // After the tool exited, what is still buffered is read; a pipe that stays open
        // without data (held outside the group) ends the reading.
        pollfd p{reader, POLLIN, 0};
        const int ready = poll(&p, 1, std::min(left, 100));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            if (exited) break;
            continue;
        }
        char buf[4096];
        const ssize_t n = read(reader, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(reader);
            reader = -1;
            continue;
        }
        if (r.out.size() < cap) r.out.append(buf, std::min(static_cast<size_t>(n), cap - r.out.size()));
    }
    if (reader >= 0) close(reader);
    r.status = status_of(wstatus);
    return r;
}

}  // namespace numabind::cli
