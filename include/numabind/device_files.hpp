// Adapter: which accelerators the calling process can really use. Each accelerator's
// device file is found from its PCI address (NVIDIA: /proc/driver/nvidia/gpus/<addr>/
// information "Device Minor" -> /dev/nvidia<N>; AMD/Intel: /sys/bus/pci/devices/<addr>/
// drm/renderD<N> -> /dev/dri/renderD<N>) and probed with open(2): a device cgroup
// (Slurm's ConstrainDevices) denies it with EPERM, which access(2) and stat(2) do not see.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "numabind/accelerators.hpp"

namespace numabind {

// The device file of one accelerator, "" when none can be found. `sysfs_root` and
// `procfs_root` are "" on a real system (tests point them at a fake tree).
std::string device_file_for_pci(const std::string& pci, const std::string& procfs_root = "",
                                const std::string& sysfs_root = "");

enum class DeviceAccess {
    Held,     // open() succeeded, or the driver refused the open itself (ENXIO, ENODEV)
    Denied,   // EPERM or EACCES: the device cgroup (or the file's mode) keeps us out
    Missing,  // ENOENT: no such file
    Unknown,  // any other error (errno in `error`)
};
struct DeviceProbe {
    DeviceAccess access = DeviceAccess::Unknown;
    int error = 0;
};
// open(path, O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY), closed again at once.
DeviceProbe probe_device_file(const std::string& path);

}  // namespace numabind

namespace numabind {
// Whether this process's device cgroup (cgroup v1 "devices" controller) restricts it:
// false when it allows everything ("a *:* rwm"), true when it lists devices, nullopt when
// it cannot be told (cgroup v2 uses an eBPF program that cannot be read back).
std::optional<bool> devices_constrained();
}  // namespace numabind
