// numabind SPANK plugin: option and plugstack.conf parsing.
#include "config.hpp"
#include "core/text.hpp"
#include "log_text.hpp"

#include <unistd.h>

#include <cstdlib>
#include <set>

#include "core/omp.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "option_flags.hpp"

namespace numabind::spank {

namespace {

constexpr const char* kSiteKeys =
    "default=<mode>, mem=<policy>, fallback=warn|fail, verbose[=yes|no|2], devices=<match spec>, "
    "topology=<hwloc xml>, device_files=<path>[,<path>...], respect_user_bind=yes|no "
    "(alias respect_cpu_bind), batch_step=yes|no, ucx=yes|no, smt=1|all, omp=yes|no";

}  // namespace

std::string option_help() {
    return "<mode>" + option_flags_usage() + " with mode one of " + kModeChoices + " and policy one of " +
           kMemPolicyChoices;
}

UserChoice parse_option_value(std::string_view value) {
    if (value.empty())
        throw UsageError("invalid --numa-binding value '' (expected " + option_help() + ")");
    const std::string q = quoted(value);
    // A NUL would end the value early wherever it is handed on as a C string.
    if (value.find('\0') != std::string_view::npos)
        throw UsageError("invalid --numa-binding value " + q + ": it contains a NUL byte (expected " + option_help() + ")");
    UserChoice c;
    auto items = split(value, ',');
    try {
        c.mode = parse_mode(items[0]);
    } catch (const UsageError&) {
        throw UsageError("invalid --numa-binding mode " + quoted(items[0]) + " in " + q +
                         " (valid modes: " + kModeChoices + "; flags: " + option_flags_list() + ")");
    }
    std::vector<std::string> seen;
    for (size_t i = 1; i < items.size(); ++i) apply_option_flag(items[i], q, seen, c);
    return c;
}

SiteConfig parse_site_config(const std::vector<std::string>& args) {
    SiteConfig s;
    std::set<std::string> seen;
    for (const std::string& arg : args) {
        // A NUL would cut topology=, devices= or device_files= short where a C string is made.
        if (arg.find('\0') != std::string::npos)
            throw UsageError("plugstack.conf: argument " + quoted(arg) + " contains a NUL byte (valid arguments: " +
                             kSiteKeys + ")");
        const size_t eq = arg.find('=');
        std::string key = arg.substr(0, eq);
        const std::string given_key = key;
        if (key == "respect_cpu_bind") key = "respect_user_bind";  // the old name, same setting
        const bool has_value = eq != std::string::npos;
        const std::string value = has_value ? arg.substr(eq + 1) : std::string();
        auto bad = [&](const std::string& valid) {
            return UsageError("plugstack.conf: invalid value " + quoted(value) + " for " + given_key + " (valid: " + valid + ")");
        };
        if (!seen.insert(key).second)
            throw UsageError("plugstack.conf: argument " + quoted(given_key) + " given twice" +
                             (key == "respect_user_bind" ? " (respect_cpu_bind is the old name of respect_user_bind)" : ""));
        if (key != "verbose" && !has_value)
            throw UsageError("plugstack.conf: argument " + quoted(arg) + " needs a value (valid arguments: " + kSiteKeys + ")");
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
                s.verbose_level = 1;
            } else if (value == "2") {
                s.verbose_level = 2;
            } else if (auto b = parse_yes_no(value)) {
                s.verbose_level = *b ? 1 : 0;
            } else {
                throw bad(std::string(kYesNoChoices) + ", 2");
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
        } else if (key == "device_files") {
            for (std::string_view path : split(value, ',')) {
                if (path.empty() || path[0] != '/') throw bad("absolute device file paths, comma-separated, in accelerator order");
                (void)expand_path(path, "n", "h");
                s.device_files.emplace_back(path);
            }
        } else if (key == "respect_user_bind") {
            auto b = parse_yes_no(value);
            if (!b) throw bad(kYesNoChoices);
            s.respect_user_bind = *b;
        } else if (key == "ucx") {
            auto b = parse_yes_no(value);
            if (!b) throw bad(kYesNoChoices);
            s.ucx = *b;
        } else if (key == "batch_step") {
            auto b = parse_yes_no(value);
            if (!b) throw bad(kYesNoChoices);
            s.batch_step = *b;
        } else if (key == "smt") {
            if (value != "1" && value != "all") throw bad(kSmtChoices);
            s.one_thread_per_core = value == "1";
        } else if (key == "omp") {
            auto b = parse_yes_no(value);
            if (!b) throw bad(kYesNoChoices);
            s.omp = *b;
        } else {
            throw UsageError("plugstack.conf: unknown argument " + quoted(arg) + " (valid arguments: " + kSiteKeys + ")");
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
                throw UsageError("plugstack.conf: path " + quoted(pattern) +
                                 " has an unknown % sequence (valid: %n node name, %h host name, %%)");
        }
        ++i;
    }
    return out;
}

std::string short_hostname() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "localhost";
    std::string h(host);
    return h.substr(0, h.find('.'));
}

std::string node_name() {
    const char* node = std::getenv("SLURMD_NODENAME");
    return node && *node ? node : short_hostname();
}

}  // namespace numabind::spank
