// The device-file adapter on a fake /proc and /sys tree, and open(2) probing of real files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "numabind/device_files.hpp"

namespace nb = numabind;

namespace {

std::string temp_dir() {
    char tmpl[] = "/tmp/nb-devfiles.XXXXXX";
    const char* d = mkdtemp(tmpl);
    return d ? d : "";
}

void write_file(const std::string& path, const std::string& text) {
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << text;
}

}  // namespace

TEST(DeviceFiles, NvidiaMinorFromProcDriverInformation) {
    const std::string root = temp_dir();
    write_file(root + "/proc/driver/nvidia/gpus/0000:3b:00.0/information",
               "Model: \t\t NVIDIA H100\nIRQ:   \t\t 150\nGPU UUID: \t GPU-x\nVideo BIOS: \t ??.??\n"
               "Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDevice Minor: \t 5\n");
    EXPECT_EQ(nb::device_file_for_pci("0000:3B:00.0", root, root), "/dev/nvidia5");  // case as the kernel has it
    EXPECT_EQ(nb::device_file_for_pci("3b:00.0", root, root), "/dev/nvidia5");       // domain 0 implied
    EXPECT_EQ(nb::device_file_for_pci("0000:3c:00.0", root, root), "");
    EXPECT_EQ(nb::device_file_for_pci("../../etc", root, root), "");
    std::system(("rm -rf '" + root + "'").c_str());
}

TEST(DeviceFiles, RenderNodeFromSysfsDrm) {
    const std::string root = temp_dir();
    write_file(root + "/sys/bus/pci/devices/0000:c1:00.0/drm/card1/uevent", "");
    write_file(root + "/sys/bus/pci/devices/0000:c1:00.0/drm/renderD129/uevent", "");
    EXPECT_EQ(nb::device_file_for_pci("0000:c1:00.0", root, root), "/dev/dri/renderD129");
    std::system(("rm -rf '" + root + "'").c_str());
}

TEST(DeviceFiles, ProbeTellsHeldFromMissing) {
    EXPECT_EQ(nb::probe_device_file("/dev/null").access, nb::DeviceAccess::Held);
    EXPECT_EQ(nb::probe_device_file("/nonexistent/nvidia0").access, nb::DeviceAccess::Missing);
    // a character device with no driver behind its major number: ENXIO, i.e. the cgroup let us in
    const std::string root = temp_dir();
    const std::string dev = root + "/nvidia0";
    if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(195, 250)) == 0) {
        nb::DeviceProbe p = nb::probe_device_file(dev);
        EXPECT_EQ(p.access, nb::DeviceAccess::Held) << p.error;
    }
    if (geteuid() != 0) {
        write_file(root + "/private", "");
        chmod((root + "/private").c_str(), 0);
        EXPECT_EQ(nb::probe_device_file(root + "/private").access, nb::DeviceAccess::Denied);
    }
    std::system(("rm -rf '" + root + "'").c_str());
}
