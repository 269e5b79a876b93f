// The /proc parsers of `numabind show --pid` and the plan marker (process_audit.hpp):
// parse_numa_maps, task_policy_from_numa_maps, parse_numa_policy, pages_by_node,
// plan_from_environ (environ text: NUL- or newline-separated NAME=value), plan_from_maps.
// The input is split at the first 0x01 byte: numa_maps text | maps/environ text.
// Invariants: only numabind::Error is thrown (none here: the parsers skip what they cannot
// read); page counts are non-negative and anonymous pages never exceed all pages on a node;
// a plan that is present (environment or marker) has CPUs; device ids are non-negative.
#include <map>
#include <string>

#include "core/process_audit.hpp"
#include "fuzz_support.hpp"
#include "numabind/error.hpp"

using namespace numabind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string s = nbfuzz::as_string(data, size);
    const size_t split = s.find('\x01');
    const std::string numa_maps = s.substr(0, split);
    const std::string other = split == std::string::npos ? std::string() : s.substr(split + 1);

    const std::vector<NumaMapping> maps = parse_numa_maps(numa_maps);
    const std::map<int, long> all = pages_by_node(maps, false), anon = pages_by_node(maps, true);
    for (const auto& [node, pages] : all) NB_FUZZ_CHECK(node >= 0 && pages >= 0, numa_maps);
    for (const auto& [node, pages] : anon) {
        NB_FUZZ_CHECK(pages >= 0, numa_maps);
        auto it = all.find(node);
        NB_FUZZ_CHECK(it != all.end() && it->second >= pages, numa_maps);
    }
    for (const NumaMapping& m : maps) {
        const NumaPolicy p = parse_numa_policy(m.policy);
        NB_FUZZ_CHECK(p.nodes.empty() || p.nodes.first() >= 0, m.policy);
    }
    if (auto policy = task_policy_from_numa_maps(maps)) (void)parse_numa_policy(*policy);

    // environ: NUL-separated as /proc writes it, or newline-separated
    std::map<std::string, std::string> env;
    size_t pos = 0;
    while (pos < other.size()) {
        size_t end = other.find_first_of(std::string("\0\n", 2), pos);
        if (end == std::string::npos) end = other.size();
        const std::string entry = other.substr(pos, end - pos);
        pos = end + 1;
        const size_t eq = entry.find('=');
        if (eq != std::string::npos && eq > 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    const EnvPlan from_env = plan_from_environ(env);
    if (from_env.present) NB_FUZZ_CHECK(!from_env.cpus.empty(), other);
    std::vector<int> devices;
    if (auto marker = plan_from_maps(other, &devices)) {
        if (marker->present) NB_FUZZ_CHECK(!marker->cpus.empty(), other);
        for (int d : devices) NB_FUZZ_CHECK(d >= 0, other);
    }
    return 0;
}
