#include "numabind/idset.hpp"

#include <algorithm>
#include <charconv>

#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind {

namespace {

int parse_id(std::string_view token, std::string_view whole, int max_id) {
    int value = -1;
    const char* begin = token.data();
    const char* end = token.data() + token.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (token.empty() || ec != std::errc() || ptr != end || value < 0 || value > max_id) {
        throw UsageError("invalid id '" + std::string(token) + "' in list '" + std::string(whole) +
                         "' (expected numbers 0-" + std::to_string(max_id) +
                         " and ranges like 0-3,8)");
    }
    return value;
}

template <typename Fn>
void for_each_range(std::string_view text, Fn&& fn, int max_id = IdSet::kMaxId) {
    if (text.empty()) return;
    for (std::string_view item : split(text, ',')) {
        size_t dash = item.find('-');
        int lo, hi;
        if (dash == std::string_view::npos) {
            lo = hi = parse_id(item, text, max_id);
        } else {
            lo = parse_id(item.substr(0, dash), text, max_id);
            hi = parse_id(item.substr(dash + 1), text, max_id);
            if (hi < lo) {
                throw UsageError("invalid range '" + std::string(item) + "' in list '" + std::string(text) +
                                 "' (first id must not exceed last)");
            }
        }
        fn(lo, hi);
    }
}

}  // namespace

IdSet::IdSet(std::initializer_list<int> ids) {
    for (int id : ids) insert(id);
}

IdSet IdSet::range(int first, int last) {
    IdSet s;
    s.insert_range(first, last);
    return s;
}

IdSet IdSet::parse(std::string_view text, int max_id) {
    IdSet s;
    for_each_range(text, [&](int lo, int hi) { s.insert_range(lo, hi); }, std::min(max_id, kMaxId));
    return s;
}

// A word at a time: "0-1048575" costs its 16K words, not a million inserts.
void IdSet::insert_range(int first, int last) {
    if (first < 0) first = 0;
    if (last < first) return;
    const size_t lo = static_cast<size_t>(first), hi = static_cast<size_t>(last);
    if (hi / 64 >= words_.size()) words_.resize(hi / 64 + 1, 0);
    for (size_t w = lo / 64; w <= hi / 64; ++w) {
        const size_t from = w == lo / 64 ? lo % 64 : 0, to = w == hi / 64 ? hi % 64 : 63;
        const uint64_t upto = to == 63 ? ~uint64_t{0} : (uint64_t{1} << (to + 1)) - 1;
        words_[w] |= upto & ~((uint64_t{1} << from) - 1);
    }
}

int IdSet::last() const {
    if (words_.empty()) return -1;
    return static_cast<int>((words_.size() - 1) * 64 + 63 - __builtin_clzll(words_.back()));
}

std::vector<int> parse_id_list(std::string_view text, std::string_view what) {
    std::vector<int> out;
    try {
        for_each_range(text, [&](int lo, int hi) {
            if (hi - lo > 65536) throw UsageError("range too large");
            for (int i = lo; i <= hi; ++i) out.push_back(i);
        });
    } catch (const UsageError&) {
        throw UsageError("invalid " + std::string(what) + " '" + std::string(text) +
                         "' (expected a list like 0,1 or 0-3)");
    }
    return out;
}

void IdSet::insert(int id) {
    if (id < 0) return;
    size_t word = static_cast<size_t>(id) / 64;
    if (word >= words_.size()) words_.resize(word + 1, 0);
    words_[word] |= uint64_t{1} << (id % 64);
}

void IdSet::erase(int id) {
    if (id < 0) return;
    size_t word = static_cast<size_t>(id) / 64;
    if (word < words_.size()) {
        words_[word] &= ~(uint64_t{1} << (id % 64));
        trim();
    }
}

bool IdSet::contains(int id) const {
    if (id < 0) return false;
    size_t word = static_cast<size_t>(id) / 64;
    return word < words_.size() && (words_[word] >> (id % 64)) & 1;
}

bool IdSet::empty() const { return words_.empty(); }

int IdSet::size() const {
    int n = 0;
    for (uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
}

int IdSet::first() const {
    for (size_t i = 0; i < words_.size(); ++i) {
        if (words_[i]) return static_cast<int>(i * 64 + __builtin_ctzll(words_[i]));
    }
    return -1;
}

std::vector<int> IdSet::ids() const {
    std::vector<int> out;
    for (size_t i = 0; i < words_.size(); ++i) {
        uint64_t w = words_[i];
        while (w) {
            out.push_back(static_cast<int>(i * 64 + __builtin_ctzll(w)));
            w &= w - 1;
        }
    }
    return out;
}

void IdSet::trim() {
    while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

IdSet IdSet::operator&(const IdSet& o) const {
    IdSet r = *this;
    r &= o;
    return r;
}

IdSet IdSet::operator|(const IdSet& o) const {
    IdSet r = *this;
    r |= o;
    return r;
}

IdSet IdSet::operator-(const IdSet& o) const {
    IdSet r = *this;
    for (size_t i = 0; i < r.words_.size() && i < o.words_.size(); ++i) r.words_[i] &= ~o.words_[i];
    r.trim();
    return r;
}

IdSet& IdSet::operator|=(const IdSet& o) {
    if (o.words_.size() > words_.size()) words_.resize(o.words_.size(), 0);
    for (size_t i = 0; i < o.words_.size(); ++i) words_[i] |= o.words_[i];
    return *this;
}

IdSet& IdSet::operator&=(const IdSet& o) {
    if (words_.size() > o.words_.size()) words_.resize(o.words_.size());
    for (size_t i = 0; i < words_.size(); ++i) words_[i] &= o.words_[i];
    trim();
    return *this;
}

bool IdSet::operator==(const IdSet& o) const { return words_ == o.words_; }

bool IdSet::intersects(const IdSet& o) const {
    size_t n = std::min(words_.size(), o.words_.size());
    for (size_t i = 0; i < n; ++i)
        if (words_[i] & o.words_[i]) return true;
    return false;
}

bool IdSet::is_subset_of(const IdSet& o) const { return (*this - o).empty(); }

// Runs found a word at a time (a full word is 64 ids of one run), not id by id.
std::string IdSet::to_string() const {
    std::string out;
    const int n = static_cast<int>(words_.size()) * 64;
    auto bit = [&](int id) { return (words_[static_cast<size_t>(id) / 64] >> (id % 64)) & 1; };
    int id = 0;
    while (id < n) {
        const uint64_t rest = words_[static_cast<size_t>(id) / 64] >> (id % 64);
        if (rest == 0) {
            id = (id / 64 + 1) * 64;
            continue;
        }
        id += __builtin_ctzll(rest);
        int end = id;  // last id of this run
        while (end + 1 < n) {
            if ((end + 1) % 64 == 0 && words_[static_cast<size_t>(end + 1) / 64] == ~uint64_t{0}) end += 64;
            else if (bit(end + 1)) ++end;
            else break;
        }
        if (!out.empty()) out += ',';
        out += std::to_string(id);
        if (end > id) out += '-' + std::to_string(end);
        id = end + 1;
    }
    return out;
}

}  // namespace numabind
