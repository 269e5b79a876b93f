// The node model as text: see model_text.hpp.
#include "core/model_text.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind {

namespace {

constexpr std::string_view kHeader = "numabind-model 2";  // 2: PCI bridges, network devices
constexpr std::string_view kEnd = "end ";

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a(std::string_view s) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

std::string hex16(uint64_t v) {
    static const char* digits = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = digits[v & 15];
    return out;
}

std::string end_line(std::string_view body) {
    size_t lines = 0;
    for (char c : body) lines += c == '\n';
    return std::string(kEnd) + std::to_string(lines) + " " + hex16(fnv1a(body));
}

// The body (everything before the end line) when the end line is there and matches it.
std::string_view checked_body(std::string_view text) {
    if (text.empty() || text.back() != '\n') throw Error("model cache: cut short (no end line)");
    const size_t last = text.rfind('\n', text.size() - 2);
    const size_t start = last == std::string_view::npos ? 0 : last + 1;
    const std::string_view line = text.substr(start, text.size() - 1 - start);
    const std::string_view body = text.substr(0, start);
    if (line.compare(0, kEnd.size(), kEnd) != 0) throw Error("model cache: cut short (no end line)");
    if (line != end_line(body))
        throw Error("model cache: the end line '" + std::string(line.substr(0, 64)) + "' does not match the " +
                    end_line(body).substr(kEnd.size()) + " before it (cut short or changed)");
    return body;
}

std::string set_text(const IdSet& s) { return s.empty() ? "-" : s.to_string(); }

// One line, whitespace in free text (names, subtypes) folded so that it stays one line.
std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

std::string devices_text(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& d : v) out += (out.empty() ? "" : ",") + d;
    return out.empty() ? "-" : out;
}

std::string ints_text(const std::vector<int>& v) { return join_ints(v, ",", "-"); }

// <rdma 0|1> <ports n=state,...|-> <subtype|-> <name, rest of line>
std::string net_text(const NetDevice& n) {
    std::string ports;
    for (const auto& [port, state] : n.ports)
        ports += (ports.empty() ? "" : ",") + std::to_string(port) + "=" + std::to_string(state);
    std::string subtype = n.subtype.empty() ? "-" : n.subtype;
    for (char& c : subtype)
        if (c == ' ' || c == '\n' || c == '\r') c = '_';
    return std::string(n.rdma ? "1" : "0") + " " + (ports.empty() ? "-" : ports) + " " + subtype + " " + one_line(n.name);
}

// Each item of a comma-separated field ("-": none, as model_to_text writes an empty list).
template <typename F>
void for_each_item(std::string_view list, F&& each) {
    if (list == "-") return;
    for (size_t s = 0; s <= list.size();) {
        const size_t e = std::min(list.find(',', s), list.size());
        each(list.substr(s, e - s));
        s = e + 1;
    }
}

// Fields of one line: `n` words, then (with rest) what is left of the line.
struct Line {
    std::string_view text;
    size_t pos = 0;
    int number;
    const ModelLimits* limits;

    std::string_view word() {
        while (pos < text.size() && text[pos] == ' ') ++pos;
        const size_t start = pos;
        while (pos < text.size() && text[pos] != ' ') ++pos;
        if (start == pos) fail("a field is missing");
        return text.substr(start, pos - start);
    }
    std::string_view rest() {
        if (pos < text.size() && text[pos] == ' ') ++pos;
        std::string_view r = text.substr(pos);
        pos = text.size();
        return r;
    }
    int integer() {
        const std::string_view w = word();
        long v = 0;
        auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
        if (ec != std::errc() || end != w.data() + w.size() || v < -1 || v > (1 << 30))
            fail("'" + std::string(w) + "' is not a number");
        return static_cast<int>(v);
    }
    // A PU list (a core's, a node's or a device's locality): ids up to the possible CPUs.
    IdSet set() {
        const std::string_view w = word();
        if (w == "-") return {};
        try {
            return IdSet::parse(w, limits->max_pu);
        } catch (const Error&) {
            fail("'" + std::string(w.substr(0, 64)) + "' is not a CPU list within 0-" + std::to_string(limits->max_pu));
        }
        return {};
    }
    int node() {
        const int v = integer();
        if (v < 0 || v > limits->max_node)
            fail("NUMA node " + std::to_string(v) + " is outside 0-" + std::to_string(limits->max_node));
        return v;
    }
    void end() {
        while (pos < text.size() && text[pos] == ' ') ++pos;
        if (pos != text.size()) fail("unexpected text at the end");
    }
    [[noreturn]] void fail(const std::string& why) const {
        throw Error("model cache line " + std::to_string(number) + ": " + why);
    }
};

