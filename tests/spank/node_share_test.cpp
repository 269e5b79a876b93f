// The node share across real processes: children forked after create() publish their
// sets and must all read the same final state; a child that never publishes is marked
// late once the bounded wait runs out, and every child still agrees.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "node_share.hpp"

using namespace numabind::spank;

namespace {

// Each child writes what it read into a pipe: "r:state/devices;..." plus whether it
// won the once-claim.
std::string describe(const std::vector<Published>& all) {
    std::string s;
    for (size_t r = 0; r < all.size(); ++r) {
        s += std::to_string(r) + ":" + std::to_string(static_cast<int>(all[r].state)) + "/";
        for (int d : all[r].devices) s += std::to_string(d) + ",";
        s += ";";
    }
    return s;
}

struct Exchange {
    std::vector<std::string> views;
    int claims = 0;
    double max_wait_ms = 0;
};

Exchange run(int ntasks, int silent_rank, int timeout_ms) {
    NodeShare share;
    EXPECT_TRUE(share.create(ntasks, 8));
    std::vector<int> fds;
    std::vector<pid_t> pids;
    for (int r = 0; r < ntasks; ++r) {
        int p[2];
        EXPECT_EQ(pipe(p), 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (r == silent_rank) _exit(0);  // died before task_init
            usleep(static_cast<useconds_t>(1000 * (r % 3)));
            Published mine{Published::State::Devices, true, {r % 8, (r + 3) % 8}};
            share.publish(r, mine);
            auto t0 = std::chrono::steady_clock::now();
            std::string out = describe(share.wait_all(timeout_ms));
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            out += "|" + std::string(share.claim(NodeShare::Once::Missing) ? "1" : "0") + "|" + std::to_string(ms);
            if (write(p[1], out.data(), out.size()) < 0) _exit(2);
            _exit(0);
        }
        close(p[1]);
        fds.push_back(p[0]);
        pids.push_back(pid);
    }
    Exchange res;
    for (size_t i = 0; i < fds.size(); ++i) {
        std::string got;
        char buf[4096];
        ssize_t n;
        while ((n = read(fds[i], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
        close(fds[i]);
        int status = 0;
        waitpid(pids[i], &status, 0);
        if (static_cast<int>(i) == silent_rank) continue;
        const size_t a = got.find('|'), b = got.rfind('|');
        if (a == std::string::npos) { ADD_FAILURE() << got; continue; }
        res.views.push_back(got.substr(0, a));
        res.claims += got.substr(a + 1, b - a - 1) == "1";
        res.max_wait_ms = std::max(res.max_wait_ms, std::stod(got.substr(b + 1)));
    }
    return res;
}

}  // namespace

TEST(NodeShare, EveryTaskReadsTheSameSets) {
    for (int n : {2, 8, 64}) {
        Exchange res = run(n, -1, 2000);
        ASSERT_EQ(res.views.size(), static_cast<size_t>(n));
        for (const std::string& v : res.views) EXPECT_EQ(v, res.views[0]);
        // every task's own set is there, in its order
        EXPECT_NE(res.views[0].find("1:0/1,4,;"), std::string::npos) << res.views[0];
        EXPECT_EQ(res.views[0].find(":2/"), std::string::npos) << res.views[0];  // nobody late
        EXPECT_EQ(res.claims, 1);
        EXPECT_LT(res.max_wait_ms, 1500) << n << " tasks";
    }
}

TEST(NodeShare, ATaskThatNeverPublishesIsLateForEveryone) {
    Exchange res = run(4, 2, 150);
    ASSERT_EQ(res.views.size(), 3u);
    for (const std::string& v : res.views) EXPECT_EQ(v, res.views[0]);
    EXPECT_NE(res.views[0].find("2:2/;"), std::string::npos) << res.views[0];  // State::Late
    EXPECT_GE(res.max_wait_ms, 100);
    EXPECT_LT(res.max_wait_ms, 1000);
}

TEST(NodeShare, WithoutARegionTasksSpeakForThemselves) {
    NodeShare none;
    EXPECT_FALSE(none.ready());
    EXPECT_TRUE(none.claim(NodeShare::Once::Failure));
    EXPECT_FALSE(none.publish(0, {}));
    EXPECT_FALSE(none.create(0, 4));
    EXPECT_TRUE(none.wait_all(10).empty());
}
