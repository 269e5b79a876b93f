// The per-boot topology cache (src/hwloc/topology_cache.hpp).
// Runs against this machine; the writing tests need root (the cache trusts only
// root-owned files) and skip otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/time.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "hwloc/topology_cache.hpp"
#include "numabind/error.hpp"

namespace nb = numabind;

namespace {

class CacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/numabind-cache-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        base_ = tmpl;
        opts_.dir = base_ + "/cache";  // created by the writer
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + base_ + "'";
        ASSERT_EQ(std::system(cmd.c_str()), 0);
    }
    static bool root() { return geteuid() == 0; }
    std::string path() const { return nb::topology_cache_path(opts_, nb::topology_cache_key()); }
    static mode_t mode_of(const std::string& p) {
        struct stat st {};
        EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
        return st.st_mode & 07777;
    }
    static void write_file(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

    std::string base_;
    nb::TopologyCacheOptions opts_;
};

void expect_same_model(const nb::Topology& a, const nb::Topology& b) {
    ASSERT_EQ(a.cores.size(), b.cores.size());
    for (size_t i = 0; i < a.cores.size(); ++i) {
        EXPECT_EQ(a.cores[i].pus, b.cores[i].pus);
        EXPECT_EQ(a.cores[i].l3, b.cores[i].l3);
        EXPECT_EQ(a.cores[i].package, b.cores[i].package);
    }
    ASSERT_EQ(a.numa_nodes.size(), b.numa_nodes.size());
    for (size_t i = 0; i < a.numa_nodes.size(); ++i) {
        EXPECT_EQ(a.numa_nodes[i].os_index, b.numa_nodes[i].os_index);
        EXPECT_EQ(a.numa_nodes[i].pus, b.numa_nodes[i].pus);
    }
    EXPECT_EQ(a.l3_groups.size(), b.l3_groups.size());
    EXPECT_EQ(a.packages.size(), b.packages.size());
    ASSERT_EQ(a.pci_devices.size(), b.pci_devices.size());
    for (size_t i = 0; i < a.pci_devices.size(); ++i) {
        EXPECT_EQ(a.pci_devices[i].address, b.pci_devices[i].address);
        EXPECT_EQ(a.pci_devices[i].locality, b.pci_devices[i].locality);
        EXPECT_EQ(a.pci_devices[i].class_id, b.pci_devices[i].class_id);
    }
    EXPECT_EQ(a.distances, b.distances);
}

TEST_F(CacheTest, KeyIsStableAndNamesThisBoot) {
    const std::string k = nb::topology_cache_key();
    EXPECT_EQ(k, nb::topology_cache_key());
    EXPECT_NE(k.find("hwloc "), std::string::npos) << k;
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    if (in >> boot) EXPECT_NE(k.find(boot), std::string::npos) << k;
    const std::string p = path();
    EXPECT_EQ(p.rfind(opts_.dir + "/topology-", 0), 0u) << p;
    EXPECT_EQ(p.size(), opts_.dir.size() + std::string("/topology-0123456789abcdef.xml").size()) << p;
}

TEST_F(CacheTest, WriteThenHitGivesTheLiveModel) {
    if (!root()) GTEST_SKIP() << "needs root";
    const std::string written = nb::write_topology_cache(opts_);
    EXPECT_EQ(written, path());
    EXPECT_EQ(mode_of(opts_.dir), 0755u);
    EXPECT_EQ(mode_of(written), 0644u);

    nb::CacheOutcome out;
    auto cached = nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Hit) << out.detail;
    EXPECT_EQ(out.path, written);
    EXPECT_TRUE(cached->is_this_system());
    nb::HwlocTopology live(nb::LoadOptions{});
    expect_same_model(live.model(), cached->model());
    EXPECT_EQ(live.allowed_cpus(), cached->allowed_cpus());
    EXPECT_EQ(live.allowed_mems(), cached->allowed_mems());
}

TEST_F(CacheTest, MissWritesThenHits) {
    if (!root()) GTEST_SKIP() << "needs root";
    nb::CacheOutcome out;
    nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Written) << out.detail;
    nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Hit) << out.detail;
}

