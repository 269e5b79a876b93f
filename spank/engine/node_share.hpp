// numabind SPANK plugin: one exchange per step and node among the local tasks. slurmstepd
// maps a small MAP_SHARED|MAP_ANONYMOUS region before the tasks fork (as pyxis shares its
// container start); each task publishes its device set there and waits, bounded, for the
// others, so every task plans the node from the same sets. Lock-free: every slot moves
// once from empty to published or to missing (set by the first task whose wait ran out),
// so all tasks end up reading the same final state. Waiting uses a futex on the shared
// counter (no busy loop: overcommitted tasks share CPUs); a task killed or stopped anywhere in
// the exchange costs the others at most the bounded wait, never CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devices.hpp"

namespace numabind::spank {

class NodeShare {
public:
    NodeShare() = default;
    ~NodeShare();
    NodeShare(const NodeShare&) = delete;
    NodeShare& operator=(const NodeShare&) = delete;

    // In slurmstepd before the tasks fork. False when the mapping fails (tasks then plan
    // alone and say so).
    bool create(int ntasks, int accelerator_count);
    void destroy();  // slurmstepd, at exit
    bool ready() const { return base_ != nullptr; }
    int ntasks() const { return ntasks_; }

    // Publishes task `rank`'s set (or that it has none to give). Returns false when the
    // wait of another task already ran out and this task was recorded as missing.
    bool publish(int rank, const Published& mine);
    // Waits until every slot is final or `timeout_ms` after the first publication passed,
    // then marks the slots still empty as missing. Returns every task's final entry.
    std::vector<Published> wait_all(int timeout_ms);

    // Tests only: called at each step of publish() and wait_all(), so that a test can stop or kill a task
    // exactly there. Null in production.
    enum class Step { Arrived, SlotFinal, Counted, Waiting, Sealing };
    using StepHook = void (*)(Step);
    static void set_step_hook_for_tests(StepHook hook) { step_hook_ = hook; }

private:
    bool all_final() const;
    void seal_empty_slots();  // the deadline's end: every Empty slot becomes Late
    static StepHook step_hook_;

    struct Header;
    Header* header() const;
    uint32_t* slot(int rank) const;  // state, length, then `devices_` int32 entries

    void* base_ = nullptr;
    size_t size_ = 0;
    int ntasks_ = 0;
    int devices_ = 0;
};

}  // namespace numabind::spank
