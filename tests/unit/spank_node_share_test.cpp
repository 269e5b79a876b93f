// The node share across real processes: children forked after create() publish their
// sets and must all read the same final state; a child that never publishes is marked
// late once the bounded wait runs out, and every child still agrees.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>
#include <cstdio>
#include <string>

#include "engine/node_share.hpp"
#include "shared/said_once.hpp"

using namespace numabind::spank;

namespace {

// Each child writes what it read into a pipe: "r:state/devices;..." plus whether it was the
// first to say the step's line (SaidOnce, mapped beside the share before the fork).
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
    SaidOnce said;
    EXPECT_TRUE(said.create());
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
            out += "|" + std::string(said.first("late") ? "1" : "0") + "|" + std::to_string(ms);
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
    // A deadline far beyond any load: what is checked is the sets and that the wait ended when
    // the last task published, not at the deadline (a 2 s deadline made 64 forks on a loaded
    // 2-core machine miss a 1.5 s bound: 7 of 8 runs with 8 copies at once).
    const int deadline_ms = 30000;
    for (int n : {2, 8, 64}) {
        Exchange res = run(n, -1, deadline_ms);
        ASSERT_EQ(res.views.size(), static_cast<size_t>(n));
        for (const std::string& v : res.views) EXPECT_EQ(v, res.views[0]);
        // every task's own set is there, in its order
        EXPECT_NE(res.views[0].find("1:0/1,4,;"), std::string::npos) << res.views[0];
        EXPECT_EQ(res.views[0].find(":2/"), std::string::npos) << res.views[0];  // nobody late
        EXPECT_EQ(res.claims, 1);
        EXPECT_LT(res.max_wait_ms, deadline_ms / 2) << n << " tasks";
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
    EXPECT_TRUE(SaidOnce().first("anything")) << "without its page every task says its lines";
    EXPECT_FALSE(none.publish(0, {}));
    EXPECT_FALSE(none.create(0, 4));
    EXPECT_TRUE(none.wait_all(10).empty());
}

// A task stopped (SIGSTOP) or killed (SIGKILL) at any point of the exchange: the others must
// leave within the bound without burning CPU, agree on one final state, and exactly one of
// them says that tasks were late. The victim stops or dies at an exact step (through the
// test hook) or at a random moment the parent picks (fixed seed: the same rounds every run).
namespace {

NodeShare::Step g_victim_step;
int g_victim_signal = 0;
void victim_hook(NodeShare::Step step) {
    if (g_victim_signal && step == g_victim_step) raise(g_victim_signal);
}

double cpu_ms() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

struct TaskView {
    std::string view;
    bool claimed = false;
    double wall_ms = 0, cpu_ms = 0;
};

// "view|claimed|wall|cpu" from one child, or empty when it wrote nothing.
TaskView parse_view(const std::string& got) {
    TaskView t;
    const size_t a = got.find('|');
    if (a == std::string::npos) return t;
    const size_t b = got.find('|', a + 1), c = got.find('|', b + 1);
    t.view = got.substr(0, a);
    t.claimed = got.substr(a + 1, b - a - 1) == "1";
    t.wall_ms = std::stod(got.substr(b + 1, c - b - 1));
    t.cpu_ms = std::stod(got.substr(c + 1));
    return t;
}

void child_task(NodeShare& share, SaidOnce& said, int rank, int silent_rank, int timeout_ms, unsigned delay_us, int fd) {
    if (rank == silent_rank) _exit(0);  // never reaches task_init
    usleep(delay_us);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    share.publish(rank, Published{Published::State::Devices, true, {rank % 8}});
    const std::vector<Published> all = share.wait_all(timeout_ms);
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_ms() - c0;
    const bool any_late = std::any_of(all.begin(), all.end(), [](const Published& p) { return p.state == Published::State::Late; });
    const bool claimed = any_late && said.first("late");
    std::string out = describe(all) + "|" + (claimed ? "1" : "0") + "|" + std::to_string(wall) + "|" + std::to_string(cpu);
    if (write(fd, out.data(), out.size()) < 0) _exit(2);
    _exit(0);
}

// Reads every fd in `fds` to EOF, or gives up at `deadline` (then the rest stay empty).
std::vector<std::string> read_all(const std::vector<int>& fds, std::chrono::steady_clock::time_point deadline) {
    std::vector<std::string> got(fds.size());
    std::vector<bool> open(fds.size(), true);
    size_t left = fds.size();
    while (left > 0) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        std::vector<pollfd> pfds;
        std::vector<size_t> which;
        for (size_t i = 0; i < fds.size(); ++i)
            if (open[i]) {
                pfds.push_back({fds[i], POLLIN, 0});
                which.push_back(i);
            }
        const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
        if (poll(pfds.data(), pfds.size(), ms) <= 0) continue;
        for (size_t k = 0; k < pfds.size(); ++k) {
            if (!pfds[k].revents) continue;
            char buf[4096];
            const ssize_t n = read(pfds[k].fd, buf, sizeof buf);
            if (n > 0) {
                got[which[k]].append(buf, static_cast<size_t>(n));
            } else {
                open[which[k]] = false;
                --left;
            }
        }
    }
    return got;
}

enum class Strike { AtStep, AtRandomTime };

struct Round {
    int ntasks = 4;
    int victim = 1;
    int signal = SIGKILL;  // SIGSTOP or SIGKILL
    Strike strike = Strike::AtStep;
    NodeShare::Step step = NodeShare::Step::SlotFinal;
    unsigned strike_after_us = 0;  // AtRandomTime
    int silent_rank = -1;          // a task that never publishes
    int timeout_ms = 300;
    unsigned seed = 1;
};

// Runs one round and checks it; the label names the round in failures.
void run_round(const Round& r, const std::string& label) {
    NodeShare share;
    ASSERT_TRUE(share.create(r.ntasks, 8));
    SaidOnce said;
    ASSERT_TRUE(said.create());
    std::mt19937 rng(r.seed);
    std::vector<int> fds;
    std::vector<pid_t> pids;
    for (int rank = 0; rank < r.ntasks; ++rank) {
        int p[2];
        ASSERT_EQ(pipe(p), 0);
        const unsigned delay_us = rng() % 3000;
        const pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (rank == r.victim && r.strike == Strike::AtStep) {
                g_victim_step = r.step;
                g_victim_signal = r.signal;
                NodeShare::set_step_hook_for_tests(victim_hook);
            }
            child_task(share, said, rank, r.silent_rank, r.timeout_ms, delay_us, p[1]);
        }
        close(p[1]);
        fds.push_back(p[0]);
        pids.push_back(pid);
    }
    if (r.strike == Strike::AtRandomTime) {
        usleep(r.strike_after_us);
        kill(pids[static_cast<size_t>(r.victim)], r.signal);
    }
    // The others' reports; a spinning or hung peer shows as a missing report at the guard.
    std::vector<int> others;
    for (int rank = 0; rank < r.ntasks; ++rank)
        if (rank != r.victim && rank != r.silent_rank) others.push_back(fds[static_cast<size_t>(rank)]);
    const auto guard = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.timeout_ms + 6000);
    const std::vector<std::string> reports = read_all(others, guard);
    // Now let a stopped victim go on (it must read the same final state), or reap a dead one.
    const pid_t victim = pids[static_cast<size_t>(r.victim)];
    if (r.signal == SIGSTOP) {
        // On a loaded machine the victim may reach its step (and stop itself) only after the
        // others are done: continue it only once it has really stopped (or ended), else the
        // SIGCONT would come first and it would stay stopped.
        bool reaped = false;
        for (int i = 0; i < 5000; ++i) {
            int status = 0;
            const pid_t w = waitpid(victim, &status, WUNTRACED | WNOHANG);
            if (w == victim && WIFSTOPPED(status)) break;
            if (w == victim) { reaped = true; break; }
            usleep(1000);
        }
        if (!reaped) kill(victim, SIGCONT);
    }
    const std::string victim_report =
        read_all({fds[static_cast<size_t>(r.victim)]}, std::chrono::steady_clock::now() + std::chrono::seconds(5))[0];
    for (size_t i = 0; i < pids.size(); ++i) {
        kill(pids[i], SIGKILL);  // only matters when a child hung: the test fails then, it never hangs
        waitpid(pids[i], nullptr, 0);
        close(fds[i]);
    }

    std::vector<TaskView> views;
    for (const std::string& rep : reports) {
        TaskView t = parse_view(rep);
        EXPECT_FALSE(t.view.empty()) << label << ": a task never left the exchange (spinning or hung)";
        if (t.view.empty()) return;
        // The bound plus slack for a loaded machine: a task that waits for its stopped peer never
        // ends before the guard, and one that spins fails the CPU check, so the slack only has to
        // cover scheduling (1.5 s was passed by 2.4-2.8 s at load 13 on 2 cores).
        EXPECT_LT(t.wall_ms, r.timeout_ms + 3000) << label << ": waited past the bound";
        EXPECT_LT(t.cpu_ms, 100) << label << ": burnt CPU while waiting";
        views.push_back(t);
    }
    const TaskView v = parse_view(victim_report);
    if (!v.view.empty()) views.push_back(v);  // stopped and continued, or struck after it was done
    else EXPECT_EQ(r.signal, SIGKILL) << label << ": a stopped and continued task did not finish";
    int claims = 0;
    for (const TaskView& t : views) {
        EXPECT_EQ(t.view, views[0].view) << label << ": tasks disagree";
        claims += t.claimed;
    }
    const bool any_late = views[0].view.find(":2/") != std::string::npos;
    EXPECT_EQ(claims, any_late ? 1 : 0) << label << ": the late tasks were said " << claims << " times";
}

