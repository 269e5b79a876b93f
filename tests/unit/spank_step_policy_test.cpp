// The step decision (spank/policy/step_policy.hpp), as a table: step kind x option x site default x
// GPUs x an explicit binding of the user's. Each row is what docs/SITE.md promises.
#include <gtest/gtest.h>

#include "policy/config.hpp"
#include "policy/step_policy.hpp"

using namespace numabind::spank;
using numabind::Mode;
using A = StepDecision::Action;

namespace {

SiteConfig site(const std::vector<std::string>& args) { return parse_site_config(args); }

StepFacts facts(StepKind kind, bool gpus, const char* option = nullptr) {
    StepFacts f;
    f.kind = kind;
    f.has_gpus = gpus;
    if (option) {
        f.option_seen = true;
        try {
            f.choice = parse_option_value(option);
            f.option_given = true;
        } catch (const std::exception& e) {
            f.option_error = e.what();
        }
    }
    return f;
}

}  // namespace

TEST(StepPolicy, DecisionTable) {
    struct Row {
        std::vector<std::string> site;
        StepKind kind;
        bool gpus;
        const char* option;
        bool cpu_bind;
        A action;
        Mode mode;
    };
    const std::vector<Row> rows = {
        // opt-in site: only an explicit option binds
        {{}, StepKind::Normal, true, nullptr, false, A::Unbound, Mode::None},
        {{}, StepKind::Normal, true, "node", false, A::Bind, Mode::Node},
        {{}, StepKind::Normal, false, "node", false, A::Bind, Mode::Node},  // the engine says "no GPU" once
        {{}, StepKind::Normal, true, "none", false, A::ExplicitNone, Mode::None},
        {{}, StepKind::Normal, true, "bogus", false, A::OptionError, Mode::None},
        // site default: GPU steps bind, CPU-only steps are left alone before the engine loads
        {{"default=exclusive"}, StepKind::Normal, true, nullptr, false, A::Bind, Mode::Exclusive},
        {{"default=exclusive"}, StepKind::Normal, false, nullptr, false, A::Unbound, Mode::Exclusive},
        {{"default=exclusive", "fallback=fail"}, StepKind::Normal, false, nullptr, false, A::Unbound, Mode::Exclusive},
        // an explicit --cpu-bind wins over the default, not over the user's own --numa-binding
        {{"default=node"}, StepKind::Normal, true, nullptr, true, A::Unbound, Mode::Node},
        {{"default=node", "respect_user_bind=no"}, StepKind::Normal, true, nullptr, true, A::Bind, Mode::Node},
        {{"default=node"}, StepKind::Normal, true, "socket", true, A::Bind, Mode::Socket},
        // shells: the batch script, salloc's interactive step and srun --pty alike
        {{"default=node"}, StepKind::Batch, true, nullptr, false, A::NotOurs, Mode::None},
        {{"default=node"}, StepKind::Interactive, true, nullptr, false, A::NotOurs, Mode::None},
        {{"default=node"}, StepKind::PtyShell, true, nullptr, false, A::NotOurs, Mode::None},
        {{"default=node"}, StepKind::PtyShell, true, "node", false, A::NotOurs, Mode::None},
        {{"default=node", "batch_step=yes"}, StepKind::PtyShell, true, nullptr, false, A::Bind, Mode::Node},
        {{"default=node", "batch_step=yes"}, StepKind::Batch, true, nullptr, false, A::Bind, Mode::Node},
        {{"default=node", "batch_step=yes"}, StepKind::Extern, true, nullptr, false, A::NotOurs, Mode::None},
    };
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        StepFacts f = facts(r.kind, r.gpus, r.option);
        f.user_cpu_bind = r.cpu_bind;
        const StepDecision d = decide_step(site(r.site), f);
        EXPECT_EQ(d.action, r.action) << "row " << i;
        if (d.action == A::Bind || d.action == A::Unbound) EXPECT_EQ(d.mode, r.mode) << "row " << i;
    }
}

TEST(StepPolicy, MessagesAndFlags) {
    StepDecision d = decide_step(site({"default=node"}), facts(StepKind::Normal, false));
    EXPECT_NE(d.message.find("no GPU"), std::string::npos) << d.message;
    StepFacts bound = facts(StepKind::Normal, true);
    bound.user_mem_bind = true;
    d = decide_step(site({"default=node"}), bound);
    EXPECT_NE(d.message.find("--mem-bind"), std::string::npos) << d.message;
    // --hint=nomultithread is no --cpu-bind: the default applies, one thread per core
    StepFacts hint = facts(StepKind::Normal, true);
    hint.hint_nomultithread = true;
    d = decide_step(site({"default=node"}), hint);
    EXPECT_EQ(d.action, A::Bind);
    EXPECT_TRUE(d.one_thread_per_core);
    // verbosity and memory from the option, else the site
    d = decide_step(site({"mem=bind"}), facts(StepKind::Normal, true, "node,verbose=2,mem=interleave"));
    EXPECT_TRUE(d.verbose);
    EXPECT_TRUE(d.detail);
    EXPECT_EQ(d.mem, numabind::MemPolicy::Interleave);
    d = decide_step(site({"default=node", "mem=bind", "verbose"}), facts(StepKind::Normal, true));
    EXPECT_TRUE(d.verbose);
    EXPECT_FALSE(d.detail);
    EXPECT_EQ(d.mem, numabind::MemPolicy::Bind);
    d = decide_step(site({}), facts(StepKind::Normal, true, "node,bogus"));
    EXPECT_EQ(d.action, A::OptionError);
    EXPECT_NE(d.message.find("bogus"), std::string::npos) << d.message;
}

