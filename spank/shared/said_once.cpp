// numabind SPANK plugin: see said_once.hpp.
#include "said_once.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace numabind::spank {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSlots = kPage / sizeof(uint64_t);

uint64_t text_hash(const std::string& text) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h | 1;  // never 0, the empty slot
}

}  // namespace

SaidOnce::~SaidOnce() { destroy(); }

bool SaidOnce::create() {
    destroy();
    void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    slots_ = static_cast<uint64_t*>(p);  // zero-filled: nothing said
    return true;
}

void SaidOnce::destroy() {
    if (slots_) munmap(slots_, kPage);
    slots_ = nullptr;
}

bool SaidOnce::first(const std::string& text) {
    if (!slots_) return true;
    const uint64_t h = text_hash(text);
    for (size_t i = 0; i < kSlots; ++i) {
        uint64_t seen = __atomic_load_n(&slots_[i], __ATOMIC_ACQUIRE);
        if (seen == 0) {
            if (__atomic_compare_exchange_n(&slots_[i], &seen, h, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return true;
            // another task took this slot meanwhile: `seen` holds its text's hash
        }
        if (seen == h) return false;
    }
    return true;
}

}  // namespace numabind::spank
