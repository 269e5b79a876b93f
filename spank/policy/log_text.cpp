// numabind SPANK plugin: escaping user text for log lines.
#include "log_text.hpp"

namespace numabind::spank {

namespace {

void hex(std::string& out, unsigned char c) {
    static const char digits[] = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
}

bool printable(unsigned char c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

std::string quoted(std::string_view text, size_t cap) {
    std::string out = "'";
    const size_t n = text.size() < cap ? text.size() : cap;
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!printable(c) || c == '\'' || c == '\\') hex(out, c);
        else out += static_cast<char>(c);
    }
    if (text.size() > cap) out += "...";
    return out + "'";
}

std::string log_safe(std::string_view message, size_t cap) {
    std::string out;
    for (unsigned char c : message) {
        if (out.size() >= cap) {
            out += "...";
            break;
        }
        if (printable(c)) out += static_cast<char>(c);
        else hex(out, c);
    }
    return out;
}

}  // namespace numabind::spank
