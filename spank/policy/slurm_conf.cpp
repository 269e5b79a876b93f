// Slurm's configuration files as numabind reads them (see slurm_conf.hpp).
#include "slurm_conf.hpp"

#include <algorithm>
#include <cctype>

#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind::spank {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Splits at commas outside brackets: "n[1-2],gpu01" -> "n[1-2]", "gpu01".
std::vector<std::string> split_top_level(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : text) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "Key=Value" words of one line; keys in lower case.
std::vector<std::pair<std::string, std::string>> settings_of(const std::string& line) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& w : words_of(line)) {
        const size_t eq = w.find('=');
        if (eq == std::string::npos) continue;
        out.emplace_back(lower(w.substr(0, eq)), w.substr(eq + 1));
    }
    return out;
}

}  // namespace

std::vector<std::string> words_of(const std::string& line) {
    const std::string_view text = std::string_view(line).substr(0, line.find('#'));
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
        if (is_space(text[pos])) {
            ++pos;
            continue;
        }
        const size_t start = pos;
        while (pos < text.size() && !is_space(text[pos])) ++pos;
        out.emplace_back(text.substr(start, pos - start));
    }
    return out;
}

std::map<std::string, std::string> parse_key_values(const std::string& text) {
    std::map<std::string, std::string> out;
    for (const std::string& line : lines_of(text)) {
        const auto settings = settings_of(line);
        if (settings.empty()) continue;
        const std::string& first = settings.front().first;
        if (first == "nodename" || first == "partitionname" || first == "nodeset" || first == "frontendname" ||
            first == "downnodes" || first == "switchname")
            continue;
        for (const auto& [k, v] : settings) out[k] = v;
    }
    return out;
}

bool is_yes(const std::string& value) {
    const std::string v = lower(value);
    return v == "yes" || v == "true" || v == "1";
}

std::vector<std::string> expand_brackets(const std::string& pattern) {
    if (pattern.size() > kMaxBracketPattern)
        throw UsageError("name '" + pattern.substr(0, 64) + "...' is longer than " + std::to_string(kMaxBracketPattern) +
                         " characters");
    // Left to right, one bracket group at a time: the product of all groups is capped, not
    // only each range (three n[0-4096] groups would be 68 billion names).
    std::vector<std::string> out{""};
    size_t pos = 0;
    while (pos < pattern.size()) {
        const size_t open = pattern.find('[', pos);
        const std::string literal = pattern.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
        for (std::string& o : out) o += literal;
        if (open == std::string::npos) break;
        const size_t close = pattern.find(']', open);
        if (close == std::string::npos) throw UsageError("unbalanced '[' in '" + pattern + "'");
        std::vector<std::string> next;
        std::vector<std::string_view> items = split(std::string_view(pattern).substr(open + 1, close - open - 1), ',');
        if (items.back().empty()) items.pop_back();  // "1," is "1"; "1,,2" still fails
        for (const std::string_view piece : items) {
            const std::string item(piece);
            const size_t dash = item.find('-');
            const std::string a = item.substr(0, dash);
            const std::string b = dash == std::string::npos ? a : item.substr(dash + 1);
            if (!all_digits(a) || !all_digits(b) || a.size() > 7 || b.size() > 7)
                throw UsageError("bad range '" + item + "' in '" + pattern + "' (expected N or N-M)");
            const long first = std::stol(a), last = std::stol(b);
            if (last < first) throw UsageError("bad range '" + item + "' in '" + pattern + "'");
            if (static_cast<size_t>(last - first + 1) * out.size() + next.size() > kMaxExpandedNames)
                throw UsageError("'" + pattern + "' expands to more than " + std::to_string(kMaxExpandedNames) +
                                 " names (the limit of numabind check)");
            for (const std::string& head : out)
                for (long i = first; i <= last; ++i) {
                    std::string n = std::to_string(i);
                    if (n.size() < a.size()) n = std::string(a.size() - n.size(), '0') + n;  // keep "00-07" widths
                    next.push_back(head + n);
                }
        }
        out = std::move(next);
        pos = close + 1;
    }
    return out;
}

GresGpus parse_gres_conf(const std::string& text, const std::string& node) {
    GresGpus g;
    // All names of the file together are capped too: many lines each at the per-name cap
    // would still take minutes.
    size_t names = 0;
    auto expand = [&](const std::string& part) {
        std::vector<std::string> out = expand_brackets(part);
        names += out.size();
        if (names > kMaxGresNames)
            throw UsageError("gres.conf expands to more than " + std::to_string(kMaxGresNames) +
                             " names in all (the limit of numabind check)");
        return out;
    };
    for (const std::string& line : lines_of(text)) {
        const auto settings = settings_of(line);
        if (settings.empty()) continue;
        std::map<std::string, std::string> s(settings.begin(), settings.end());
        if (auto it = s.find("nodename"); it != s.end()) {
            bool mine = false;
            for (const std::string& part : split_top_level(it->second))
                for (const std::string& n : expand(part)) mine = mine || n == node;
            if (!mine) continue;
        }
        if (auto it = s.find("autodetect"); it != s.end()) {
            g.autodetect_value = it->second;
            g.autodetect = lower(it->second) != "off" && !it->second.empty();
        }
        auto name = s.find("name");
        auto file = s.find("file");
        if (name == s.end() || lower(name->second) != "gpu" || file == s.end()) continue;
        for (const std::string& part : split_top_level(file->second))
            for (const std::string& f : expand(part)) g.files.push_back(f);
    }
    return g;
}

std::optional<bool> devices_constrained(const std::optional<std::string>& slurm_conf_text,
                                        const std::optional<std::string>& cgroup_conf_text) {
    if (!slurm_conf_text) return std::nullopt;
    const auto slurm = parse_key_values(*slurm_conf_text);
    const auto plugin = slurm.find("taskplugin");
    if (plugin == slurm.end() || lower(plugin->second).find("task/cgroup") == std::string::npos) return false;
    if (!cgroup_conf_text) return false;  // Slurm's default: ConstrainDevices=no
    const auto cgroup = parse_key_values(*cgroup_conf_text);
    const auto constrain = cgroup.find("constraindevices");
    return constrain != cgroup.end() && is_yes(constrain->second);
}

bool slurm_files_usable(size_t gres_files, size_t accelerators) { return accelerators > 0 && gres_files == accelerators; }

GpuIdentity gpu_identity(size_t accelerators, size_t known_files, size_t gres_files,
                         const std::optional<bool>& devices_constrained) {
    if (known_files >= accelerators) return GpuIdentity::DeviceFiles;
    if (slurm_files_usable(gres_files, accelerators)) return GpuIdentity::SlurmDeviceFiles;
    if (devices_constrained == false) return GpuIdentity::GresIndex;
    if (accelerators - known_files == 1) return GpuIdentity::OneUnknown;
    return GpuIdentity::Guess;
}

std::string slurm_conf_dir(const std::optional<std::string>& slurm_conf_variable) {
    if (!slurm_conf_variable || slurm_conf_variable->empty()) return "/etc/slurm";
    const size_t slash = slurm_conf_variable->rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : slurm_conf_variable->substr(0, slash);
}

}  // namespace numabind::spank
