// Small text helpers shared by the parsers and the messages (engine, plugin, CLI).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace numabind {

// The C locale's white space, without the locale: isspace reads libc's ctype table, one
// more page for every task that parses a variable.
inline constexpr bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// `text` without white space at either end; a view into it.
inline std::string_view trimmed(std::string_view text) {
    size_t b = 0, e = text.size();
    while (b < e && is_space(text[b])) ++b;
    while (e > b && is_space(text[e - 1])) --e;
    return text.substr(b, e - b);
}

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

// The lines of a text, without their newlines (a last line without one included).
inline std::vector<std::string> lines_of(std::string_view text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        out.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

// {0,2,3} -> "0,2,3": the one spelling of an index list (NUMABIND_MEMS, messages, the plan
// marker). `none`: what an empty list reads as ("" by default, "-" in tables and log lines).
inline std::string join_ints(const std::vector<int>& values, std::string_view sep = ",", std::string_view none = "") {
    std::string out;
    for (int v : values) {
        if (!out.empty()) out += sep;
        out += std::to_string(v);
    }
    return out.empty() ? std::string(none) : out;
}

// The one yes/no of every parser (plugstack, --numa-binding flags, the C API's options):
// 1, yes, y, true are yes; 0, no, n, false are no (pyxis's spellings); anything else nullopt.
inline std::optional<bool> parse_yes_no(std::string_view text) {
    if (text == "1" || text == "yes" || text == "y" || text == "true") return true;
    if (text == "0" || text == "no" || text == "n" || text == "false") return false;
    return std::nullopt;
}
inline constexpr const char* kYesNoChoices = "yes, no";  // what a "valid:" list shows

}  // namespace numabind
