// Unit tests of the SPANK plugin's option and plugstack.conf parsing (no Slurm needed).
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cstdlib>

#include "numabind/error.hpp"
#include "policy/config.hpp"
#include "policy/log_text.hpp"

namespace nb = numabind;
using namespace numabind::spank;

namespace {

std::string usage_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const nb::UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST(SpankOption, ModesAndFlags) {
    UserChoice c = parse_option_value("exclusive");
    EXPECT_EQ(c.mode, nb::Mode::Exclusive);
    EXPECT_FALSE(c.mem.has_value());
    EXPECT_EQ(c.verbose_level, 0);
    c = parse_option_value("core-complex,verbose,mem=interleave");
    EXPECT_EQ(c.mode, nb::Mode::CoreComplex);
    EXPECT_EQ(c.verbose_level, 1);
    ASSERT_TRUE(c.mem.has_value());
    EXPECT_EQ(*c.mem, nb::MemPolicy::Interleave);
    EXPECT_EQ(parse_option_value("none").mode, nb::Mode::None);
    EXPECT_EQ(parse_option_value("socket,mem=none").mem, nb::MemPolicy::None);
}

TEST(SpankOption, BadValuesNameTheItemAndTheChoices) {
    std::string e = usage_error([] { parse_option_value("sockets"); });
    EXPECT_NE(e.find("'sockets'"), std::string::npos) << e;
    EXPECT_NE(e.find("none, node, socket, exclusive, core-complex"), std::string::npos) << e;
    e = usage_error([] { parse_option_value("node,mem=fast"); });
    EXPECT_NE(e.find("'fast'"), std::string::npos) << e;
    EXPECT_NE(e.find("prefer, bind, interleave, none"), std::string::npos) << e;
    e = usage_error([] { parse_option_value("node,loud"); });
    EXPECT_NE(e.find("'loud'"), std::string::npos) << e;
    EXPECT_NE(usage_error([] { parse_option_value(""); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("node,verbose,verbose"); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("node,mem=bind,mem=prefer"); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("verbose"); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("node,"); }), "(no error)");
}

// smt=1|all and omp: flags after the mode, each at most once; plugstack smt= and omp=.
TEST(SpankOption, SmtAndOmp) {
    UserChoice c = parse_option_value("node,smt=1,omp");
    ASSERT_TRUE(c.one_thread_per_core.has_value());
    EXPECT_TRUE(*c.one_thread_per_core);
    ASSERT_TRUE(c.omp.has_value());
    EXPECT_TRUE(*c.omp);
    c = parse_option_value("exclusive,smt=all,omp=no,verbose");
    EXPECT_FALSE(*c.one_thread_per_core);
    EXPECT_FALSE(*c.omp);
    c = parse_option_value("socket");
    EXPECT_FALSE(c.one_thread_per_core.has_value());
    EXPECT_FALSE(c.omp.has_value());
    std::string e = usage_error([] { parse_option_value("node,smt=3"); });
    EXPECT_NE(e.find("'smt=3'"), std::string::npos) << e;
    EXPECT_NE(e.find("smt=1, smt=all"), std::string::npos) << e;
    e = usage_error([] { parse_option_value("node,omp=maybe"); });
    EXPECT_NE(e.find("'omp=maybe'"), std::string::npos) << e;
    EXPECT_NE(e.find("smt=1|all, omp"), std::string::npos) << e;
    EXPECT_NE(usage_error([] { parse_option_value("node,smt=1,smt=all"); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("node,omp,omp"); }), "(no error)");
    EXPECT_NE(usage_error([] { parse_option_value("smt=1"); }), "(no error)");  // the mode comes first

    SiteConfig s = parse_site_config({"smt=1", "omp=yes"});
    EXPECT_TRUE(s.one_thread_per_core);
    EXPECT_TRUE(s.omp);
    s = parse_site_config({});
    EXPECT_FALSE(s.one_thread_per_core);
    EXPECT_FALSE(s.omp);
    e = usage_error([] { parse_site_config({"smt=2"}); });
    EXPECT_NE(e.find("'2' for smt (valid: 1, all)"), std::string::npos) << e;
    e = usage_error([] { parse_site_config({"omp=often"}); });
    EXPECT_NE(e.find("'often' for omp (valid: yes, no)"), std::string::npos) << e;
    EXPECT_NE(usage_error([] { parse_site_config({"smt=1", "smt=all"}); }), "(no error)");
}

TEST(SpankSite, Defaults) {
    SiteConfig s = parse_site_config({});
    EXPECT_EQ(s.default_mode, nb::Mode::None);
    EXPECT_EQ(s.mem, nb::MemPolicy::Prefer);
    EXPECT_EQ(s.fallback, Fallback::Warn);
    EXPECT_EQ(s.verbose_level, 0);
    EXPECT_TRUE(s.respect_user_bind);
    EXPECT_TRUE(s.device_files.empty());
    EXPECT_FALSE(s.batch_step);
    EXPECT_TRUE(s.topology.empty());
    EXPECT_TRUE(s.devices.empty());
}

TEST(SpankSite, EveryKey) {
    SiteConfig s = parse_site_config({"default=socket", "mem=bind", "fallback=fail", "verbose", "devices=10de,class=0x1200",
                                      "topology=/etc/topo/%n.xml", "respect_user_bind=no", "batch_step=yes",
                                      "device_files=/dev/nvidia1,/d/%n/nvidia0"});
    EXPECT_EQ(s.default_mode, nb::Mode::Socket);
    EXPECT_EQ(s.mem, nb::MemPolicy::Bind);
    EXPECT_EQ(s.fallback, Fallback::Fail);
    EXPECT_EQ(s.verbose_level, 1);
    EXPECT_EQ(s.devices, "10de,class=0x1200");
    EXPECT_EQ(s.topology, "/etc/topo/%n.xml");
    EXPECT_FALSE(s.respect_user_bind);
    EXPECT_EQ(s.device_files, (std::vector<std::string>{"/dev/nvidia1", "/d/%n/nvidia0"}));
    EXPECT_TRUE(s.batch_step);
    EXPECT_EQ(parse_site_config({"verbose=no"}).verbose_level, 0);
    EXPECT_EQ(parse_site_config({"verbose=2"}).verbose_level, 2);
    EXPECT_EQ(parse_option_value("node,verbose=2").verbose_level, 2);
}

TEST(SpankSite, StrictParsing) {
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"bogus=1"}, {"default"}, {"default=fast"}, {"mem=all"}, {"fallback=maybe"}, {"devices=zz"},
             {"topology=relative.xml"}, {"topology=/x/%q.xml"}, {"respect_cpu_bind=perhaps"}, {"batch_step="},
             {"default=node", "default=socket"}, {"verbose=loud"}, {"device_files=dev/nvidia0"},
             {"device_files=/dev/nvidia0,"}, {"device_files=/d/%z"}, {"respect_user_bind=yes", "respect_cpu_bind=no"}}) {
        std::string e = usage_error([&] { parse_site_config(args); });
        EXPECT_NE(e.find("plugstack.conf"), std::string::npos) << args[0] << ": " << e;
    }
    std::string e = usage_error([] { parse_site_config({"bogus=1"}); });
    EXPECT_NE(e.find("unknown argument 'bogus=1'"), std::string::npos) << e;
    EXPECT_NE(e.find("default=<mode>"), std::string::npos) << e;
}

