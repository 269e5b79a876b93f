// Loads a topology XML once in a child process before numabind loads it itself: hwloc 2.9
// aborts or crashes on some malformed XML (fuzz/known-hwloc-crashes/), and the commands an
// admin validates a topology= file with (check, topo, plan) must report that, not die of it.
#pragma once

#include <optional>
#include <string>

namespace numabind::cli {

// nullopt when hwloc loads (or refuses) `path` without dying; else one line saying how it
// died. Only for single-threaded callers (it forks).
std::optional<std::string> hwloc_dies_loading(const std::string& path);

}  // namespace numabind::cli
