// A binding that fails, or is not kept, leaves the thread exactly as it
// was (CPU affinity and memory policy, read with the raw kernel calls, not numabind's).
#include <gtest/gtest.h>
#include <numaif.h>
#include <sched.h>

#include <cstring>

#include "sys/binding.hpp"

namespace nb = numabind;

namespace {

struct Kernel {
    cpu_set_t cpus;
    int mode = -1;
    unsigned long nodes[16] = {};
    static Kernel now() {
        Kernel k;
        CPU_ZERO(&k.cpus);
        EXPECT_EQ(sched_getaffinity(0, sizeof k.cpus, &k.cpus), 0);
        EXPECT_EQ(get_mempolicy(&k.mode, k.nodes, 1024, nullptr, 0), 0);
        return k;
    }
    bool operator==(const Kernel& o) const {
        return CPU_EQUAL(&cpus, &o.cpus) && mode == o.mode && std::memcmp(nodes, o.nodes, sizeof nodes) == 0;
    }
};

class BindingRestoreTest : public ::testing::Test {
protected:
    void SetUp() override { before_ = Kernel::now(); }
    void TearDown() override {  // whatever happened, with the raw calls
        sched_setaffinity(0, sizeof before_.cpus, &before_.cpus);
        set_mempolicy(MPOL_DEFAULT, nullptr, 0);
    }
    // The task plan of one CPU this thread may use (the lowest), memory bound to `node`.
    nb::TaskPlan one_cpu(int node) const {
        nb::TaskPlan t;
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &before_.cpus)) {
                t.cpus.insert(c);
                break;
            }
        t.mem = nb::MemPolicy::Bind;
        t.mems = {node};
        return t;
    }
    Kernel before_;
};

TEST_F(BindingRestoreTest, FailedMemoryPolicyPutsTheCpuAffinityBack) {
    ASSERT_EQ(before_.mode, MPOL_DEFAULT);
    // The CPUs are set first and succeed; node 4000 exists on no machine: set_mempolicy fails.
    nb::ApplyResult r = nb::apply_binding(one_cpu(4000));
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.restored) << r.error;
    EXPECT_NE(r.error.find("set_mempolicy"), std::string::npos) << r.error;
    EXPECT_TRUE(Kernel::now() == before_);
}

TEST_F(BindingRestoreTest, CpusOutsideTheAllowedSetChangeNothing) {
    nb::TaskPlan t = one_cpu(0);
    t.cpus = nb::IdSet::parse("100000");  // no such CPU: sched_setaffinity fails
    nb::ApplyResult r = nb::apply_binding(t);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.restored);
    EXPECT_TRUE(Kernel::now() == before_);
}

TEST_F(BindingRestoreTest, ScopedBindingNotKeptIsUndone) {
    const nb::TaskPlan t = one_cpu(0);
    {
        nb::ScopedBinding binding;
        nb::ApplyResult r = binding.apply(t);
        ASSERT_TRUE(r.ok) << r.error;
        Kernel bound = Kernel::now();
        EXPECT_EQ(CPU_COUNT(&bound.cpus), 1);
        EXPECT_TRUE(CPU_ISSET(t.cpus.first(), &bound.cpus));
        EXPECT_EQ(bound.mode, MPOL_BIND);
        EXPECT_EQ(bound.nodes[0], 1UL);
        // A caller that fails now (its export throws, say) does not call keep().
    }
    EXPECT_TRUE(Kernel::now() == before_);
}

TEST_F(BindingRestoreTest, ScopedBindingKeptStays) {
    const nb::TaskPlan t = one_cpu(0);
    {
        nb::ScopedBinding binding;
        ASSERT_TRUE(binding.apply(t).ok);
        binding.keep();
    }
    Kernel after = Kernel::now();
    EXPECT_EQ(CPU_COUNT(&after.cpus), 1);
    EXPECT_EQ(after.mode, MPOL_BIND);
}

TEST_F(BindingRestoreTest, ExceptionLeavesTheTaskAsBefore) {
    const nb::TaskPlan t = one_cpu(0);
    try {
        nb::ScopedBinding binding;
        ASSERT_TRUE(binding.apply(t).ok);
        throw std::bad_alloc();  // what a caller's string building does when memory runs out
    } catch (const std::bad_alloc&) {
    }
    EXPECT_TRUE(Kernel::now() == before_);
}

}  // namespace
