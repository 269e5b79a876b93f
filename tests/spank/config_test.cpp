// Unit tests of the SPANK plugin's option and plugstack.conf parsing (no Slurm needed).
#include <gtest/gtest.h>

#include "config.hpp"
#include "numabind/error.hpp"

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
    EXPECT_FALSE(c.verbose);
    c = parse_option_value("core-complex,verbose,mem=interleave");
    EXPECT_EQ(c.mode, nb::Mode::CoreComplex);
    EXPECT_TRUE(c.verbose);
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

TEST(SpankSite, Defaults) {
    SiteConfig s = parse_site_config({});
    EXPECT_EQ(s.default_mode, nb::Mode::None);
    EXPECT_EQ(s.mem, nb::MemPolicy::Prefer);
    EXPECT_EQ(s.fallback, Fallback::Warn);
    EXPECT_FALSE(s.verbose);
    EXPECT_TRUE(s.respect_cpu_bind);
    EXPECT_FALSE(s.batch_step);
    EXPECT_TRUE(s.topology.empty());
    EXPECT_TRUE(s.devices.empty());
}

TEST(SpankSite, EveryKey) {
    SiteConfig s = parse_site_config({"default=socket", "mem=bind", "fallback=fail", "verbose", "devices=10de,class=0x1200",
                                      "topology=/etc/topo/%n.xml", "respect_cpu_bind=no", "batch_step=yes"});
    EXPECT_EQ(s.default_mode, nb::Mode::Socket);
    EXPECT_EQ(s.mem, nb::MemPolicy::Bind);
    EXPECT_EQ(s.fallback, Fallback::Fail);
    EXPECT_TRUE(s.verbose);
    EXPECT_EQ(s.devices, "10de,class=0x1200");
    EXPECT_EQ(s.topology, "/etc/topo/%n.xml");
    EXPECT_FALSE(s.respect_cpu_bind);
    EXPECT_TRUE(s.batch_step);
    EXPECT_FALSE(parse_site_config({"verbose=no"}).verbose);
}

TEST(SpankSite, StrictParsing) {
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"bogus=1"}, {"default"}, {"default=fast"}, {"mem=all"}, {"fallback=maybe"}, {"devices=zz"},
             {"topology=relative.xml"}, {"topology=/x/%q.xml"}, {"respect_cpu_bind=perhaps"}, {"batch_step="},
             {"default=node", "default=socket"}, {"verbose=loud"}}) {
        std::string e = usage_error([&] { parse_site_config(args); });
        EXPECT_NE(e.find("plugstack.conf"), std::string::npos) << args[0] << ": " << e;
    }
    std::string e = usage_error([] { parse_site_config({"bogus=1"}); });
    EXPECT_NE(e.find("unknown argument 'bogus=1'"), std::string::npos) << e;
    EXPECT_NE(e.find("default=<mode>"), std::string::npos) << e;
}

TEST(SpankSite, PathExpansion) {
    EXPECT_EQ(expand_path("/t/%n-%h.xml", "n1", "host"), "/t/n1-host.xml");
    EXPECT_EQ(expand_path("/t/100%%/%n", "n2", "h"), "/t/100%/n2");
    EXPECT_EQ(expand_path("/plain.xml", "n", "h"), "/plain.xml");
    EXPECT_NE(usage_error([] { expand_path("/t/%", "n", "h"); }), "(no error)");
    EXPECT_NE(usage_error([] { expand_path("/t/%x", "n", "h"); }), "(no error)");
}
