// numabind SPANK plugin: option and plugstack.conf parsing.
#include "config.hpp"
#include "numabind/text.hpp"

#include <set>

#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"

namespace numabind::spank {

namespace {

// pyxis-style booleans.
std::optional<bool> parse_bool(std::string_view v) {
    if (v == "1" || v == "yes" || v == "y" || v == "true") return true;
    if (v == "0" || v == "no" || v == "n" || v == "false") return false;
    return std::nullopt;
}

constexpr const char* kSiteKeys =
    "default=<mode>, mem=<policy>, fallback=warn|fail, verbose, devices=<match spec>, "
    "topology=<hwloc xml>, respect_cpu_bind=yes|no, batch_step=yes|no";

}  // namespace

std::string option_help() {
    return std::string("<mode>[,verbose][,mem=<policy>] with mode one of ") + kModeChoices +
           " and policy one of " + kMemPolicyChoices;
}

UserChoice parse_option_value(std::string_view value) {
    const std::string shown(value);
    if (value.empty())
        throw UsageError("invalid --numa-binding value '' (expected " + option_help() + ")");
    UserChoice c;
    auto items = split(value, ',');
    try {
        c.mode = parse_mode(items[0]);
    } catch (const UsageError&) {
        throw UsageError("invalid --numa-binding mode '" + std::string(items[0]) + "' in '" + shown +
                         "' (valid modes: " + kModeChoices + "; flags: verbose, mem=prefer|bind|interleave|none)");
    }
    bool seen_verbose = false;
    for (size_t i = 1; i < items.size(); ++i) {
        std::string_view item = items[i];
        if (item == "verbose" && !seen_verbose) {
            c.verbose = seen_verbose = true;
        } else if (item.rfind("mem=", 0) == 0 && !c.mem) {
            try {
                c.mem = parse_mem_policy(item.substr(4));
            } catch (const UsageError&) {
                throw UsageError("invalid --numa-binding memory policy '" + std::string(item.substr(4)) + "' in '" +
                                 shown + "' (valid: " + kMemPolicyChoices + ")");
            }
        } else {
            throw UsageError("invalid --numa-binding flag '" + std::string(item) + "' in '" + shown +
                             "' (valid flags, each at most once: verbose, mem=prefer|bind|interleave|none)");
        }
    }
    return c;
}

SiteConfig parse_site_config(const std::vector<std::string>& args) {
    SiteConfig s;
    std::set<std::string> seen;
    for (const std::string& arg : args) {
        const size_t eq = arg.find('=');
        const std::string key = arg.substr(0, eq);
        const bool has_value = eq != std::string::npos;
        const std::string value = has_value ? arg.substr(eq + 1) : std::string();
        auto bad = [&](const std::string& valid) {
            return UsageError("plugstack.conf: invalid value '" + value + "' for " + key + " (valid: " + valid + ")");
        };
        if (!seen.insert(key).second) throw UsageError("plugstack.conf: argument '" + key + "' given twice");
        if (key != "verbose" && !has_value)
            throw UsageError("plugstack.conf: argument '" + arg + "' needs a value (valid arguments: " + kSiteKeys + ")");
        if (key == "default") {
            try {
                s.default_mode = parse_mode(value);
            } catch (const UsageError&) {
                throw bad(kModeChoices);
            }
        } else if (key == "mem") {
            try {
                s.mem = parse_mem_policy(value);
            } catch (const UsageError&) {
                throw bad(kMemPolicyChoices);
            }
        } else if (key == "fallback") {
            if (value == "warn") s.fallback = Fallback::Warn;
            else if (value == "fail") s.fallback = Fallback::Fail;
            else throw bad("warn, fail");
        } else if (key == "verbose") {
            if (!has_value) {
                s.verbose = true;
            } else if (auto b = parse_bool(value)) {
                s.verbose = *b;
            } else {
                throw bad("yes, no");
            }
        } else if (key == "devices") {
            try {
                s.matcher = DeviceMatcher::parse(value);
            } catch (const UsageError& e) {
                throw UsageError(std::string("plugstack.conf: devices: ") + e.what());
            }
            s.devices = value;
        } else if (key == "topology") {
            if (value.empty() || value[0] != '/') throw bad("an absolute path to an hwloc XML file");
            (void)expand_path(value, "n", "h");  // reject bad % sequences now
            s.topology = value;
        } else if (key == "respect_cpu_bind") {
            auto b = parse_bool(value);
            if (!b) throw bad("yes, no");
            s.respect_cpu_bind = *b;
        } else if (key == "batch_step") {
            auto b = parse_bool(value);
            if (!b) throw bad("yes, no");
            s.batch_step = *b;
        } else {
            throw UsageError("plugstack.conf: unknown argument '" + arg + "' (valid arguments: " + kSiteKeys + ")");
        }
    }
    return s;
}

std::string expand_path(std::string_view pattern, std::string_view node, std::string_view host) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        switch (next) {
            case 'n': out += node; break;
            case 'h': out += host; break;
            case '%': out += '%'; break;
            default:
                throw UsageError("plugstack.conf: topology path '" + std::string(pattern) +
                                 "' has an unknown % sequence (valid: %n node name, %h host name, %%)");
        }
        ++i;
    }
    return out;
}

}  // namespace numabind::spank
