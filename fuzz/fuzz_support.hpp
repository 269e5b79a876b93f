// Helpers shared by the libFuzzer harnesses (fuzz/*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/text.hpp"
#include "core/visible.hpp"

namespace nbfuzz {

inline std::string as_string(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// A broken invariant: print it and abort, which libFuzzer records as a crash.
[[noreturn]] inline void violated(const char* what, const std::string& detail = {}) {
    std::fprintf(stderr, "numabind fuzz invariant violated: %s %s\n", what, detail.c_str());
    std::abort();
}
#define NB_FUZZ_CHECK(cond, detail) \
    do {                            \
        if (!(cond)) ::nbfuzz::violated(#cond, (detail)); \
    } while (0)

// "NAME=value" lines (later lines win); lines without '=' are ignored. Values may be
// empty ("set but empty" is a distinct case for the parsers).
inline std::map<std::string, std::string> env_lines(const std::string& text) {
    std::map<std::string, std::string> out;
    for (std::string_view line : numabind::split(text, '\n')) {
        size_t eq = line.find('=');
        if (eq != std::string_view::npos && eq > 0) out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    return out;
}

inline numabind::EnvLookup lookup(const std::map<std::string, std::string>& env) {
    return [&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
    };
}

// Whitespace-separated words (how slurmstepd splits a plugstack.conf line).
inline std::vector<std::string> words(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : text) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

}  // namespace nbfuzz
