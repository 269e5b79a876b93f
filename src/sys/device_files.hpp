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

// Whether `path` (an admin's device_files= entry) is the device file of the accelerator at
// PCI address `pci`, from what the file is: its device number (stat) against the NVIDIA
// driver's "Device Minor" of that address (/proc/driver/nvidia/gpus/<addr>/information,
// major 195), else against the char device's sysfs entry (/sys/dev/char/MAJ:MIN), whose
// real path names the PCI function it belongs to (DRM render nodes, accel, Habana, ...).
enum class DeviceFileVerdict {
    Matches,       // the file is that accelerator's
    Mismatch,      // the file belongs to another PCI device (or another NVIDIA minor)
    Missing,       // no such file (ENOENT)
    Unverifiable,  // exists, but nothing readable ties it to a PCI address (detail says why)
};
struct DeviceFileCheck {
    DeviceFileVerdict verdict = DeviceFileVerdict::Unverifiable;
    std::string detail;  // one phrase, e.g. "char 195:3, NVIDIA minor of 0000:3b:00.0 is 5"
};
DeviceFileCheck check_device_file(const std::string& path, const std::string& pci, const std::string& procfs_root = "",
                                  const std::string& sysfs_root = "");

// What the plugin makes of a device_files= entry by its verdict: the one rule the step
// engine applies and `numabind check` reports.
enum class ListedFileUse {
    Use,          // which GPU a task holds is told by it
    UseTrusted,   // likewise, unverified: trusted as listed (a note in every step)
    FindWithout,  // no such file: that GPU is found as without device_files= (a step note)
    FailStep,     // another device's file: by it every task would be bound beside the wrong GPU
};
ListedFileUse listed_file_use(DeviceFileVerdict verdict);
// Whether a device_files= list of `listed` entries fits a node with `accelerators`: one
// entry per accelerator; a node without accelerators ignores the list.
bool listed_files_fit(size_t listed, size_t accelerators);

}  // namespace numabind
