#include "numabind/idset.hpp"

#include <algorithm>
#include <charconv>

#include "numabind/error.hpp"
#include "numabind/text.hpp"

namespace numabind {

namespace {

int parse_id(std::string_view token, std::string_view whole) {
    int value = -1;
    const char* begin = token.data();
    const char* end = token.data() + token.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (token.empty() || ec != std::errc() || ptr != end || value < 0 || value > IdSet::kMaxId) {
        throw UsageError("invalid id '" + std::string(token) + "' in list '" + std::string(whole) +
                         "' (expected numbers 0-" + std::to_string(IdSet::kMaxId) +
                         " and ranges like 0-3,8)");
    }
    return value;
}

template <typename Fn>
void for_each_range(std::string_view text, Fn&& fn) {
    if (text.empty()) return;
    for (std::string_view item : split(text, ',')) {
        size_t dash = item.find('-');
        int lo, hi;
        if (dash == std::string_view::npos) {
            lo = hi = parse_id(item, text);
        } else {
            lo = parse_id(item.substr(0, dash), text);
            hi = parse_id(item.substr(dash + 1), text);
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
    for (int i = first; i <= last; ++i) s.insert(i);
    return s;
}

IdSet IdSet::parse(std::string_view text) {
    IdSet s;
    for_each_range(text, [&](int lo, int hi) {
        for (int i = lo; i <= hi; ++i) s.insert(i);
    });
    return s;
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

std::string IdSet::to_string() const {
    std::string out;
    std::vector<int> v = ids();
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(v[i]);
        if (j > i) out += '-' + std::to_string(v[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace numabind
