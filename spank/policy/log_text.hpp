// numabind SPANK plugin: user-supplied text in log lines. A value that reached slurmstepd
// around srun's checks (a user's own plugstack, a crafted environment) must not forge
// lines in slurmd's log: control characters are escaped and the length is capped.
#pragma once

#include <string>
#include <string_view>

namespace numabind::spank {

// Longest piece of user text shown in a message, and longest message written.
inline constexpr size_t kMaxQuoted = 64;
inline constexpr size_t kMaxLogLine = 1024;

// 'text' in single quotes: bytes outside printable ASCII, the quote and the backslash as
// \xNN, cut after `cap` input bytes with "..." inside the quotes.
std::string quoted(std::string_view text, size_t cap = kMaxQuoted);

// A whole message made safe for one log line: control and non-ASCII bytes as \xNN
// (backslashes stay), at most `cap` bytes, "..." when cut.
std::string log_safe(std::string_view message, size_t cap = kMaxLogLine);

}  // namespace numabind::spank