uint16_t u16(Line& l) {
    const int v = l.integer();
    if (v < 0 || v > 0xffff) l.fail("value out of range");
    return static_cast<uint16_t>(v);
}

bool valid_nic_name(std::string_view name) {
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == ':' || c == '-';
    });
}

// 'text' with bytes outside printable ASCII, the quote and the backslash as \xNN, capped.
std::string escaped(std::string_view text) {
    static const char digits[] = "0123456789abcdef";
    std::string out = "'";
    for (size_t i = 0; i < text.size() && i < 64; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
            out += "\\x";
            out += digits[c >> 4];
            out += digits[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + (text.size() > 64 ? "...'" : "'");
}

}  // namespace

std::string model_to_text(const Topology& m) {
    std::string out = std::string(kHeader) + "\ncache_level " + one_line(m.cache_level_name) + "\n";
    for (const Core& c : m.cores)
        out += "core " + set_text(c.pus) + " " + std::to_string(c.l3) + " " + std::to_string(c.package) + "\n";
    for (const CacheGroup& g : m.l3_groups) out += "l3 " + set_text(g.pus) + "\n";
    for (const Package& p : m.packages) out += "package " + std::to_string(p.os_index) + " " + set_text(p.pus) + "\n";
    for (const NumaNode& n : m.numa_nodes)
        out += "numa " + std::to_string(n.os_index) + " " + set_text(n.pus) + " " + set_text(n.locality) + " " +
               one_line(n.subtype) + "\n";
    for (const PciDevice& d : m.pci_devices) {
        out += "pci " + d.address + " " + std::to_string(d.vendor) + " " + std::to_string(d.device) + " " +
               std::to_string(d.class_id) + " " + (d.machine_level ? "1" : "0") + " " + std::to_string(d.l3) + " " +
               set_text(d.locality) + " " + devices_text(d.os_devices) + " " + ints_text(d.bridges) + " " +
               one_line(d.name) + "\n";
        for (const NetDevice& n : d.net_devices) out += "net " + net_text(n) + "\n";
    }
    for (const auto& [from_to, d] : m.distances)
        out += "distance " + std::to_string(from_to.first) + " " + std::to_string(from_to.second) + " " +
               std::to_string(d) + "\n";
    return out + end_line(out) + "\n";
}

Topology model_from_text(std::string_view whole, const ModelLimits& limits) {
    if (whole.size() > limits.max_bytes)
        throw Error("model cache: " + std::to_string(whole.size()) + " bytes, more than the " +
                    std::to_string(limits.max_bytes) + " a node model may have");
    if (whole.empty()) throw Error("model cache: empty");
    if (whole.substr(0, kHeader.size()) != kHeader)
        throw Error("model cache line 1: not a numabind model (expected '" + std::string(kHeader) + "')");
    const std::string_view text = checked_body(whole);
    // Counts a machine within the limits can have (each core, L3 group and package holds at
    // least one PU of its own; nodes and distances follow the nodes).
    const size_t max_pus = static_cast<size_t>(limits.max_pu) + 1, max_nodes = static_cast<size_t>(limits.max_node) + 1;
    auto too_many = [](const char* what, size_t limit) {
        throw Error(std::string("model cache: more ") + what + " than the " + std::to_string(limit) +
                    " the limits allow");
    };
    Topology m;
    int number = 0;
    bool header = false;
    size_t start = 0;
    while (start < text.size()) {
        size_t eol = text.find('\n', start);
        if (eol == std::string_view::npos) eol = text.size();
        Line l{text.substr(start, eol - start), 0, ++number, &limits};
        start = eol + 1;
        if (!header) {
            if (l.text != kHeader) l.fail("not a numabind model (expected '" + std::string(kHeader) + "')");
            header = true;
            continue;
        }
        const std::string_view kind = l.word();
        if (kind == "cache_level") {
            m.cache_level_name = std::string(l.rest());
        } else if (kind == "core") {
            Core c;
            c.pus = l.set();
            c.l3 = l.integer();
            c.package = l.integer();
            l.end();
            if (m.cores.size() >= max_pus) too_many("cores", max_pus);
            m.cores.push_back(std::move(c));
        } else if (kind == "l3") {
            if (m.l3_groups.size() >= max_pus) too_many("L3 groups", max_pus);
            m.l3_groups.push_back({l.set()});
            l.end();
        } else if (kind == "package") {
            Package p;
            p.os_index = l.integer();
            p.pus = l.set();
            l.end();
            if (m.packages.size() >= max_pus) too_many("packages", max_pus);
            m.packages.push_back(std::move(p));
        } else if (kind == "numa") {
            NumaNode n;
            n.os_index = l.node();
            n.pus = l.set();
            n.locality = l.set();
            n.subtype = std::string(l.rest());
            if (m.numa_nodes.size() >= max_nodes) too_many("NUMA nodes", max_nodes);
            m.numa_nodes.push_back(std::move(n));
        } else if (kind == "pci") {
            PciDevice d;
            d.address = std::string(l.word());
            d.vendor = u16(l);
            d.device = u16(l);
            d.class_id = u16(l);
            const int machine = l.integer();
            if (machine != 0 && machine != 1) l.fail("machine level is neither 0 nor 1");
            d.machine_level = machine == 1;
            d.l3 = l.integer();
            d.locality = l.set();
            for_each_item(l.word(), [&](std::string_view dev) {
                if (!dev.empty()) d.os_devices.emplace_back(dev);
            });
            for_each_item(l.word(), [&](std::string_view index) {
                Line item{index, 0, number, &limits};
                const int b = item.integer();
                if (b < 0) l.fail("a bridge index is negative");
                if (d.bridges.size() >= 256) l.fail("more than 256 bridges above one PCI function");
                d.bridges.push_back(b);
            });
            d.name = std::string(l.rest());
            if (m.pci_devices.size() >= limits.max_pci) too_many("PCI devices", limits.max_pci);
            m.pci_devices.push_back(std::move(d));
        } else if (kind == "net") {
            if (m.pci_devices.empty()) l.fail("a network device before any PCI function");
            PciDevice& d = m.pci_devices.back();
            NetDevice n;
            const int rdma = l.integer();
            if (rdma != 0 && rdma != 1) l.fail("rdma is neither 0 nor 1");
            n.rdma = rdma == 1;
            for_each_item(l.word(), [&](std::string_view item) {
                const size_t eq = item.find('=');
                if (eq == std::string_view::npos) l.fail("port '" + std::string(item.substr(0, 32)) + "' is not N=STATE");
                Line p{item.substr(0, eq), 0, number, &limits}, st{item.substr(eq + 1), 0, number, &limits};
                const int port = p.integer(), state = st.integer();
                if (port < 0 || port > 255 || state < 0 || state > 255) l.fail("port or state out of range");
                if (n.ports.size() >= 256) l.fail("more than 256 ports");
                n.ports.emplace_back(port, state);
            });
            const std::string_view subtype = l.word();
            if (subtype != "-") n.subtype = std::string(subtype);
            n.name = std::string(l.rest());
            if (n.name.empty()) l.fail("a network device without a name");
            // The name goes into UCX_NET_DEVICES and log lines: only what interface and
            // RDMA device names are made of.
            if (!valid_nic_name(n.name))
                l.fail("network device name " + escaped(n.name) + " has characters outside [A-Za-z0-9_.:-]");
            if (d.net_devices.size() >= 256) l.fail("more than 256 network devices on one PCI function");
            d.net_devices.push_back(std::move(n));
        } else if (kind == "distance") {
            const int from = l.node(), to = l.node(), d = l.integer();
            l.end();
            m.distances[{from, to}] = d;
        } else {
            l.fail("unknown kind '" + std::string(kind) + "'");
        }
    }
    if (m.cores.empty()) throw Error("model cache without cores");
    // Indexes into the model's own vectors must hold: the planner indexes with them.
    for (const Core& c : m.cores)
        if (c.l3 >= static_cast<int>(m.l3_groups.size()) || c.package >= static_cast<int>(m.packages.size()))
            throw Error("model cache: a core refers to an L3 group or package that is not there");
    for (const PciDevice& p : m.pci_devices)
        if (p.l3 >= static_cast<int>(m.l3_groups.size()))
            throw Error("model cache: a PCI device refers to an L3 group that is not there");
    return m;
}

}  // namespace numabind
