#include <gtest/gtest.h>

#include "numabind/error.hpp"
#include "numabind/idset.hpp"

using numabind::IdSet;

TEST(IdSet, ParsesAndFormatsLinuxLists) {
    IdSet s = IdSet::parse("0-3,8,10-11");
    EXPECT_EQ(s.size(), 7);
    EXPECT_TRUE(s.contains(2));
    EXPECT_FALSE(s.contains(9));
    EXPECT_EQ(s.to_string(), "0-3,8,10-11");
    EXPECT_EQ(IdSet::parse("").to_string(), "");
    EXPECT_EQ(IdSet::parse("5,4,3").to_string(), "3-5");
}

TEST(IdSet, RejectsBadListsNamingTheToken) {
    for (const char* bad : {"a", "1,,2", "3-1", "1-", "-1", "1 ,2", "99999999999", "0,"}) {
        try {
            IdSet::parse(bad);
            ADD_FAILURE() << "accepted " << bad;
        } catch (const numabind::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("invalid"), std::string::npos) << e.what();
        }
    }
}

TEST(IdSet, SetAlgebra) {
    IdSet a = IdSet::parse("0-7"), b = IdSet::parse("4-11");
    EXPECT_EQ((a & b).to_string(), "4-7");
    EXPECT_EQ((a | b).to_string(), "0-11");
    EXPECT_EQ((a - b).to_string(), "0-3");
    EXPECT_TRUE(a.intersects(b));
    EXPECT_FALSE((a - b).intersects(b));
    EXPECT_TRUE(IdSet::parse("1-2").is_subset_of(a));
    EXPECT_EQ(IdSet::parse("200").first(), 200);
    EXPECT_TRUE((IdSet::parse("200") & IdSet::parse("1")).empty());
}
