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

// Ranges are filled a word at a time and listed run by run: the result must be exactly the
// per-id one, at every word boundary (0, 63, 64, 127, 128...).
TEST(IdSet, RangesMatchIdByIdInsertionAtEveryWordBoundary) {
    const int edges[] = {0, 1, 62, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 1000};
    for (int lo : edges)
        for (int hi : edges) {
            if (hi < lo) continue;
            IdSet by_id;
            for (int i = lo; i <= hi; ++i) by_id.insert(i);
            IdSet ranged = IdSet::range(lo, hi);
            ASSERT_EQ(ranged, by_id) << lo << "-" << hi;
            const std::string want = lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
            ASSERT_EQ(ranged.to_string(), want);
            ASSERT_EQ(IdSet::parse(want), by_id);
            ASSERT_EQ(ranged.last(), hi);
            ASSERT_EQ(ranged.size(), hi - lo + 1);
        }
    IdSet mixed = IdSet::parse("0-63,64,66-200,255,256-1023,5000");
    EXPECT_EQ(mixed.to_string(), "0-64,66-200,255-1023,5000");
    EXPECT_EQ(IdSet::parse(mixed.to_string()), mixed);
    EXPECT_EQ(IdSet{}.last(), -1);
}

TEST(IdSet, AnIdPastTheCallersLimitIsRefused) {
    EXPECT_NO_THROW(IdSet::parse("0-63", 63));
    EXPECT_THROW(IdSet::parse("0-64", 63), numabind::UsageError);
    EXPECT_THROW(IdSet::parse("0-1048575", 63), numabind::UsageError);
    EXPECT_EQ(IdSet::parse("0-1048575").size(), 1 << 20);
}
