// A set of small non-negative integers (OS PU indexes, NUMA node indexes),
// stored as a bitmap so that the planner's set algebra stays cheap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace numabind {

class IdSet {
public:
    // Largest id accepted from text; keeps hostile input from allocating gigabytes.
    static constexpr int kMaxId = 1 << 20;

    IdSet() = default;
    IdSet(std::initializer_list<int> ids);
    static IdSet range(int first, int last);  // inclusive

    // Parses a Linux-style list ("0-3,8,10-11"), ranges filled a word at a time. Throws
    // numabind::Error naming the bad token, also for an id above `max_id` (at most kMaxId).
    // The empty string is the empty set.
    static IdSet parse(std::string_view text, int max_id = kMaxId);

    void insert(int id);
    void insert_range(int first, int last);  // inclusive
    void erase(int id);
    bool contains(int id) const;
    bool empty() const;
    int size() const;
    int first() const;  // -1 when empty
    int last() const;   // -1 when empty
    std::vector<int> ids() const;  // ascending

    IdSet operator&(const IdSet& other) const;
    IdSet operator|(const IdSet& other) const;
    IdSet operator-(const IdSet& other) const;
    IdSet& operator|=(const IdSet& other);
    IdSet& operator&=(const IdSet& other);
    bool operator==(const IdSet& other) const;
    bool operator!=(const IdSet& other) const { return !(*this == other); }
    bool intersects(const IdSet& other) const;
    bool is_subset_of(const IdSet& other) const;

    // Canonical list form, e.g. "0-3,8"; "" for the empty set.
    std::string to_string() const;

private:
    void trim();
    std::vector<uint64_t> words_;
};

// An ordered list of ids that may repeat order-sensitive choices ("3,1,2"),
// with ranges allowed ("0-3"). Throws numabind::Error on bad input.
std::vector<int> parse_id_list(std::string_view text, std::string_view what);

}  // namespace numabind