// smt and omp: the user's flag, else the site's; --hint=nomultithread always
// means one thread per core.
TEST(StepPolicy, SmtAndOmpTable) {
    struct Row {
        std::vector<std::string> site;
        const char* option;
        bool hint;
        bool one_thread;
        bool omp;
    };
    const std::vector<Row> rows = {
        {{"default=node"}, nullptr, false, false, false},
        {{"default=node"}, "node,smt=1", false, true, false},
        {{"default=node"}, "node,smt=all", false, false, false},
        {{"default=node"}, "node,omp", false, false, true},
        {{"default=node"}, "exclusive,smt=1,omp,verbose", false, true, true},
        {{"default=node", "smt=1", "omp=yes"}, nullptr, false, true, true},
        {{"default=node", "smt=1", "omp=yes"}, "node", false, true, true},        // flags not given: the site's
        {{"default=node", "smt=1", "omp=yes"}, "node,smt=all,omp=no", false, false, false},
        {{"default=node", "smt=all"}, "node,smt=all", true, true, false},         // the hint wins
        {{"default=node"}, nullptr, true, true, false},
    };
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        StepFacts f = facts(StepKind::Normal, true, r.option);
        f.hint_nomultithread = r.hint;
        const StepDecision d = decide_step(site(r.site), f);
        ASSERT_EQ(d.action, A::Bind) << "row " << i << " " << d.message;
        EXPECT_EQ(d.one_thread_per_core, r.one_thread) << "row " << i;
        EXPECT_EQ(d.omp, r.omp) << "row " << i;
        EXPECT_EQ(d.min_cpus_in_cores, r.hint) << "row " << i;  // Slurm counts -c in cores under the hint only
    }
}

// A nested srun inherits the parent task's SLURM_CPU_BIND (Slurm writes "mask_cpu:0x1",
// slurmstepd then sees "mask_cpu:1"): that is no --cpu-bind of the user's.
TEST(StepPolicy, InheritedBindingIsNotTyped) {
    EXPECT_FALSE(typed_not_inherited(std::string("quiet,mask_cpu:1"), std::string("quiet,mask_cpu:0x1")));
    EXPECT_FALSE(typed_not_inherited(std::string("quiet,mask_cpu:3,C"), std::string("quiet,mask_cpu:0x3,0xc")));
    EXPECT_TRUE(typed_not_inherited(std::string("quiet,none"), std::string("quiet,mask_cpu:0x1")));
    EXPECT_TRUE(typed_not_inherited(std::string("quiet,cores"), std::nullopt));
    EXPECT_FALSE(typed_not_inherited(std::nullopt, std::string("quiet,mask_cpu:0x1")));
    EXPECT_FALSE(typed_not_inherited(std::nullopt, std::nullopt));
}

// srun --pty bash is a shell; srun --pty python train.py is a program like any other.
TEST(StepPolicy, PtyShellIsAShellProgram) {
    EXPECT_TRUE(is_shell_program("bash", std::nullopt));
    EXPECT_TRUE(is_shell_program("/bin/zsh", std::nullopt));
    EXPECT_TRUE(is_shell_program("-bash", std::nullopt));
    EXPECT_TRUE(is_shell_program("/opt/bin/xonsh", std::string("/opt/bin/xonsh")));
    EXPECT_FALSE(is_shell_program("python", std::string("/bin/bash")));
    EXPECT_FALSE(is_shell_program("/usr/bin/python3", std::nullopt));
    EXPECT_FALSE(is_shell_program("", std::nullopt));
}

// ucx from the option or the site.
TEST(StepPolicy, UcxFromOptionOrSite) {
    EXPECT_FALSE(decide_step(site({"default=node"}), facts(StepKind::Normal, true)).ucx);
    EXPECT_TRUE(decide_step(site({"default=node", "ucx=yes"}), facts(StepKind::Normal, true)).ucx);
    EXPECT_TRUE(decide_step(site({}), facts(StepKind::Normal, true, "node,ucx")).ucx);
    EXPECT_FALSE(decide_step(site({}), facts(StepKind::Normal, true, "node")).ucx);
    EXPECT_FALSE(decide_step(site({"default=node", "ucx=yes"}), facts(StepKind::Normal, true, "node,ucx=no")).ucx);
    EXPECT_TRUE(decide_step(site({"default=node", "ucx=yes"}), facts(StepKind::Normal, true, "node")).ucx);
}

// --cpu-bind=verbose (or quiet) alone asks for no binding: the site default stays, the same
// as the value arriving through SLURM_CPU_BIND.
TEST(StepPolicy, VerboseOrQuietAloneSelectsNoBinding) {
    for (const char* v : {"verbose", "quiet", "v", "q", "VERBOSE", "quiet,verbose", "verbose,"})
        EXPECT_FALSE(selects_binding(v)) << v;
    for (const char* v : {"none", "cores", "verbose,cores", "quiet,mask_cpu:0x1", "local", "verbose,map_mem:0"})
        EXPECT_TRUE(selects_binding(v)) << v;
}
