// A forked task does not inherit its parent's page-table entries for file mappings: each
// 64 KB window of the engine's code that a hook reaches is a page fault, in slurmstepd and
// again in every task. MADV_POPULATE_READ maps the whole executable segment (its pages are in
// the page cache) in one system call instead. On the reference VM, where a fault costs
// 16-21 us, that saved ~0.1 ms in slurmstepd and ~0.1 ms per task (docs/PERFORMANCE.md §4).
#include "code_pages.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace numabind::spank {

CodeRange own_code() noexcept {
    CodeRange code;
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&own_code), &info) == 0 || !info.dli_fbase) return code;
    const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    const auto* ehdr = reinterpret_cast<const ElfW(Ehdr)*>(base);
    if (ehdr->e_ident[EI_MAG0] != ELFMAG0 || ehdr->e_ident[EI_MAG1] != ELFMAG1) return code;
    const auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(base + ehdr->e_phoff);
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < ehdr->e_phnum; ++i) {
        if (phdr[i].p_type != PT_LOAD || !(phdr[i].p_flags & PF_X)) continue;
        code.start = (base + phdr[i].p_vaddr) & ~(page - 1);
        code.end = (base + phdr[i].p_vaddr + phdr[i].p_memsz + page - 1) & ~(page - 1);
        break;  // one executable segment (ld's default layout)
    }
    return code;
}

void map_code(const CodeRange& code) noexcept {
    if (code.end > code.start)
        (void)madvise(reinterpret_cast<void*>(code.start), code.end - code.start, MADV_POPULATE_READ);
}

}  // namespace numabind::spank
