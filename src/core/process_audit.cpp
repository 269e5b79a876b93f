#include "core/process_audit.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/binding_env.hpp"
#include "core/text.hpp"

namespace numabind {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::optional<long> to_long(std::string_view s) {
    long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
    return v;
}

std::string pages_text(const std::map<int, long>& by_node) {
    std::string out;
    for (const auto& [node, pages] : by_node) out += (out.empty() ? "" : ", ") + std::to_string(pages) + " on node " + std::to_string(node);
    return out;
}

}  // namespace

// Page counts add up without overflow (a hostile text could repeat huge ones).
static void add_pages(long& total, long pages) {
    constexpr long kMax = 1L << 60;
    total = pages > kMax - total ? kMax : total + pages;
}

std::vector<NumaMapping> parse_numa_maps(std::string_view text) {
    std::vector<NumaMapping> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        std::vector<std::string_view> tok;
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ') ++i;
            size_t j = i;
            while (j < line.size() && line[j] != ' ') ++j;
            if (j > i) tok.push_back(line.substr(i, j - i));
            i = j;
        }
        if (tok.size() < 2) continue;
        NumaMapping m;
        m.address = std::string(tok[0]);
        size_t k = 1;
        m.policy = std::string(tok[k++]);
        // MPOL_PREFERRED_MANY is written "prefer (many):0-1", with a space.
        if (m.policy == "prefer" && k < tok.size() && starts_with(tok[k], "(many)")) m.policy += " " + std::string(tok[k++]);
        for (; k < tok.size(); ++k) {
            std::string_view t = tok[k];
            if (starts_with(t, "file=")) {
                m.file = std::string(t.substr(5));
            } else if (t == "heap") {
                m.heap = true;
            } else if (t == "stack" || starts_with(t, "stack:")) {
                m.stack = true;
            } else if (starts_with(t, "kernelpagesize_kB=")) {
                if (auto v = to_long(t.substr(18))) m.page_kb = *v;
            } else if (t.size() > 1 && t[0] == 'N' && t.find('=') != std::string_view::npos) {
                size_t eq = t.find('=');
                auto node = to_long(t.substr(1, eq - 1));
                auto pages = to_long(t.substr(eq + 1));
                // The kernel writes node ids and page counts >= 0; anything else (a negative
                // id, a count past any machine's memory) is not its text: skipped, never summed.
                if (node && pages && *node >= 0 && *node <= IdSet::kMaxId && *pages >= 0 && *pages <= (1L << 48))
                    add_pages(m.pages[static_cast<int>(*node)], *pages);
            }
        }
        out.push_back(std::move(m));
    }
    return out;
}

std::optional<std::string> task_policy_from_numa_maps(const std::vector<NumaMapping>& maps) {
    for (const NumaMapping& m : maps)
        if (!m.file.empty()) return m.policy;
    return std::nullopt;
}

NumaPolicy parse_numa_policy(std::string_view policy) {
    NumaPolicy p;
    size_t colon = policy.find(':');
    std::string_view kind = policy.substr(0, colon);
    if (size_t eq = kind.find('='); eq != std::string_view::npos) kind = kind.substr(0, eq);  // =static, =relative
    if (starts_with(kind, "prefer")) kind = "prefer";
    p.kind = std::string(kind);
    if (colon != std::string_view::npos) {
        try {
            p.nodes = IdSet::parse(policy.substr(colon + 1));
        } catch (const std::exception&) {
            p.nodes = IdSet();
        }
    }
    return p;
}

std::map<int, long> pages_by_node(const std::vector<NumaMapping>& maps, bool anonymous_only) {
    std::map<int, long> out;
    for (const NumaMapping& m : maps) {
        if (anonymous_only && !m.anonymous()) continue;
        for (const auto& [node, pages] : m.pages) add_pages(out[node], pages);
    }
    return out;
}

namespace {

std::optional<std::vector<int>> node_list(const std::string& text) {
    std::vector<int> out;
    if (text.empty()) return out;
    for (std::string_view item : split(text, ',')) {
        auto v = to_long(item);
        if (!v || *v > IdSet::kMaxId) return std::nullopt;
        out.push_back(static_cast<int>(*v));
    }
    return out;
}

EnvPlan make_plan(const std::string& mode, const std::string& cpus, const std::string& mems, const std::string& mem) {
    EnvPlan p;
    if (mode.empty() || mode == "none" || cpus.empty()) return p;
    try {
        p.cpus = IdSet::parse(cpus);
    } catch (const std::exception&) {
        return p;
    }
    auto m = node_list(mems);
    if (!m) return p;
    p.mems = *m;
    p.mem_policy = mem;
    p.present = !p.cpus.empty();
    return p;
}

}  // namespace

