// Placement pictures: colours and legend (see draw_style.hpp).
#include "draw_style.hpp"

namespace numabind::draw {

const std::vector<Colour>& palette() {
    // Colour-blind-safe first (Okabe-Ito), then a few more distinct ones.
    static const std::vector<Colour> p = {
        {"#e69f00", "orange", "#000000"},   {"#56b4e9", "sky blue", "#000000"}, {"#009e73", "green", "#ffffff"},
        {"#f0e442", "yellow", "#000000"},   {"#0072b2", "blue", "#ffffff"},     {"#d55e00", "vermilion", "#ffffff"},
        {"#cc79a7", "pink", "#000000"},     {"#7f3c8d", "purple", "#ffffff"},   {"#11a579", "teal", "#ffffff"},
        {"#3969ac", "indigo", "#ffffff"},   {"#f2b701", "gold", "#000000"},     {"#e73f74", "rose", "#ffffff"},
        {"#80ba5a", "lime", "#000000"},     {"#e68310", "amber", "#000000"},    {"#008695", "cyan", "#ffffff"},
        {"#cf1c90", "magenta", "#ffffff"},
    };
    return p;
}

const Colour& shared_colour() {
    static const Colour c{"#a0a0a0", "grey", "#000000"};
    return c;
}

std::string style_of(const Colour& c) { return "Background=" + c.hex + ";Text=" + c.text; }

Styles paint(const std::vector<TaskPaint>& tasks) {
    Styles s;
    std::map<int, int> pu_owner;             // -1: shared
    std::map<std::string, int> pci_owner;
    for (size_t t = 0; t < tasks.size(); ++t) {
        for (int pu : tasks[t].cpus.ids()) {
            auto [it, fresh] = pu_owner.emplace(pu, static_cast<int>(t));
            if (!fresh && it->second != static_cast<int>(t)) it->second = -1;
        }
        for (const std::string& p : tasks[t].pci) {
            auto [it, fresh] = pci_owner.emplace(p, static_cast<int>(t));
            if (!fresh && it->second != static_cast<int>(t)) it->second = -1;
        }
    }
    const auto& pal = palette();
    auto colour = [&](int owner) -> const Colour& { return owner < 0 ? shared_colour() : pal[static_cast<size_t>(owner) % pal.size()]; };
    bool any_shared = false;
    for (const auto& [pu, owner] : pu_owner) {
        s.pu[pu] = style_of(colour(owner));
        any_shared = any_shared || owner < 0;
    }
    for (const auto& [p, owner] : pci_owner) {
        s.pci[p] = style_of(colour(owner));
        any_shared = any_shared || owner < 0;
    }
    for (size_t t = 0; t < tasks.size(); ++t) {
        const TaskPaint& k = tasks[t];
        std::string devices;
        for (const std::string& p : k.pci) devices += (devices.empty() ? "" : " ") + p;
        s.legend.push_back(colour(static_cast<int>(t)).name + " (" + colour(static_cast<int>(t)).hex + "): " + k.label +
                           ", CPUs " + (k.cpus.empty() ? "-" : k.cpus.to_string()) +
                           (k.note.empty() ? "" : ", " + k.note) + (devices.empty() ? "" : " (" + devices + ")"));
    }
    if (any_shared)
        s.legend.push_back(shared_colour().name + " (" + shared_colour().hex + "): used by more than one task");
    return s;
}

}  // namespace numabind::draw
