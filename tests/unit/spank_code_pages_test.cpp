// map_code(own_code()) (spank/engine/code_pages.cpp): after it, every page of the executable mapping
// that holds it is mapped in this process, as the kernel counts it (/proc/self/smaps Rss).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/code_pages.hpp"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace {

struct Mapping {
    bool found = false;
    long size_kb = -1;
    long rss_kb = -1;
};

// The smaps entry of the mapping that contains `addr`: its header line is "start-end perms
// ...", then one "Key: N kB" line per field.
Mapping mapping_of(uintptr_t addr) {
    std::ifstream smaps("/proc/self/smaps");
    Mapping m;
    std::string line;
    while (std::getline(smaps, line)) {
        std::istringstream words(line);
        std::string first;
        long kb = 0;
        words >> first >> kb;
        const size_t dash = first.find('-');
        if (first.back() != ':' && dash != std::string::npos) {  // a mapping's header
            if (m.found) break;
            const uintptr_t start = std::stoull(first.substr(0, dash), nullptr, 16);
            const uintptr_t end = std::stoull(first.substr(dash + 1), nullptr, 16);
            m.found = addr >= start && addr < end;
        } else if (m.found && first == "Size:") {
            m.size_kb = kb;
        } else if (m.found && first == "Rss:") {
            m.rss_kb = kb;
        }
    }
    return m;
}

bool kernel_populates() {
    const long page = sysconf(_SC_PAGESIZE);
    void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = madvise(p, static_cast<size_t>(page), MADV_POPULATE_READ) == 0;
    munmap(p, static_cast<size_t>(page));
    return ok;
}

}  // namespace

TEST(CodePages, TheWholeExecutableMappingIsMappedAfterIt) {
    if (!kernel_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_READ (Linux < 5.14)";
    const auto addr = reinterpret_cast<uintptr_t>(&numabind::spank::own_code);
    const Mapping before = mapping_of(addr);
    ASSERT_TRUE(before.found);
    ASSERT_GT(before.size_kb, 0);
    numabind::spank::map_code(numabind::spank::own_code());
    const Mapping after = mapping_of(addr);
    EXPECT_EQ(after.rss_kb, after.size_kb) << "before: " << before.rss_kb << " of " << before.size_kb << " kB";
}
