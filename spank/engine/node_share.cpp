// numabind SPANK plugin: the per-step exchange of device sets among local tasks.
#include "node_share.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace numabind::spank {

namespace {

// Slot states; a slot leaves Empty exactly once (compare-and-swap).
enum : uint32_t { kEmpty = 0, kPerTask = 1, kShared = 2, kMissing = 3, kLate = 4 };
// Or'ed into kPerTask / kShared: the task took its entry of the step's plan.
constexpr uint32_t kCommitted = 8;

uint32_t load(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
bool cas(uint32_t* p, uint32_t from, uint32_t to) {
    return __atomic_compare_exchange_n(p, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Shared (not FUTEX_PRIVATE): the waiters are different processes.
void futex_wait(uint32_t* addr, uint32_t expected, int64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
    syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void futex_wake_all(uint32_t* addr) { syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

}  // namespace

struct NodeShare::Header {
    uint32_t done;  // slots that left Empty; the futex word (woken when it reaches ntasks)
    int64_t first_ns;  // when the first task arrived: the wait is bounded from there
};

NodeShare::~NodeShare() { destroy(); }

bool NodeShare::create(int ntasks, int accelerator_count) {
    destroy();
    if (ntasks < 1 || ntasks > 1 << 16 || accelerator_count < 0 || accelerator_count > 1 << 12) return false;
    const size_t slot_words = 2 + static_cast<size_t>(accelerator_count);
    size_ = sizeof(Header) + static_cast<size_t>(ntasks) * slot_words * sizeof(uint32_t);
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        size_ = 0;
        return false;
    }
    base_ = p;  // zero-filled by the kernel: every slot Empty, nothing claimed
    ntasks_ = ntasks;
    devices_ = accelerator_count;
    return true;
}

void NodeShare::destroy() {
    if (base_) munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
    ntasks_ = 0;
}

NodeShare::Header* NodeShare::header() const { return static_cast<Header*>(base_); }

uint32_t* NodeShare::slot(int rank) const {
    auto* first = reinterpret_cast<uint32_t*>(static_cast<char*>(base_) + sizeof(Header));
    return first + static_cast<size_t>(rank) * (2 + static_cast<size_t>(devices_));
}

void NodeShare::seal_empty_slots() {
    uint32_t sealed = 0;
    for (int r = 0; r < ntasks_; ++r)
        if (cas(slot(r), kEmpty, kLate)) {
            ++sealed;
            if (step_hook_) step_hook_(Step::Sealing);
        }
    // The count only keeps the futex word in step; nobody waits on it reaching ntasks.
    if (sealed && __atomic_add_fetch(&header()->done, sealed, __ATOMIC_ACQ_REL) >= static_cast<uint32_t>(ntasks_))
        futex_wake_all(&header()->done);
}

NodeShare::StepHook NodeShare::step_hook_ = nullptr;

bool NodeShare::publish(int rank, const Published& mine) {
    if (!base_ || rank < 0 || rank >= ntasks_) return false;
    int64_t zero = 0;
    __atomic_compare_exchange_n(&header()->first_ns, &zero, now_ns(), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (step_hook_) step_hook_(Step::Arrived);
    uint32_t* s = slot(rank);
    uint32_t len = 0;
    if (mine.state == Published::State::Devices)
        for (int d : mine.devices)
            if (d >= 0 && d < devices_ && len < static_cast<uint32_t>(devices_)) s[2 + len++] = static_cast<uint32_t>(d);
    s[1] = len;  // written before the state's release store below makes them visible
    uint32_t state = mine.state != Published::State::Devices ? kMissing : mine.per_task ? kPerTask : kShared;
    if (mine.state == Published::State::Devices && mine.committed) state |= kCommitted;
    const bool ok = cas(&s[0], kEmpty, state);
    if (step_hook_) step_hook_(Step::SlotFinal);
    // Only the last one wakes the waiters: a wake per publication would wake every waiter
    // n times (n^2 context switches with 64 overcommitted tasks).
    if (ok && __atomic_add_fetch(&header()->done, 1, __ATOMIC_ACQ_REL) == static_cast<uint32_t>(ntasks_))
        futex_wake_all(&header()->done);
    if (step_hook_) step_hook_(Step::Counted);
    return ok;
}

bool NodeShare::all_final() const {
    for (int r = 0; r < ntasks_; ++r)
        if (load(slot(r)) == kEmpty) return false;
    return true;
}

std::vector<Published> NodeShare::wait_all(int timeout_ms) {
    std::vector<Published> out(static_cast<size_t>(ntasks_));
    if (!base_) return out;
    Header* h = header();
    int64_t first = __atomic_load_n(&h->first_ns, __ATOMIC_ACQUIRE);
    if (first == 0) first = now_ns();
    if (step_hook_) step_hook_(Step::Waiting);
    const int64_t deadline = first + static_cast<int64_t>(timeout_ms) * 1000000;
    // The slots, not `done`, say when the exchange is over: a task killed or stopped between
    // its slot's CAS and its count leaves `done` short for good, and only the deadline's wake
    // ends the wait. `done` is the futex word only, so that just the last publication wakes.
    while (true) {
        const uint32_t done = load(&h->done);
        if (done >= static_cast<uint32_t>(ntasks_) || all_final()) break;
        const int64_t left = deadline - now_ns();
        if (left <= 0) {
            seal_empty_slots();  // every slot is final after it, whoever else seals at once
            break;
        }
        futex_wait(&h->done, done, left);
    }
    for (int r = 0; r < ntasks_; ++r) {
        const uint32_t* s = slot(r);
        const uint32_t state = load(s);
        Published& p = out[static_cast<size_t>(r)];
        if (state == kMissing) continue;
        if (state == kLate) {
            p.state = Published::State::Late;
            continue;
        }
        p.state = Published::State::Devices;
        p.per_task = (state & ~kCommitted) == kPerTask;
        p.committed = (state & kCommitted) != 0;
        const uint32_t len = s[1];
        for (uint32_t i = 0; i < len && i < static_cast<uint32_t>(devices_); ++i)
            p.devices.push_back(static_cast<int>(s[2 + i]));
    }
    return out;
}

}  // namespace numabind::spank
