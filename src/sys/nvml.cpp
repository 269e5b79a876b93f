// NVML through dlopen: resolves GPU-/MIG- UUIDs to PCI addresses where the
// NVIDIA driver is installed, without a build or runtime dependency elsewhere.
#include <dlfcn.h>

#include <cctype>
#include <cstdio>

#include "sys/nvml.hpp"

namespace numabind {

namespace {

// The few NVML declarations we use (ABI-stable, from nvml.h).
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlPciInfo_t {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
};
using InitFn = int (*)();
using ByUuidFn = int (*)(const char*, nvmlDevice_t*);
using PciFn = int (*)(nvmlDevice_t, nvmlPciInfo_t*);
using ParentFn = int (*)(nvmlDevice_t, nvmlDevice_t*);

struct Nvml {
    void* lib = nullptr;
    ByUuidFn by_uuid = nullptr;
    PciFn pci = nullptr;
    ParentFn parent = nullptr;
    bool ok = false;
};

Nvml& nvml() {
    static Nvml n = [] {
        Nvml x;
        x.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!x.lib) return x;
        auto init = reinterpret_cast<InitFn>(dlsym(x.lib, "nvmlInit_v2"));
        x.by_uuid = reinterpret_cast<ByUuidFn>(dlsym(x.lib, "nvmlDeviceGetHandleByUUID"));
        x.pci = reinterpret_cast<PciFn>(dlsym(x.lib, "nvmlDeviceGetPciInfo_v3"));
        x.parent = reinterpret_cast<ParentFn>(dlsym(x.lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"));
        x.ok = init && x.by_uuid && x.pci && init() == 0;
        return x;
    }();
    return n;
}

}  // namespace

UuidResolver nvml_uuid_resolver() {
    return [](const std::string& uuid) -> std::optional<std::string> {
        Nvml& n = nvml();
        if (!n.ok) return std::nullopt;
        nvmlDevice_t dev = nullptr;
        if (n.by_uuid(uuid.c_str(), &dev) != 0) return std::nullopt;
        if (uuid.rfind("MIG-", 0) == 0 && n.parent) {
            nvmlDevice_t parent = nullptr;
            if (n.parent(dev, &parent) == 0) dev = parent;
        }
        nvmlPciInfo_t info{};
        if (n.pci(dev, &info) != 0) return std::nullopt;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", info.domain, info.bus, info.device);
        return std::string(buf);
    };
}

}  // namespace numabind
