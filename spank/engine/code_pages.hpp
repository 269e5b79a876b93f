// The step engine's code, mapped in one call where it is about to run (slurmstepd, each
// task) instead of one page fault per 64 KB of it that the hooks reach.
#pragma once

#include <cstdint>

namespace numabind::spank {

// The executable segment of the module this function is linked into (the engine), page
// aligned; empty where it cannot be found.
struct CodeRange {
    uintptr_t start = 0;
    uintptr_t end = 0;
};
CodeRange own_code() noexcept;

// Best effort: nothing happens on a kernel without MADV_POPULATE_READ (before 5.14).
void map_code(const CodeRange& code) noexcept;

}  // namespace numabind::spank
