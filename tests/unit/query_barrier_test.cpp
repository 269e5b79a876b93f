// wait_for_local_queries (pmix/query_barrier.cpp): the node's ranks pass together, the last
// one out removes the files, a missing rank ends in the timeout, a foreign directory is refused.
#include <gtest/gtest.h>
#include <glob.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "query_barrier.hpp"

namespace nb = numabind;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char templ[] = "/tmp/nb-barrier-XXXXXX";
        path = mkdtemp(templ);
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::vector<std::string> entries(const std::string& dir) {
    glob_t g{};
    std::vector<std::string> out;
    if (glob((dir + "/*").c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
    return out;
}

// Forks `n` processes that each wait for `expected` after `delay_ms[i]`; returns each one's
// exit code: 0 complete, 1 timed out, 2 error; and its wait in ms through `waited`.
std::vector<int> run_ranks(const std::string& base, const std::string& key, int n, int expected,
                           long long timeout_ms, const std::vector<int>& delay_ms, std::vector<long long>& waited) {
    std::vector<pid_t> pids;
    std::vector<int> pipes;
    for (int i = 0; i < n; ++i) {
        int fds[2];
        if (pipe(fds) != 0) return {};
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            if (i < static_cast<int>(delay_ms.size())) usleep(static_cast<useconds_t>(delay_ms[i]) * 1000);
            nb::BarrierOutcome b = nb::wait_for_local_queries(base, key, expected, timeout_ms);
            if (write(fds[1], &b.waited_ms, sizeof b.waited_ms) != sizeof b.waited_ms) _exit(3);
            _exit(!b.error.empty() ? 2 : b.complete ? 0 : 1);
        }
        close(fds[1]);
        pids.push_back(pid);
        pipes.push_back(fds[0]);
    }
    std::vector<int> codes;
    waited.clear();
    for (int i = 0; i < n; ++i) {
        long long ms = -1;
        if (read(pipes[i], &ms, sizeof ms) != sizeof ms) ms = -1;
        close(pipes[i]);
        int status = 0;
        waitpid(pids[i], &status, 0);
        codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100);
        waited.push_back(ms);
    }
    return codes;
}

}  // namespace

TEST(QueryBarrier, TheNodesRanksPassTogetherAndTheLastRemovesTheFiles) {
    TempDir base;
    std::vector<long long> waited;
    // rank 3 arrives 300 ms late: the others wait for it
    auto codes = run_ranks(base.path, "ns@1", 4, 4, 10000, {0, 0, 0, 300}, waited);
    ASSERT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
    for (int i = 0; i < 3; ++i) {
        EXPECT_GE(waited[i], 250) << "rank " << i << " did not wait for the late one";
        EXPECT_LT(waited[i], 5000);
    }
    EXPECT_TRUE(entries(base.path).empty()) << "files left behind: " << entries(base.path).size();
}

TEST(QueryBarrier, AMissingRankEndsInTheTimeout) {
    TempDir base;
    std::vector<long long> waited;
    auto codes = run_ranks(base.path, "ns@2", 2, 3, 300, {}, waited);
    ASSERT_EQ(codes, (std::vector<int>{1, 1}));
    for (long long ms : waited) {
        EXPECT_GE(ms, 300);
        EXPECT_LT(ms, 3000);
    }
}

TEST(QueryBarrier, NamespacesDoNotMix) {
    TempDir base;
    std::vector<long long> waited;
    // two ranks of one namespace and one of another, all expecting 2: the odd one times out
    pid_t other = fork();
    if (other == 0) {
        nb::BarrierOutcome b = nb::wait_for_local_queries(base.path, "other@1", 2, 400);
        _exit(b.complete ? 0 : 1);
    }
    auto codes = run_ranks(base.path, "ns@3", 2, 2, 5000, {}, waited);
    int status = 0;
    waitpid(other, &status, 0);
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

TEST(QueryBarrier, ADirectoryOthersCanWriteIsRefused) {
    TempDir base;
    // a timed-out wait leaves its directory; make it writable by everyone, as an attacker's would be
    nb::BarrierOutcome first = nb::wait_for_local_queries(base.path, "ns@4", 2, 0);
    ASSERT_FALSE(first.complete);
    ASSERT_TRUE(first.error.empty()) << first.error;
    auto dirs = entries(base.path);
    ASSERT_EQ(dirs.size(), 1u);
    ASSERT_EQ(chmod(dirs[0].c_str(), 0777), 0);
    nb::BarrierOutcome second = nb::wait_for_local_queries(base.path, "ns@4", 1, 1000);
    EXPECT_FALSE(second.complete);
    EXPECT_NE(second.error.find("not a private directory"), std::string::npos) << second.error;
}

TEST(QueryBarrier, ASymlinkInPlaceOfTheDirectoryIsRefused) {
    TempDir base, elsewhere;
    nb::BarrierOutcome first = nb::wait_for_local_queries(base.path, "ns@5", 2, 0);
    auto dirs = entries(base.path);
    ASSERT_EQ(dirs.size(), 1u);
    std::system(("rm -rf '" + dirs[0] + "'").c_str());
    ASSERT_EQ(symlink(elsewhere.path.c_str(), dirs[0].c_str()), 0);
    nb::BarrierOutcome second = nb::wait_for_local_queries(base.path, "ns@5", 1, 1000);
    EXPECT_FALSE(second.complete);
    EXPECT_FALSE(second.error.empty());
    EXPECT_TRUE(entries(elsewhere.path).empty()) << "wrote through the symlink";
}
