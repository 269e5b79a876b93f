// numa_maps text that the kernel never writes (found by fuzz_proc_parsers): a negative node
// id or a page count past any machine is skipped, and huge counts add up without overflow.
#include <gtest/gtest.h>

#include <string>

#include "core/process_audit.hpp"

namespace nb = numabind;

TEST(NumaMapsParse, NegativeNodesAndImpossibleCountsAreSkipped) {
    const auto maps = nb::parse_numa_maps("7f00 default anon=3 N0=3 N-8343=5 N1=-4 N2=99999999999999999 kernelpagesize_kB=4\n");
    ASSERT_EQ(maps.size(), 1u);
    EXPECT_EQ(maps[0].pages, (std::map<int, long>{{0, 3}}));
    for (const auto& [node, pages] : nb::pages_by_node(maps, false)) {
        EXPECT_GE(node, 0);
        EXPECT_GE(pages, 0);
    }
}

TEST(NumaMapsParse, HugeCountsSaturateInsteadOfOverflowing) {
    std::string text;
    for (int i = 0; i < 64; ++i) text += "7f" + std::to_string(i) + " default anon=1 N0=281474976710656 kernelpagesize_kB=4\n";
    const auto pages = nb::pages_by_node(nb::parse_numa_maps(text), true);
    ASSERT_EQ(pages.count(0), 1u);
    EXPECT_GT(pages.at(0), 0);
}
