// Option strings: --mode/--mem values (parse_mode, parse_mem_policy) and, when the SPANK
// plugin sources are present, its --numa-binding value (also read from the job's
// SLURM_SPANK_* environment), its plugstack.conf arguments and the topology path template.
#include <string>

#include "fuzz_support.hpp"
#include "numabind/error.hpp"
#include "numabind/plan.hpp"
#ifdef NUMABIND_FUZZ_SPANK
#include "policy/config.hpp"
#endif

using namespace numabind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string s = nbfuzz::as_string(data, size);
    try {
        Mode m = parse_mode(s);
        NB_FUZZ_CHECK(to_string(m) == s, s);  // only the canonical names are accepted
    } catch (const UsageError&) {
    }
    try {
        MemPolicy p = parse_mem_policy(s);
        NB_FUZZ_CHECK(to_string(p) == s, s);
    } catch (const UsageError&) {
    }
#ifdef NUMABIND_FUZZ_SPANK
    try {
        spank::UserChoice c = spank::parse_option_value(s);
        // The mode is the text up to the first comma, by its canonical name.
        NB_FUZZ_CHECK(s.compare(0, s.find(','), to_string(c.mode)) == 0, s);
    } catch (const UsageError&) {
    }
    try {
        spank::SiteConfig cfg = spank::parse_site_config(nbfuzz::words(s));
        // topology= is an absolute path whose % sequences all expand.
        if (!cfg.topology.empty()) {
            NB_FUZZ_CHECK(cfg.topology[0] == '/', cfg.topology);
            std::string path = spank::expand_path(cfg.topology, "n1", "host1");
            NB_FUZZ_CHECK(!path.empty() && path[0] == '/', path);
        }
        if (!cfg.devices.empty()) (void)DeviceMatcher::parse(cfg.devices);
    } catch (const UsageError&) {
    }
    try {
        std::string out = spank::expand_path(s, "node", "host");
        NB_FUZZ_CHECK(out.size() <= s.size() * 4 + 4, s);  // "%n" -> 4 chars at most
        if (s.find('%') == std::string::npos) NB_FUZZ_CHECK(out == s, s);
    } catch (const UsageError&) {
    }
#endif
    return 0;
}