std::string status_field(std::string_view status, std::string_view name) {
    size_t pos = 0;
    while (pos < status.size()) {
        size_t nl = status.find('\n', pos);
        std::string_view line = status.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? status.size() : nl + 1;
        if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == ':') {
            size_t v = line.find_first_not_of(" \t", name.size() + 1);
            return v == std::string_view::npos ? std::string() : std::string(line.substr(v));
        }
    }
    return {};
}

EnvPlan plan_from_environ(const std::map<std::string, std::string>& env) {
    auto get = [&](const char* k) {
        auto it = env.find(k);
        return it == env.end() ? std::string() : it->second;
    };
    return make_plan(get(kEnvMode), get(kEnvCpus), get(kEnvMems), get(kEnvMemPolicy));
}

std::optional<EnvPlan> plan_from_maps(std::string_view maps_text, std::vector<int>* devices_out) {
    const std::string_view tag = "/memfd:numabind-plan:";
    size_t at = maps_text.rfind(tag);
    if (at == std::string_view::npos) return std::nullopt;
    size_t end = maps_text.find_first_of(" \n", at);
    std::string_view body = maps_text.substr(at + tag.size(), end == std::string_view::npos ? std::string_view::npos : end - at - tag.size());
    std::map<std::string, std::string> kv;
    for (std::string_view item : split(body, ';')) {
        size_t eq = item.find('=');
        if (eq != std::string_view::npos) kv[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    }
    if (devices_out) *devices_out = node_list(kv["devices"]).value_or(std::vector<int>{});
    return make_plan(kv["mode"], kv["cpus"], kv["mems"], kv["mem"]);
}

std::vector<std::string> process_mismatches(const std::vector<AuditedThread>& threads, const EnvPlan& plan,
                                            const std::map<int, long>& anonymous_pages,
                                            const std::vector<AuditedDevice>& devices,
                                            const std::vector<int>& cpu_nodes) {
    std::vector<std::string> out;
    if (plan.present) {
        for (const AuditedThread& t : threads) {
            if (!t.cpus.is_subset_of(plan.cpus))
                out.push_back("thread " + std::to_string(t.tid) + " (" + t.name + ") may run on CPUs " + t.cpus.to_string() +
                              ", outside the plan's CPUs " + plan.cpus.to_string());
        }
        const IdSet home = [&] {
            IdSet s;
            for (int n : plan.mems) s.insert(n);
            return s;
        }();
        if (plan.mem_policy != "none" && !plan.mem_policy.empty() && !home.empty()) {
            const std::string want = plan.mem_policy == "prefer" ? "prefer" : plan.mem_policy;
            for (const AuditedThread& t : threads) {
                if (t.policy.empty()) continue;
                NumaPolicy p = parse_numa_policy(t.policy);
                if (p.kind != want || p.nodes.empty() || !p.nodes.is_subset_of(home))
                    out.push_back("thread " + std::to_string(t.tid) + " (" + t.name + ") has memory policy " + t.policy +
                                  ", the plan's is " + plan.mem_policy + " on node(s) " + join_ints(plan.mems));
            }
        }
        if (!home.empty()) {
            std::map<int, long> off;
            for (const auto& [node, pages] : anonymous_pages)
                if (pages > 0 && !home.contains(node)) off[node] = pages;
            if (!off.empty())
                out.push_back("anonymous memory pages off the home node(s) " + join_ints(plan.mems) + ": " + pages_text(off));
        }
    }
    if (!devices.empty()) {
        std::vector<int> homes;
        std::string names;
        for (const AuditedDevice& d : devices) {
            homes.insert(homes.end(), d.home_nodes.begin(), d.home_nodes.end());
            names += (names.empty() ? "" : ", ") + std::to_string(d.index) + " (" + d.pci + ")";
        }
        std::sort(homes.begin(), homes.end());
        homes.erase(std::unique(homes.begin(), homes.end()), homes.end());
        for (int n : cpu_nodes) {
            if (std::find(homes.begin(), homes.end(), n) == homes.end()) {
                out.push_back("its threads may run on NUMA node " + std::to_string(n) + " but device " + names +
                              (devices.size() > 1 ? " are" : " is") + " on node(s) " + join_ints(homes));
                break;
            }
        }
    }
    return out;
}

}  // namespace numabind
