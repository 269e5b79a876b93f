// numabind SPANK plugin: step-level messages said once per step and node, whichever task
// gets there first: the one such mechanism of the front and the step engine. slurmstepd maps one shared anonymous page before the tasks fork; each
// distinct text claims a slot (its hash, compare-and-swap), so a warning that every task of
// a GPU would print appears once, and different warnings of different tasks all appear.
#pragma once

#include <cstdint>
#include <string>

namespace numabind::spank {

class SaidOnce {
public:
    SaidOnce() = default;
    ~SaidOnce();
    SaidOnce(const SaidOnce&) = delete;
    SaidOnce& operator=(const SaidOnce&) = delete;

    bool create();   // slurmstepd, before the tasks fork; false: every task speaks for itself
    void destroy();  // slurmstepd, at exit
    // True for the first caller with this text in this step (and whenever the page is full
    // or missing: better said twice than not at all).
    bool first(const std::string& text);

private:
    uint64_t* slots_ = nullptr;
};

}  // namespace numabind::spank
