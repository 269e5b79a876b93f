// set_mempolicy(2) and get_mempolicy(2) for the plugin's copy of the binding code, so that
// the plugin does not link libnuma: libnuma's constructor (numa_init reads /proc and /sys)
// would run in srun and in every slurmstepd that loads the plugin, ~1 ms each per step
// (docs/PERFORMANCE.md). libnuma's own wrappers are these same direct syscalls. Hidden
// (the version script exports only the SPANK symbols): slurmstepd's namespace is untouched.
// The command-line tool and libnumabind.so keep libnuma.
#include <numaif.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {

long set_mempolicy(int mode, const unsigned long* nodemask, unsigned long maxnode) {
    return syscall(SYS_set_mempolicy, mode, nodemask, maxnode);
}

long get_mempolicy(int* mode, unsigned long* nodemask, unsigned long maxnode, void* addr, unsigned flags) {
    return syscall(SYS_get_mempolicy, mode, nodemask, maxnode, addr, flags);
}

}  // extern "C"
