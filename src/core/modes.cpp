// The vocabulary of modes, memory policies and device rules: their names, parsers and choices.
#include "numabind/error.hpp"
#include "numabind/plan.hpp"

namespace numabind {

const char* const kModeChoices = "none, node, socket, exclusive, core-complex";
const char* const kMemPolicyChoices = "prefer, bind, interleave, none";

Mode parse_mode(std::string_view text) {
    if (text == "none") return Mode::None;
    if (text == "node") return Mode::Node;
    if (text == "socket") return Mode::Socket;
    if (text == "exclusive") return Mode::Exclusive;
    if (text == "core-complex") return Mode::CoreComplex;
    throw UsageError("invalid mode '" + std::string(text) + "' (valid: " + kModeChoices + ")");
}

MemPolicy parse_mem_policy(std::string_view text) {
    if (text == "prefer") return MemPolicy::Prefer;
    if (text == "bind") return MemPolicy::Bind;
    if (text == "interleave") return MemPolicy::Interleave;
    if (text == "none") return MemPolicy::None;
    throw UsageError("invalid memory policy '" + std::string(text) + "' (valid: " +
                     kMemPolicyChoices + ")");
}

std::string to_string(Mode mode) {
    switch (mode) {
        case Mode::None: return "none";
        case Mode::Node: return "node";
        case Mode::Socket: return "socket";
        case Mode::Exclusive: return "exclusive";
        case Mode::CoreComplex: return "core-complex";
    }
    return "none";
}

std::string to_string(MemPolicy policy) {
    switch (policy) {
        case MemPolicy::None: return "none";
        case MemPolicy::Prefer: return "prefer";
        case MemPolicy::Bind: return "bind";
        case MemPolicy::Interleave: return "interleave";
    }
    return "none";
}

bool disjoint(Mode mode) { return mode == Mode::Exclusive || mode == Mode::CoreComplex; }

std::string to_string(DeviceRule rule) { return rule == DeviceRule::LocalRank ? "local-rank" : "blocks"; }

}  // namespace numabind