// A NUL inside a value would cut it short where it becomes a C string: refused everywhere,
// in one line naming the argument (escaped) and the valid choices.
TEST(SpankSite, EmbeddedNulIsRefused) {
    using namespace std::string_literals;
    for (const std::string arg : {"topology=/etc/a.xml\0/b.xml"s, "devices=10de\0,1002"s, "device_files=/dev/nvidia0\0x"s,
                                  "default=node\0"s, "ucx=yes\0"s}) {
        const std::string e = usage_error([&] { parse_site_config({arg}); });
        EXPECT_NE(e.find("contains a NUL byte"), std::string::npos) << e;
        EXPECT_NE(e.find("\\x00"), std::string::npos) << e;
        EXPECT_NE(e.find("valid arguments: default=<mode>"), std::string::npos) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
    const std::string e = usage_error([] { parse_option_value("node,verbose\0,ucx"s); });
    EXPECT_NE(e.find("contains a NUL byte"), std::string::npos) << e;
    EXPECT_NE(e.find("with mode one of"), std::string::npos) << e;
}

TEST(SpankSite, PathExpansion) {
    EXPECT_EQ(expand_path("/t/%n-%h.xml", "n1", "host"), "/t/n1-host.xml");
    EXPECT_EQ(expand_path("/t/100%%/%n", "n2", "h"), "/t/100%/n2");
    EXPECT_EQ(expand_path("/plain.xml", "n", "h"), "/plain.xml");
    EXPECT_NE(usage_error([] { expand_path("/t/%", "n", "h"); }), "(no error)");
    EXPECT_NE(usage_error([] { expand_path("/t/%x", "n", "h"); }), "(no error)");
}

// %n is slurmd's node name where slurmd set it, else the host name up to its first dot (uname).
TEST(SpankSite, NodeAndHostNames) {
    struct utsname u {};
    ASSERT_EQ(uname(&u), 0);
    const std::string host = std::string(u.nodename).substr(0, std::string(u.nodename).find('.'));
    const char* saved = std::getenv("SLURMD_NODENAME");
    const std::string kept = saved ? saved : "";
    EXPECT_EQ(short_hostname(), host);
    setenv("SLURMD_NODENAME", "gpu-node-17", 1);
    EXPECT_EQ(node_name(), "gpu-node-17");
    setenv("SLURMD_NODENAME", "", 1);
    EXPECT_EQ(node_name(), host);
    unsetenv("SLURMD_NODENAME");
    EXPECT_EQ(node_name(), host);
    if (saved) setenv("SLURMD_NODENAME", kept.c_str(), 1);
}

TEST(SpankSite, RespectCpuBindIsTheOldNameOfRespectUserBind) {
    EXPECT_FALSE(parse_site_config({"respect_cpu_bind=no"}).respect_user_bind);
    EXPECT_TRUE(parse_site_config({"respect_cpu_bind=yes"}).respect_user_bind);
    std::string e = usage_error([] { parse_site_config({"respect_cpu_bind=no", "respect_user_bind=no"}); });
    EXPECT_NE(e.find("given twice"), std::string::npos) << e;
}

// A user's value must not forge log lines.
TEST(SpankLogText, UserValuesAreEscapedAndCapped) {
    const std::string forged = "node\n[2024-01-01T00:00:00.000] error: forged\r\x1b[2J";
    std::string e = usage_error([&] { parse_option_value(forged); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.find('\r'), std::string::npos) << e;
    EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
    EXPECT_NE(e.find("\\x0a"), std::string::npos) << e;
    const std::string huge(8192, 'x');
    e = usage_error([&] { parse_option_value(huge); });
    EXPECT_LT(e.size(), 400u) << e.size();
    EXPECT_NE(e.find("...'"), std::string::npos);
    e = usage_error([&] { parse_site_config({"bogus=a\nb"}); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(SpankLogText, QuotedAndLogSafe) {
    EXPECT_EQ(quoted("node"), "'node'");
    EXPECT_EQ(quoted("a'b\\c"), "'a\\x27b\\x5cc'");
    EXPECT_EQ(quoted("abcdef", 3), "'abc...'");
    EXPECT_EQ(log_safe("ok line"), "ok line");
    EXPECT_EQ(log_safe("two\nlines\t"), "two\\x0alines\\x09");
    EXPECT_EQ(log_safe("\xc3\xa9"), "\\xc3\\xa9");
    EXPECT_EQ(log_safe(std::string(2000, 'y')).size(), kMaxLogLine + 3);
}

// The ucx flag (srun ,ucx) and plugstack ucx=yes|no.
TEST(SpankOption, UcxFlag) {
    EXPECT_FALSE(parse_option_value("node").ucx);
    EXPECT_TRUE(parse_option_value("node,ucx").ucx);
    EXPECT_TRUE(parse_option_value("exclusive,verbose,ucx,mem=bind").ucx);
    const std::string e = usage_error([] { parse_option_value("node,ucx,ucx"); });
    EXPECT_NE(e.find("'ucx'"), std::string::npos) << e;
    EXPECT_NE(e.find(" ucx,"), std::string::npos) << e;  // named among the valid flags
    EXPECT_NE(usage_error([] { parse_option_value("node,ucx=1"); }), "(no error)");
    EXPECT_TRUE(*parse_option_value("node,ucx=yes").ucx);
    EXPECT_FALSE(*parse_option_value("node,ucx=no").ucx);  // a job opts out of a site's ucx=yes
    EXPECT_FALSE(parse_site_config({}).ucx);
    EXPECT_TRUE(parse_site_config({"ucx=yes"}).ucx);
    EXPECT_FALSE(parse_site_config({"ucx=no"}).ucx);
    const std::string s = usage_error([] { parse_site_config({"ucx=maybe"}); });
    EXPECT_NE(s.find("'maybe'"), std::string::npos) << s;
    EXPECT_NE(s.find("yes, no"), std::string::npos) << s;
}

// The usage line and the lists of valid flags are built from the flag table: the texts users
// and sites already know stay exactly as they were written out before.
TEST(SpankOption, FlagTableTexts) {
    EXPECT_EQ(option_help(),
              "<mode>[,verbose[=2]][,mem=<policy>][,ucx][,smt=1|all][,omp] with mode one of none, node, socket, "
              "exclusive, core-complex and policy one of prefer, bind, interleave, none");
    EXPECT_EQ(usage_error([] { parse_option_value("node,fast"); }),
              "invalid --numa-binding flag 'fast' in 'node,fast' (valid flags, each at most once: verbose, verbose=2, "
              "mem=prefer|bind|interleave|none, ucx, smt=1|all, omp)");
    EXPECT_EQ(usage_error([] { parse_option_value("fast"); }),
              "invalid --numa-binding mode 'fast' in 'fast' (valid modes: none, node, socket, exclusive, core-complex; "
              "flags: verbose, verbose=2, mem=prefer|bind|interleave|none, ucx, smt=1|all, omp)");
    EXPECT_EQ(usage_error([] { parse_option_value("node,mem=near"); }),
              "invalid --numa-binding memory policy 'near' in 'node,mem=near' (valid: prefer, bind, interleave, none)");
    EXPECT_EQ(usage_error([] { parse_option_value("node,smt=2"); }),
              "invalid --numa-binding flag 'smt=2' in 'node,smt=2' (valid: smt=1, smt=all)");
    // A flag that takes no value of this kind, or one given twice: the whole list.
    for (const char* bad : {"node,verbose=3", "node,ucx=1", "node,omp=maybe", "node,mem", "node,smt",
                            "node,mem=bind,mem=bind", "node,verbose,verbose=2", "node,"})
        EXPECT_NE(usage_error([bad] { parse_option_value(bad); }).find("(valid flags, each at most once: "),
                  std::string::npos)
            << bad;
}

// Every flag of the table is accepted in each of its spellings, at most once.
TEST(SpankOption, FlagTableSpellings) {
    EXPECT_EQ(parse_option_value("node,verbose=1").verbose_level, 1);
    EXPECT_EQ(*parse_option_value("node,mem=interleave").mem, nb::MemPolicy::Interleave);
    EXPECT_FALSE(*parse_option_value("node,omp=no").omp);
    EXPECT_TRUE(*parse_option_value("node,omp=yes").omp);
    EXPECT_TRUE(*parse_option_value("node,ucx").ucx);
    EXPECT_FALSE(*parse_option_value("node,smt=all").one_thread_per_core);
    const UserChoice c = parse_option_value("socket,omp,smt=1,ucx=no,mem=none,verbose=2");
    EXPECT_EQ(c.mode, nb::Mode::Socket);
    EXPECT_TRUE(*c.omp);
    EXPECT_TRUE(*c.one_thread_per_core);
    EXPECT_FALSE(*c.ucx);
    EXPECT_EQ(*c.mem, nb::MemPolicy::None);
    EXPECT_EQ(c.verbose_level, 2);
}

// The plugstack's yes/no is the library's one parser: pyxis's spellings.
TEST(SpankSiteConfig, YesNoSpellings) {
    for (const char* yes : {"1", "yes", "y", "true"}) EXPECT_TRUE(parse_site_config({std::string("omp=") + yes}).omp);
    for (const char* no : {"0", "no", "n", "false"}) EXPECT_FALSE(parse_site_config({std::string("ucx=") + no}).ucx);
    EXPECT_NE(usage_error([] { parse_site_config({"batch_step=on"}); }).find("'on' for batch_step (valid: yes, no)"),
              std::string::npos);
    EXPECT_NE(usage_error([] { parse_site_config({"verbose=3"}); }).find("'3' for verbose (valid: yes, no, 2)"),
              std::string::npos);
}
