// The step engine's code, mapped in one call where it is about to run (slurmstepd, each
// task) instead of one page fault per 64 KB of it that the hooks reach.
#pragma once

namespace numabind::spank {

// Maps the executable segment of the module this function is linked into (the engine).
// Best effort: nothing happens on a kernel without MADV_POPULATE_READ (before 5.14).
void map_own_code() noexcept;

}  // namespace numabind::spank
