// Small text helpers shared by the parsers (engine, plugin).
#pragma once

#include <string_view>
#include <vector>

namespace numabind {

// "a,b,,c" -> {"a","b","","c"}; "" -> {""}. Views into `text`.
inline std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> out;
    size_t pos = 0;
    while (true) {
        size_t next = text.find(sep, pos);
        out.push_back(text.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
        if (next == std::string_view::npos) break;
        pos = next + 1;
    }
    return out;
}

}  // namespace numabind