std::string step_name(NodeShare::Step s) {
    switch (s) {
        case NodeShare::Step::Arrived: return "arrived";
        case NodeShare::Step::SlotFinal: return "slot-final";
        case NodeShare::Step::Counted: return "counted";
        case NodeShare::Step::Waiting: return "waiting";
        case NodeShare::Step::Sealing: return "sealing";
    }
    return "?";
}

}  // namespace

TEST(NodeShare, AStoppedOrKilledTaskAtAnyStepCostsTheOthersOnlyTheBound) {
    using S = NodeShare::Step;
    for (S step : {S::Arrived, S::SlotFinal, S::Counted, S::Waiting, S::Sealing})
        for (int sig : {SIGSTOP, SIGKILL}) {
            Round r;
            r.step = step;
            r.signal = sig;
            // Sealing happens only with someone missing: rank 3 never publishes, and the
            // victim publishes first so that it is among the first to seal.
            if (step == S::Sealing) r.silent_rank = 3;
            run_round(r, step_name(step) + (sig == SIGSTOP ? "/stop" : "/kill"));
        }
}

TEST(NodeShare, ATaskKilledBetweenItsSlotAndItsCountCostsAtMostTheStepBound) {
    Round r;  // the production bound (kShareTimeoutMs), once
    r.ntasks = 8;
    r.victim = 5;
    r.step = NodeShare::Step::SlotFinal;
    r.timeout_ms = 2000;
    run_round(r, "slot-final/kill at 2 s");
}

TEST(NodeShare, TasksStruckAtRandomMomentsStillLeaveWithinTheBound) {
    std::mt19937 rng(20261204);  // fixed: the same rounds every run
    for (int round = 0; round < 24; ++round) {
        Round r;
        r.ntasks = 2 + static_cast<int>(rng() % 7);
        r.victim = static_cast<int>(rng() % static_cast<unsigned>(r.ntasks));
        r.signal = rng() % 2 ? SIGSTOP : SIGKILL;
        r.strike = Strike::AtRandomTime;
        r.strike_after_us = rng() % 4000;
        r.seed = rng();
        r.timeout_ms = 250;
        run_round(r, "random round " + std::to_string(round));
    }
}
