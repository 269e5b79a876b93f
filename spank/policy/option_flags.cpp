// The --numa-binding flags (option_flags.hpp): the table and what is built from it.
#include "option_flags.hpp"

#include <algorithm>

#include "core/omp.hpp"
#include "core/text.hpp"
#include "log_text.hpp"
#include "numabind/error.hpp"

namespace numabind::spank {

namespace {

// "a, b, c" -> {"a", "b", "c"}: a choices constant as a flag's values.
std::vector<std::string> choices_of(const char* choices) {
    std::vector<std::string> out;
    for (std::string_view c : split(choices, ',')) out.emplace_back(c.substr(c.find_first_not_of(' ')));
    return out;
}

std::string joined(const std::vector<std::string>& values, const std::string& sep, const std::string& prefix = "") {
    std::string out;
    for (const std::string& v : values) out += (out.empty() ? "" : sep) + prefix + v;
    return out;
}

std::vector<OptionFlag> make_flags() {
    const std::vector<std::string> policies = choices_of(kMemPolicyChoices);
    const std::vector<std::string> smt = choices_of(kSmtChoices);
    return {
        {"verbose", true, {"1", "2"}, "2", "", "",
         [](std::optional<std::string_view> v, UserChoice& c) { c.verbose_level = v == "2" ? 2 : 1; }},
        {"mem", false, policies, joined(policies, "|"), "<policy>", "memory policy",
         [](std::optional<std::string_view> v, UserChoice& c) { c.mem = parse_mem_policy(*v); }},
        {"ucx", true, {"yes", "no"}, "", "", "",
         [](std::optional<std::string_view> v, UserChoice& c) { c.ucx = !v || *parse_yes_no(*v); }},
        {"smt", false, smt, joined(smt, "|"), "", "",
         [](std::optional<std::string_view> v, UserChoice& c) { c.one_thread_per_core = parse_smt(*v, "smt"); }},
        {"omp", true, {"yes", "no"}, "", "", "",
         [](std::optional<std::string_view> v, UserChoice& c) { c.omp = !v || *parse_yes_no(*v); }},
    };
}

}  // namespace

const std::vector<OptionFlag>& option_flags() {
    static const std::vector<OptionFlag> flags = make_flags();
    return flags;
}

std::string option_flags_usage() {
    std::string out;
    for (const OptionFlag& f : option_flags()) {
        const std::string value = f.placeholder.empty() ? f.shown : f.placeholder;
        if (f.bare) out += "[," + f.name + (value.empty() ? "" : "[=" + value + "]") + "]";
        else out += "[," + f.name + "=" + value + "]";
    }
    return out;
}

std::string option_flags_list() {
    std::string out;
    for (const OptionFlag& f : option_flags()) {
        std::string entry = f.bare ? f.name : f.name + "=" + f.shown;
        if (f.bare && !f.shown.empty()) entry += ", " + f.name + "=" + f.shown;
        out += (out.empty() ? "" : ", ") + entry;
    }
    return out;
}

void apply_option_flag(std::string_view item, const std::string& quoted_value, std::vector<std::string>& seen,
                       UserChoice& choice) {
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const std::optional<std::string_view> value =
        eq == std::string_view::npos ? std::nullopt : std::optional<std::string_view>(item.substr(eq + 1));
    const auto& flags = option_flags();
    const auto flag = std::find_if(flags.begin(), flags.end(), [&](const OptionFlag& f) { return f.name == name; });
    const bool once = flag != flags.end() && std::find(seen.begin(), seen.end(), name) == seen.end();
    if (once && value && std::find(flag->values.begin(), flag->values.end(), *value) == flag->values.end() &&
        !flag->bare) {  // a flag that needs a value names its own valid ones
        if (!flag->value_name.empty())
            throw UsageError("invalid --numa-binding " + flag->value_name + " " + quoted(*value) + " in " +
                             quoted_value + " (valid: " + joined(flag->values, ", ") + ")");
        throw UsageError("invalid --numa-binding flag " + quoted(item) + " in " + quoted_value +
                         " (valid: " + joined(flag->values, ", ", flag->name + "=") + ")");
    }
    const bool accepted = once && (value ? std::find(flag->values.begin(), flag->values.end(), *value) !=
                                               flag->values.end()
                                         : flag->bare);
    if (!accepted)
        throw UsageError("invalid --numa-binding flag " + quoted(item) + " in " + quoted_value +
                         " (valid flags, each at most once: " + option_flags_list() + ")");
    flag->set(value, choice);
    seen.emplace_back(name);
}

}  // namespace numabind::spank
