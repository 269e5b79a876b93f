/* A stand-in libnvidia-ml.so.1 for `numabind check` tests: the four NVML calls check makes.
 * FAKE_NVML_AFFINITY="0000:07:00.0=48-63,176-191;0000:0f:00.0=..." gives each GPU's CPU
 * affinity (the test writes hwloc-calc's local CPUs of each GPU there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }

static const char* entry_of(const char* bus) {
    const char* all = getenv("FAKE_NVML_AFFINITY");
    size_t n = strlen(bus);
    for (const char* p = all; p && *p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL)
        if (strncmp(p, bus, n) == 0 && p[n] == '=') return p + n + 1;
    return NULL;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** device) {
    const char* e = entry_of(bus);
    if (!e) return 6; /* NVML_ERROR_NOT_FOUND */
    *device = (void*)e;
    return 0;
}

int nvmlDeviceGetCpuAffinity(void* device, unsigned words, unsigned long* set) {
    const char* p = device;
    memset(set, 0, words * sizeof *set);
    while (*p && *p != ';') {
        char* end;
        long a = strtol(p, &end, 10), b = a;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        for (long i = a; i <= b; ++i)
            if ((unsigned long)i / (8 * sizeof *set) < words) set[i / (8 * sizeof *set)] |= 1UL << (i % (8 * sizeof *set));
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}
