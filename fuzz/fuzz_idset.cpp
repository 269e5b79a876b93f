// CPU and node lists: IdSet::parse (allowed CPUs, Slurm lists), parse_id_list (device
// lists such as SLURM_STEP_GPUS), parse_device_list (--devices), and the set algebra.
// Input: LIST or LIST|LIST (the second list is the other operand of the algebra).
#include <algorithm>
#include <string>

#include "core/visible.hpp"
#include "fuzz_support.hpp"
#include "numabind/error.hpp"
#include "numabind/idset.hpp"

using namespace numabind;

namespace {

void check_set(const IdSet& a, const std::string& text) {
    std::vector<int> ids = a.ids();
    NB_FUZZ_CHECK(static_cast<int>(ids.size()) == a.size(), text);
    NB_FUZZ_CHECK(std::is_sorted(ids.begin(), ids.end()), text);
    NB_FUZZ_CHECK(a.empty() == ids.empty(), text);
    NB_FUZZ_CHECK(a.first() == (ids.empty() ? -1 : ids.front()), text);
    if (!ids.empty()) NB_FUZZ_CHECK(ids.front() >= 0 && ids.back() <= IdSet::kMaxId, text);
    // The canonical form parses back to the same set.
    NB_FUZZ_CHECK(IdSet::parse(a.to_string()) == a, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string s = nbfuzz::as_string(data, size);
    const size_t bar = s.find('|');
    const std::string left = s.substr(0, bar);
    const std::string right = bar == std::string::npos ? std::string() : s.substr(bar + 1);

    std::optional<IdSet> a, b;
    try {
        a = IdSet::parse(left);
        check_set(*a, left);
    } catch (const Error&) {
    }
    try {
        b = IdSet::parse(right);
        check_set(*b, right);
    } catch (const Error&) {
    }
    if (a && b) {
        IdSet i = *a & *b, u = *a | *b, d = *a - *b;
        NB_FUZZ_CHECK(i.is_subset_of(*a) && i.is_subset_of(*b), s);
        NB_FUZZ_CHECK(a->is_subset_of(u) && b->is_subset_of(u), s);
        NB_FUZZ_CHECK(!d.intersects(*b) && d.is_subset_of(*a), s);
        NB_FUZZ_CHECK(a->intersects(*b) == !i.empty(), s);
        NB_FUZZ_CHECK((d | i) == *a, s);
        NB_FUZZ_CHECK(u.size() == a->size() + b->size() - i.size(), s);
        IdSet e = *a;
        for (int id : b->ids()) e.erase(id);
        NB_FUZZ_CHECK(e == d, s);
    }
    try {
        std::vector<int> list = parse_id_list(left, "list");
        for (int x : list) NB_FUZZ_CHECK(x >= 0 && x <= IdSet::kMaxId, left);
        if (a) NB_FUZZ_CHECK(IdSet::parse(left).size() <= static_cast<int>(list.size()), left);
    } catch (const Error&) {
    }
    try {
        std::vector<int> devs = parse_device_list(left, 8);
        NB_FUZZ_CHECK(!devs.empty(), left);
        for (int x : devs) NB_FUZZ_CHECK(x >= 0 && x < 8, left);
    } catch (const UsageError&) {
    }
    return 0;
}