TEST_F(CacheTest, RootWritesUsersRead) {
    if (!root()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
    nb::write_topology_cache(opts_);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // as nobody: the cache is read (hit), never written
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
        nb::TopologyCacheOptions ro = opts_;
        nb::CacheOutcome out;
        try {
            nb::load_this_machine(ro, &out);
        } catch (...) {
            _exit(11);
        }
        _exit(out.result == nb::CacheResult::Hit ? 0 : 12);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setuid failed, 11: load threw, 12: not a hit";
}

TEST_F(CacheTest, NoWriteWhenDisabledByOptions) {
    nb::TopologyCacheOptions o = opts_;
    o.write = false;
    nb::CacheOutcome out;
    auto t = nb::load_this_machine(o, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    EXPECT_FALSE(t->model().cores.empty());
    struct stat st {};
    EXPECT_NE(lstat(o.dir.c_str(), &st), 0);  // nothing created
}

TEST_F(CacheTest, UntrustedFileOrDirectoryIsIgnored) {
    if (!root()) GTEST_SKIP() << "needs root";
    const std::string p = nb::write_topology_cache(opts_);
    nb::TopologyCacheOptions ro = opts_;
    ro.write = false;
    nb::CacheOutcome out;

    ASSERT_EQ(chmod(p.c_str(), 0666), 0);  // world-writable file
    nb::load_this_machine(ro, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    EXPECT_NE(out.detail.find("not a root-owned regular file"), std::string::npos) << out.detail;
    ASSERT_EQ(chmod(p.c_str(), 0644), 0);

    ASSERT_EQ(chmod(opts_.dir.c_str(), 0777), 0);  // world-writable directory
    nb::load_this_machine(ro, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    EXPECT_NE(out.detail.find("cache directory"), std::string::npos) << out.detail;
    EXPECT_THROW(nb::write_topology_cache(opts_), nb::Error);  // and never written into
    ASSERT_EQ(chmod(opts_.dir.c_str(), 0755), 0);

    ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);  // owned by someone else
    nb::load_this_machine(ro, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    ASSERT_EQ(unlink(p.c_str()), 0);

    const std::string target = base_ + "/elsewhere.xml";  // a symlink is never followed
    nb::write_topology_cache(opts_);
    ASSERT_EQ(rename(p.c_str(), target.c_str()), 0);
    ASSERT_EQ(symlink(target.c_str(), p.c_str()), 0);
    nb::load_this_machine(ro, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss) << out.detail;
}

TEST_F(CacheTest, CorruptOrForeignFileFallsBackAndIsReplaced) {
    if (!root()) GTEST_SKIP() << "needs root";
    const std::string p = nb::write_topology_cache(opts_);
    nb::CacheOutcome out;

    write_file(p, "<topology>garbage");
    auto t = nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Written) << out.detail;
    EXPECT_NE(out.detail.find("unusable"), std::string::npos) << out.detail;
    EXPECT_FALSE(t->model().cores.empty());
    nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Hit) << out.detail;

    // A valid XML stored under this key's name but carrying another key (a hash collision,
    // or a file copied from another boot) is not used.
    nb::HwlocTopology live(nb::LoadOptions{});
    write_file(p, live.export_xml({{"NumabindCacheKey", "another key"}}));
    nb::TopologyCacheOptions ro = opts_;
    ro.write = false;
    nb::load_this_machine(ro, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    EXPECT_NE(out.detail.find("another key"), std::string::npos) << out.detail;
}

TEST_F(CacheTest, WritingRemovesStaleFiles) {
    if (!root()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(mkdir(opts_.dir.c_str(), 0755), 0);
    const std::string stale = opts_.dir + "/topology-0000000000000000.xml";
    const std::string other = opts_.dir + "/unrelated.txt";
    write_file(stale, "old");
    write_file(other, "keep");
    const std::string p = nb::write_topology_cache(opts_);
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0);
    EXPECT_NE(lstat(stale.c_str(), &st), 0);
    EXPECT_EQ(lstat(other.c_str(), &st), 0);
}

TEST_F(CacheTest, NonRootCannotWrite) {
    if (root()) GTEST_SKIP() << "runs as a non-root user only";
    EXPECT_THROW(nb::write_topology_cache(opts_), nb::Error);
}

TEST_F(CacheTest, HwlocOverrideVariableBypassesTheCache) {
    setenv("HWLOC_SYNTHETIC", "node:2 core:2 pu:1", 1);
    nb::CacheOutcome out;
    auto t = nb::load_this_machine(opts_, &out);
    unsetenv("HWLOC_SYNTHETIC");
    EXPECT_EQ(out.result, nb::CacheResult::Disabled);
    EXPECT_NE(out.detail.find("HWLOC_SYNTHETIC"), std::string::npos);
    struct stat st {};
    EXPECT_NE(lstat(opts_.dir.c_str(), &st), 0);  // nothing written
    EXPECT_FALSE(t->model().cores.empty());
}

// A FIFO at the cache path, HWLOC_* variables, stale temporaries, reports.

// Runs `body` in a child with a 20 s alarm: a hang shows up as a failure, not a stuck test.
// The child's exit code is body's; a signal (SIGALRM when it hung) is 128 + signal.
template <typename F>
int in_child_with_timeout(F body) {
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int rc = 99;
        try {
            rc = body();
        } catch (...) {
            rc = 98;
        }
        _exit(rc);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST_F(CacheTest, FifoAtTheCachePathNeitherBlocksNorIsUsed) {
    if (!root()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(mkdir(opts_.dir.c_str(), 0755), 0);
    ASSERT_EQ(mkfifo(path().c_str(), 0644), 0);
    nb::TopologyCacheOptions ro = opts_;
    ro.write = false;
    // Nobody ever writes to the FIFO: an open() without O_NONBLOCK would wait forever.
    EXPECT_EQ(in_child_with_timeout([&] {
                  nb::CacheOutcome out;
                  nb::load_this_machine(ro, &out);
                  if (out.result != nb::CacheResult::Miss) return 1;
                  return out.detail.find("not a root-owned regular file") != std::string::npos ? 0 : 2;
              }),
              0);
    // A writer replaces it with a real cache file (rename over the FIFO).
    EXPECT_EQ(in_child_with_timeout([&] {
                  nb::CacheOutcome out;
                  nb::load_this_machine(opts_, &out);
                  return out.result == nb::CacheResult::Written ? 0 : 1;
              }),
              0);
    struct stat st {};
    ASSERT_EQ(lstat(path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(CacheTest, FifoAtTheReportMarkerDoesNotBlock) {
    if (!root()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(mkdir(opts_.dir.c_str(), 0777), 0);  // untrusted: a problem to report
    ASSERT_EQ(chmod(opts_.dir.c_str(), 0777), 0);
    ASSERT_EQ(mkfifo(nb::topology_cache_report_marker(opts_).c_str(), 0644), 0);
    EXPECT_EQ(in_child_with_timeout([&] {
                  nb::CacheOutcome out;
                  nb::load_this_machine(opts_, &out);
                  return out.result == nb::CacheResult::Miss && out.should_report ? 0 : 1;
              }),
              0);
}

TEST_F(CacheTest, HwlocVariablesEnterTheKeyOrBypassTheCache) {
    const std::string plain = nb::topology_cache_key();
    struct Case {
        const char* name;
        const char* value;
        bool changes_key;
    };
    for (const Case& c : {Case{"HWLOC_ALLOW", "all", true}, Case{"HWLOC_PLUGINS_BLACKLIST", "hwloc_pci", true},
                          Case{"HWLOC_HIDE_ERRORS", "1", true},
                          // exactly what the CLI sets around its load (GL/OpenCL are off anyway)
                          Case{"HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl", false}}) {
        setenv(c.name, c.value, 1);
        const std::string k = nb::topology_cache_key();
        unsetenv(c.name);
        EXPECT_EQ(k != plain, c.changes_key) << c.name << "=" << c.value << ": " << k;
        if (c.changes_key) EXPECT_NE(k.find(std::string(c.name) + "=" + c.value), std::string::npos) << k;
    }
    // Variables whose value may name a file (or that this list does not know), even empty.
    for (const char* name : {"HWLOC_PCI_LOCALITY", "HWLOC_FSROOT", "HWLOC_SOMETHING_NEW"}) {
        for (const char* value : {"/etc/hwloc-pci-locality", ""}) {
            setenv(name, value, 1);
            nb::CacheOutcome out;
            auto t = nb::load_this_machine(opts_, &out);
            if (root()) {
                EXPECT_THROW(nb::write_topology_cache(opts_), nb::Error) << name;
            }
            unsetenv(name);
            EXPECT_EQ(out.result, nb::CacheResult::Disabled) << name << "='" << value << "'";
            EXPECT_NE(out.detail.find(name), std::string::npos) << out.detail;
            struct stat st {};
            EXPECT_NE(lstat(opts_.dir.c_str(), &st), 0) << name;  // nothing written
        }
    }
}

TEST_F(CacheTest, CacheOfAnotherHwlocEnvironmentIsNotUsed) {
    if (!root()) GTEST_SKIP() << "needs root";
    // Written under one hwloc environment, read under another (an admin who sets
    // HWLOC_ALLOW or blacklists a plugin in slurmd's environment): never a hit on the old
    // file, whatever the variable changes on this particular machine.
    const std::string before = nb::write_topology_cache(opts_);
    for (const char* value : {"hwloc_pci", "hwloc_pci,hwloc_xml_libxml"}) {
        setenv("HWLOC_PLUGINS_BLACKLIST", value, 1);
        nb::CacheOutcome out;
        auto t = nb::load_this_machine(opts_, &out);
        nb::HwlocTopology live_now(nb::LoadOptions{});  // what hwloc gives under this environment
        unsetenv("HWLOC_PLUGINS_BLACKLIST");
        EXPECT_EQ(out.result, nb::CacheResult::Written) << value << ": " << out.detail;
        EXPECT_NE(out.path, before) << value;
        expect_same_model(live_now.model(), t->model());
    }
    nb::CacheOutcome out;
    nb::load_this_machine(opts_, &out);  // and back: the old key again
    EXPECT_EQ(out.path, before);
}

TEST_F(CacheTest, WritingRemovesStaleTemporaries) {
    if (!root()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(mkdir(opts_.dir.c_str(), 0755), 0);
    auto make = [&](const std::string& name, int age_s) {
        const std::string p = opts_.dir + "/" + name;
        write_file(p, "partial");
        struct timeval tv[2];
        gettimeofday(&tv[0], nullptr);
        tv[0].tv_sec -= age_s;
        tv[1] = tv[0];
        EXPECT_EQ(utimes(p.c_str(), tv), 0);
        return p;
    };
    const std::string old_tmp = make(".topology-a1B2c3", 120);     // a killed writer's
    const std::string fresh_tmp = make(".topology-d4E5f6", 0);     // maybe a writer right now
    const std::string other = make(".topology-notmine.txt", 120);  // not a mkstemp name
    const std::string link = opts_.dir + "/.topology-g7H8i9";      // only regular files go
    ASSERT_EQ(symlink("/etc/passwd", link.c_str()), 0);
    nb::write_topology_cache(opts_);
    struct stat st {};
    EXPECT_NE(lstat(old_tmp.c_str(), &st), 0);
    EXPECT_EQ(lstat(fresh_tmp.c_str(), &st), 0);
    EXPECT_EQ(lstat(other.c_str(), &st), 0);
    EXPECT_EQ(lstat(link.c_str(), &st), 0);
    EXPECT_EQ(lstat("/etc/passwd", &st), 0);
}

TEST_F(CacheTest, LastingProblemsAreReportedOncePerBoot) {
    if (!root()) GTEST_SKIP() << "needs root";
    const std::string marker = nb::topology_cache_report_marker(opts_);
    EXPECT_EQ(marker, opts_.dir + ".reported");
    nb::CacheOutcome out;
    nb::load_this_machine(opts_, &out);  // first step: written, nothing to say
    EXPECT_EQ(out.result, nb::CacheResult::Written);
    EXPECT_FALSE(out.should_report);
    nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Hit);
    EXPECT_FALSE(out.should_report);

    ASSERT_EQ(chown(opts_.dir.c_str(), 65534, 65534), 0);  // mis-owned: every step rediscovers
    ASSERT_EQ(unlink(path().c_str()), 0);
    nb::load_this_machine(opts_, &out);
    EXPECT_EQ(out.result, nb::CacheResult::Miss);
    EXPECT_TRUE(out.should_report) << out.detail;
    EXPECT_NE(out.detail.find("cache directory"), std::string::npos) << out.detail;
    std::ifstream boot_in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    boot_in >> boot;
    EXPECT_EQ(slurp(marker), boot);
    for (int step = 0; step < 3; ++step) {
        nb::load_this_machine(opts_, &out);
        EXPECT_EQ(out.result, nb::CacheResult::Miss);
        EXPECT_FALSE(out.should_report) << "step " << step;
    }
    // A marker of another boot (a /run that is not a tmpfs) does not silence this one.
    write_file(marker, "00000000-0000-0000-0000-000000000000");
    nb::load_this_machine(opts_, &out);
    EXPECT_TRUE(out.should_report);
    EXPECT_EQ(slurp(marker), boot);
    // Not root: never (cannot record it, cannot fix it).
    ASSERT_EQ(unlink(marker.c_str()), 0);
    EXPECT_EQ(in_child_with_timeout([&] {
                  if (setgid(65534) != 0 || setuid(65534) != 0) return 10;
                  nb::CacheOutcome o2;
                  nb::load_this_machine(opts_, &o2);
                  return o2.should_report ? 1 : 0;
              }),
              0);
}

}  // namespace
