// Helpers defined once: the index-list join and the /proc status field reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/process_audit.hpp"
#include "core/text.hpp"
#include "numabind/plan.hpp"
#include "numabind/report.hpp"

namespace nb = numabind;

TEST(JoinInts, CommaListsAndTheEmptyText) {
    EXPECT_EQ(nb::join_ints({}), "");
    EXPECT_EQ(nb::join_ints({}, ",", "-"), "-");
    EXPECT_EQ(nb::join_ints({3}), "3");
    EXPECT_EQ(nb::join_ints({0, 2, 10}), "0,2,10");
    EXPECT_EQ(nb::join_ints({0, 2}, ", ", "-"), "0, 2");
    EXPECT_EQ(nb::join({4, 5}), "4,5");  // the public spelling is the same function
}

TEST(StatusField, WholeFieldNamesAtALineStart) {
    const std::string status =
        "Name:\tpython3\nState:\tS (sleeping)\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\n"
        "Mems_allowed_list:\t0-1\nSigBlk:\t0000000000000004\nEmpty:\n";
    EXPECT_EQ(nb::status_field(status, "Name"), "python3");
    EXPECT_EQ(nb::status_field(status, "Cpus_allowed"), "ff");  // not Cpus_allowed_list
    EXPECT_EQ(nb::status_field(status, "Cpus_allowed_list"), "0-7");
    EXPECT_EQ(nb::status_field(status, "Mems_allowed_list"), "0-1");
    EXPECT_EQ(nb::status_field(status, "SigBlk"), "0000000000000004");
    EXPECT_EQ(nb::status_field(status, "Empty"), "");
    EXPECT_EQ(nb::status_field(status, "Threads"), "");
    EXPECT_EQ(nb::status_field(status, "allowed_list"), "");  // whole names only, at a line's start
    EXPECT_EQ(nb::status_field("Mems_allowed_list:  2,3", "Mems_allowed_list"), "2,3");  // no final newline
}
