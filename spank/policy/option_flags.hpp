// The --numa-binding flags after the mode, in one table: each flag's name, the values it
// takes and how it sets the user's choice. The parser, the usage line and every list of
// valid flags are built from it, so a new flag is one row plus its use.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.hpp"

namespace numabind::spank {

struct OptionFlag {
    std::string name;                 // "smt"
    bool bare = false;                // the name alone is accepted ("ucx", "verbose")
    std::vector<std::string> values;  // accepted after '=' ("1", "all")
    std::string shown;                // the values lists show after '=' ("1|all"; "": the name alone)
    std::string placeholder;          // the usage line's value instead of `shown` ("<policy>")
    std::string value_name;           // a bad value is named as this ("memory policy"), not as a flag
    void (*set)(std::optional<std::string_view> value, UserChoice& choice);  // nullopt: the bare name
};

const std::vector<OptionFlag>& option_flags();

// "[,verbose[=2]][,mem=<policy>]...": the flags of the usage line.
std::string option_flags_usage();

// "verbose, verbose=2, mem=prefer|bind|interleave|none, ...": the valid flags.
std::string option_flags_list();

// Sets flag `item` ("smt=1") in `choice`, each flag at most once (`seen` holds the names set
// so far). Throws UsageError naming the item, the whole value `quoted_value` and what is valid.
void apply_option_flag(std::string_view item, const std::string& quoted_value, std::vector<std::string>& seen,
                       UserChoice& choice);

}  // namespace numabind::spank
